"""Fixtures of the CUDA tests: the kernels on the CPU emulator (needs g++) or on the GPU (tests/conftest.py
skips `gpu` tests where none is usable)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness, emulator


def emulated(defines: tuple[str, ...] = ()):
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    from harness import Runner
    return Runner("emu", defines)


@pytest.fixture(scope="session")
def emu():
    """Kernels run by the CPU emulator (tests/cuda/emulator)."""
    return emulated()


@pytest.fixture(scope="session")
def emu_wgmma():
    """The same, built as an sm_90a compilation builds the kernels (emulator.WGMMA: wgmma.cuh's path)."""
    import emulator
    return emulated(emulator.WGMMA)


@pytest.fixture(scope="session")
def gpu():
    """Kernels run on the GPU through CuPy."""
    from harness import Runner
    return Runner("cupy")
