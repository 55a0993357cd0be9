"""Sample inputs for scripts/arm-check.sh: CIFAR-10 test images as PNGs plus odd files that exercise the image rules."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def odd_images(out: Path) -> None:
    """16-bit grey rotated by EXIF, a palette image with transparency, a CMYK JPEG, a truncated PNG."""
    rng = np.random.default_rng(0)
    grey16 = (rng.integers(0, 65536, (40, 48))).astype(np.uint16)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(grey16).save(out / "odd-grey16-exif.png", exif=exif.tobytes())
    pal = Image.fromarray(rng.integers(0, 256, (70, 50, 3), dtype=np.uint8)).quantize(32)
    pal.save(out / "odd-palette-transparent.png", transparency=0)
    Image.fromarray(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)).convert("CMYK").save(out / "odd-cmyk.jpg")
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, "PNG")
    (out / "odd-truncated.png").write_bytes(buf.getvalue()[:2000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=20, help="CIFAR-10 test images (default 20)")
    args = ap.parse_args()
    from litenet.data import open_cifar10

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ds = open_cifar10(progress=False)
    for i in range(args.count):
        label = ds.classes[int(ds.test.labels[i])]
        Image.fromarray(np.asarray(ds.test.images[i])).save(out / f"cifar-{i:02d}-{label}.png")
    odd_images(out)


if __name__ == "__main__":
    main()
