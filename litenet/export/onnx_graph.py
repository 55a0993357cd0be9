"""LiteNet's forward written out as an ONNX graph with onnx.helper, one node per reference operation.

The fp32 and the int8 (QDQ) models share this builder; they differ only in what stands in front of
each MatMul, which a `Linear` strategy decides (plain float weights here, Q/DQ pairs in qdq.py).
Only opset-13 operators appear: no LayerNormalization (opset 17) and no Gelu (opset 20), so that
ONNX Runtime ≥ 1.14 and TensorRT 8.6 (the last TensorRT for Pascal GPUs) both parse the file.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from litenet.model import ModelConfig, param_views
from litenet.train.reference import GELU_C, GELU_K

# Opset 13 is the first with per-axis QuantizeLinear/DequantizeLinear (needed for per-channel
# weights) and lies inside both TensorRT 8.6's (7–17) and ONNX Runtime 1.14's (≤ 18) ranges.
# IR version 7 is the one ONNX 1.8 paired with opset 13, so every reader of opset 13 accepts it.
OPSET = 13
IR_VERSION = 7
INPUT_NAME = "images"
OUTPUT_NAME = "logits"
PRODUCER = "litenet.export"


def matmul_inputs(model: ModelConfig) -> list[tuple[str, str]]:
    """(activation name, weight name) of every MatMul, in graph order: the tensors int8 quantizes."""
    pairs = [("embed.input", "embed.weight")]
    for i in range(model.blocks):
        pairs += [(f"blocks.{i}.fc1.input", f"blocks.{i}.fc1.weight"),
                  (f"blocks.{i}.fc2.input", f"blocks.{i}.fc2.weight")]
    return pairs + [("head.input", "head.weight")]


class GraphBuilder:
    """Collects nodes and initializers; every helper returns the name of the tensor it made."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value, dtype=np.float32) -> str:
        """Add an initializer."""
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str, **attrs) -> str:
        """Add a node with one output, named after that output."""
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output


class Fp32Linear:
    """x @ W (+ b) with float32 initializers: the plain fp32 model."""

    def linear(self, g: GraphBuilder, x: str, act_name: str, layer: str, weight: np.ndarray,
               bias: np.ndarray | None, out: str | None = None) -> str:
        """Emit x @ W (+ b); returns the output's name."""
        y = g.op("MatMul", [x, g.const(f"{layer}.weight", weight)], f"{layer}.matmul")
        return y if bias is None else g.op("Add", [y, g.const(f"{layer}.bias", bias)], out or f"{layer}.out")


def gelu(g: GraphBuilder, u: str, prefix: str) -> str:
    """½ u (1 + tanh(c (u + 0.044715 u³))), as the reference writes it.

    Pow(u, 3) and this operand order are PyTorch's export of the tanh GELU, the pattern ONNX
    Runtime's FastGeluFusion turns into one kernel (eight nodes cost more than the math at batch 1).
    """
    u3 = g.op("Pow", [u, g.const(f"{prefix}.three", 3.0)], f"{prefix}.u3")
    inner = g.op("Add", [u, g.op("Mul", [u3, g.const(f"{prefix}.k", GELU_K)], f"{prefix}.ku3")], f"{prefix}.inner")
    t = g.op("Tanh", [g.op("Mul", [inner, g.const(f"{prefix}.c", GELU_C)], f"{prefix}.cinner")], f"{prefix}.tanh")
    half_u = g.op("Mul", [u, g.const(f"{prefix}.half", 0.5)], f"{prefix}.half_u")
    return g.op("Mul", [half_u, g.op("Add", [t, g.const(f"{prefix}.one", 1.0)], f"{prefix}.one_plus_t")], f"{prefix}.out")


def layernorm(g: GraphBuilder, s: str, gamma: np.ndarray, beta: np.ndarray, eps: float, prefix: str) -> str:
    """γ (s − μ) / √(σ² + eps) + β over the last axis.

    Written as PyTorch exports it (ReduceMean, Sub, Pow 2, ReduceMean, Add, Sqrt, Div) because
    that is the pattern ONNX Runtime's LayerNormFusion and TensorRT's normalisation fusion match.
    """
    mu = g.op("ReduceMean", [s], f"{prefix}.mean", axes=[-1], keepdims=1)
    d = g.op("Sub", [s, mu], f"{prefix}.centered")
    sq = g.op("Pow", [d, g.const(f"{prefix}.two", 2.0)], f"{prefix}.sq")
    var = g.op("ReduceMean", [sq], f"{prefix}.var", axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(f"{prefix}.eps", eps)], f"{prefix}.var_eps")], f"{prefix}.std")
    n = g.op("Div", [d, std], f"{prefix}.normed")
    scaled = g.op("Mul", [n, g.const(f"{prefix}.gamma", gamma)], f"{prefix}.scaled")
    return g.op("Add", [scaled, g.const(f"{prefix}.beta", beta)], f"{prefix}.out")


def embed_rows(g: GraphBuilder, model: ModelConfig) -> str:
    """(N, 32, 32, 3) pixels in [0, 1] → the rows the embedding multiplies, shift and colour sum included."""
    flat = g.op("Reshape", [INPUT_NAME, g.const("embed.flat_shape", [-1, 3072], np.int64)], "embed.flat")
    if model.input_shift:
        flat = g.op("Sub", [flat, g.const("embed.shift", model.input_shift)], "embed.shifted")
    if model.embed == "full":
        return flat
    pixels = g.op("Reshape", [flat, g.const("embed.pixel_shape", [-1, 1024, 3], np.int64)], "embed.pixels")
    # ReduceSum takes its axes as an input from opset 13 on.
    return g.op("ReduceSum", [pixels, g.const("embed.sum_axes", [2], np.int64)], "embed.colour_sum", keepdims=0)


def build_graph(params: np.ndarray, model: ModelConfig, linear, name: str = "litenet") -> onnx.GraphProto:
    """The whole network as a graph: input `images` (N, 32, 32, 3) float32 in [0, 1] → `logits` (N, classes)."""
    p = param_views(np.asarray(params, np.float32), model)
    g = GraphBuilder()
    h = linear.linear(g, embed_rows(g, model), "embed.input", "embed", p["embed.weight"], None)
    for i in range(model.blocks):
        pre = f"blocks.{i}"
        u = linear.linear(g, h, f"{pre}.fc1.input", f"{pre}.fc1", p[f"{pre}.fc1.weight"], p[f"{pre}.fc1.bias"])
        a = gelu(g, u, f"{pre}.gelu")
        v = linear.linear(g, a, f"{pre}.fc2.input", f"{pre}.fc2", p[f"{pre}.fc2.weight"], p[f"{pre}.fc2.bias"])
        s = g.op("Add", [h, v], f"{pre}.residual")  # the identity side path joins the main path
        h = layernorm(g, s, p[f"{pre}.ln.gamma"], p[f"{pre}.ln.beta"], model.ln_eps, f"{pre}.ln")
    linear.linear(g, h, "head.input", "head", p["head.weight"], p["head.bias"], out=OUTPUT_NAME)
    images = helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", 32, 32, 3])
    logits = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", model.classes])
    return helper.make_graph(g.nodes, name, [images], [logits], g.initializers)


def make_model(graph: onnx.GraphProto, metadata: dict[str, object], doc: str) -> onnx.ModelProto:
    """Wrap a graph at the pinned opset and IR version, with string metadata (non-strings as JSON)."""
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name=PRODUCER, doc_string=doc)
    proto.ir_version = IR_VERSION  # make_model stamps the installed onnx's newest IR; pin ours
    set_metadata(proto, metadata)
    return proto


def set_metadata(proto: onnx.ModelProto, metadata: dict[str, object]) -> None:
    """Replace or add metadata_props entries; values that are not strings are stored as JSON."""
    current = {p.key: p.value for p in proto.metadata_props}
    current.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})
    del proto.metadata_props[:]
    for key in sorted(current):
        proto.metadata_props.add(key=key, value=current[key])


def read_metadata(proto: onnx.ModelProto) -> dict[str, str]:
    """metadata_props as a dict of strings."""
    return {p.key: p.value for p in proto.metadata_props}


def check(proto: onnx.ModelProto) -> None:
    """onnx.checker with full_check (shape inference included); raises on any violation."""
    onnx.checker.check_model(proto, full_check=True)
