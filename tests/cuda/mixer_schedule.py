"""Random training data and augmentation draws for the Mixer backend tests (emulated and GPU)."""

import numpy as np


def random_schedule(steps: int, batch: int, images: int, lr: float, crop_padding: int = 4, seed: int = 0):
    """Random uint8 images and labels, then `steps` steps' batches, learning rates, flips, crop offsets
    and cutout centres: (images, labels, batches, lrs, flips, crops, cutouts)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (images, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, images).astype(np.uint8)
    batches = np.stack([rng.permutation(images)[:batch] for _ in range(steps)])
    return pixels, labels, batches, np.full(steps, lr), rng.random(batches.shape) < 0.5, \
        rng.integers(0, 2 * crop_padding + 1, (steps, batch, 2)), rng.integers(0, 32, (steps, batch, 2))
