"""Training-time augmentation on the CPU: random crops of the reflect-padded image, left-right flips,
cutout (a square of the augmented image filled with the mean grey) and CutMix (a box of another
augmented image of the batch pasted in; the loss then mixes the two targets by area: mix_shares).

Both are index maps, so one gather builds the whole augmented batch from the uint8 training set and
no padded copy is made: a crop at offset (oy, ox) of the image padded by p reads source row
reflect(oy − p + i) for output row i, where reflect mirrors about the edge pixel without repeating
it (−1 → 1, 32 → 30), as np.pad's and PyTorch's "reflect" modes do. The offsets and flips of every
step come from litenet.train.schedule, seeded by (seed, epoch): a resumed run draws the same ones.
kernels/patches.cu does the same on the GPU in its read of the uint8 images (these are its twins).
"""

from __future__ import annotations

import numpy as np

from litenet.errors import LiteNetError

SIDE = 32
# Cutout's fill: the uint8 grey nearest CIFAR-10's mean pixel (0.473 × 255), which the Mixer's
# input_shift of 0.47 centres to about 0 — what "cut out" means after normalisation (DeVries &
# Taylor fill 0 after subtracting the mean) — while staying a uint8 value both paths hold exactly.
CUTOUT_FILL = 121


def reflect(index: np.ndarray) -> np.ndarray:
    """Source coordinate of a padded coordinate (−p … 31 + p) under reflect padding (p ≤ 31)."""
    index = np.abs(index)
    return np.where(index > SIDE - 1, 2 * (SIDE - 1) - index, index)


def apply(images: np.ndarray, indices: np.ndarray, flips: np.ndarray | None = None,
          crops: np.ndarray | None = None, padding: int = 4, cutouts: np.ndarray | None = None,
          cutout_size: int = 8, mixes: np.ndarray | None = None) -> np.ndarray:
    """images[indices] (uint8 NHWC), each cropped at crops[b] = (oy, ox) in 0 … 2p of its copy padded
    by p = `padding`, then mirrored left-right where flips[b], then with the cutout_size square
    centred at cutouts[b] = (cy, cx) filled (cutout_square), then with the box of mixes[b] =
    (partner, top, left, bottom, right) taken from image `partner` of the batch as those steps left
    it (mix_boxes; partner −1: none; schedule.epoch_mixes); `None` skips any step."""
    batch = images[indices]
    if crops is not None or (flips is not None and np.any(flips)):
        batch = _crop_flip(batch, flips, crops, padding)
    if cutouts is not None:
        batch = np.where(cutout_square(cutouts, cutout_size)[:, :, :, None], np.uint8(CUTOUT_FILL), batch)
    if mixes is not None:
        partners = np.maximum(np.asarray(mixes)[:, 0], 0)
        batch = np.where(mix_boxes(mixes)[:, :, :, None], batch[partners], batch)
    return batch


def check_mixes(mixes: np.ndarray, steps: int, batch: int) -> np.ndarray:
    """CutMix draws for `steps` steps of `batch` images as int32, or a one-line LiteNetError: the
    shape (steps, batch, 5), partners −1 or a position in the batch, boxes inside the 32×32 image
    (a kernel reads the partner's image and label through them)."""
    mixes = np.asarray(mixes)
    if mixes.shape != (steps, batch, 5):
        raise LiteNetError(f"CutMix draws must have shape ({steps}, {batch}, 5); got {mixes.shape}")
    partner, top, left, bottom, right = np.moveaxis(mixes.astype(np.int64), -1, 0)
    if np.any((partner < -1) | (partner >= batch)):
        raise LiteNetError(f"CutMix partners must be −1 or positions 0 … {batch - 1} of the batch")
    if np.any((top < 0) | (left < 0) | (bottom > SIDE) | (right > SIDE) | (top > bottom) | (left > right)):
        raise LiteNetError("CutMix boxes must lie inside the 32×32 image (0 ≤ top ≤ bottom ≤ 32, the same for columns)")
    return mixes.astype(np.int32)


def mix_boxes(mixes: np.ndarray) -> np.ndarray:
    """(n, 32, 32) bool: the pixels of each image that CutMix takes from its partner (none where
    the partner is −1): rows top … bottom − 1 and columns left … right − 1."""
    mixes = np.asarray(mixes, np.int64)
    steps = np.arange(SIDE)
    rows = (steps >= mixes[:, 1, None]) & (steps < mixes[:, 3, None])
    cols = (steps >= mixes[:, 2, None]) & (steps < mixes[:, 4, None])
    return (mixes[:, 0] >= 0)[:, None, None] & rows[:, :, None] & cols[:, None, :]


def mix_shares(mixes: np.ndarray) -> np.ndarray:
    """(n,) the share of each image that its CutMix partner supplies, the box's area / 32² (0 without
    a partner): the weight of the partner's label in the target (1 − λ in Yun et al.'s terms)."""
    mixes = np.asarray(mixes, np.int64)
    area = (mixes[:, 3] - mixes[:, 1]) * (mixes[:, 4] - mixes[:, 2])
    return np.where(mixes[:, 0] >= 0, area / float(SIDE * SIDE), 0.0)


def mixed_targets(labels: np.ndarray, mixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the partner's label, its share) of each image of a batch with CutMix draws `mixes`: what
    ops.cross_entropy_forward's `mix` takes. An image without a partner keeps its own label, share 0."""
    partners = np.asarray(mixes)[:, 0]
    return np.where(partners >= 0, labels[np.maximum(partners, 0)], labels), mix_shares(mixes)


def cutout_square(centres: np.ndarray, size: int) -> np.ndarray:
    """(n, 32, 32) bool: rows cy − ⌊size/2⌋ … cy − ⌊size/2⌋ + size − 1 and the same columns around cx,
    clipped to the image (an output pixel of the augmented image is cut when both hold)."""
    centres = np.asarray(centres, np.int64)
    steps = np.arange(SIDE)
    low = centres - size // 2  # (n, 2)
    inside = (steps >= low[:, :, None]) & (steps < low[:, :, None] + size)  # (n, 2, 32): rows, columns
    return inside[:, 0, :, None] & inside[:, 1, None, :]


def _crop_flip(batch: np.ndarray, flips, crops, padding: int) -> np.ndarray:
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
