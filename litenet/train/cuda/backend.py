"""CudaBackend: LiteNet's training step on an NVIDIA GPU, with the methods of every backend
(litenet/train/backends.py) plus memory_report() and layer_stats() for debugging.

Before the first step everything is allocated once (layout.py's arena); a step is a fixed list
of kernel launches (plans.py) that reads its batch, flips and learning rate from a schedule on
the device through a device-side step counter, so the list is captured once as a CUDA graph and
replayed for every step with no host synchronisation. Statistics accumulate on the device, one
row per step, and are copied back only by fetch_stats.

`precision` (default: the TrainConfig's, itself "fp32"): "fp32" runs every kernel in fp32 on any GPU
from sm_61; "tf32" or "bf16" (sm_80+) runs the step's tile products — the embedding's, fc1's,
fc2's and the head's, forward and both gradients — on the tensor cores (mma.cuh: operands rounded
to TF32 / BF16, fp32 accumulation, fp32 weights and activations in memory), in 64-row tiles. The
fused plan's row kernels and the other kernels stay fp32 (geometry.Geometry says why).

With a communicator (`comm`, docs/parallel.md) the backend is one rank of a data-parallel run: it
trains on its columns of each step's batch, and the communicator sums the flat gradient buffer
over the ranks between the gradient kernels and the update, on the same stream. A step is then
two graphs with the all-reduce between them (plans.Plans.with_allreduce).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig
from litenet.gpu.launch import check_launch
from litenet.train.cuda.check import check_step, run_checked
from litenet.train.cuda.geometry import Geometry, choose_plan
from litenet.train.cuda.layout import StatsLayout, param_offsets
from litenet.train.cuda.plans import AllReduce, Plans, arena_plan
from litenet.train.cuda.schedule_ring import DeviceSchedule, check_images, check_precision, open_device
from litenet.train.parallel.comm import local_columns, reduces

PLANS = ("auto", "fused", "ops")
# The embedding's version (geometry.choose_embed) and the products' tile shapes (geometry.choose_tall,
# choose_wide; None: chosen per product, True/False: tall or wide tiles everywhere or nowhere — wide for
# BF16 only): tests and benchmarks pick.
EMBEDS = ("auto", "rows", "tiles")
ACTIVATIONS = ("S", "X", "U", "A", "NRM", "RSTD", "Z", "DY", "DS", "DH0", "G1", "G2", "G3", "GH", "DZ", "PS")


class CudaBackend(DeviceSchedule):
    """Trains on the GPU with the hand-written kernels in kernels/*.cu."""

    name = "cuda"

    def __init__(self, model: ModelConfig, train: TrainConfig, params: np.ndarray, check_kernels: int = 0,
                 plan: str = "auto", graph: bool = True, steps_per_graph: int = 8, device=None,
                 capacity: int | None = None, embed: str = "auto", tall: bool | None = None, comm=None,
                 precision: str | None = None, wide: bool | None = None):
        precision = precision or train.precision
        check_precision(precision)
        if plan not in PLANS:
            raise LiteNetError(f"plan must be one of {', '.join(PLANS)}; got {plan!r}")
        if embed not in EMBEDS:
            raise LiteNetError(f"embed must be one of {', '.join(EMBEDS)}; got {embed!r}")
        if check_kernels < 0:
            raise LiteNetError("--check-kernels needs a number of steps ≥ 0")
        if train.activations != "keep":
            raise LiteNetError("activations = recompute is written for the Mixer's CUDA backend only; "
                               "use activations = keep for the MLP family")
        params, device = open_device(model, params, device, precision)
        self.model, self.train, self.dev, self.precision = model, train, device, precision
        self.comm = comm if reduces(comm) else None
        self.columns = local_columns(train.batch_size, comm)  # this rank's share of every step's batch
        self.batch = self.columns.stop - self.columns.start
        self.geometry = Geometry(model, self.batch, device.sm_count, embed, tall, precision, wide)
        self.plan = choose_plan(self.geometry) if plan == "auto" else plan
        if self.plan == "fused" and not self.geometry.fused_ok:
            raise LiteNetError("this model's rows do not fit the fused kernel's shared memory; use plan='ops'")
        self.capacity = capacity or int(np.clip(2 ** 20 // self.batch, 16, 4096))
        self.stats_layout = StatsLayout.of(model)
        self.arena = arena_plan(model, self.geometry, self.plan, self.capacity)
        self.v = device.allocate(self.arena)
        device.upload(self.v["params"], params.astype(np.float32))
        device.upload(self.v["layout"], param_offsets(model))
        device.upload(self.v["eval_index"], np.arange(self.batch, dtype=np.int32)[None])
        if self.plan == "fused":
            device.upload(self.v["jobs"], self.geometry.jobs)
        self.check_kernels, self.check_report = int(check_kernels), {}
        # Every step reads its inputs through the device counter, so one graph can hold several
        # consecutive steps: one host call then enqueues `steps_per_graph` steps, which keeps the
        # Python overhead of a launch (µs) below a small step's GPU time.
        self.use_graph, self.steps_per_graph = graph, max(1, int(steps_per_graph))
        self.host = SimpleNamespace(images=None, labels=None)  # for the twins of check_kernels
        self._dataset = None
        self._steps, self._graphs, self._split = None, {}, None
        plans = Plans(model, train, self.geometry, self.v, None, None)
        self._eval, self._refresh = self._validated(plans.eval_forward()), self._validated(plans.refresh_copies())
        self._refresh_copies()
        self._pos, self._done, self._pending = 0, 0, []

    # -- the backend interface -------------------------------------------------------------------

    def load_dataset(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Copy the training set (uint8 NHWC, labels) to the GPU once; steps gather from it there."""
        check_images(images, "training images")
        labels = np.asarray(labels)
        if labels.shape != (len(images),):
            raise LiteNetError(f"{len(images)} training images but labels of shape {labels.shape}")
        if labels.size and (labels.min() < 0 or labels.max() >= self.model.classes):
            raise LiteNetError(f"labels must lie in 0…{self.model.classes - 1}")
        self._dataset = (self.dev.to_device(np.asarray(images)), self.dev.to_device(labels.astype(np.uint8)))
        self.host.images, self.host.labels = images, labels
        plans = Plans(self.model, self.train, self.geometry, self.v, *self._dataset, host=self.host)
        steps = plans.step(self.plan)
        if self.comm is not None:
            steps = plans.with_allreduce(steps, self.comm.world_size)
        self._steps = self._validated(steps)
        self._graphs, self._split = {}, None

    def train_steps(self, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray | None = None) -> None:
        """Enqueue one SGD step per row of `batches` (indices into the training set); returns at once."""
        if self._steps is None:
            raise LiteNetError("call load_dataset before train_steps")
        batches, lrs = np.asarray(batches), np.asarray(lrs, dtype=np.float32)
        n = len(batches)
        if batches.ndim != 2 or batches.shape[1] != self.train.batch_size:
            raise LiteNetError(f"batches must have shape (steps, {self.train.batch_size}); got {batches.shape} "
                               "(the CUDA backend's buffers are sized for the configured batch_size)")
        if lrs.shape != (n,):
            raise LiteNetError(f"expected {n} learning rates, got shape {lrs.shape}")
        if n and (batches.min() < 0 or batches.max() >= len(self.host.images)):
            raise LiteNetError("batch indices outside the training set")
        flips = np.zeros(batches.shape, np.uint8) if flips is None else np.asarray(flips).astype(np.uint8)
        if flips.shape != batches.shape:
            raise LiteNetError(f"flips must have the shape of batches {batches.shape}; got {flips.shape}")
        batches, flips = batches[:, self.columns], flips[:, self.columns]
        done = 0
        while done < n:
            if self._pos == self.capacity:
                self._drain()
            count = min(self.capacity - self._pos, n - done)
            rows = slice(self._pos, self._pos + count)
            self.dev.upload(self.v["batches"][rows], batches[done:done + count].astype(np.int32))
            self.dev.upload(self.v["flips"][rows], flips[done:done + count])
            self.dev.upload(self.v["lrs"][rows], lrs[done:done + count])
            self._run(self._pos, count)
            self._pos += count
            done += count

    def state(self) -> dict[str, np.ndarray]:
        return {"params": self.dev.download(self.v["params"]), "velocity": self.dev.download(self.v["velocity"])}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key in ("params", "velocity"):
            value = np.asarray(state[key], dtype=np.float32)
            if value.shape != self.v[key].shape:
                raise LiteNetError(f"checkpoint {key} has shape {value.shape}, this model needs {self.v[key].shape}")
            self.dev.upload(self.v[key], value)
        self._refresh_copies()
        self.dev.synchronize()

    def _refresh_copies(self) -> None:
        """Copies of the parameters the step keeps (plans.refresh_copies), remade after an upload."""
        for launch in self._refresh:
            self.dev.launch(launch)

    # -- debugging -------------------------------------------------------------------------------

    def memory_report(self) -> dict:
        """Device memory: the arena (every step buffer), the dataset, and the device's own figures."""
        dataset = sum(int(a.nbytes) for a in self._dataset) if self._dataset else 0
        return {"plan": self.plan, "precision": self.precision, "arena_bytes": self.arena.size, "dataset_bytes": dataset,
                **self.dev.memory(), "buffers": self.arena.table()}

    def layer_stats(self) -> dict[str, dict]:
        """min / max / mean / NaN count of every activation buffer as the last step (or logits) left it."""
        out = {}
        for name in ACTIVATIONS:
            if name in self.v:
                a = self.dev.download(self.v[name]).astype(np.float64)
                finite = a[np.isfinite(a)]
                out[name] = {"min": float(finite.min()) if finite.size else float("nan"),
                             "max": float(finite.max()) if finite.size else float("nan"),
                             "mean": float(finite.mean()) if finite.size else float("nan"),
                             "nan": int(np.isnan(a).sum()), "shape": a.shape}
        return out

    # -- internals -------------------------------------------------------------------------------

    def _run(self, pos: int, count: int) -> None:
        """Enqueue `count` steps whose schedule rows start at `pos`."""
        k = 0
        while k < count:
            if self._done < self.check_kernels:
                self._checked_step(pos + k)
                n = 1
            elif not self.use_graph or self._done == 0:  # the first step runs eagerly: modules load outside a capture
                for launch in self._steps:
                    self._launch(launch)
                n = 1
            elif self.comm is not None:
                self._split_step()
                n = 1
            else:
                n = self._replay_steps(count - k)
            k += n
            self._done += n

    def _launch(self, launch) -> None:
        if isinstance(launch, AllReduce):
            self.comm.allreduce_sum_(launch.buffer, stream=getattr(self.dev, "stream", None))
        else:
            self.dev.launch(launch)

    def _split_step(self) -> None:
        """One data-parallel step: the graph of the kernels before the all-reduce, the all-reduce
        itself (a call on the stream, outside any graph: docs/parallel.md), the graph of the rest."""
        if self._split is None:
            cut = next(i for i, launch in enumerate(self._steps) if isinstance(launch, AllReduce))
            self._split = (self.dev.capture(self._steps[:cut]), self._steps[cut],
                           self.dev.capture(self._steps[cut + 1:]))
        before, allreduce, after = self._split
        self.dev.replay(before)
        self._launch(allreduce)
        self.dev.replay(after)

    def _checked_step(self, pos: int) -> None:
        def run_one(launch) -> dict[str, float]:
            if isinstance(launch, AllReduce):  # not a kernel: nothing to hold to a twin
                self._launch(launch)
                return {}
            return run_checked(self.dev, launch, pos)

        check_step(self._steps, self._done, run_one, self.check_report)

    def _validated(self, launches):
        """Check every launch's arguments against its kernel's declared parameters, once."""
        for launch in launches:
            if not isinstance(launch, AllReduce):
                check_launch(launch)
        return launches
