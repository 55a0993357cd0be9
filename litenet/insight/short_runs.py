"""Short training runs for the diagnostic experiments: a NumPy backend driven for N steps, stats kept."""

from __future__ import annotations

import numpy as np

from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train import schedule
from litenet.train.numpy_backend import NumpyBackend


def short_run(model: ModelConfig, train: TrainConfig, images: np.ndarray, labels: np.ndarray, steps: int,
              progress: str | None = None, params: np.ndarray | None = None) -> dict:
    """Train `steps` steps from the seeded initialisation with the recipe's batches and lrs.

    The lrs are those of the first `steps` steps of the full run (warm-up, then the schedule over
    train.epochs), so a short run sees what the same steps of a real run would. Returns the stacked
    per-step statistics (backends.STAT_FIELDS) plus "lr", and the backend (for evaluation).
    A run whose loss stops being finite ends there.
    """
    backend = NumpyBackend(model, train, init_params(model, train.seed) if params is None else params)
    backend.load_dataset(images, labels)
    per_epoch = schedule.steps_per_epoch(len(images), train)
    total = max(steps, per_epoch * train.epochs)
    lrs = schedule.learning_rates(0, steps, total, train)
    bar = _bar(steps, progress)
    chunks, done = [], 0
    with np.errstate(all="ignore"):  # a diverging lr overflows; that is a result here, not an error
        while done < steps:
            epoch, first = divmod(done, per_epoch)
            count = min(50, steps - done, per_epoch - first)
            batches = schedule.epoch_batches(len(images), train, epoch)[first:first + count]
            backend.train_steps(batches, lrs[done:done + count])
            chunks.append(backend.fetch_stats())
            done += count
            bar.update(count)
            if not np.all(np.isfinite(chunks[-1]["loss"])):
                break
    bar.close()
    stats = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    stats["lr"] = lrs[:len(stats["loss"])]
    return {"stats": stats, "backend": backend}


def held_out(backend, images: np.ndarray, labels: np.ndarray, train: TrainConfig) -> tuple[float, float]:
    """(mean loss, accuracy) of the backend's weights on held-out images."""
    from litenet.train.network import loss_and_dlogits

    with np.errstate(all="ignore"):
        z = backend.logits(images).astype(np.float64)
        if not np.all(np.isfinite(z)):
            return float("nan"), float("nan")
        labels = np.asarray(labels, np.int64)
        return float(loss_and_dlogits(z, labels, train.loss, train.margin)[0]), float(np.mean(z.argmax(1) == labels))


def _bar(total: int, label: str | None):
    from tqdm import tqdm
    return tqdm(total=total, desc=label, unit="step", leave=False, disable=None if label else True)
