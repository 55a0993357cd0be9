"""Fixtures for the runtime tests: tiny models exported once per session, image writers, the CLI runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runtime_fixtures import EXPORTED, fx


@pytest.fixture(scope="session")
def exported(tmp_path_factory) -> dict[str, Path]:
    """Model folders written by the real litenet train format + litenet export --int8, one per tiny shape."""
    from litenet.export.pipeline import ExportOptions, export_model

    ds = fx.fake_dataset()
    folders = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
        for shape in EXPORTED:
            folder = tmp_path_factory.mktemp(f"model-{shape}")
            fx.write_model(folder, fx.SHAPES[shape])
            export_model(folder, options=ExportOptions(int8=True, calib=256, engine=False), log=lambda line: None)
            folders[shape] = folder
    return folders


@pytest.fixture(scope="session")
def model_dir(exported) -> Path:
    """The default tiny model folder."""
    return exported["full-shift"]


@pytest.fixture(scope="session")
def test_images() -> np.ndarray:
    """Synthetic uint8 NHWC images, CIFAR-shaped."""
    return fx.images(64, seed=11)


@pytest.fixture
def png_folder(tmp_path, test_images) -> Path:
    """A folder of five 32×32 PNGs (good_0.png … good_4.png)."""
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(5):
        Image.fromarray(test_images[i]).save(folder / f"good_{i}.png")
    return folder
