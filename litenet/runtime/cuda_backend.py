"""`--backend cuda`: LiteNet's own CUDA kernels through CuPy, for both families.

fp32 runs weights.safetensors + config.json; int8 runs model.int8.plan.safetensors exactly as
docs/int8-plan.md defines it (dp4a, so any GPU from sm_61 — a GTX 1060 — on). The weights go to
the GPU once; each batch size gets its buffers once and, from its second use on, one CUDA graph
that is replayed.

MLP family (kernels/infer_fp32.cu, kernels/infer_int8.cu; cuda_net, cuda_plan): a batch of up to
FUSED_MAX_BATCH images runs as one launch (the whole forward, phases separated by grid barriers), a
larger one as a tiled launch per layer. Mixer family (cuda_mixer_net, cuda_mixer): a launch per op
of the op list, each product with its GELU or residual join fused in (mode "layers"). A network that is
a layer list (LiteNet Studio's, litenet/layers.py), fp32: the op-list lowering's forward program
(litenet/lowering/forward.py), the same walk the trainer's evaluation runs.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from litenet.errors import LiteNetError
from litenet.runtime.backends import Backend
from litenet.runtime.cuda_mixer import MODE as MIXER_MODE
from litenet.runtime.cuda_mixer import plan_mixer_batch
from litenet.runtime.cuda_mixer_net import (
    MixerDeviceNet,
    load_mixer_fp32,
    load_mixer_int8,
)
from litenet.runtime.cuda_net import load_fp32, load_int8, pack_fp32, pack_int8
from litenet.runtime.cuda_plan import MODES, BatchRun, DeviceNet, plan_batch
from litenet.runtime.model_files import ModelFiles

# The one-launch kernel up to this batch, tiles above it: the crossover measured on the H200
# (infer-gpu-2026-12-02.md in bench/results/raw/gpu-inference.tar.xz, batch scan): fp32 fused still wins at 64 and loses at 128
# on both presets; int8 fused wins at 16 and loses at 32 (its tiles are cheaper, its rows dearer).
FUSED_MAX_BATCH = {"fp32": 64, "int8": 16}
CHUNK = 4096          # the largest batch run at once; predict splits bigger inputs
KEPT_SIZES = 8        # batch sizes whose buffers and graphs are kept (least recently used dropped)
MIN_CAPABILITY = (6, 1)  # __dp4a
LOWERED_MODE = "lowering"
FAMILIES = ("mlp", "mixer", "layers")
INT8_FAMILIES = ("mlp", "mixer")  # the int8 plan's kernels; a layer list's int8 runs in ONNX Runtime


class CudaInference(Backend):
    """LiteNet's CUDA kernels; fp32 or int8 (the plan)."""

    name = "cuda"

    @classmethod
    def unavailable_reason(cls, model: ModelFiles, precision: str) -> str | None:
        if precision == "fp32" and (model.weights is None or model.config is None):
            return f"{model.describe()} has no weights.safetensors with its config.json (the CUDA fp32 input)"
        if model.family() not in FAMILIES:
            return f"its kernels run the {', '.join(FAMILIES)} families; this model is a {model.family()}"
        if precision == "int8" and model.family() not in INT8_FAMILIES:
            return (f"its int8 kernels run the {' and '.join(INT8_FAMILIES)} families; a {model.family()} model's "
                    "int8 runs in ONNX Runtime (--backend onnxruntime)")
        if precision == "int8" and model.plan is None:
            return f"{model.describe()} has no model.int8.plan.safetensors (run litenet export --int8)"
        try:
            import cupy
        except Exception as exc:  # ImportError, or CUDA libraries missing
            return f"CuPy is not importable ({type(exc).__name__})"
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                return "no GPU found"
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        except Exception as exc:  # no driver, no device
            return f"no usable GPU ({exc.__class__.__name__})"
        try:  # after the GPU: on a machine without one, the missing GPU is the reason worth reading
            import safetensors  # noqa: F401
        except ImportError:
            return "needs the safetensors package (pip install safetensors)"
        if (props["major"], props["minor"]) < MIN_CAPABILITY:
            return f"the GPU is sm_{props['major']}{props['minor']}; LiteNet's kernels need sm_61 or newer"
        return None

    def __init__(self, model: ModelFiles, precision: str, device=None, mode: str = "auto", graphs: bool = True,
                 fused_max_batch: int | None = None, fused_grid: int | None = None, chunk: int = CHUNK,
                 **_options):
        """Load and pack the model, put it on the GPU. `device`: a litenet.gpu.device.CupyDevice (or
        the tests' emulator); `mode`: auto | fused | phases | tiles (MLP), auto | layers (Mixer);
        `fused_grid`: blocks of the one-launch kernel (default: one per SM, all resident — the grid
        barrier needs that)."""
        if precision not in ("fp32", "int8"):
            raise LiteNetError(f"precision must be fp32 or int8, got {precision!r}")
        self.family = model.family()
        if self.family == "mixer":
            self._init_mixer(model, precision, device, mode, graphs, chunk)
            return
        if self.family == "layers":
            self._init_layers(model, precision, device, mode, graphs, chunk)
            return
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"mode must be auto or one of {MODES}")
        if precision == "fp32":
            shape, tensors, classes = load_fp32(model)
            packed = pack_fp32(shape, tensors, classes)
            self.path = model.weights
        else:
            packed = pack_int8(load_int8(model))
            self.path = model.plan
        self._set_classes(model.classes or packed.classes, packed.shape.classes)
        self._start(device, precision, mode, graphs, chunk)
        self.fused_max_batch = FUSED_MAX_BATCH[precision] if fused_max_batch is None else fused_max_batch
        self.fused_grid = fused_grid or self.dev.sm_count
        self.net = DeviceNet(self.dev, packed)

    def _init_mixer(self, model: ModelFiles, precision: str, device, mode: str, graphs: bool, chunk: int) -> None:
        if mode not in ("auto", MIXER_MODE):
            raise ValueError(f"a Mixer runs in mode auto or {MIXER_MODE}, not {mode!r}")
        packed = load_mixer_fp32(model) if precision == "fp32" else load_mixer_int8(model)
        self.path = model.weights if precision == "fp32" else model.plan
        self._set_classes(model.classes or packed.classes, packed.model.classes)
        self._start(device, precision, MIXER_MODE, graphs, chunk)
        self.net = MixerDeviceNet(self.dev, packed)

    def _init_layers(self, model: ModelFiles, precision: str, device, mode: str, graphs: bool, chunk: int) -> None:
        from litenet.weights import load_model

        if precision != "fp32":
            raise LiteNetError(f"{model.describe()} is a layer list: LiteNet's CUDA int8 runs the "
                               f"{' and '.join(INT8_FAMILIES)} families; use --backend onnxruntime for its int8")
        if mode not in ("auto", LOWERED_MODE):
            raise ValueError(f"a layer list runs in mode auto or {LOWERED_MODE}, not {mode!r}")
        if model.weights is None or model.config is None:
            raise LiteNetError(f"{model.describe()}: the CUDA backend's fp32 needs weights.safetensors and "
                               "config.json beside each other")
        self.params, self.model, _train, _doc = load_model(model.weights.parent)
        self.path = model.weights
        self._set_classes(model.classes, self.model.classes)
        self._start(device, precision, LOWERED_MODE, graphs, chunk)

    def _set_classes(self, names, count: int) -> None:
        """The class names (numbered when the files name none), refused when their count is not the model's."""
        self.classes = names or tuple(f"class {i}" for i in range(count))
        if len(self.classes) != count:
            raise LiteNetError(f"{self.path} has {count} classes but the model's config names "
                               f"{len(self.classes)}; the model files come from different models")

    def _start(self, device, precision: str, mode: str, graphs: bool, chunk: int) -> None:
        """What every family's backend keeps: the GPU (CuPy's current one unless given), its settings, and
        the per-batch-size runs it builds on first use."""
        if device is None:
            from litenet.gpu.device import CupyDevice
            device = CupyDevice()
        self.dev, self.precision, self.mode, self.graphs = device, precision, mode, graphs
        self.chunk = max(1, chunk)
        self._runs: OrderedDict[int, object] = OrderedDict()
        self.kernel_preparation = None  # what the latest new batch size's kernels cost (gpu/kernel_cache.py)

    def mode_for(self, batch: int) -> str:
        if self.family in ("mixer", "layers") or self.mode != "auto":
            return self.mode
        return "fused" if batch <= self.fused_max_batch and self.net.fused_fits() else "tiles"

    def prepare(self, batch: int) -> BatchRun:
        """The buffers and launches for `batch` images (made once per size, then reused)."""
        run = self._runs.get(batch)
        if run is None:
            if self.family == "mixer":
                run = plan_mixer_batch(self.net, batch)
            elif self.family == "layers":
                from litenet.lowering.forward import ForwardRun

                run = ForwardRun(self.model, self.params, self.dev, batch)
            else:
                run = plan_batch(self.net, batch, self.mode_for(batch), self.fused_grid)
            # its kernels compiled (in parallel where the cache lacks them) and loaded before the first launch
            self.kernel_preparation = self.dev.prepare(launch.kernel for launch in run.launches)
            self._runs[batch] = run
            while len(self._runs) > KEPT_SIZES:
                self._runs.popitem(last=False)
        self._runs.move_to_end(batch)
        return run

    def execute(self, run: BatchRun) -> None:
        """One forward pass on what is in run.pixels, queued on the device's stream (no wait)."""
        if run.graph is None and self.graphs and run.runs >= 1:  # the size repeats: capture it once
            run.graph = self.dev.capture(run.launches)
        if run.graph is not None:
            self.dev.replay(run.graph)
        else:
            for launch in run.launches:
                self.dev.launch(launch)
        run.runs += 1

    def predict(self, images: np.ndarray) -> np.ndarray:
        """uint8 (N, 32, 32, 3) → float32 logits (N, C), in slices of at most `chunk` images."""
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (32, 32, 3):
            raise ValueError(f"expected uint8 images of shape (N, 32, 32, 3), got {images.dtype} {images.shape}")
        out = np.empty((len(images), len(self.classes)), np.float32)
        for start in range(0, len(images), self.chunk):
            part = images[start:start + self.chunk]
            run = self.prepare(len(part))
            self.dev.upload(run.pixels, part.reshape(len(part), 3072))
            self.execute(run)
            out[start:start + len(part)] = self.dev.download(run.logits)
        return out

    def describe(self) -> str:
        if self.family == "layers":
            return (f"LiteNet CUDA kernels, {self.precision}, on {self.dev.name} ({self.dev.capability}); "
                    f"the op-list lowering's forward, a launch per op or fused region; {self.path}")
        if self.family == "mixer":
            return (f"LiteNet CUDA kernels, {self.precision}, on {self.dev.name} ({self.dev.capability}); "
                    f"{self.net.describe()}, a launch per op; {self.path}")
        return (f"LiteNet CUDA kernels, {self.precision}, on {self.dev.name} ({self.dev.capability}); "
                f"one launch up to batch {self.fused_max_batch}, tiles above; {self.path}")
