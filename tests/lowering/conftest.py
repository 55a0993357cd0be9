"""The lowering's tests run kernels on the CPU emulator (tests/cuda/emulator; needs g++)."""

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # the emulator package
sys.path.insert(0, str(Path(__file__).resolve().parent))  # networks, training


@pytest.fixture(scope="session")
def emu():
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    from emulator.device import EmuDevice
    return EmuDevice
