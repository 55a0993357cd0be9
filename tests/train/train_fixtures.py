"""Small synthetic training data and settings shared by the training tests."""

from __future__ import annotations

import numpy as np

from litenet.gpu.kernel_cache import Preparation
from litenet.model import ModelConfig, TrainConfig
from litenet.train.numpy_backend import NumpyBackend
from litenet.train.trainer import Split

TINY_MODEL = ModelConfig(embed="full", input_shift=0.5, width=16, hidden=24, blocks=2)
TINY_TRAIN = TrainConfig(epochs=3, batch_size=16, lr_base=0.2, warmup_steps=5, schedule="cosine",
                         loss="cross-entropy")


def synthetic_split(n: int, seed: int) -> Split:
    """Images whose class shows in their mean colour, so a tiny model can learn them."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    base = rng.integers(0, 120, (n, 32, 32, 3))
    base[..., 0] += labels[:, None, None] * 12
    return Split(base.clip(0, 255).astype(np.uint8), labels)


class PreparedBackend(NumpyBackend):
    """The NumPy backend, reporting kernels made ready as the CUDA backend does (gpu/kernel_cache.py)."""

    kernel_preparation = Preparation(4, 3, 2, 1.5, 2.8, "sm_90a")


class WatchingBackend(NumpyBackend):
    """The NumPy backend noting, as each chunk is handed to it, how many step records metrics.jsonl holds."""

    seen: list[int] = []
    folder = None

    def train_steps(self, batches, lrs, **draws):
        path = WatchingBackend.folder / "metrics.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        WatchingBackend.seen.append(sum('"type":"step"' in line for line in lines))
        super().train_steps(batches, lrs, **draws)
