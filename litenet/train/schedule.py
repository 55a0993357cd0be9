"""What each step sees: the learning rate at every step and the order of the images in every epoch."""

from __future__ import annotations

import math

import numpy as np

from litenet.model import TrainConfig


def learning_rate(step: int, total_steps: int, train: TrainConfig) -> float:
    """The lr at a 0-based global step: linear warm-up to lr, then constant or cosine to zero.

    lr = lr_base × batch / 256 (the linear scaling rule). Warm-up: lr × (step + 1) / warmup_steps.
    Cosine: lr × ½ (1 + cos(π · progress)), progress running from 0 after warm-up to 1 at the end.
    """
    peak = train.lr
    if step < train.warmup_steps:
        return peak * (step + 1) / train.warmup_steps
    if train.schedule == "constant":
        return peak
    span = max(1, total_steps - train.warmup_steps)
    progress = min(1.0, (step - train.warmup_steps) / span)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def learning_rates(first: int, count: int, total_steps: int, train: TrainConfig) -> np.ndarray:
    return np.array([learning_rate(s, total_steps, train) for s in range(first, first + count)])


def epoch_batches(n_images: int, train: TrainConfig, epoch: int) -> np.ndarray:
    """(steps, batch) image indices for one epoch: a fresh permutation seeded by (seed, epoch).

    The last partial batch is dropped so every step has the same shape (what a CUDA graph needs).
    Deriving the order from the epoch number alone is what lets a resumed run continue exactly.
    """
    steps = n_images // train.batch_size
    rng = np.random.default_rng([train.seed, epoch])
    order = rng.permutation(n_images)[:steps * train.batch_size]
    return order.reshape(steps, train.batch_size).astype(np.int64)


def epoch_flips(batches: np.ndarray, train: TrainConfig, epoch: int) -> np.ndarray | None:
    """Left-right flips for each image of each step when "flip" augmentation is on; None otherwise."""
    if "flip" not in train.augmentations:
        return None
    rng = np.random.default_rng([train.seed, epoch, 1])
    return rng.random(batches.shape) < 0.5


def epoch_crops(batches: np.ndarray, train: TrainConfig, epoch: int) -> np.ndarray | None:
    """(steps, batch, 2) crop offsets (row, column) in 0 … 2·crop_padding when "crop" augmentation is
    on (uniform: every 32×32 window of the padded image equally likely); None otherwise. A stream of
    its own, so switching crops on leaves the flips of a seed as they were."""
    if "crop" not in train.augmentations:
        return None
    rng = np.random.default_rng([train.seed, epoch, 2])
    return rng.integers(0, 2 * train.crop_padding + 1, size=(*batches.shape, 2), dtype=np.int8)


def epoch_cutouts(batches: np.ndarray, train: TrainConfig, epoch: int) -> np.ndarray | None:
    """(steps, batch, 2) centres (row, column) in 0 … 31 of each image's cutout square when "cutout"
    augmentation is on (uniform over the image, so a square near an edge is partly outside it, as
    in DeVries & Taylor's Cutout); None otherwise. A stream of its own, as epoch_crops."""
    if "cutout" not in train.augmentations:
        return None
    rng = np.random.default_rng([train.seed, epoch, 3])
    return rng.integers(0, 32, size=(*batches.shape, 2), dtype=np.int8)


def epoch_mixes(batches: np.ndarray, train: TrainConfig, epoch: int) -> np.ndarray | None:
    """(steps, batch, 5) int32 CutMix draws when "cutmix" augmentation is on, None otherwise: for image
    b of a step, [partner, top, left, bottom, right] — the box rows top … bottom − 1, columns left …
    right − 1 of it come from the image at position `partner` of the same step (both augmented), or
    partner = −1: no box. As Yun et al.'s reference code: the partners are a permutation of the
    batch; the box's area share 1 − λ with λ ~ Beta(1, 1) (uniform), its sides ⌊32·√(1 − λ)⌋ halved
    either side of a uniform centre, then clipped to the image (so the area that counts, the one the
    targets are mixed by, is the clipped one: augment.mix_shares). A stream of its own."""
    if "cutmix" not in train.augmentations:
        return None
    rng = np.random.default_rng([train.seed, epoch, 4])
    steps, B = batches.shape
    partners = np.argsort(rng.random((steps, B)), axis=1)  # a uniform permutation per step
    chosen = rng.random((steps, B)) < train.cutmix_prob
    half = (32 * np.sqrt(1.0 - rng.random((steps, B)))).astype(np.int64) // 2
    centre = rng.integers(0, 32, size=(steps, B, 2))
    low, high = np.clip(centre - half[..., None], 0, 32), np.clip(centre + half[..., None], 0, 32)
    mixes = np.stack([partners, low[..., 0], low[..., 1], high[..., 0], high[..., 1]], axis=-1)
    mixes[~chosen] = (-1, 0, 0, 0, 0)
    return mixes.astype(np.int32)


def epoch_augments(batches: np.ndarray, train: TrainConfig, epoch: int) -> dict[str, np.ndarray]:
    """The epoch's augmentation draws that are switched on, by train_steps' argument name
    (flips, crops, cutouts, mixes); each indexed like `batches` in its first two axes."""
    draws = {"flips": epoch_flips(batches, train, epoch), "crops": epoch_crops(batches, train, epoch),
             "cutouts": epoch_cutouts(batches, train, epoch), "mixes": epoch_mixes(batches, train, epoch)}
    return {name: value for name, value in draws.items() if value is not None}


def steps_per_epoch(n_images: int, train: TrainConfig) -> int:
    return n_images // train.batch_size
