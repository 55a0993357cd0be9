"""Running exported models in ONNX Runtime: sessions, logits, accuracy, and which kernels the CPU provider chose."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from litenet.runtime.onnx_external import check_external_data

# What ONNX Runtime's CPU provider turns a QDQ MatMul into when its int8 fusion works. A plain
# MatMul (or Gemm) fed by a DequantizeLinear means the weights are dequantized on every call.
INT8_KERNELS = ("MatMulIntegerToFloat", "QLinearMatMul", "QGemm", "DynamicQuantizeMatMul", "MatMulInteger")


def session(model: onnx.ModelProto | str | Path, threads: int = 1, level: str = "all",
            optimized_path: str | Path | None = None, config: dict[str, str] | None = None):
    """A CPU InferenceSession with a fixed intra-op thread count (1 by default: see docs/export.md)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    options.log_severity_level = 3  # the "optimized model may be hardware specific" warning is expected
    if optimized_path is not None:
        options.optimized_model_filepath = str(optimized_path)
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    if not isinstance(model, onnx.ModelProto):
        check_external_data(Path(model))  # before ONNX Runtime may follow a location out of the folder
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def to_input(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC images → the models' float32 input in [0, 1] (x / 255, as the reference scales them)."""
    return images.astype(np.float32) / np.float32(255) if images.dtype == np.uint8 else images.astype(np.float32)


def logits(sess, images: np.ndarray, batch_size: int = 1000) -> np.ndarray:
    """Logits for uint8 images, run in slices so 10,000 images never need one big buffer."""
    name = sess.get_inputs()[0].name
    out = [sess.run(None, {name: to_input(images[i:i + batch_size])})[0] for i in range(0, len(images), batch_size)]
    return np.concatenate(out)


def accuracy(z: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows whose argmax is the label."""
    return float((z.argmax(axis=1) == np.asarray(labels)).mean())


def optimized_graph(model: onnx.ModelProto, threads: int = 1, config: dict[str, str] | None = None) -> onnx.ModelProto:
    """The graph ONNX Runtime actually runs (ORT_ENABLE_ALL), as written by optimized_model_filepath."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "optimized.onnx"
        session(model, threads=threads, optimized_path=path, config=config)
        return onnx.load(str(path))


def kernel_report(model: onnx.ModelProto, config: dict[str, str] | None = None) -> dict:
    """Op counts of the optimized graph and how many MatMuls still run in float after a DequantizeLinear."""
    graph = optimized_graph(model, config=config).graph
    ops = Counter(node.op_type for node in graph.node)
    producers = {out: node.op_type for node in graph.node for out in node.output}
    float_after_dq = [node.name for node in graph.node if node.op_type in ("MatMul", "Gemm")
                      and any(producers.get(i) == "DequantizeLinear" for i in node.input)]
    return {"ops": dict(ops), "int8_kernels": sum(ops[k] for k in INT8_KERNELS),
            "float_matmuls_after_dq": float_after_dq}
