"""The fp32 ONNX model, built from the weights with onnx.helper (no framework exporter)."""

from __future__ import annotations

import numpy as np
import onnx

from litenet.export import onnx_graph as og
from litenet.model import AnyModel

INPUT_DOC = ("Input images: float32 NHWC (N, 32, 32, 3), pixel / 255 in [0, 1]; the input shift and the "
             "colour sum happen inside the graph. Output logits (N, classes); argmax is the class.")


def build_fp32(params: np.ndarray, model: AnyModel, metadata: dict[str, object]) -> onnx.ModelProto:
    """LiteNet in float32 at opset 13 / IR 7, dynamic batch, with `metadata` in metadata_props."""
    graph = og.build_graph(params, model, og.Fp32Linear(), name="litenet_fp32")
    return og.make_model(graph, {**metadata, "quantization": "none"}, "LiteNet fp32. " + INPUT_DOC)
