"""Image loading: every colour mode, EXIF orientation, sizes, resizing rules and refused files."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from litenet.runtime import images as im
from litenet.runtime.images import ImageError, load_image
from runtime_fixtures import bomb_png, png_bytes


def save(tmp_path, img: Image.Image, name: str, **kwargs):
    path = tmp_path / name
    img.save(path, **kwargs)
    return path


def rgb_array(seed=0, shape=(32, 32, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


# --- colour modes -----------------------------------------------------------------------------

def test_rgb_32x32_passes_through_untouched(tmp_path):
    a = rgb_array()
    out = load_image(save(tmp_path, Image.fromarray(a), "x.png"))
    assert out.dtype == np.uint8 and out.shape == (32, 32, 3)
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("mode,file", [("L", "png"), ("1", "png"), ("L", "bmp"), ("L", "tiff")])
def test_grey_modes_become_equal_rgb_channels(tmp_path, mode, file):
    grey = rgb_array(1, (32, 32))
    img = Image.fromarray(grey).convert(mode)
    out = load_image(save(tmp_path, img, f"g.{file}"))
    expected = np.asarray(img.convert("L"))
    for c in range(3):
        np.testing.assert_array_equal(out[..., c], expected)


def test_palette_without_and_with_transparency(tmp_path):
    a = rgb_array(2)
    pal = Image.fromarray(a).quantize(16)
    np.testing.assert_array_equal(load_image(save(tmp_path, pal, "p.png")), np.asarray(pal.convert("RGB")))
    pal.info["transparency"] = 0  # palette entry 0 is transparent → white
    out = load_image(save(tmp_path, pal, "pt.png", transparency=0))
    index = np.asarray(pal)
    assert (out[index == 0] == 255).all()
    np.testing.assert_array_equal(out[index != 0], np.asarray(pal.convert("RGB"))[index != 0])


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_alpha_is_composited_on_white(tmp_path, mode):
    a = rgb_array(3, (32, 32, 4))
    a[:16, :, 3] = 0  # transparent top half
    a[16:, :, 3] = 255  # opaque bottom half
    img = Image.fromarray(a, "RGBA").convert(mode)
    out = load_image(save(tmp_path, img, "a.png"))
    assert (out[:16] == 255).all()
    np.testing.assert_array_equal(out[16:], np.asarray(img.convert("RGB"))[16:])


def test_half_transparent_pixel_is_a_blend_with_white():
    img = Image.new("RGBA", (32, 32), (0, 0, 0, 128))
    out = np.asarray(im.to_rgb(img))
    assert abs(int(out[0, 0, 0]) - 127) <= 1  # 0·128/255 + 255·127/255


def test_16_bit_grey_maps_its_full_range(tmp_path):
    a = (np.arange(32 * 32, dtype=np.uint32).reshape(32, 32) * 64).astype(np.uint16)
    a[0, 0], a[0, 1], a[0, 2] = 0, 65535, 257 * 100
    out = load_image(save(tmp_path, Image.fromarray(a), "g16.png"))
    assert out[0, 0, 0] == 0 and out[0, 1, 0] == 255 and out[0, 2, 0] == 100
    np.testing.assert_array_equal(out[..., 0], np.clip(np.rint(a / 257.0), 0, 255).astype(np.uint8))


@pytest.mark.parametrize("values,expected", [
    (np.array([0, 100, 255]), [0, 100, 255]),  # fits 8 bits: as is
    (np.array([0, 257 * 10, 65535]), [0, 10, 255]),  # a 16-bit PNG opened as "I" by older Pillow
    (np.array([-1000, 0, 1000]), [0, 128, 255]),  # anything else: stretched min…max
])
def test_32_bit_integer_grey(tmp_path, values, expected):
    a = np.resize(values, (32, 32)).astype(np.int32)
    img = Image.fromarray(a, "I")
    out = load_image(save(tmp_path, img, "i.tiff"))
    np.testing.assert_array_equal(out[0, :3, 1], expected)


@pytest.mark.parametrize("values,expected", [
    (np.array([0.0, 0.5, 1.0]), [0, 128, 255]),  # [0, 1] floats
    (np.array([0.0, 2.0, 255.0]), [0, 2, 255]),  # 0…255 floats
    (np.array([-1.0, 0.0, 1.0, 3.0]), [0, 64, 128, 255]),  # stretched
])
def test_float_grey(tmp_path, values, expected):
    a = np.resize(values, (32, 32)).astype(np.float32)
    out = load_image(save(tmp_path, Image.fromarray(a, "F"), "f.tiff"))
    np.testing.assert_array_equal(out[0, :len(expected), 2], expected)


def test_float_grey_with_nan_is_refused():
    with pytest.raises(ImageError, match="NaN"):
        im.to_rgb(Image.fromarray(np.full((32, 32), np.nan, np.float32), "F"))


@pytest.mark.parametrize("mode,file", [("CMYK", "jpg"), ("CMYK", "tiff"), ("YCbCr", "jpg"), ("RGB", "jpg"),
                                       ("RGB", "webp"), ("RGB", "gif"), ("RGB", "bmp")])
def test_other_colour_modes_and_formats(tmp_path, mode, file):
    img = Image.fromarray(rgb_array(4)).convert(mode)
    path = save(tmp_path, img, f"c.{file}")
    out = load_image(path)
    with Image.open(path) as reread:
        expected = np.asarray(reread.convert("RGB"))
    assert out.shape == (32, 32, 3)
    np.testing.assert_array_equal(out, expected)


def test_first_frame_of_an_animation(tmp_path):
    frames = [Image.new("RGB", (32, 32), c) for c in ((255, 0, 0), (0, 0, 255))]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:])
    out = load_image(path)
    assert (out[..., 0] > 200).all() and (out[..., 2] < 50).all()


# --- orientation and size ----------------------------------------------------------------------

@pytest.mark.parametrize("orientation,k", [(1, 0), (3, 2), (6, -1), (8, 1)])
def test_exif_orientation_is_applied(tmp_path, orientation, k):
    a = rgb_array(5)
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = load_image(save(tmp_path, Image.fromarray(a), "o.png", exif=exif.tobytes()))
    np.testing.assert_array_equal(out, np.rot90(a, k=k))  # 6: rotate 90° clockwise to display


@pytest.mark.parametrize("w,h", [(1, 1), (1, 1000), (1000, 7), (33, 31), (31, 33), (640, 480), (17, 17)])
def test_any_size_becomes_32x32(tmp_path, w, h):
    out = load_image(save(tmp_path, Image.new("RGB", (w, h), (10, 200, 30)), "s.png"))
    assert out.shape == (32, 32, 3)
    assert (out == np.array([10, 200, 30], np.uint8)).all()  # a flat colour stays exactly itself


def test_centre_square_is_kept(tmp_path):
    a = np.zeros((32, 96, 3), np.uint8)
    a[:, :32] = (255, 0, 0)
    a[:, 32:64] = (0, 255, 0)
    a[:, 64:] = (0, 0, 255)
    out = load_image(save(tmp_path, Image.fromarray(a), "wide.png"))
    assert (out == np.array([0, 255, 0], np.uint8)).all()


def test_shrinking_is_the_area_average(tmp_path):
    a = rgb_array(6, (64, 64, 3))
    out = load_image(save(tmp_path, Image.fromarray(a), "big.png"))
    expected = a.reshape(32, 2, 32, 2, 3).astype(np.float64).mean(axis=(1, 3))
    np.testing.assert_array_equal(out, np.rint(expected))  # the 2×2 mean, rounded once (half to even)


@pytest.mark.parametrize("kind", ["noise", "gradient"])
def test_big_photo_is_reduced_then_averaged(tmp_path, kind):
    if kind == "noise":
        a = rgb_array(12, (1500, 2100, 3))
    else:
        y, x = np.mgrid[0:1500, 0:2100]
        a = np.stack([x * 255 // 2099, y * 255 // 1499, (x + y) * 255 // 3598], axis=-1).astype(np.uint8)
    out = load_image(save(tmp_path, Image.fromarray(a), "photo.bmp"))  # 1500² crop → 2×2 means → 750² → 32²
    exact = np.stack([np.asarray(Image.fromarray(a[:, 300:1800, c].astype(np.float32), "F").resize(
        (32, 32), Image.Resampling.BOX)) for c in range(3)], axis=-1)
    diff = out - exact
    # The 2×2 pre-average is exact but blurs each box edge over two source pixels: on pixel noise
    # that moves single values by up to ~2 levels, on smooth content by under one; either way
    # without bias.
    assert np.abs(diff).max() <= (2.0 if kind == "noise" else 1.0)
    assert abs(diff.mean()) < 0.05


def test_enlarging_is_bicubic(tmp_path):
    a = rgb_array(7, (16, 16, 3))
    img = Image.fromarray(a)
    out = load_image(save(tmp_path, img, "small.png"))
    np.testing.assert_array_equal(out, np.asarray(img.resize((32, 32), Image.Resampling.BICUBIC)))


def test_pixels_to_float_is_the_training_scaling():
    from litenet.ops import pixels_to_float

    a = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1).repeat(3, axis=3)
    x = im.pixels_to_float(a)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, pixels_to_float(a, np.float32))
    np.testing.assert_array_equal(x, a.astype(np.float32) / np.float32(255))


# --- refused files -----------------------------------------------------------------------------

def test_truncated_png_is_refused(tmp_path):
    data = png_bytes(Image.fromarray(rgb_array(8, (64, 64, 3))))
    path = tmp_path / "cut.png"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ImageError, match="cut.png: damaged"):
        load_image(path)


def test_truncated_jpeg_is_refused(tmp_path):
    buf = io.BytesIO()
    Image.fromarray(rgb_array(9, (64, 64, 3))).save(buf, "JPEG")
    path = tmp_path / "cut.jpg"
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])
    with pytest.raises(ImageError, match="cut.jpg: damaged"):
        load_image(path)


@pytest.mark.parametrize("content", [b"", b"hello, I am text\n", bytes(range(256)) * 4,
                                     b"\x89PNG\r\n\x1a\n" + b"\0" * 40])
def test_non_images_are_refused(tmp_path, content):
    path = tmp_path / "fake.png"
    path.write_bytes(content)
    with pytest.raises(ImageError, match="fake.png"):
        load_image(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ImageError, match="no such file"):
        load_image(tmp_path / "absent.png")
    with pytest.raises(ImageError, match="is a folder"):
        load_image(tmp_path)


@pytest.mark.parametrize("side", [8000, 20000])  # 64 MP: above the limit; 400 MP: above twice the limit
def test_decompression_bomb_is_refused_before_decoding(tmp_path, side):
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png(side, side))
    with pytest.raises(ImageError, match="bomb.png: refused, more than 50,000,000 pixels"):
        load_image(path)


def test_limit_is_the_module_setting(tmp_path, monkeypatch):
    monkeypatch.setattr(im, "MAX_PIXELS", 1000)
    path = save(tmp_path, Image.new("RGB", (40, 40)), "small-bomb.png")  # 1,600 pixels: warning range
    with pytest.raises(ImageError, match="refused"):
        load_image(path)


# --- inputs on the command line ----------------------------------------------------------------

def test_expand_inputs(tmp_path):
    for name in ("b.png", "a.jpg", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.png").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    got = im.expand_inputs([str(tmp_path), str(tmp_path / "*.png"), str(tmp_path / "**" / "*.png"),
                            str(tmp_path / "nothing.png"), str(tmp_path / "empty"), str(tmp_path / "notes.txt"),
                            str(tmp_path / "*.gif")])
    t = str(tmp_path)
    assert got == [(f"{t}/a.jpg", None), (f"{t}/b.png", None), (f"{t}/b.png", None),
                   (f"{t}/b.png", None), (f"{t}/sub/c.png", None),
                   (f"{t}/nothing.png", "no such file"), (f"{t}/empty", "folder holds no image files"),
                   (f"{t}/notes.txt", None), (f"{t}/*.gif", "pattern matches no files")]
