"""Video frames → the model's input, and the label drawn back onto a frame (OpenCV; the video extra).

The rule is the still images' (images.py): the largest centred square, shrunk by the area average
(INTER_AREA: each output pixel the mean of the source pixels it covers, as CIFAR-10's images were
made) or, for a frame under 32 pixels, enlarged by BICUBIC. A 480 × 480 square is an exact 15 × 15
block mean, so a 32 × 32 image enlarged 15× by pixel repetition comes back bit for bit.
"""

from __future__ import annotations

SIZE = 32


def centre_square(frame):
    """The largest centred square of an (H, W, C) frame, as a view, and its (x, y, side) in the frame."""
    h, w = frame.shape[:2]
    side = min(h, w)
    x, y = (w - side) // 2, (h - side) // 2
    return frame[y:y + side, x:x + side], (x, y, side)


def to_model_input(frame, cv2):
    """One frame (uint8 BGR, BGRA or grey, any size) → uint8 RGB (32, 32, 3)."""
    square, (_, _, side) = centre_square(frame)
    interpolation = cv2.INTER_AREA if side >= SIZE else cv2.INTER_CUBIC
    small = cv2.resize(square, (SIZE, SIZE), interpolation=interpolation)
    if small.ndim == 2:
        return cv2.cvtColor(small, cv2.COLOR_GRAY2RGB)
    return cv2.cvtColor(small, cv2.COLOR_BGRA2RGB if small.shape[2] == 4 else cv2.COLOR_BGR2RGB)


def to_batch(frames, cv2, pool=None):
    """Frames → uint8 (N, 32, 32, 3); with a thread pool, frames are resized side by side (OpenCV
    releases the GIL while it resizes, so the threads do run at once)."""
    import numpy as np

    out = np.empty((len(frames), SIZE, SIZE, 3), np.uint8)

    def fill(i):
        out[i] = to_model_input(frames[i], cv2)

    if pool is None or len(frames) < 2:
        for i in range(len(frames)):
            fill(i)
    else:
        list(pool.map(fill, range(len(frames))))
    return out


def annotate(frame, text: str, cv2) -> None:
    """Draw `text` (e.g. "cat 0.87") in a dark band at the top of a BGR frame, and outline the square
    the model saw; in place."""
    h, w = frame.shape[:2]
    scale = max(0.4, h / 600)
    thickness = max(1, round(h / 300))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    pad = max(4, th // 3)
    cv2.rectangle(frame, (0, 0), (min(w, tw + 2 * pad), th + base + 2 * pad), (0, 0, 0), -1)
    cv2.putText(frame, text, (pad, pad + th), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    _, (x, y, side) = centre_square(frame)
    cv2.rectangle(frame, (x, y), (x + side - 1, y + side - 1), (0, 255, 255), max(1, thickness // 2))
