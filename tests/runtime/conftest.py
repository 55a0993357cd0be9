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


# --- video clips (the --video tests; OpenCV writes them) ---------------------------------------------

@pytest.fixture(scope="session")
def clip_source():
    """12 CIFAR-10 test images and their labels (seeded synthetic images and None without the data set)."""
    from video_fixtures import clip_images

    return clip_images(12)


@pytest.fixture(scope="session")
def lossless_clip(tmp_path_factory, clip_source) -> Path:
    """FFV1 (lossless) .avi, 640 × 480 at 30 fps: each of clip_source's images for 2 frames (24 frames)."""
    pytest.importorskip("cv2")
    from video_fixtures import write

    return write(tmp_path_factory.mktemp("clips") / "cifar.avi", clip_source[0], hold=2)


@pytest.fixture(scope="session")
def mp4_clip(tmp_path_factory) -> Path:
    """mp4v .mp4, 640 × 480 at 30 fps, 2 s: 30 images for 2 frames each."""
    pytest.importorskip("cv2")
    from video_fixtures import clip_images, write

    return write(tmp_path_factory.mktemp("clips") / "clip.mp4", clip_images(30)[0], hold=2)
