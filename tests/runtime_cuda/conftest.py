"""Fixtures of the CUDA inference backend tests: the CPU emulator (needs g++) and the small models
exported on the CPU (tests/conftest.py skips `gpu` tests where no GPU is usable)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "cuda"))  # the emulator package
sys.path.insert(0, str(HERE.parent / "export"))  # export_fixtures: tiny models, synthetic images
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def emu_device():
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    from emu_infer import EmuInferDevice
    return EmuInferDevice(sm_count=3)


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    """Model folders as litenet train + litenet export --int8 write them (random weights, synthetic
    calibration images), one per shape in MODEL_SHAPES."""
    import export_fixtures as fx
    from rtcuda_checks import MODEL_SHAPES

    from litenet.export.pipeline import ExportOptions, export_model
    from litenet.model import load_preset

    shapes = dict(fx.SHAPES, **{p: load_preset(p).model for p in ("litenet-seed", "litenet-base")})
    ds = fx.fake_dataset()
    folders = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
        for name in MODEL_SHAPES:
            folder = tmp_path_factory.mktemp(f"rtcuda-{name}")
            fx.write_model(folder, shapes[name])
            export_model(folder, options=ExportOptions(int8=True, calib=256, engine=False), log=lambda line: None)
            folders[name] = folder
    return folders


@pytest.fixture(scope="session")
def images():
    import export_fixtures as fx
    return fx.images(80, seed=5)
