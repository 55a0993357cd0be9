"""The TensorRT backend: runs model.int8.engine (built by `litenet export --int8` where TensorRT exists).

Written against TensorRT's documented Python API (8.6 and 10.x: tensor names, `set_input_shape`,
`set_tensor_address`, `execute_async_v3`), with CuPy for device memory. No project machine has
TensorRT, so this module has never run a real engine: docs/runtime.md says what is and is not tested.
"""

from __future__ import annotations

import importlib
import json

from litenet.errors import LiteNetError
from litenet.runtime.backends import Backend
from litenet.runtime.images import pixels_to_float
from litenet.runtime.model_files import ModelFiles

# The engine JSON's format; litenet.export.tensorrt writes it (the exporter imports it from here).
ENGINE_FORMAT = "litenet-trt-engine/1"
REBUILD = "rebuild it on this machine with `litenet export --weights <model folder> --int8`"


def _import(name: str):
    """A module, or None when it is missing or its shared libraries fail to load."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - ImportError, or OSError from a missing libnvinfer / libcudart
        return None


def compute_capability(cupy) -> str:
    """Device 0's compute capability as nvidia-smi writes it ("9.0"), the form the engine JSON stores."""
    cc = str(cupy.cuda.Device(0).compute_capability)  # CuPy gives "90", "61"
    return f"{cc[:-1]}.{cc[-1]}"


def engine_mismatch(info: dict, trt_version: str, cc: str) -> str | None:
    """Why an engine described by `info` cannot run with this TensorRT on this GPU, or None.

    A plain TensorRT engine is tied to the exact TensorRT version and the compute capability that
    built it. litenet.export.tensorrt.check_engine_compatible applies this same rule.
    """
    if not isinstance(info, dict) or info.get("format") != ENGINE_FORMAT:
        return f"not a LiteNet engine description (expected format {ENGINE_FORMAT}); {REBUILD}"
    if info.get("tensorrt_version") != trt_version:
        return f"engine built with TensorRT {info.get('tensorrt_version')}, this machine has {trt_version}; {REBUILD}"
    if info.get("compute_capability") != cc:
        return (f"engine built for compute capability {info.get('compute_capability')} ({info.get('gpu_name')}), "
                f"this GPU is {cc}; {REBUILD}")
    return None


def read_info(model: ModelFiles) -> dict:
    """The engine's JSON description; LiteNetError when it is missing or unreadable."""
    if model.engine_info is None:
        raise LiteNetError(f"{model.engine} has no model.int8.engine.json beside it; {REBUILD}")
    try:
        return json.loads(model.engine_info.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LiteNetError(f"{model.engine_info}: unreadable ({exc}); {REBUILD}") from None


class TensorRTInference(Backend):
    """A deserialized engine, one execution context, inputs split by the engine's batch profile."""

    name = "tensorrt"

    @classmethod
    def unavailable_reason(cls, model: ModelFiles, precision: str) -> str | None:
        if model.engine is None:
            return f"{model.describe()} has no model.int8.engine (litenet export builds one where TensorRT runs)"
        if precision != "int8":
            return "the TensorRT engine is int8 only; add --precision int8"
        trt = _import("tensorrt")
        if trt is None:
            return "the tensorrt Python package is not installed"
        cupy = _import("cupy")
        if cupy is None:
            return "CuPy (for device buffers) is not installed"
        try:
            cc = compute_capability(cupy)
        except Exception as exc:  # noqa: BLE001 - CUDARuntimeError when no driver or no device
            return f"no usable GPU ({exc.__class__.__name__})"
        try:
            info = read_info(model)
            model.check_same_weights(info, model.engine)
            return engine_mismatch(info, trt.__version__, cc)
        except LiteNetError as exc:
            return str(exc)

    def __init__(self, model: ModelFiles, precision: str, **_options):
        import cupy
        import tensorrt as trt

        info = read_info(model)
        model.check_same_weights(info, model.engine)  # an engine built from other weights is another model
        problem = engine_mismatch(info, trt.__version__, compute_capability(cupy))
        if problem:
            raise LiteNetError(f"{model.engine}: {problem}")
        self.cupy, self.info, self.path = cupy, info, model.engine
        self.classes = model.classes
        if not self.classes:
            raise LiteNetError(f"{model.engine}: no class names (no config.json or model.onnx beside it); "
                               "keep the engine in its model folder")
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.engine = trt.Runtime(self.logger).deserialize_cuda_engine(model.engine.read_bytes())
        if self.engine is None:
            raise LiteNetError(f"{model.engine}: TensorRT could not deserialize it; {REBUILD}")
        self.input_name = info["input"]["name"]
        self.output_name = info["output"]["name"]
        self.max_batch = int(info["batch_profile"]["max"])
        self._check_tensors(model)
        self.context = self.engine.create_execution_context()
        self.stream = cupy.cuda.Stream()

    def _check_tensors(self, model: ModelFiles) -> None:
        """The engine has the input and output its JSON names, with one logit per class name."""
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        for name in (self.input_name, self.output_name):
            if name not in names:
                raise LiteNetError(f"{model.engine} has no tensor {name!r} (it has {', '.join(names)}), which its "
                                   f"JSON names: the two files come from different exports; {REBUILD}")
        shape = self.engine.get_tensor_shape(self.output_name)
        outputs = shape[len(shape) - 1]  # NOTE: not shape[-1]: TensorRT's Dims may not take negative indices
        if outputs != len(self.classes):
            raise LiteNetError(f"{model.engine} has {outputs} outputs but the model's config names "
                               f"{len(self.classes)} classes; the engine comes from another model; {REBUILD}")

    def predict(self, images):
        """uint8 (N, 32, 32, 3) → float32 logits (N, C), in slices of the profile's maximum batch."""
        import numpy as np

        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (32, 32, 3):
            raise ValueError(f"expected uint8 images of shape (N, 32, 32, 3), got {images.dtype} {images.shape}")
        cp = self.cupy
        out = []
        with self.stream:  # copies and the engine on one stream, so each waits for the one before
            for i in range(0, len(images), self.max_batch):
                x = cp.asarray(pixels_to_float(images[i:i + self.max_batch]))
                z = cp.empty((len(x), len(self.classes)), dtype=cp.float32)
                if not self.context.set_input_shape(self.input_name, tuple(x.shape)):
                    raise LiteNetError(f"{self.path}: TensorRT refused input shape {tuple(x.shape)}, within the "
                                       f"batch profile its JSON gives (1 to {self.max_batch}); {REBUILD}")
                self.context.set_tensor_address(self.input_name, x.data.ptr)
                self.context.set_tensor_address(self.output_name, z.data.ptr)
                if not self.context.execute_async_v3(self.stream.ptr):
                    raise RuntimeError("TensorRT execute_async_v3 failed (see its log above)")
                out.append(cp.asnumpy(z, stream=self.stream))
                self.stream.synchronize()
        return np.concatenate(out) if out else np.zeros((0, len(self.classes)), np.float32)

    def describe(self) -> str:
        return f"TensorRT {self.info.get('tensorrt_version')} on {self.info.get('gpu_name')}, {self.path}"
