"""Images named on the command line: special files, sizes that would not fit memory, unreadable folders."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from adversarial_helpers import is_root, one_error_line, png_header_only, run_module
from litenet.runtime.images import ImageError, expand_inputs, load_image


@pytest.fixture
def good_png(tmp_path):
    path = tmp_path / "good.png"
    Image.fromarray(np.full((32, 32, 3), 100, np.uint8)).save(path)
    return path


def test_a_fifo_is_refused_and_the_other_images_are_answered(tmp_path, good_png):
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    r = run_module("litenet.runtime", fifo, good_png, "--json", timeout=30)
    assert r.returncode == 1, r.stderr
    line = one_error_line(r.stderr, "litenet-infer")
    assert "fifo.png" in line and "not a regular file" in line
    assert '"ok": true' in r.stdout.replace('"ok":true', '"ok": true') and "good.png" in r.stdout


def test_load_image_never_blocks_on_a_fifo(tmp_path):
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)  # no writer: a blocking open would never return
    with pytest.raises(ImageError, match="not a regular file"):
        load_image(fifo)
    assert expand_inputs([str(fifo)]) == [(str(fifo), "not a regular file (a FIFO, socket or device); "
                                                     "give an image file")]


def test_a_thin_image_is_refused_from_its_header_before_decoding(tmp_path):
    path = png_header_only(tmp_path / "thin.png", 1, 49_000_000)  # 49 MP: under the pixel cap
    with pytest.raises(ImageError, match="MiB to decode"):
        load_image(path)


def test_a_sixteen_bit_image_under_the_cap_decodes(tmp_path):
    path = tmp_path / "deep.png"
    Image.fromarray(np.full((600, 2000), 65535, np.uint16)).save(path)
    assert load_image(path).min() == 255


def test_a_symlink_loop_is_named_as_one(tmp_path):
    loop = tmp_path / "loop.png"
    loop.symlink_to(loop)
    assert "symlink loop" in expand_inputs([str(loop)])[0][1]


@is_root
def test_an_unreadable_folder_does_not_stop_the_other_images(tmp_path, good_png):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        got = expand_inputs([str(locked), str(good_png)])
    finally:
        locked.chmod(0o755)
    assert got[0][1].startswith("folder cannot be read") and got[1] == (str(good_png), None)


def test_a_folder_that_cannot_be_listed_does_not_stop_the_others_as_any_user(tmp_path, good_png, monkeypatch):
    from pathlib import Path

    locked = tmp_path / "locked"
    locked.mkdir()
    real = Path.iterdir

    def iterdir(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    got = expand_inputs([str(locked), str(good_png)])
    assert got == [(str(locked), "folder cannot be read (permission denied)"), (str(good_png), None)]


def test_a_file_that_is_no_image_is_still_named_as_one(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("not an image")
    with pytest.raises(ImageError, match="not an image file Pillow can read"):
        load_image(path)
