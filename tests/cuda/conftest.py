"""Skips for the CUDA tests: `gpu` tests need CuPy and a usable GPU; emulator tests need g++."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness, emulator


def _gpu_reason() -> str | None:
    from litenet.train.backends import cuda_unavailable_reason
    return cuda_unavailable_reason()


def pytest_collection_modifyitems(config, items):
    gpu_reason = None
    for item in items:
        if item.get_closest_marker("gpu"):
            gpu_reason = gpu_reason or _gpu_reason() or ""
            if gpu_reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {gpu_reason}"))


@pytest.fixture(scope="session")
def emu():
    """Kernels run by the CPU emulator (tests/cuda/emulator)."""
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    from harness import Runner
    return Runner("emu")


@pytest.fixture(scope="session")
def gpu():
    """Kernels run on the GPU through CuPy."""
    from harness import Runner
    return Runner("cupy")
