"""What both CUDA training backends (the MLP's backend.py, the Mixer's mixer_backend.py) share: the
precision choice and the device it needs, the statistics rows that their steps fill on the device,
drained when the schedule ring is full or the trainer asks, and evaluation one batch of images at a
time through the forward launches."""

from __future__ import annotations

import numpy as np

from litenet.errors import LiteNetError, UsageError
from litenet.model import param_count
from litenet.train.parallel.comm import reduce_stats

PRECISIONS = {"fp32": "", "tf32": "_tf32", "bf16": "_bf16"}  # the products' kernel-name suffixes (mma.cuh)


def split_precision(kernel: str) -> tuple[str, str]:
    """(a product kernel's name without its PRECISIONS suffix, its precision "fp32" | "tf32" | "bf16")."""
    for precision, suffix in PRECISIONS.items():
        if suffix and kernel.endswith(suffix):
            return kernel[:-len(suffix)], precision
    return kernel, "fp32"


def has_tensor_cores(capability: str) -> bool:
    """Whether "sm_XY" runs mma.sync with TF32 / BF16 operands (sm_80, Ampere, and newer); the CPU
    emulator ("emulated") runs the same fragment code."""
    return capability == "emulated" or (capability.startswith("sm_") and int(capability[3:-1]) >= 8)


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")


def open_device(model, params, device, precision: str):
    """(params as an array checked against the model, the device — CuPy's unless one is given —
    checked to run the precision)."""
    params = np.asarray(params)
    if params.shape != (param_count(model),):
        raise LiteNetError(f"expected {param_count(model)} parameters for this model, got shape {params.shape}")
    if device is None:
        from litenet.gpu.device import CupyDevice
        device = CupyDevice()
    if precision != "fp32" and not has_tensor_cores(device.capability):
        raise UsageError(f"precision {precision} needs tensor cores (sm_80 or newer); this GPU is "
                         f"{device.capability}: use --precision fp32")
    return params, device


def check_images(images, what: str) -> None:
    """uint8 NHWC (N, 32, 32, 3), or a one-line LiteNetError."""
    if getattr(images, "dtype", None) != np.uint8 or tuple(images.shape[1:]) != (32, 32, 3):
        raise LiteNetError(f"{what} must be uint8 NHWC (N, 32, 32, 3); got {getattr(images, 'dtype', None)} "
                           f"{getattr(images, 'shape', None)}")


class DeviceSchedule:
    """Mixin of a CUDA backend whose arena `v` holds `stats` (one row per step), `ctr` (the step
    counter), `eval_images` and `Z` (the logits), and which sets `dev`, `batch`, `model`,
    `_steps` (a step's launches), `_graphs` (captured graphs by length), `steps_per_graph`,
    `stats_layout`, `comm` (None on one GPU), `_eval` (the forward launches), `_pos` (schedule rows
    in use) and `_pending` (drained statistics not yet fetched)."""

    def _replay_steps(self, remaining: int) -> int:
        """Up to steps_per_graph of the `remaining` steps as one CUDA graph of `_steps` repeated
        (captured once per length, then replayed); returns how many steps it enqueued."""
        n = self.steps_per_graph if remaining >= self.steps_per_graph else 1
        if n not in self._graphs:
            self._graphs[n] = self.dev.capture(self._steps * n)
        self.dev.replay(self._graphs[n])
        return n

    def fetch_stats(self) -> dict[str, np.ndarray]:
        """Per-step statistics since the last call (backends.STAT_FIELDS); waits for the GPU."""
        self._drain()
        rows = np.concatenate(self._pending) if self._pending else np.zeros((0, self.stats_layout.width), np.float32)
        self._pending = []
        return reduce_stats(self.stats_layout.unpack(rows), self.comm)

    def logits(self, images: np.ndarray, batch_size: int | None = None) -> np.ndarray:
        """Forward only, one batch of images at a time through the evaluation buffers."""
        check_images(images, "images")
        out = np.empty((len(images), self.model.classes), np.float32)
        chunk = np.zeros((self.batch, 32, 32, 3), np.uint8)
        for start in range(0, len(images), self.batch):
            part = np.asarray(images[start:start + self.batch])
            chunk[:len(part)] = part
            self.dev.upload(self.v["eval_images"], chunk)
            for launch in self._eval:
                self.dev.launch(launch)
            out[start:start + len(part)] = self.dev.download(self.v["Z"])[:len(part)]
        return out

    def _drain(self) -> None:
        """Copy the filled statistics rows to the host and rewind the schedule (waits for the GPU)."""
        if self._pos == 0:
            return
        self._pending.append(self.dev.download(self.v["stats"][:self._pos]))
        self.dev.fill(self.v["stats"][:self._pos], 0)
        self.dev.fill(self.v["ctr"], 0)
        self._pos = 0
