"""TensorRT engine from the QDQ model (explicit quantization), with a JSON that says where it can run.

Written against TensorRT's documented Python API (8.6 and 10.x); none of the project's machines
has TensorRT, so `build_engine` has only run against a stand-in module in the tests. An engine is
tied to the TensorRT version and the GPU architecture that built it: `check_engine_compatible`
refuses a mismatch before a loader hands the bytes to TensorRT, which would fail less clearly.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
from pathlib import Path

from litenet.errors import LiteNetError
from litenet.export.onnx_graph import INPUT_NAME, OUTPUT_NAME
from litenet.runtime.tensorrt_backend import ENGINE_FORMAT, engine_mismatch  # one rule for exporter and loader

ENGINE_FILE = "model.int8.engine"
ENGINE_INFO_FILE = "model.int8.engine.json"
BATCH_PROFILE = {"min": 1, "opt": 64, "max": 256}
WORKSPACE_BYTES = 1 << 28


def import_tensorrt():
    """The tensorrt module, or None when it is not installed (or fails to load its libraries)."""
    try:
        return importlib.import_module("tensorrt")
    except Exception:  # ImportError, or OSError from a missing libnvinfer
        return None


def gpu_identity() -> tuple[str, str]:
    """(GPU name, compute capability "major.minor") of device 0, from nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise LiteNetError(f"cannot identify the GPU (nvidia-smi: {exc.__class__.__name__})") from None
    name, _, cc = out.strip().splitlines()[0].rpartition(",")
    return name.strip(), cc.strip()


def unavailable_reason(trt=None) -> str | None:
    """None when an engine can be built here; otherwise why not, in a few words."""
    trt = trt if trt is not None else import_tensorrt()
    if trt is None:
        return "the tensorrt Python package is not installed"
    try:
        gpu_identity()
    except LiteNetError as exc:
        return f"no usable GPU ({exc})"
    return None


def skip_message(reason: str) -> str:
    """The one line `litenet export` prints when it builds no engine."""
    return f"TensorRT engine: skipped ({reason}); model.int8.onnx builds one wherever TensorRT runs"


def _major(version: str) -> int:
    return int(version.split(".")[0])


def build_engine(onnx_bytes: bytes, trt=None, profile: dict[str, int] | None = None) -> bytes:
    """Parse the QDQ model and build a serialized engine with a dynamic-batch optimisation profile.

    The Q/DQ nodes choose what runs in int8 (explicit quantization); no calibrator is involved.
    TensorRT 8.x still needs BuilderFlag.INT8 before it will honour them; TensorRT 10 takes the
    precisions from the Q/DQ nodes, so the flag is left alone there.
    """
    trt = trt if trt is not None else import_tensorrt()
    if trt is None:
        raise LiteNetError("TensorRT is not installed; the engine can only be built where it is")
    profile = profile or BATCH_PROFILE
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if _major(trt.__version__) < 10:  # implicit batch is the default before 10, and gone in 10
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(_error_text(parser.get_error(i)) for i in range(parser.num_errors))
        raise LiteNetError(f"TensorRT could not parse the QDQ model: {errors}")
    config = builder.create_builder_config()
    if _major(trt.__version__) < 10:
        config.set_flag(trt.BuilderFlag.INT8)
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    shapes = builder.create_optimization_profile()
    shapes.set_shape(INPUT_NAME, *[(profile[k], 32, 32, 3) for k in ("min", "opt", "max")])
    config.add_optimization_profile(shapes)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise LiteNetError("TensorRT failed to build the engine (see its log above)")
    return bytes(serialized)


def _error_text(error) -> str:
    return error.desc() if hasattr(error, "desc") else str(error)


def engine_info(trt_version: str, gpu_name: str, compute_capability: str, onnx_bytes: bytes,
                profile: dict[str, int] | None = None) -> dict:
    """The JSON written beside an engine: what built it, for which GPU, for which batch sizes."""
    return {
        "format": ENGINE_FORMAT,
        "tensorrt_version": trt_version,
        "gpu_name": gpu_name,
        "compute_capability": compute_capability,
        "batch_profile": dict(profile or BATCH_PROFILE),
        "input": {"name": INPUT_NAME, "shape": ["batch", 32, 32, 3], "dtype": "float32", "range": [0, 1]},
        "output": {"name": OUTPUT_NAME, "shape": ["batch", "classes"], "dtype": "float32"},
        "onnx_sha256": hashlib.sha256(onnx_bytes).hexdigest(),
    }


def read_engine_info(source: dict | str | Path) -> dict:
    """An engine JSON as a dict, from a dict, JSON text or a file path."""
    if isinstance(source, dict):
        return source
    text = Path(source).read_text(encoding="utf-8") if isinstance(source, Path) or (
        isinstance(source, str) and not source.lstrip().startswith("{")) else source
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LiteNetError(f"engine description is not valid JSON ({exc.msg}); re-run litenet export --int8") from None
    return doc


def check_engine_compatible(info: dict | str | Path, trt_version: str | None = None,
                            compute_capability: str | None = None) -> None:
    """Refuse (LiteNetError) an engine built by another TensorRT version or for another GPU architecture.

    `trt_version` and `compute_capability` describe this machine; when None they are looked up
    (tensorrt.__version__, nvidia-smi). The rule itself is the runtime's `engine_mismatch`, which
    the TensorRT backend applies before it deserializes an engine.
    """
    doc = read_engine_info(info)
    if trt_version is None:
        trt = import_tensorrt()
        if trt is None:
            raise LiteNetError("this engine needs TensorRT, which is not installed here; "
                               "use the ONNX Runtime (CPU) or LiteNet CUDA backend instead")
        trt_version = trt.__version__
    if compute_capability is None:
        compute_capability = gpu_identity()[1]
    problem = engine_mismatch(doc, trt_version, compute_capability)
    if problem:
        raise LiteNetError(problem)


def build_and_describe(onnx_bytes: bytes, trt=None, weights_sha256: str | None = None) -> tuple[bytes, dict]:
    """Build the engine and its JSON on this machine's GPU (the JSON records the weights it came from)."""
    trt = trt if trt is not None else import_tensorrt()
    engine = build_engine(onnx_bytes, trt)
    name, cc = gpu_identity()
    info = engine_info(trt.__version__, name, cc, onnx_bytes)
    return engine, info if weights_sha256 is None else {**info, "weights_sha256": weights_sha256}
