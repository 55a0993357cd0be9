"""The peer: ONNX Runtime's own `quantize_static` on our fp32 model, as a new user would call it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx

from litenet.export.evaluate import to_input

# Our method names → ONNX Runtime's CalibrationMethod members.
ORT_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
BATCH = 64  # ONNX Runtime's histogram calibrators stack batches, so every batch must have this size


def feeds(images: np.ndarray, input_name: str) -> list[dict[str, np.ndarray]]:
    """The calibration images as equal batches of float input: a ragged last batch crashes ONNX
    Runtime's Entropy and Percentile collectors (they np.asarray the list of batches), so a
    remainder of fewer than BATCH images is left out."""
    usable = len(images) - len(images) % BATCH or len(images)
    return [{input_name: to_input(images[i:i + BATCH])} for i in range(0, usable, BATCH)]


def quantize_static(fp32: onnx.ModelProto, calib_images: np.ndarray, method: str,
                    preprocess: bool = False) -> onnx.ModelProto:
    """quantize_static with its documented defaults (QDQ, int8 activations and weights) plus
    per_channel=True, on the same calibration images our calibration used.

    `preprocess` first runs quant_pre_process (the step its warning recommends; shape inference
    plus ORT's basic graph optimisations, which fuse MatMul+Add into Gemm).
    """
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        """Hands quantize_static one batch per call, then None."""

        def __init__(self, batches):
            self.batches = iter(batches)

        def get_next(self):
            return next(self.batches, None)

    reader = Reader(feeds(calib_images, fp32.graph.input[0].name))
    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "fp32.onnx", Path(folder) / "int8.onnx"
        onnx.save(fp32, str(src))
        if preprocess:
            # skip_symbolic_shape: the symbolic pass needs sympy, which onnxruntime does not install;
            # our graph's shapes are fully inferable by ONNX's own pass anyway.
            quant_pre_process(str(src), str(src), skip_symbolic_shape=True)
        ort_quantize_static(str(src), str(dst), reader, quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, ORT_METHODS[method]))
        return onnx.load(str(dst))


def qdq_node_count(model: onnx.ModelProto) -> int:
    """QuantizeLinear + DequantizeLinear nodes in a model file."""
    return sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)
