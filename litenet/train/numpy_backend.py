"""The NumPy training backend: the reference network driven step by step on the CPU."""

from __future__ import annotations

import numpy as np

from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig, param_layout, param_views
from litenet.train import network
from litenet.train import reference as ref
from litenet.train.parallel.comm import local_columns, reduce_stats, reduces


class NumpyBackend:
    """Trains with the reference math; the same methods as every backend in `backends.BACKENDS`."""

    name = "numpy"

    def __init__(self, model: ModelConfig, train: TrainConfig, params: np.ndarray, dtype=np.float32, comm=None):
        self.model, self.train = model, train
        # Data-parallel (docs/parallel.md): this rank trains on its columns of each step's batch and
        # sums its gradient with the other ranks' before the clip rule and the update.
        self.comm = comm if reduces(comm) else None
        self.columns = local_columns(train.batch_size, comm)
        self.params = np.array(params, dtype=dtype)
        self.velocity = np.zeros_like(self.params)
        self.grads = np.zeros_like(self.params)
        self._scratch = np.empty_like(self.params)  # the optimiser's temporaries, allocated once
        self._images = self._labels = None
        self._stats: list[dict] = []

    def load_dataset(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Keep the training set (uint8 NHWC, usually a read-only memory map) for `train_steps`."""
        self._images, self._labels = images, labels

    def train_steps(self, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray | None = None) -> None:
        """Run one SGD step per row of `batches` (indices into the training set) at the given lrs.

        `flips` (same shape as `batches`, optional) mirrors those images left-right first.
        With a communicator, `batches` holds the global batch and this rank takes its columns.
        """
        if self.comm is not None:
            batches = np.asarray(batches)
            if batches.ndim != 2 or batches.shape[1] != self.train.batch_size:
                raise LiteNetError(f"batches must have shape (steps, {self.train.batch_size}); got {batches.shape}")
            batches = batches[:, self.columns]
            flips = None if flips is None else np.asarray(flips)[:, self.columns]
        for row, (indices, lr) in enumerate(zip(batches, lrs)):
            images = self._images[indices]
            if flips is not None and flips[row].any():
                images = np.where(flips[row][:, None, None, None], images[:, :, ::-1], images)
            self.step(images, self._labels[indices].astype(np.int64), float(lr))

    def step(self, images: np.ndarray, labels: np.ndarray, lr: float) -> dict:
        """One step on an explicit batch: forward, backward, clip rule, SGD update."""
        t = self.train
        tape = network.forward(self.params, images, self.model)
        loss, _, dz = network.loss_and_dlogits(tape.z, labels, t.loss, t.margin)
        _, _, block_grads = network.backward(self.params, tape, dz, self.model, grads=self.grads)
        if self.comm is not None:  # the mean over the global batch, the same on every rank
            self.comm.allreduce_sum_(self.grads)
            ref.grad_average(self.grads, self.comm.world_size)
        grad_sq = [float(np.dot(g.ravel(), g.ravel())) for g in param_views(self.grads, self.model).values()]
        norm, clipped = ref.grad_norm_clip(self.grads, t.clip_threshold, t.clip_norm)
        ref.sgd_momentum_update(self.params, self.velocity, self.grads, lr, t.momentum, t.weight_decay, self._scratch)
        stats = {"loss": float(loss), "grad_norm": norm, "clipped": clipped, "grad_sq": grad_sq,
                 "path": [network.path_sums(b) for b in block_grads]}
        self._stats.append(stats)
        return stats

    def fetch_stats(self) -> dict[str, np.ndarray]:
        """Per-step statistics since the last call (see `backends.STAT_FIELDS` for their meaning)."""
        stats, self._stats = self._stats, []
        return reduce_stats(stack_stats(stats, self.model), self.comm)

    def logits(self, images: np.ndarray, batch_size: int = 1000) -> np.ndarray:
        """Forward only, in slices, for evaluation."""
        out = [network.forward(self.params, images[i:i + batch_size], self.model).z
               for i in range(0, len(images), batch_size)]
        return np.concatenate(out).astype(np.float32)

    def state(self) -> dict[str, np.ndarray]:
        """Parameters and momentum, as host float arrays, for a checkpoint."""
        return {"params": self.params.copy(), "velocity": self.velocity.copy()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.params[...] = state["params"]
        self.velocity[...] = state["velocity"]


def stack_stats(stats: list[dict], model: ModelConfig) -> dict[str, np.ndarray]:
    """Turn a list of per-step dicts into arrays with a leading step axis (empty arrays for none)."""
    n_tensors, blocks = len(param_layout(model)), model.blocks
    def column(key, dtype, shape=()):
        return np.array([s[key] for s in stats], dtype=dtype).reshape((len(stats), *shape))
    return {"loss": column("loss", np.float64), "grad_norm": column("grad_norm", np.float64),
            "clipped": column("clipped", bool), "grad_sq": column("grad_sq", np.float64, (n_tensors,)),
            "path": column("path", np.float64, (blocks, 3))}
