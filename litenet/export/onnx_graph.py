"""LiteNet's op list (litenet.graph) lowered to an ONNX graph with onnx.helper, a few nodes per op.

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

from litenet import graph
from litenet.graph import Op, patch_grid
from litenet.model import AnyModel, param_views
from litenet.ops import GELU_C, GELU_K

# Opset 13 is the first with per-axis QuantizeLinear/DequantizeLinear (needed for per-channel
# weights) and lies inside both TensorRT 8.6's (7–17) and ONNX Runtime 1.14's (≤ 18) ranges.
# IR version 7 is the one ONNX 1.8 paired with opset 13, so every reader of opset 13 accepts it.
OPSET = 13
IR_VERSION = 7
INPUT_NAME = "images"
OUTPUT_NAME = "logits"
PRODUCER = "litenet.export"


def matmul_inputs(model: AnyModel) -> list[tuple[str, str]]:
    """(activation name, weight name) of every MatMul, in graph order: the tensors int8 quantizes."""
    return [(f"{op.name}.input", op.param("weight")) for op in graph.products(model)]


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


def embed_rows(g: GraphBuilder, op: Op) -> str:
    """(N, 32, 32, 3) pixels in [0, 1] → the rows the MLP embedding multiplies, shift and colour sum included."""
    flat = g.op("Reshape", [INPUT_NAME, g.const("embed.flat_shape", [-1, 3072], np.int64)], "embed.flat")
    if op.attrs["input_shift"]:
        flat = g.op("Sub", [flat, g.const("embed.shift", op.attrs["input_shift"])], "embed.shifted")
    if op.attrs["embed"] == "full":
        return flat
    pixels = g.op("Reshape", [flat, g.const("embed.pixel_shape", [-1, 1024, 3], np.int64)], "embed.pixels")
    # ReduceSum takes its axes as an input from opset 13 on.
    return g.op("ReduceSum", [pixels, g.const("embed.sum_axes", [2], np.int64)], "embed.colour_sum", keepdims=0)


def patches(g: GraphBuilder, op: Op) -> str:
    """(N, 32, 32, 3) → (N, T, P·P·3) patches, each row-major and colour-minor, shifted and scaled as litenet.ops.patchify."""
    size, grid = op.attrs["patch"], patch_grid(op.attrs["patch"])
    tiles = g.op("Reshape", [INPUT_NAME, g.const(f"{op.name}.tile_shape", [-1, grid, size, grid, size, 3], np.int64)],
                 f"{op.name}.tiles")
    order = g.op("Transpose", [tiles], f"{op.name}.order", perm=[0, 1, 3, 2, 4, 5])
    flat = g.op("Reshape", [order, g.const(f"{op.name}.shape", [-1, grid * grid, size * size * 3], np.int64)],
                f"{op.name}.flat")
    if op.attrs["input_shift"]:
        flat = g.op("Sub", [flat, g.const(f"{op.name}.shift", op.attrs["input_shift"])], f"{op.name}.shifted")
    if op.attrs["input_scale"] != 1.0:
        flat = g.op("Mul", [flat, g.const(f"{op.name}.scale", op.attrs["input_scale"])], f"{op.name}.scaled")
    return flat


def build_graph(params: np.ndarray, model: AnyModel, linear, name: str = "litenet") -> onnx.GraphProto:
    """The whole network as a graph: input `images` (N, 32, 32, 3) float32 in [0, 1] → `logits` (N, classes).

    Walks the op list (litenet.graph). The Mixer's patch tensors are (N, T, d) here, the layout a
    MatMul with the weight second wants for the channel products; a product over the patches
    (token_linear) runs on the transposed (N, d, T) tensor, so each MLP across the patches costs
    two Transposes, one in and one out, and GELU between its two products runs on the transposed
    tensor as it comes.
    """
    p = param_views(np.asarray(params, np.float32), model)
    g = GraphBuilder()
    graph_ops = graph.ops_of(model)
    tensor = {graph.IMAGES: INPUT_NAME}  # op name → the ONNX tensor holding its output
    transposed: set[str] = set()  # op names whose ONNX tensor is (N, d, T) rather than (N, T, d)

    def read(name: str, want_transposed: bool = False) -> str:
        if (name in transposed) == want_transposed:
            return tensor[name]
        return g.op("Transpose", [tensor[name]], f"{name}.{'to_tokens_last' if want_transposed else 'back'}",
                    perm=[0, 2, 1])

    for op in graph_ops:
        last = op is graph_ops[-1]
        if op.kind == "pixel_rows":
            out = embed_rows(g, op)
        elif op.kind == "patches":
            out = patches(g, op)
        elif op.kind in graph.PRODUCTS:
            token = op.kind == "token_linear"
            bias = p[op.param("bias")] if op.param("bias") else None
            out = linear.linear(g, read(op.inputs[0], token), f"{op.name}.input", op.name, p[op.param("weight")],
                                bias, out=OUTPUT_NAME if last else None)
            if token:
                transposed.add(op.name)
        elif op.kind == "gelu":
            out = gelu(g, tensor[op.inputs[0]], op.name)  # elementwise: keeps its input's layout
            if op.inputs[0] in transposed:
                transposed.add(op.name)
        elif op.kind == "residual":
            out = g.op("Add", [read(op.inputs[0]), read(op.inputs[1])], op.name)
        elif op.kind == "layernorm":
            out = layernorm(g, read(op.inputs[0]), p[op.param("gamma")], p[op.param("beta")], op.attrs["eps"], op.name)
        elif op.kind == "mean_tokens":
            out = g.op("ReduceMean", [read(op.inputs[0])], op.name, axes=[1], keepdims=0)
        else:
            raise ValueError(f"no ONNX lowering for op kind {op.kind!r}")
        tensor[op.name] = out
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
