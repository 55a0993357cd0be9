"""GpuBackend: training on an NVIDIA GPU through the op-list lowering (litenet.lowering), for any network.

The step is the model's op list lowered to kernel calls — the reference tier, or the fast tier's
rewrites where they cover the settings — and every tensor is placed by liveness in one allocation
made before the first step. A step reads its batch, augmentation draws, learning rate and update
count from a schedule on the device through a device-side step counter, so its launch list is
captured once as a CUDA graph and replayed with no host synchronisation; statistics stay on the
device, one row per step, until fetch_stats. Evaluation is the same walk without the backward, in
the same arena, at the largest batch (up to 1,024 images) that needs no more of it than the training
batch, over a split kept on the device: one upload, one captured graph replayed a batch at a time, one download
(litenet/lowering/evaluation.py).

Options: `kernels` "fast" (default) or "reference"; `precision` fp32 | tf32 | bf16 (the fast tier's
products; the reference tier is fp32 and refuses the others); `check_kernels` N runs the first N steps
region by region, holding each fast region to its reference calls and each reference call to its NumPy
twin (lowering/check.py); `print_launches` prints the launch list before training.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from litenet.errors import LiteNetError, UsageError
from litenet.graph import ops_of
from litenet.lowering import KERNEL_TIERS, lower_forward, lower_training
from litenet.lowering.arena import Arena, bind
from litenet.lowering.evaluation import SPLIT_COUNTER, SPLIT_IMAGES, SPLIT_LOGITS, over_split
from litenet.lowering.program import Program, Region
from litenet.lowering.stats import StatsLayout, param_offsets
from litenet.model import param_count
from litenet.train import augment
from litenet.train.numpy_backend import decay_mask
from litenet.train.parallel.comm import local_columns, reduce_stats, reduces

PRECISIONS = ("fp32", "tf32", "bf16")
CUTOUT_OFF = -128  # a cutout centre whose square misses every pixel (int8, as the schedule holds centres)


def has_tensor_cores(capability: str) -> bool:
    """Whether "sm_XY" runs mma.sync with TF32 / BF16 operands (sm_80 and newer); the CPU emulator runs them."""
    return capability == "emulated" or (capability.startswith("sm_") and int(capability[3:-1]) >= 8)


def check_images(images, what: str) -> None:
    """uint8 NHWC (N, 32, 32, 3), or a one-line LiteNetError."""
    if getattr(images, "dtype", None) != np.uint8 or tuple(images.shape[1:]) != (32, 32, 3):
        raise LiteNetError(f"{what} must be uint8 NHWC (N, 32, 32, 3); got {getattr(images, 'dtype', None)} "
                           f"{getattr(images, 'shape', None)}")


# The largest batch evaluation runs at: larger gained little more and cost planning time at start-up.
EVAL_BATCH_MAX = 1024


class GpuBackend:
    """Trains with the kernels in kernels/ (see the module docstring); the methods of every backend."""

    name = "cuda"

    def __init__(self, model, train, params: np.ndarray, device=None, precision: str | None = None,
                 kernels: str = "fast", check_kernels: int = 0, graph: bool = True, steps_per_graph: int = 8,
                 capacity: int | None = None, comm=None, print_launches: bool = False, eval_batch: int | None = None,
                 **tiles):
        precision = precision or train.precision
        if precision not in PRECISIONS:
            raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
        if kernels not in KERNEL_TIERS:
            raise UsageError(f"--kernels must be one of {', '.join(KERNEL_TIERS)}; got {kernels!r}")
        if kernels == "reference" and precision != "fp32":
            raise UsageError(f"--kernels reference computes in fp32; --precision {precision} needs --kernels fast")
        if check_kernels < 0:
            raise UsageError("--check-kernels needs a number of steps ≥ 0")
        if eval_batch is not None and eval_batch < 1:
            raise UsageError(f"eval_batch must be ≥ 1; got {eval_batch}")
        if train.activations == "recompute" and kernels == "reference":
            raise UsageError("--activations recompute is a fast-tier rewrite; use --kernels fast or activations keep")
        params = np.asarray(params)
        if params.shape != (param_count(model),):
            raise LiteNetError(f"expected {param_count(model)} parameters for this model, got shape {params.shape}")
        if device is None:
            from litenet.gpu.device import CupyDevice
            device = CupyDevice()
        if precision != "fp32" and not has_tensor_cores(device.capability):
            raise UsageError(f"precision {precision} needs tensor cores (sm_80 or newer); this GPU is "
                             f"{device.capability}: use --precision fp32")
        self.model, self.train, self.dev, self.precision, self.kernels = model, train, device, precision, kernels
        self.comm = comm if reduces(comm) else None
        if self.comm is not None and "cutmix" in train.augmentations:
            raise LiteNetError("CutMix pairs images across the whole batch; data-parallel training does not "
                               "support it yet (train on one GPU, or drop cutmix from --augment)")
        self.columns = local_columns(train.batch_size, comm)
        self.batch = self.columns.stop - self.columns.start
        self.capacity = capacity or int(np.clip(2 ** 20 // self.batch, 16, 4096))
        options = dict(precision=precision, sm_count=device.sm_count, world_size=self.comm.world_size if self.comm else None,
                       **tiles)
        self.program = lower_training(model, train, self.batch, self.capacity, kernels, **options)
        self.eval_batch, self.eval_program = self._evaluation(self._timeline(check_kernels), kernels, options,
                                                              eval_batch)
        if print_launches:
            print(self.program.describe(), file=sys.stderr)
        # Every kernel the run launches, compiled (in parallel where the cache lacks them) before the first.
        self.kernel_preparation = device.prepare(c.kernel for c in self._launched(check_kernels))
        self.arena = Arena.plan(self._timeline(check_kernels), self.eval_program)
        self.v = device.allocate(self.arena)
        self.stats_layout = StatsLayout.of(model)
        self._upload_state(params)
        self.use_graph, self.steps_per_graph = graph, max(1, int(steps_per_graph))
        self.check_kernels, self.check_report, self._checker = int(check_kernels), {}, None
        self._eval, self._eval_graphs, self._split_room = None, {}, 0  # bound once the split's buffers exist
        self._refresh = [bind(c, self.v) for c in self.program.refresh]
        self._refresh_copies()
        # A parameter copy the evaluation reads and the step does not keep (its batch may take wide tiles where
        # the step's does not) is remade before each evaluation.
        self._eval_refresh = [bind(c, self.v) for c in self.eval_program.refresh if c not in self.program.refresh]
        self._steps = self._graphs = None
        self._dataset, self._host_set = None, None
        self._pos, self._done, self._pending, self.updates = 0, 0, [], 0
        # Draw kinds whose whole ring holds "off" (filled once): a call that leaves them out uploads nothing,
        # since every upload from host memory waits for the stream, and small steps feel each wait.
        self._off_rings: set[str] = set()

    def _evaluation(self, timeline: Program, kernels: str, options: dict, asked: int | None) -> tuple[int, Program]:
        """The evaluation's batch and program: `asked`, or else the largest of the training batch times 2ᵏ up
        to EVAL_BATCH_MAX whose arena (step and evaluation together) is no larger than at the training
        batch, so scoring the test set costs fewer, fuller launches and no memory. (At batch 128 the
        Mixer's forward needs split-K scratch that a larger batch does not, so the largest can need the
        least.) On the CPU emulator, whose cost is per thread, a padded last batch costs what a whole one
        does: there it is the training batch unless asked."""
        def program(batch: int) -> Program:
            return over_split(lower_forward(self.model, batch, kernels, **options), self.model, batch)

        at_training = program(self.batch)
        if asked is not None or self.dev.capability == "emulated":
            return (asked, program(asked)) if asked else (self.batch, at_training)
        bytes_at_training = Arena.plan(timeline, at_training).size
        batch = self.batch
        while batch * 2 <= EVAL_BATCH_MAX:
            batch *= 2
        while batch > self.batch:
            candidate = program(batch)
            if Arena.plan(timeline, candidate).size <= bytes_at_training:
                return batch, candidate
            batch //= 2
        return self.batch, at_training

    def _timeline(self, check_kernels: int) -> Program:
        """What the arena's liveness follows: the step's calls — and, where --check-kernels will hold each
        fast region to its reference calls, those too, so every tensor they read stays live as long."""
        if not check_kernels:
            return self.program
        return Program(self.program.tensors, [Region(r.name, r.phase, r.ops, r.calls + r.reference)
                                              for r in self.program.regions])

    def _launched(self, check_kernels: int):
        """The calls of the step, its parameter copies and the evaluation, and where --check-kernels will
        run them, the reference calls of every fast region."""
        yield from self.program.calls()
        yield from self.program.refresh
        yield from self.eval_program.calls()
        yield from self.eval_program.refresh
        if check_kernels:
            yield from (c for r in self.program.regions for c in r.reference)

    @property
    def plan(self) -> str:
        """"fused" where the fast tier runs the whole step of a small MLP in 4 launches, else "ops"."""
        return self.program.labels.get("plan", "ops")

    @property
    def geometry(self):
        """The fast tier's MLP tile geometry (lowering/fast/geometry.py), or None."""
        return self.program.geometry

    def _upload_state(self, params: np.ndarray) -> None:
        dev, v = self.dev, self.v
        dev.upload(v["params"], params.astype(np.float32))
        dev.upload(v["layout"], param_offsets(self.model))
        dev.upload(v["decay"], np.broadcast_to(decay_mask(self.model, self.train), params.shape).astype(np.float32))
        for program in (self.program, self.eval_program):  # tables a rewrite's kernels look up
            for name, value in program.constants.items():
                dev.upload(v[name], value)

    def _refresh_copies(self) -> None:
        """Copies of the parameters the fast tier keeps (e.g. BF16), remade after parameters are uploaded."""
        for launch in self._refresh:
            self.dev.launch(launch)

    # -- the backend interface -------------------------------------------------------------------

    def load_dataset(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Copy the training set (uint8 NHWC, labels) to the GPU once; steps gather and augment it there."""
        images, labels = np.asarray(images), np.asarray(labels)
        check_images(images, "training images")
        if labels.shape != (len(images),):
            raise LiteNetError(f"{len(images)} training images but labels of shape {labels.shape}")
        if labels.size and (labels.min() < 0 or labels.max() >= ops_of(self.model)[-1].shape[-1]):
            raise LiteNetError(f"labels must lie in 0…{ops_of(self.model)[-1].shape[-1] - 1}")
        self._dataset = {"dataset.images": self.dev.to_device(images),
                         "dataset.labels": self.dev.to_device(labels.astype(np.uint8))}
        self._host_set = (images, labels.astype(np.uint8))
        self.v.update(self._dataset)
        self._steps = [bind(c, self.v) for c in self.program.calls()]
        self._graphs = {}
        if self.check_kernels:
            from litenet.train.check_kernels import RegionChecker
            self._checker = RegionChecker(self.dev, self.program, self.v, self._host_set, self.model, self.train)

    def train_steps(self, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray | None = None,
                    crops: np.ndarray | None = None, cutouts: np.ndarray | None = None,
                    mixes: np.ndarray | None = None) -> None:
        """Enqueue one step per row of `batches` (indices into the training set); returns at once. The
        draws as NumpyBackend.train_steps takes them; a kind left out is off."""
        if self._steps is None:
            raise LiteNetError("call load_dataset before train_steps")
        batches, lrs = np.asarray(batches), np.asarray(lrs, np.float32)
        n, B = len(batches), self.train.batch_size
        if batches.ndim != 2 or batches.shape[1] != B:
            raise LiteNetError(f"batches must have shape (steps, {B}); got {batches.shape} "
                               "(the GPU's buffers are sized for the configured batch_size)")
        if lrs.shape != (n,):
            raise LiteNetError(f"expected {n} learning rates, got shape {lrs.shape}")
        if n and (batches.min() < 0 or batches.max() >= len(self._host_set[0])):
            raise LiteNetError("batch indices outside the training set")
        # A kind left out is off: no flip, the centred crop (offset = padding), a cutout centre off the image,
        # no CutMix box.
        off = {"flips": 0, "crops": self.train.crop_padding, "cutouts": CUTOUT_OFF, "mixes": -1}
        draws = {"flips": (flips, np.uint8), "crops": (crops, np.int8), "cutouts": (cutouts, np.int8)}
        if "cutmix" in self.train.augmentations:
            draws["mixes"] = (None if mixes is None else augment.check_mixes(mixes, n, B), np.int32)
        rows = {}
        for k, (a, dt) in draws.items():
            if a is None:
                if k not in self._off_rings:
                    self.dev.upload(self.v[k], np.full(self.v[k].shape, off[k], dt))
                    self._off_rings.add(k)
                continue
            rows[k] = np.asarray(a).astype(dt)
            self._off_rings.discard(k)
            if rows[k].shape[:2] != batches.shape:
                raise LiteNetError(f"{k} must have the shape of batches {batches.shape} first; got {rows[k].shape}")
        rows = {k: a[:, self.columns] for k, a in rows.items()}
        batches = batches[:, self.columns]
        done = 0
        while done < n:
            if self._pos == self.capacity:
                self._drain()
            count = min(self.capacity - self._pos, n - done)
            at, part = slice(self._pos, self._pos + count), slice(done, done + count)
            self.dev.upload(self.v["batches"][at], batches[part].astype(np.int32))
            for k, a in rows.items():
                self.dev.upload(self.v[k][at], a[part])
            self.dev.upload(self.v["lrs"][at], lrs[part])
            if self.train.optimizer == "adamw":  # the update count only AdamW's bias correction reads
                self.dev.upload(self.v["steps"][at], np.arange(self.updates + 1, self.updates + count + 1, dtype=np.int32))
            self._run(count)
            self._pos += count
            self.updates += count
            done += count

    def fetch_stats(self) -> dict[str, np.ndarray]:
        """Per-step statistics since the last call (backends.STAT_FIELDS); waits for the GPU."""
        self._drain()
        width = self.stats_layout.width
        rows = np.concatenate(self._pending) if self._pending else np.zeros((0, width), np.float32)
        self._pending = []
        return reduce_stats(self.stats_layout.unpack(rows), self.comm)

    def logits(self, images: np.ndarray, batch_size: int | None = None) -> np.ndarray:
        """Forward only, through the evaluation program at `eval_batch` (`batch_size` is the NumPy
        backend's): the images go up once, a captured graph scores them a batch per replay, the logits come
        down once."""
        check_images(images, "images")
        n, classes = len(images), ops_of(self.model)[-1].shape[-1]
        if n == 0:
            return np.zeros((0, classes), np.float32)
        self._make_split_room(n)
        self.dev.upload(self.v["eval/" + SPLIT_IMAGES][:n], np.asarray(images))
        self.dev.upload(self.v["eval/" + SPLIT_COUNTER], np.array([0, n], np.int32))
        for launch in self._eval_refresh:
            self.dev.launch(launch)
        batches, done = math.ceil(n / self.eval_batch), 0
        while done < batches:
            if self.use_graph:
                done += self._replay_group(self._eval, self._eval_graphs, batches - done)
            else:
                for launch in self._eval:
                    self.dev.launch(launch)
                done += 1
        return self.dev.download(self.v["eval/" + SPLIT_LOGITS][:n])

    def _make_split_room(self, n: int) -> None:
        """Device buffers for a split of at least n images (whole batches), made when a larger split comes;
        the evaluation's launches are bound to them, so growing them drops the captured graphs."""
        if n <= self._split_room:
            return
        room = math.ceil(n / self.eval_batch) * self.eval_batch
        classes = ops_of(self.model)[-1].shape[-1]
        self._eval_graphs = {}  # they point at the old buffers: drop them before those go
        self.v["eval/" + SPLIT_IMAGES] = self.dev.to_device(np.zeros((room, 32, 32, 3), np.uint8))
        self.v["eval/" + SPLIT_LOGITS] = self.dev.to_device(np.zeros((room, classes), np.float32))
        self._eval = [bind(c, self.v) for c in self.eval_program.calls()]
        self._split_room = room

    def _moments(self) -> tuple[str, ...]:
        return ("velocity",) if self.train.optimizer == "sgd" else ("m", "v")

    def weights(self) -> np.ndarray:
        """The parameters alone, as a host array: the trainer reads them after every chunk, and the
        optimiser's moments would triple the copy."""
        return self.dev.download(self.v["params"])

    def state(self) -> dict[str, np.ndarray]:
        """Parameters and the optimiser's state, as host arrays, for a checkpoint."""
        return {"params": self.dev.download(self.v["params"]),
                **{k: self.dev.download(self.v[k]) for k in self._moments()},
                "updates": np.array([self.updates], np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key in ("params",) + self._moments():
            value = np.asarray(state[key], dtype=np.float32)
            if value.shape != self.v[key].shape:
                raise LiteNetError(f"checkpoint {key} has shape {value.shape}, this model needs {self.v[key].shape}")
            self.dev.upload(self.v[key], value)
        self.updates = int(state["updates"][0]) if "updates" in state else 0
        self._refresh_copies()
        self.dev.synchronize()

    def memory_report(self) -> dict:
        """Device memory: the arena (every tensor, placed by liveness), the training set, the split last
        evaluated, the device's figures."""
        dataset = sum(int(a.nbytes) for a in self._dataset.values()) if self._dataset else 0
        split = sum(int(self.v[k].nbytes) for k in ("eval/" + SPLIT_IMAGES, "eval/" + SPLIT_LOGITS) if k in self.v)
        return {"kernels": self.kernels, "precision": self.precision, "arena_bytes": self.arena.size,
                "dataset_bytes": dataset, "evaluation_split_bytes": split, **self.dev.memory(),
                "buffers": self.arena.table()}

    # -- internals -------------------------------------------------------------------------------

    def _run(self, count: int) -> None:
        k = 0
        while k < count:
            if self._done < self.check_kernels:
                self._checker.step(self._done, self.check_report, self._allreduce)
                n = 1
            elif self.comm is not None:
                n = self._data_parallel_step()
            elif not self.use_graph or self._done == 0:  # the first step eagerly: modules load outside a capture
                for launch in self._steps:
                    self.dev.launch(launch)
                n = 1
            else:
                n = self._replay_group(self._steps, self._graphs, count - k)
            k += n
            self._done += n

    def _replay_group(self, launches: list, graphs: dict, left: int) -> int:
        """One replay of a graph of `launches` repeated steps_per_graph times where that many runs are
        `left`, else of a single run; each graph captured on first use. Returns the runs replayed."""
        n = self.steps_per_graph if left >= self.steps_per_graph else 1
        if n not in graphs:
            graphs[n] = self.dev.capture(launches * n)
        self.dev.replay(graphs[n])
        return n

    def _data_parallel_step(self) -> int:
        """One rank's step: the launches before the gradient all-reduce (a communicator call on the stream,
        outside any graph: docs/parallel.md), the all-reduce, the rest."""
        cut = self.program.allreduce_at
        before, after = self._steps[:cut], self._steps[cut:]
        if not self._graphs and self.use_graph and self._done > 0:
            self._graphs["before"], self._graphs["after"] = self.dev.capture(before), self.dev.capture(after)
        if "before" in self._graphs:
            self.dev.replay(self._graphs["before"])
        else:
            for launch in before:
                self.dev.launch(launch)
        self._allreduce()
        if "after" in self._graphs:
            self.dev.replay(self._graphs["after"])
        else:
            for launch in after:
                self.dev.launch(launch)
        return 1

    def _allreduce(self) -> None:
        self.comm.allreduce_sum_(self.v["grads"], stream=getattr(self.dev, "stream", None))

    def _drain(self) -> None:
        """Copy the filled statistics rows to the host and rewind the schedule (waits for the GPU)."""
        if self._pos == 0:
            return
        self._pending.append(self.dev.download(self.v["stats"][:self._pos]))
        self.dev.fill(self.v["stats"][:self._pos], 0)
        self.dev.fill(self.v["ctr"], 0)
        self._pos = 0
