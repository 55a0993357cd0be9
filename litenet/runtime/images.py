"""Image files → the model's input: uint8 RGB 32×32 (decoding, colour modes, orientation, resizing, refusals).

The rules (docs/runtime.md gives the reasons):

- Any Pillow mode becomes 8-bit RGB. Transparency is composited on white. 16-bit grey maps its
  full range 0…65535 onto 0…255; 32-bit integer and float grey images are mapped from the range
  their values show (below). Colour profiles are not applied; CMYK and YCbCr use Pillow's plain
  conversion. Multi-frame files (GIF, APNG, TIFF pages) give their first frame.
- EXIF orientation is applied first, so a phone photo is classified the way it is displayed.
- The largest centred square is cropped and resized to 32×32: the area average (BOX, in float32,
  rounded once) when shrinking, BICUBIC when enlarging. A 32×32 image (every CIFAR-10 image)
  passes through untouched.
- Files over MAX_PIXELS pixels (decompression bombs) and truncated files are refused.
"""

from __future__ import annotations

import glob
import os
import warnings
from pathlib import Path

SIZE = 32
# 50 megapixels: a 48 MP phone photo still decodes (≈ 150 MB as RGB, which a 1 GB Raspberry Pi
# can hold); Pillow's own default (89 MP) would let a single image take ≈ 270 MB there.
MAX_PIXELS = 50_000_000
WHITE = (255, 255, 255)
# Crops wider than this are first averaged over integer blocks, so the float32 copy stays ≤ 12 MB.
REDUCE_ABOVE = 512
# What a folder given on the command line is searched for (its top level only).
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp",
                            ".ppm", ".pgm", ".pbm", ".pnm", ".tga", ".ico", ".jfif"})


class ImageError(Exception):
    """One input file could not be turned into an image; the message names the file and the reason."""


def expand_inputs(args: list[str]) -> list[tuple[str, str | None]]:
    """Command-line inputs → (path, None) per image file, or (arg, reason) for an input that named nothing.

    A folder gives its image files (by suffix, sorted, not recursive); an argument that does not
    exist but holds glob characters is expanded (for shells that do not expand, and for `**`).
    """
    out: list[tuple[str, str | None]] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            found = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            out += [(p, None) for p in found] or [(arg, "folder holds no image files")]
        elif path.exists():
            out.append((arg, None))
        elif any(c in arg for c in "*?["):
            found = sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
            out += [(p, None) for p in found] or [(arg, "pattern matches no files")]
        else:
            out.append((arg, "no such file"))
    return out


def load_image(path: str | os.PathLike):
    """Read one image file as a uint8 RGB (32, 32, 3) array; raises ImageError naming the file."""
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that; either way it is refused.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.load()
                img = ImageOps.exif_transpose(img)
                rgb = to_rgb(img)
                return resize(rgb)
    except FileNotFoundError:
        raise ImageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImageError(f"{path}: is a folder, not an image") from None
    except PermissionError:
        raise ImageError(f"{path}: permission denied") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageError(f"{path}: refused, more than {MAX_PIXELS:,} pixels (a possible decompression bomb); "
                         "shrink it first") from None
    except Image.UnidentifiedImageError:
        raise ImageError(f"{path}: not an image file Pillow can read") from None
    except ImageError as exc:
        raise ImageError(f"{path}: {exc}") from None
    # NOTE: Pillow's format plugins raise many exception types on malformed data (OSError for a
    # truncated file, SyntaxError, ValueError, struct.error, EOFError, IndexError ...); all of them
    # mean "this file is damaged", and one bad file must not stop the others.
    except Exception as exc:  # noqa: BLE001
        reason = str(exc) or exc.__class__.__name__
        raise ImageError(f"{path}: damaged or unreadable image ({reason})") from None


def to_rgb(img):
    """Any Pillow mode → 8-bit RGB, transparency composited on white."""
    from PIL import Image

    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode in ("LA", "La", "PA", "RGBa"):
        img = img.convert("RGBA")
    elif mode == "L" and "transparency" in img.info:
        img = img.convert("RGBA")
    elif mode.startswith("I") or mode == "F":
        return Image.merge("RGB", [_high_depth_to_l(img)] * 3)
    if img.mode == "RGBA":
        background = Image.new("RGB", img.size, WHITE)
        background.paste(img, mask=img.getchannel("A"))
        return background
    try:
        return img.convert("RGB")  # L, 1, CMYK, YCbCr, LAB, HSV, RGBX
    except (ValueError, OSError):
        raise ImageError(f"colour mode {mode} cannot be converted to RGB") from None


def _high_depth_to_l(img):
    """16-bit, 32-bit integer or float grey → 8-bit grey ("L").

    I;16*: the full 16-bit range. I (32-bit, also what older Pillow makes of a 16-bit PNG): as is
    when the values fit 0…255, as 16-bit when they fit 0…65535, else stretched min…max.
    F: [0, 1] floats ×255, 0…255 as is, anything else stretched min…max.
    """
    import numpy as np
    from PIL import Image

    a = np.asarray(img).astype(np.float64)
    if a.size == 0:
        raise ImageError("image has no pixels")
    if not np.isfinite(a).all():
        raise ImageError("float image holds NaN or infinite values")
    lo, hi = float(a.min()), float(a.max())
    if img.mode.startswith("I;16"):
        scaled = a / 257.0
    elif img.mode == "F" and lo >= 0 and hi <= 1:
        scaled = a * 255.0
    elif lo >= 0 and hi <= 255:
        scaled = a
    elif img.mode == "I" and lo >= 0 and hi <= 65535:
        scaled = a / 257.0
    else:
        scaled = (a - lo) * (255.0 / (hi - lo))
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8), "L")


def resize(img):
    """Centre-crop the largest square and resize it to 32×32 (area average shrinking, BICUBIC enlarging) → uint8 array."""
    import numpy as np
    from PIL import Image

    w, h = img.size
    if (w, h) == (SIZE, SIZE):
        return np.asarray(img, dtype=np.uint8).reshape(SIZE, SIZE, 3)
    side = min(w, h)
    if side < SIZE:
        return np.asarray(img.resize((SIZE, SIZE), Image.Resampling.BICUBIC, box=_centre(w, h, side)), np.uint8)
    # NOTE: not img.resize(BOX) on the 8-bit image, nor img.reduce(): Pillow rounds halves up in
    # its 8-bit passes, which brightens a 2× shrink by half a level on average. The average is
    # taken in float32 instead and rounded once.
    factor = side // REDUCE_ABOVE
    if factor >= 2:  # a big photo: exact factor × factor means first, so the float copy stays small
        side -= side % factor
    a = np.asarray(img.crop(_centre(w, h, side)), dtype=np.uint8)
    if factor >= 2:
        n = side // factor
        a = a.reshape(n, factor, n, factor, 3).mean(axis=(1, 3), dtype=np.float32)
    planes = [Image.fromarray(np.ascontiguousarray(a[..., c], dtype=np.float32), "F") for c in range(3)]
    out = np.stack([np.asarray(p.resize((SIZE, SIZE), Image.Resampling.BOX)) for p in planes], axis=-1)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _centre(w: int, h: int, side: int) -> tuple[int, int, int, int]:
    left, top = (w - side) // 2, (h - side) // 2
    return left, top, left + side, top + side


def pixels_to_float(images):
    """uint8 NHWC → float32 in [0, 1] as x / 255, exactly the training's scaling (a division, not × 1/255)."""
    import numpy as np

    return np.divide(images, np.float32(255), dtype=np.float32)
