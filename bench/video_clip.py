"""Test clips for `litenet-infer --video`: CIFAR-10 test images shown one after another in 640 × 480
frames, so the label of every frame is known, written with OpenCV (the library --video reads with).

Each 32 × 32 image is enlarged 15× by pixel repetition into the centred 480 × 480 square, on a grey
border: --video's centre square and area average give the image back bit for bit when the codec is
lossless (FFV1), and nearly so through a lossy one (mp4v). Without CIFAR-10 on the machine, seeded
random images stand in (their labels are then unknown).

    python bench/video_clip.py clip.mp4 --seconds 10 --fps 30 --hold 3 --labels clip.labels.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WIDTH, HEIGHT, SCALE = 640, 480, 15
BORDER = 128


def cifar_test_images(count: int) -> tuple[np.ndarray, list[str] | None]:
    """The first `count` CIFAR-10 test images (uint8 RGB) and their class names, found as `litenet data`
    finds the data set (never downloaded); seeded synthetic images (synthetic_images) and None where there is none."""
    from litenet.data.locate import DEFAULT_PLACES, find_in
    from litenet.data.readers import CLASS_NAMES, LAYOUTS, parse_batch
    from litenet.data.source import open_source

    places = [Path(os.environ["LITENET_DATA"])] if os.environ.get("LITENET_DATA") else [REPO / p for p in DEFAULT_PLACES]
    for place in places:
        found = find_in(place)
        if found is None:
            continue
        with open_source(found) as src:
            name = LAYOUTS[src.layout]["test"]
            (_, data), = src.read_many([name])
        images, labels = parse_batch(src.layout, data, name)
        return images[:count], [CLASS_NAMES[k] for k in labels[:count]]
    return synthetic_images(count), None


def synthetic_images(count: int) -> np.ndarray:
    """Seeded stand-ins for photographs: smooth two-colour gradients with a disk of a third colour. Not noise,
    which no video codec compresses and whose damaged frames a decoder can pass for valid ones."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    images = np.empty((count, 32, 32, 3), np.uint8)
    for i in range(count):
        a, b, disk = rng.integers(0, 256, (3, 3))
        mix = (xx + yy)[..., None] / 2
        image = a * (1 - mix) + b * mix
        cy, cx, r = rng.integers(8, 24), rng.integers(8, 24), rng.integers(4, 9)
        image[(yy * 31 - cy) ** 2 + (xx * 31 - cx) ** 2 <= r * r] = disk
        images[i] = np.clip(image, 0, 255).astype(np.uint8)
    return images


def frame_of(image: np.ndarray) -> np.ndarray:
    """A 640 × 480 BGR frame showing a 32 × 32 RGB image enlarged 15× in its centred square."""
    frame = np.full((HEIGHT, WIDTH, 3), BORDER, np.uint8)
    big = np.repeat(np.repeat(image[..., ::-1], SCALE, axis=0), SCALE, axis=1)
    x = (WIDTH - big.shape[1]) // 2
    frame[:, x:x + big.shape[1]] = big
    return frame


def write_clip(path: str | Path, images: np.ndarray, hold: int = 3, fps: float = 30.0, fourcc: str | None = None) -> int:
    """Write each image for `hold` frames; returns the frame count. FourCC by suffix unless given:
    .avi FFV1 (lossless), anything else mp4v."""
    from litenet.runtime.video_source import import_cv2

    cv2 = import_cv2()  # quiet: OpenCV reads its log settings once, at its first use
    fourcc = fourcc or ("FFV1" if str(path).endswith(".avi") else "mp4v")
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (WIDTH, HEIGHT))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write {path} with {fourcc}")
    for image in images:
        frame = frame_of(image)
        for _ in range(hold):
            writer.write(frame)
    writer.release()
    return len(images) * hold


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the clip to write (.mp4: mp4v, .avi: FFV1 lossless)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--hold", type=int, default=3, help="frames each image is shown (default 3)")
    ap.add_argument("--labels", help="write {frame: class name} here (CIFAR-10 only)")
    args = ap.parse_args()
    frames = round(args.seconds * args.fps)
    images, names = cifar_test_images(-(-frames // args.hold))
    written = write_clip(args.out, images, args.hold, args.fps)
    print(f"{args.out}: {written} frames of {WIDTH} × {HEIGHT} at {args.fps:g} fps, "
          + ("CIFAR-10 test images" if names else "random images (no CIFAR-10 found)"), file=sys.stderr)
    if args.labels:
        labels = {i * args.hold + k: name for i, name in enumerate(names or []) for k in range(args.hold)}
        Path(args.labels).write_text(json.dumps({"images": "CIFAR-10 test" if names else "random", "labels": labels}))


if __name__ == "__main__":
    main()
