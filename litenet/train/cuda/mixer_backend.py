"""MixerCudaBackend: the Mixer's training step on an NVIDIA GPU (mixer_plans.py), with the methods of
every backend (litenet/train/backends.py) plus memory_report().

As the MLP's CudaBackend: everything is allocated once; the step's launches read their batch,
flips, crops, learning rate and AdamW step count from a schedule on the device through the step
counter, so the list is captured once as a CUDA graph and replayed; statistics stay on the device
until fetch_stats. The training set is copied to the GPU once, as uint8, and augmented there
(patches.cu). `precision`: "fp32" (any GPU from sm_61), "tf32" or "bf16" (tensor cores, sm_80+).
"""

from __future__ import annotations

import numpy as np

from litenet.errors import LiteNetError
from litenet.gpu.launch import check_launch
from litenet.model import MixerConfig, TrainConfig
from litenet.train import augment
from litenet.train.cuda.check import BufferNames, check_step, run_against_twin
from litenet.train.cuda.layout import param_offsets
from litenet.train.cuda.mixer_plans import MixerPlans, MixerShapes, arena_plan
from litenet.train.cuda.mixer_twins import MIXER_TWINS
from litenet.train.cuda.schedule_ring import DeviceSchedule, check_images, check_precision, open_device
from litenet.train.numpy_backend import decay_mask


class MixerCudaBackend(DeviceSchedule):
    """Trains a Mixer on the GPU with the kernels in kernels/*.cu."""

    name = "cuda"

    def __init__(self, model: MixerConfig, train: TrainConfig, params: np.ndarray, device=None,
                 precision: str | None = None, graph: bool = True, steps_per_graph: int = 4, capacity: int | None = None,
                 comm=None, check_kernels: int = 0):
        precision = precision or train.precision
        check_precision(precision)
        if train.optimizer != "adamw" or train.loss != "cross-entropy":
            raise LiteNetError("the CUDA Mixer trains with optimizer = adamw and loss = cross-entropy; "
                               "use --backend numpy for other recipes")
        if comm is not None and getattr(comm, "world_size", 1) > 1:
            raise LiteNetError("data-parallel training of a Mixer on several GPUs is not written yet; use one GPU")
        if check_kernels < 0:
            raise LiteNetError("--check-kernels needs a number of steps ≥ 0")
        params, device = open_device(model, params, device, precision)
        self.model, self.train, self.dev, self.precision = model, train, device, precision
        self.shapes = MixerShapes(model, train.batch_size, train.activations)
        self.batch, self.comm = train.batch_size, None
        self.capacity = capacity or int(np.clip(2 ** 20 // train.batch_size, 16, 4096))
        self.arena = arena_plan(model, self.shapes, self.capacity, device.sm_count, "cutmix" in train.augmentations)
        self.v = device.allocate(self.arena)
        device.upload(self.v["params"], params.astype(np.float32))
        device.upload(self.v["layout"], param_offsets(model))
        device.upload(self.v["decay"], np.broadcast_to(decay_mask(model, train), params.shape).astype(np.float32))
        device.upload(self.v["eval_index"], np.arange(self.shapes.B, dtype=np.int32)[None])
        self.plans = MixerPlans(model, train, self.shapes, self.v, device.sm_count, precision)
        self.stats_layout = self.plans.stats_layout
        self._eval = self.plans.eval_forward()
        self.use_graph, self.steps_per_graph = graph, max(1, int(steps_per_graph))
        # the first check_kernels steps run launch by launch, each held to its kernel's NumPy twin
        self.check_kernels, self.check_report, self._names = int(check_kernels), {}, None
        self._steps, self._graphs, self._dataset, self._labels_host = None, {}, None, None
        self._pos, self._done, self._pending, self.updates = 0, 0, [], 0

    # -- the backend interface -------------------------------------------------------------------

    def load_dataset(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Copy the training set (uint8 NHWC, labels) to the GPU once; steps gather and augment it there."""
        images, labels = np.asarray(images), np.asarray(labels)
        check_images(images, "training images")
        if labels.shape != (len(images),) or (labels.size and labels.max() >= self.model.classes):
            raise LiteNetError(f"labels must be one per image, in 0…{self.model.classes - 1}")
        self._dataset = (self.dev.to_device(images), self.dev.to_device(labels.astype(np.uint8)))
        self._labels_host = len(images)
        if self.check_kernels:  # the twins read the training set from host copies, not from the GPU
            self._names = BufferNames(self.v, self.plans.p, self.plans.g)
            for device_array, host in zip(self._dataset, (images, labels.astype(np.uint8))):
                self._names.keep_host_copy(device_array, host)
        self._steps = self.plans.step(*self._dataset)
        for launch in self._steps + self._eval:
            check_launch(launch)  # every argument against its kernel's signature, once
        self._graphs = {}

    def train_steps(self, batches: np.ndarray, lrs: np.ndarray, flips: np.ndarray | None = None,
                    crops: np.ndarray | None = None, cutouts: np.ndarray | None = None,
                    mixes: np.ndarray | None = None) -> None:
        """Enqueue one step per row of `batches`; returns at once (the GPU runs behind). The draws as
        NumpyBackend.train_steps takes them; a kind left out is off (zeros, or no CutMix partners)."""
        if self._steps is None:
            raise LiteNetError("call load_dataset before train_steps")
        batches, lrs, B = np.asarray(batches), np.asarray(lrs, np.float32), self.shapes.B
        n = len(batches)
        if batches.ndim != 2 or batches.shape[1] != B:
            raise LiteNetError(f"batches must have shape (steps, {B}); got {batches.shape}")
        if n and (batches.min() < 0 or batches.max() >= self._labels_host):
            raise LiteNetError("batch indices outside the training set")
        flips = np.zeros(batches.shape, np.uint8) if flips is None else np.asarray(flips).astype(np.uint8)
        crops = np.zeros((*batches.shape, 2), np.int8) if crops is None else np.asarray(crops).astype(np.int8)
        cutouts = np.zeros((*batches.shape, 2), np.int8) if cutouts is None else np.asarray(cutouts).astype(np.int8)
        cutmix = "cutmix" in self.train.augmentations  # else the kernels read no mixes (and the buffer has one row)
        if cutmix:
            mixes = np.full((*batches.shape, 5), -1, np.int32) if mixes is None else augment.check_mixes(mixes, n, B)
        done = 0
        while done < n:
            if self._pos == self.capacity:
                self._drain()
            count = min(self.capacity - self._pos, n - done)
            rows, part = slice(self._pos, self._pos + count), slice(done, done + count)
            self.dev.upload(self.v["batches"][rows], batches[part].astype(np.int32))
            self.dev.upload(self.v["flips"][rows], flips[part])
            self.dev.upload(self.v["crops"][rows], crops[part])
            self.dev.upload(self.v["cutouts"][rows], cutouts[part])
            if cutmix:
                self.dev.upload(self.v["mixes"][rows], mixes[part])
            self.dev.upload(self.v["lrs"][rows], lrs[part])
            self.dev.upload(self.v["steps"][rows], np.arange(self.updates + 1, self.updates + count + 1, dtype=np.int32))
            self._run(count)
            self._pos += count
            self.updates += count
            done += count

    def state(self) -> dict[str, np.ndarray]:
        return {"params": self.dev.download(self.v["params"]), "m": self.dev.download(self.v["m"]),
                "v": self.dev.download(self.v["v"]), "updates": np.array([self.updates], np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key in ("params", "m", "v"):
            value = np.asarray(state[key], dtype=np.float32)
            if value.shape != self.v[key].shape:
                raise LiteNetError(f"checkpoint {key} has shape {value.shape}, this model needs {self.v[key].shape}")
            self.dev.upload(self.v[key], value)
        self.updates = int(state["updates"][0]) if "updates" in state else 0
        self.dev.synchronize()

    def memory_report(self) -> dict:
        """Device memory: the arena (every step buffer), the dataset, and the device's own figures."""
        dataset = sum(int(a.nbytes) for a in self._dataset) if self._dataset else 0
        return {"precision": self.precision, "arena_bytes": self.arena.size, "dataset_bytes": dataset,
                **self.dev.memory(), "buffers": self.arena.table()}

    # -- internals -------------------------------------------------------------------------------

    def _run(self, count: int) -> None:
        k = 0
        while k < count:
            if self._done < self.check_kernels:
                check_step(self._steps, self._done, self._run_checked, self.check_report)
                n = 1
            elif not self.use_graph or self._done == 0:  # the first step eagerly: modules load outside a capture
                for launch in self._steps:
                    self.dev.launch(launch)
                n = 1
            else:
                n = self._replay_steps(count - k)
            k += n
            self._done += n

    def _run_checked(self, launch) -> dict[str, float]:
        return run_against_twin(self.dev, launch, MIXER_TWINS, self._names)
