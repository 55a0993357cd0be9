"""Training-time augmentation on the CPU: random crops of the reflect-padded image and left-right flips.

Both are index maps, so one gather builds the whole augmented batch from the uint8 training set and
no padded copy is made: a crop at offset (oy, ox) of the image padded by p reads source row
reflect(oy − p + i) for output row i, where reflect mirrors about the edge pixel without repeating
it (−1 → 1, 32 → 30), as np.pad's and PyTorch's "reflect" modes do. The offsets and flips of every
step come from litenet.train.schedule, seeded by (seed, epoch): a resumed run draws the same ones.
"""

from __future__ import annotations

import numpy as np

SIDE = 32


def reflect(index: np.ndarray) -> np.ndarray:
    """Source coordinate of a padded coordinate (−p … 31 + p) under reflect padding (p ≤ 31)."""
    index = np.abs(index)
    return np.where(index > SIDE - 1, 2 * (SIDE - 1) - index, index)


def apply(images: np.ndarray, indices: np.ndarray, flips: np.ndarray | None = None,
          crops: np.ndarray | None = None, padding: int = 4) -> np.ndarray:
    """images[indices] (uint8 NHWC), each cropped at crops[b] = (oy, ox) in 0 … 2p of its copy padded
    by p = `padding`, then mirrored left-right where flips[b]; `None` skips either step."""
    batch = images[indices]
    if crops is None and (flips is None or not np.any(flips)):
        return batch
    n, steps = len(batch), np.arange(SIDE)
    rows = np.broadcast_to(steps, (n, SIDE))
    cols = np.broadcast_to(steps, (n, SIDE))
    if crops is not None:
        crops = np.asarray(crops, np.int64)
        rows = reflect(crops[:, :1] - padding + steps)
        cols = reflect(crops[:, 1:] - padding + steps)
    if flips is not None:
        cols = np.where(np.asarray(flips, bool)[:, None], cols[:, ::-1], cols)
    return batch[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
