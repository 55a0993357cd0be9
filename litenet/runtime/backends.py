"""Inference backends: the interface every backend implements, the registry by name, and `auto` selection.

The interface (what `litenet-infer` calls; TensorRTInference, CudaInference and OnnxRuntimeInference
implement it):

    class SomeInference(Backend):
        name = "some"                              # the registry key, shown in output

        @classmethod
        def unavailable_reason(cls, model: ModelFiles, precision: str) -> str | None:
            # None when this backend can run `model` at `precision` ("fp32" | "int8") here; otherwise
            # a few words saying why not ("CuPy is not installed", "no model.int8.engine"). Cheap:
            # check imports, the GPU and the files; never load the model. Must not raise.

        def __init__(self, model: ModelFiles, precision: str, **options): ...
            # Load once per process (sessions, engines, weights on the device). A user mistake
            # (damaged file, mismatched engine) raises LiteNetError with a one-line fix.
            # Unknown options are ignored: the CLI passes the same options to every backend.

        classes: tuple[str, ...]                   # class names in logit order
        def predict(self, images: np.ndarray) -> np.ndarray:
            # images: uint8 (N, 32, 32, 3) RGB, N ≥ 1 and any size (split internally if needed).
            # Returns float32 logits (N, len(classes)). Pixels become x / 255 in float32, exactly
            # as in training (images.pixels_to_float); the ONNX models take that float input.

Backends are imported only when asked for, so a Raspberry Pi never imports CuPy or TensorRT, and a
missing module (or a missing dependency inside it) makes that backend unavailable with a reason.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from litenet.distribution import cupy_hint
from litenet.errors import EnvironmentProblem, LiteNetError
from litenet.runtime.model_files import ModelFiles

# name → "module:Class". The order is `auto`'s preference: TensorRT, LiteNet's CUDA kernels, then the CPU.
BACKENDS: dict[str, str] = {
    "tensorrt": "litenet.runtime.tensorrt_backend:TensorRTInference",
    "cuda": "litenet.runtime.cuda_backend:CudaInference",
    "onnxruntime": "litenet.runtime.onnxruntime_backend:OnnxRuntimeInference",
}


class Backend:
    """The base of every inference backend; see the module docstring for the contract."""

    name = "backend"
    classes: tuple[str, ...] = ()

    @classmethod
    def unavailable_reason(cls, model: ModelFiles, precision: str) -> str | None:
        raise NotImplementedError

    def predict(self, images):
        raise NotImplementedError

    def describe(self) -> str:
        """A few words on how it runs (device, threads, file), for --verbose."""
        return self.name


def load_class(name: str) -> tuple[type | None, str | None]:
    """Import a registered backend class: (class, None), or (None, why it cannot be imported)."""
    module_name, _, class_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None, f"module {module_name} is not part of this installation"
        return None, f"needs the {exc.name} package, which is not installed"
    except (ImportError, OSError) as exc:  # e.g. a shared library of CUDA or TensorRT is missing
        return None, f"importing {module_name} failed ({exc})"
    cls = getattr(module, class_name, None)
    return (cls, None) if cls is not None else (None, f"{module_name} defines no {class_name}")


def availability(name: str, model: ModelFiles, precision: str) -> tuple[type | None, str | None]:
    """(class, None) when backend `name` can run `model` at `precision` here, else (None, reason)."""
    cls, reason = load_class(name)
    if cls is None:
        return None, reason
    try:
        reason = cls.unavailable_reason(model, precision)
    except LiteNetError as exc:
        reason = str(exc)
    return (cls, None) if reason is None else (None, reason)


@dataclass
class Choice:
    """The backend picked and, for --verbose, why each candidate was or was not taken."""

    cls: type
    notes: list[tuple[str, str | None]]  # (backend name, reason it is unavailable or None)


def choose(requested: str, model: ModelFiles, precision: str, probe=availability) -> Choice:
    """The backend to use: the one requested, or for "auto" the first available in BACKENDS order."""
    if requested != "auto" and requested not in BACKENDS:
        raise LiteNetError(f"unknown backend {requested!r}; choose auto or one of {', '.join(BACKENDS)}")
    names = list(BACKENDS) if requested == "auto" else [requested]
    notes: list[tuple[str, str | None]] = []
    for name in names:
        cls, reason = probe(name, model, precision)
        notes.append((name, reason))
        if cls is not None:
            return Choice(cls, notes)
    if requested != "auto":
        fix = _cpu_fix(model, precision) if requested == "onnxruntime" else "use --backend auto"
        if requested == "cuda" and importlib.util.find_spec("cupy") is None:
            fix = f"{cupy_hint()}, or {fix}"
        # this machine lacks what the backend needs (a GPU, CuPy, TensorRT): status 4, docs/errors.md
        raise EnvironmentProblem(f"backend {requested} cannot run here: {notes[0][1]}; {fix}")
    summary = "; ".join(f"{n}: {r}" for n, r in notes)
    raise LiteNetError(f"no backend can run this model at {precision} ({summary}); {_cpu_fix(model, precision)}")


def _cpu_fix(model: ModelFiles, precision: str) -> str:
    """What makes the CPU backend, the one every machine can have, able to run `model` at `precision`."""
    if (model.fp32_onnx if precision == "fp32" else model.int8_onnx) is None:  # onnxruntime's reason said so
        weights = model.folder if model.weights is not None else "<model folder>"
        return f"export it: `litenet export --weights {weights}{' --int8' if precision == 'int8' else ''}`"
    if importlib.util.find_spec("onnxruntime") is None:
        return "install ONNX Runtime (pip install onnxruntime) for the CPU"
    return "choose another --precision or --backend"
