"""`--backend cuda`: LiteNet's own CUDA kernels through CuPy, for every family.

fp32 runs weights.safetensors + config.json; int8 runs model.int8.plan.safetensors exactly as
docs/int8-plan.md defines it (dp4a, so any GPU from sm_61 — a GTX 1060 — on). The weights go to
the GPU once; each batch size gets its buffers once and, from its second use on, one CUDA graph
that is replayed.

Every batch size runs a program of the op-list lowering (litenet/lowering/inference.py), the same
walk the trainer's evaluation runs: the MLP's fp32 and int8 in the inference kernels' rewrite — up to
FUSED_MAX_BATCH images in one launch (the whole forward, phases separated by grid barriers), above it
a tiled launch per layer; the Mixer a launch per op or fused region (fp32: the fast tier's forward;
int8: the int8 plan's rewrite), or — in mode "fused", and in auto up to MIXER_FUSED_MAX_BATCH images (one)
— in one launch of the whole forward (infer_mixer.cu); a layer list's fp32 in the fast tier's forward.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from litenet.errors import LiteNetError
from litenet.lowering.fast import mixer_rows
from litenet.lowering.fast.rows import MODES as MLP_MODES
from litenet.lowering.fast.rows import check_width, fused_fits
from litenet.lowering.forward import ForwardRun
from litenet.lowering.inference import lower_inference
from litenet.runtime.backends import Backend
from litenet.runtime.cuda_mixer_net import load_mixer_int8
from litenet.runtime.cuda_net import load_fp32, load_int8, pack_fp32, pack_int8
from litenet.runtime.model_files import MODEL_HINT, ModelFiles

# The one-launch kernel up to this batch, tiles above it: the crossover measured on the H200
# (infer-gpu-2026-12-02.md in bench/results/raw/gpu-inference.tar.xz, batch scan): fp32 fused still wins at 64 and loses at 128
# on both presets; int8 fused wins at 16 and loses at 32 (its tiles are cheaper, its rows dearer).
FUSED_MAX_BATCH = {"fp32": 64, "int8": 16}
# The Mixer's one-launch forward (infer_mixer.cu) up to this batch, the launch per op above it: the one launch
# wins at batch 1 and loses from batch 2 on, where each block takes two images' units (measured on an H100 in
# both precisions: bench/results/gpu-inference.md).
MIXER_FUSED_MAX_BATCH = 1
CHUNK = 4096          # the largest batch run at once; predict splits bigger inputs
KEPT_SIZES = 8        # batch sizes whose buffers and graphs are kept (least recently used dropped)
MIN_CAPABILITY = (6, 1)  # __dp4a
OPS_MODE = "ops"  # the other families: a launch per op (with its epilogue) or fused region
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
        """Load the model (packed where a rewrite reads it packed), put it on the GPU as batch sizes come.
        `device`: a litenet.gpu.device.CupyDevice (or the tests' emulator); `mode`: auto | fused | phases |
        tiles (MLP), auto | ops | fused | phases (the Mixer), auto | ops (a layer list); `fused_grid`:
        blocks of the one-launch kernels (default: one per SM, all resident — the grid barrier needs that)."""
        if precision not in ("fp32", "int8"):
            raise LiteNetError(f"precision must be fp32 or int8, got {precision!r}")
        if fused_grid is not None and fused_grid < 1:
            raise ValueError(f"fused_grid must be a positive block count, got {fused_grid}")
        self.family = model.family()
        self.params = self.packed = None
        if self.family == "mlp":
            if mode != "auto" and mode not in MLP_MODES:
                raise ValueError(f"mode must be auto or one of {MLP_MODES}")
            if precision == "fp32":
                shape, tensors, classes = load_fp32(model)
                self.packed = pack_fp32(shape, tensors, classes)
            else:
                self.packed = pack_int8(load_int8(model))
            self.model = self.packed.shape
            check_width(self.packed)
        elif mode not in ("auto", OPS_MODE) and not (self.family == "mixer" and mode in mixer_rows.MODES):
            rows = f", {' or '.join(mixer_rows.MODES)}" if self.family == "mixer" else ""
            raise ValueError(f"a {self.family} network runs in mode auto or {OPS_MODE}{rows}, not {mode!r}")
        elif precision == "int8":
            if self.family not in INT8_FAMILIES:
                raise LiteNetError(f"{model.describe()} is a layer list: LiteNet's CUDA int8 runs the "
                                   f"{' and '.join(INT8_FAMILIES)} families; use --backend onnxruntime for its int8")
            self.packed = load_mixer_int8(model)
            self.model = self.packed.model
        else:
            self.params, self.model = self._load_fp32(model)
        self.path = model.weights if precision == "fp32" else model.plan
        self._set_classes(model.classes or getattr(self.packed, "classes", None), self.model.classes)
        if device is None:
            from litenet.gpu.device import CupyDevice
            device = CupyDevice()
        self.dev, self.precision, self.graphs = device, precision, graphs
        self.mode = mode if self.family == "mlp" or mode in mixer_rows.MODES else OPS_MODE
        self.chunk = max(1, chunk)
        default_max = MIXER_FUSED_MAX_BATCH if self.family == "mixer" else FUSED_MAX_BATCH[precision]
        self.fused_max_batch = default_max if fused_max_batch is None else fused_max_batch
        self.mixer_rows = self.family == "mixer" and mode == "auto" and self.fused_max_batch > 0
        self.fused_grid = fused_grid or self.dev.sm_count
        self._runs: OrderedDict[int, ForwardRun] = OrderedDict()
        self.kernel_preparation = None  # what the latest new batch size's kernels cost (gpu/kernel_cache.py)

    @staticmethod
    def _load_fp32(model: ModelFiles):
        from litenet.weights import load_model

        if model.weights is None or model.config is None:
            raise LiteNetError(f"{model.describe()}: the CUDA backend's fp32 needs weights.safetensors and "
                               f"config.json beside each other; {MODEL_HINT}")
        params, config, _train, _doc = load_model(model.weights.parent)
        return params, config

    def _set_classes(self, names, count: int) -> None:
        """The class names (numbered when the files name none), refused when their count is not the model's."""
        self.classes = names or tuple(f"class {i}" for i in range(count))
        if len(self.classes) != count:
            raise LiteNetError(f"{self.path} has {count} classes but the model's config names "
                               f"{len(self.classes)}; the model files come from different models")

    def mode_for(self, batch: int) -> str:
        if self.mixer_rows:
            fits = batch <= self.fused_max_batch and mixer_rows.fits(self.model, batch, self.fused_grid)
            return "fused" if fits else OPS_MODE
        if self.family != "mlp" or self.mode != "auto":
            return self.mode
        return "fused" if batch <= self.fused_max_batch and fused_fits(self.packed) else "tiles"

    def prepare(self, batch: int) -> ForwardRun:
        """The buffers and launches for `batch` images (made once per size, then reused)."""
        run = self._runs.get(batch)
        if run is None:
            mode = self.mode_for(batch)
            if mode == "fused" and self.fused_grid > self.dev.sm_count:  # its grid barrier would wait forever
                raise LiteNetError(f"fused_grid {self.fused_grid} is more blocks than the GPU's {self.dev.sm_count} "
                                   "multiprocessors: the one-launch forward needs every block resident, "
                                   "one a multiprocessor")
            program = lower_inference(self.model, batch, self.precision, self.dev.sm_count, packed=self.packed,
                                      mode=mode, grid=self.fused_grid)
            run = ForwardRun(program, self.model, self.dev, self.params, mode)
            # its kernels compiled (in parallel where the cache lacks them) and loaded before the first launch
            self.kernel_preparation = self.dev.prepare(launch.kernel for launch in run.launches)
            self._runs[batch] = run
            while len(self._runs) > KEPT_SIZES:
                self._runs.popitem(last=False)
        self._runs.move_to_end(batch)
        return run

    def execute(self, run: ForwardRun) -> None:
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
        where = f"LiteNet CUDA kernels, {self.precision}, on {self.dev.name} ({self.dev.capability})"
        if self.family == "mlp":
            return f"{where}; one launch up to batch {self.fused_max_batch}, tiles above; {self.path}"
        m = self.model
        if self.family == "mixer":
            where += f"; one launch up to batch {self.fused_max_batch}" if self.mixer_rows else f"; mode {self.mode}"
        shape = (f"Mixer P={m.patch} d={m.width} token {m.token_hidden} channel {m.channel_hidden} × {m.blocks}"
                 if self.family == "mixer" else "a layer list")
        return f"{where}; {shape}, the op-list lowering's forward, a launch per op or fused region; {self.path}"
