"""The NumPy training backend: the reference network driven step by step on the CPU."""

from __future__ import annotations

import numpy as np

from litenet.errors import LiteNetError, UsageError
from litenet.graph import residuals
from litenet.model import AnyModel, TrainConfig, param_layout, param_views
from litenet.train import augment, heap, network
from litenet.train import optim
from litenet.train.parallel.comm import local_columns, reduce_stats, reduces


def decay_mask(model: AnyModel, train: TrainConfig, dtype=np.float32) -> np.ndarray | float:
    """The weight decay of every parameter: a number when all decay alike, else an array with 0 on
    biases and LayerNorm's γ, β (decay = "weights": shrinking those towards 0 only hurts)."""
    if train.decay == "all":
        return train.weight_decay
    mask = np.zeros(param_layout(model)[-1].offset + param_layout(model)[-1].size, dtype)
    for p in param_layout(model):
        if p.kind == "weight":
            mask[p.offset:p.offset + p.size] = train.weight_decay
    return mask


class NumpyBackend:
    """Trains with the reference math; the same methods as every backend in `backends.BACKENDS`."""

    name = "numpy"
    kernel_preparation = None  # nothing is compiled

    def __init__(self, model: AnyModel, train: TrainConfig, params: np.ndarray, dtype=np.float32, comm=None):
        if train.activations != "keep":
            raise UsageError("--activations recompute is a CUDA fast-tier rewrite; the NumPy backend keeps "
                             "every activation: use --activations keep with --backend numpy")
        if train.precision != "fp32":
            raise UsageError(f"--precision {train.precision} runs CUDA products on tensor cores; the NumPy backend "
                             "computes in --dtype (float32 or float64): use --precision fp32 with --backend numpy")
        heap.keep_freed_memory()  # a step's temporaries then reuse the last step's pages (heap.py)
        self.model, self.train = model, train
        # Data-parallel (docs/parallel.md): this rank trains on its columns of each step's batch and
        # sums its gradient with the other ranks' before the clip rule and the update.
        self.comm = comm if reduces(comm) else None
        if self.comm is not None and "cutmix" in train.augmentations:
            raise LiteNetError("CutMix pairs images across the whole batch; data-parallel training does not "
                               "support it yet (train on one process, or drop cutmix from --augment)")
        self.columns = local_columns(train.batch_size, comm)
        self.params = np.array(params, dtype=dtype)
        self.grads = np.zeros_like(self.params)
        self.decay = decay_mask(model, train, dtype)
        # the optimiser's state: SGD's velocity, or AdamW's two moments and its step count
        names = ("velocity",) if train.optimizer == "sgd" else ("m", "v")
        self.moments = {name: np.zeros_like(self.params) for name in names}
        self.updates = 0
        self._scratch = np.empty_like(self.params)  # the optimiser's temporaries, allocated once
        self._images = self._labels = None
        self._stats: list[dict] = []

    def load_dataset(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Keep the training set (uint8 NHWC, usually a read-only memory map) for `train_steps`."""
        self._images, self._labels = images, labels

    def train_steps(self, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray | None = None,
                    crops: np.ndarray | None = None, cutouts: np.ndarray | None = None,
                    mixes: np.ndarray | None = None) -> None:
        """Run one step per row of `batches` (indices into the training set) at the given lrs.

        `flips` (same shape as `batches`) mirrors those images left-right, `crops` ((steps, batch, 2)
        offsets) cuts each from its reflect-padded copy, `cutouts` ((steps, batch, 2) centres) fills a
        square of it, `mixes` ((steps, batch, 5) CutMix draws, schedule.epoch_mixes) pastes a box of
        another image in and mixes the targets (litenet.train.augment); all optional.
        With a communicator, `batches` holds the global batch and this rank takes its columns.
        """
        if mixes is not None:
            mixes = augment.check_mixes(mixes, len(batches), self.train.batch_size)
        draws = {"flips": flips, "crops": crops, "cutouts": cutouts, "mixes": mixes}
        if self.comm is not None:
            batches = np.asarray(batches)
            if batches.ndim != 2 or batches.shape[1] != self.train.batch_size:
                raise LiteNetError(f"batches must have shape (steps, {self.train.batch_size}); got {batches.shape}")
            batches = batches[:, self.columns]
            draws = {k: None if v is None else np.asarray(v)[:, self.columns] for k, v in draws.items()}
        for row, (indices, lr) in enumerate(zip(batches, lrs)):
            step_draws = {k: None if v is None else v[row] for k, v in draws.items()}
            images = augment.apply(self._images, indices, padding=self.train.crop_padding,
                                   cutout_size=self.train.cutout_size, **step_draws)
            labels = self._labels[indices].astype(np.int64)
            mix = None if mixes is None else augment.mixed_targets(labels, step_draws["mixes"])
            # a diverging run overflows on its way to NaN: the trainer reports that in one line, not NumPy
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                self.step(images, labels, float(lr), mix)

    def step(self, images: np.ndarray, labels: np.ndarray, lr: float, mix=None, observer=None) -> dict:
        """One step on an explicit batch: forward, backward, clip rule, optimiser update (mix: CutMix's
        partner labels and shares, augment.mixed_targets).

        `observer` (LiteNet Studio's inspection) sees the step's own numbers, no copies: its
        `backward_op` is network.backward's on_op hook, and `pass_done(tape, dz, grads)` runs after the
        backward, before the clip rule and the update change anything.
        """
        t = self.train
        tape = network.forward(self.params, images, self.model)
        loss, _, dz = network.loss_and_dlogits(tape.z, labels, t.loss, t.margin, t.label_smoothing, mix)
        _, _, joins = network.backward(self.params, tape, dz, self.model, grads=self.grads,
                                       on_op=None if observer is None else observer.backward_op)
        if observer is not None:
            observer.pass_done(tape, dz, self.grads)
        if self.comm is not None:  # the mean over the global batch, the same on every rank
            self.comm.allreduce_sum_(self.grads)
            optim.grad_average(self.grads, self.comm.world_size)
        grad_sq = [float(np.dot(g.ravel(), g.ravel())) for g in param_views(self.grads, self.model).values()]
        norm, clipped = optim.grad_norm_clip(self.grads, t.clip_threshold, t.clip_norm)
        self.updates += 1
        if t.optimizer == "sgd":
            optim.sgd_momentum_update(self.params, self.moments["velocity"], self.grads, lr, t.momentum, self.decay,
                                    self._scratch)
        else:
            optim.adamw_update(self.params, self.moments["m"], self.moments["v"], self.grads, self.updates, lr,
                             t.beta1, t.beta2, t.adam_eps, self.decay)
        stats = {"loss": float(loss), "grad_norm": norm, "clipped": clipped, "grad_sq": grad_sq,
                 "path": [network.path_sums(j) for j in joins]}
        self._stats.append(stats)
        return stats

    def fetch_stats(self) -> dict[str, np.ndarray]:
        """Per-step statistics since the last call (see `backends.STAT_FIELDS` for their meaning)."""
        stats, self._stats = self._stats, []
        return reduce_stats(stack_stats(stats, self.model), self.comm)

    def logits(self, images: np.ndarray, batch_size: int = 1000) -> np.ndarray:
        """Forward only, in slices, for evaluation."""
        from litenet import forward as fwd

        return fwd.logits(network.ops_of(self.model), param_views(self.params, self.model), images, batch_size,
                          dtype=self.params.dtype.type)

    def weights(self) -> np.ndarray:
        """The parameters alone, a host copy (what the trainer reads after every chunk)."""
        return self.params.copy()

    def state(self) -> dict[str, np.ndarray]:
        """Parameters and the optimiser's state, as host arrays, for a checkpoint."""
        return {"params": self.params.copy(), **{k: v.copy() for k, v in self.moments.items()},
                "updates": np.array([self.updates], np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.params[...] = state["params"]
        for name, moment in self.moments.items():
            moment[...] = state[name]
        self.updates = int(state["updates"][0]) if "updates" in state else 0


def stack_stats(stats: list[dict], model: AnyModel) -> dict[str, np.ndarray]:
    """Turn a list of per-step dicts into arrays with a leading step axis (empty arrays for none)."""
    n_tensors, joins = len(param_layout(model)), len(residuals(model))
    def column(key, dtype, shape=()):
        return np.array([s[key] for s in stats], dtype=dtype).reshape((len(stats), *shape))
    return {"loss": column("loss", np.float64), "grad_norm": column("grad_norm", np.float64),
            "clipped": column("clipped", bool), "grad_sq": column("grad_sq", np.float64, (n_tensors,)),
            "path": column("path", np.float64, (joins, 3))}
