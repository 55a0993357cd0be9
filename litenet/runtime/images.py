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
- Files over MAX_PIXELS pixels (decompression bombs), files whose decoded pixels would take more than
  MAX_DECODED_BYTES (litenet.limits), truncated files and anything that is not a regular file (a
  FIFO would block the whole call) are refused, each naming the file; the other inputs are answered.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
import warnings
from pathlib import Path

from litenet.limits import MAX_DECODED_BYTES, MAX_IMAGE_PIXELS as MAX_PIXELS, decoded_image_bytes

SIZE = 32
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
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            if exc.errno == errno.ENOENT and any(c in arg for c in "*?["):
                found = sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
                out += [(p, None) for p in found] or [(arg, "pattern matches no files")]
            else:
                out.append((arg, _stat_problem(exc)))
            continue
        if stat.S_ISDIR(mode):
            try:
                found = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            except OSError as exc:
                out.append((arg, f"folder cannot be read ({_stat_problem(exc)})"))
                continue
            out += [(p, None) for p in found] or [(arg, "folder holds no image files")]
        elif stat.S_ISREG(mode):
            out.append((arg, None))
        else:
            out.append((arg, NOT_REGULAR))
    return out


NOT_REGULAR = "not a regular file (a FIFO, socket or device); give an image file"


def _stat_problem(exc: OSError) -> str:
    """Why a path cannot be used, in words."""
    return {errno.ENOENT: "no such file", errno.EACCES: "permission denied",
            errno.ELOOP: "a symlink loop (too many levels of symbolic links)",
            errno.ENOTDIR: "a part of the path is a file, not a folder"}.get(exc.errno, exc.strerror or str(exc))


def _open_regular(path):
    """The file opened for reading, refused unless it is a regular file; opening never blocks (a FIFO would)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ImageError("is a folder, not an image")
        if not stat.S_ISREG(mode):
            raise ImageError(NOT_REGULAR)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load_image(path: str | os.PathLike):
    """Read one image file as a uint8 RGB (32, 32, 3) array; raises ImageError naming the file."""
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that; either way it is refused.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with _open_regular(path) as f, Image.open(f) as img:
                _check_decoded_size(img)
                img.load()
                img = _square_first(img)
                img = ImageOps.exif_transpose(img)
                rgb = to_rgb(img)
                return resize(rgb)
    except IsADirectoryError:
        raise ImageError(f"{path}: is a folder, not an image") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageError(f"{path}: refused, more than {MAX_PIXELS:,} pixels (a possible decompression bomb); "
                         "shrink it first") from None
    except Image.UnidentifiedImageError:  # an OSError too: before the clause below
        raise ImageError(f"{path}: not an image file Pillow can read") from None
    except OSError as exc:
        if exc.filename is None and exc.errno is None:  # Pillow's own OSError: a damaged file
            raise ImageError(f"{path}: damaged or unreadable image ({exc})") from None
        raise ImageError(f"{path}: {_stat_problem(exc)}") from None
    except ImageError as exc:
        raise ImageError(f"{path}: {exc}") from None
    # NOTE: Pillow's format plugins raise many exception types on malformed data (OSError for a
    # truncated file, SyntaxError, ValueError, struct.error, EOFError, IndexError ...); all of them
    # mean "this file is damaged", and one bad file must not stop the others.
    except Exception as exc:  # noqa: BLE001
        reason = str(exc) or exc.__class__.__name__
        raise ImageError(f"{path}: damaged or unreadable image ({reason})") from None


def _check_decoded_size(img) -> None:
    """Refuse, from the header alone, an image whose decoded pixels would not fit the memory budget."""
    w, h = img.size
    need = decoded_image_bytes(w, h, img.mode)
    if need > MAX_DECODED_BYTES:
        raise ImageError(f"refused, {w}×{h} {img.mode} would take {need / 2**20:,.0f} MiB to decode "
                         f"(the limit is {MAX_DECODED_BYTES / 2**20:,.0f} MiB); shrink it first")


def _square_first(img):
    """The largest centred square, taken before any conversion so copies are of the square only.

    Only when no EXIF orientation is recorded: a rotation must see the whole image first (the
    centre of a rotated odd-sized image is a pixel off the centre of the original).
    """
    w, h = img.size
    if w == h or img.getexif().get(0x0112, 1) != 1:
        return img
    side = min(w, h)
    factor = side // REDUCE_ABOVE
    if factor >= 2:  # the box resize() crops: a multiple of its block size (resize then crops nothing more)
        side -= side % factor
    square = img.crop(_centre(w, h, side))
    square.info = dict(img.info)
    return square


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

    a = np.asarray(img)
    if a.size == 0:
        raise ImageError("image has no pixels")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ImageError("float image holds NaN or infinite values")
    lo, hi = float(a.min()), float(a.max())
    if img.mode.startswith("I;16"):
        offset, gain = 0.0, 1 / 257.0
    elif img.mode == "F" and lo >= 0 and hi <= 1:
        offset, gain = 0.0, 255.0
    elif lo >= 0 and hi <= 255:
        offset, gain = 0.0, 1.0
    elif img.mode == "I" and lo >= 0 and hi <= 65535:
        offset, gain = 0.0, 1 / 257.0
    else:
        offset, gain = lo, 255.0 / (hi - lo)
    # In bands of rows, so the float64 copy is of one band, never of the whole image.
    out = np.empty(a.shape, np.uint8)
    band = max(1, (1 << 20) // max(1, a.shape[1]))
    for top in range(0, a.shape[0], band):
        scaled = (a[top:top + band].astype(np.float64) - offset) * gain
        out[top:top + band] = np.clip(np.rint(scaled), 0, 255)
    return Image.fromarray(out, "L")


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
    left, top, right, _ = _centre(w, h, side)
    if factor >= 2:  # one band of blocks at a time: no copy of the whole image, 8-bit or float
        n = side // factor
        a = np.empty((n, n, 3), np.float32)
        for row in range(n):
            band = np.asarray(img.crop((left, top + row * factor, right, top + (row + 1) * factor)), np.uint8)
            a[row] = band.reshape(factor, n, factor, 3).mean(axis=(0, 2), dtype=np.float32)
    else:
        a = np.asarray(img.crop(_centre(w, h, side)), dtype=np.uint8)
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
