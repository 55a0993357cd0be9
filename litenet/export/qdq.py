"""The int8 QDQ ONNX model: QuantizeLinear/DequantizeLinear in front of every MatMul, the rest in float.

Activations: per tensor, symmetric int8, zero point 0 (TensorRT's explicit quantization accepts
nothing else). Weights: per output column, symmetric int8 in [−64, 64] by default (see
litenet.runtime.int8_plan.WEIGHT_MAX for why not [−127, 127]), each column's scale set by the clip
point with the least squared error. Which integers W_q and which float biases go in is an
`Int8Weights`: rounded to nearest here, or chosen on the calibration images by
litenet.export.refine (GPTQ rounding, bias correction; what litenet export does). Biases, GELU and
LayerNorm stay float32. Two details of the layout are there for ONNX Runtime's CPU kernels (docs/export.md):

* Weights are float32 initializers holding exactly q·s, followed by QuantizeLinear and
  DequantizeLinear. TensorRT 8.x requires Q/DQ weights in FP32 (int8 initializers arrived with
  TensorRT 10); ONNX Runtime folds the constant QuantizeLinear back to the int8 tensor.
* A bias joins with `Sum`, not `Add`, and the embedding's output passes through a one-input
  `Sum`. ONNX Runtime's MatMulAddFusion would otherwise turn MatMul+Add into a float Gemm before
  its QDQ fusion runs, and a QuantizeLinear consuming the embedding's MatMul would make that
  MatMul look like the head of a QLinearMatMul it cannot become. Either way the MatMul stays in
  float and re-dequantizes its weights on every call. With `Sum` every MatMul becomes
  MatMulIntegerToFloat. Sum is a plain element-wise sum; TensorRT's ONNX importer turns it into
  the same kSUM layer as Add (a one-input Sum into its input unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from litenet.export import onnx_graph as og
from litenet.export.scales import Scales
from litenet.model import AnyModel, param_views
from litenet.runtime.int8_plan import WEIGHT_MAX, quantize


WEIGHT_MAX_CHOICES = (WEIGHT_MAX, 127)
# Candidate clip points for a column's weights, as fractions of its max |W|. Clipping a few
# large weights buys a finer step for all the others; with only ±64 steps that wins (measured in
# docs/export.md). 1.0 (no clipping) is always a candidate.
CLIP_FRACTIONS = np.linspace(0.5, 1.0, 26)


def weight_scales(weight: np.ndarray, weight_max: int = WEIGHT_MAX) -> np.ndarray:
    """s_w[n] per output column: the clip point f·max|W[:, n]| / weight_max (f in CLIP_FRACTIONS)
    with the least squared error Σ_k (W − s·clamp(rne(W / s)))². float32; an all-zero column gets 1."""
    w = np.asarray(weight, np.float32)
    amax = np.abs(w).max(axis=0)
    best_scale, best_err = None, None
    for f in CLIP_FRACTIONS[::-1]:  # from no clipping down; ties keep the wider range
        scale = np.where(amax > 0, amax * np.float32(f) / np.float32(weight_max), np.float32(1.0)).astype(np.float32)
        err = ((quantize(w, scale[None, :], -weight_max, weight_max) * scale - w) ** 2).sum(axis=0)
        if best_scale is None:
            best_scale, best_err = scale, err
        else:
            better = err < best_err
            best_scale, best_err = np.where(better, scale, best_scale), np.where(better, err, best_err)
    return best_scale.astype(np.float32)


def quantize_weight(weight: np.ndarray, weight_max: int = WEIGHT_MAX) -> tuple[np.ndarray, np.ndarray]:
    """(W_q int8 (in, out) in [−weight_max, weight_max], s_w float32 (out,)) with W ≈ W_q · s_w."""
    scales = weight_scales(weight, weight_max)
    return quantize(weight, scales[None, :], -weight_max, weight_max), scales


@dataclass(frozen=True)
class Int8Weights:
    """What both the QDQ model and the plan carry for each MatMul: W_q (in, out) int8 and s_w (out,),
    and the float32 bias of each layer that has one (the trained bias, or a corrected one:
    litenet.export.refine). How W_q was rounded and whether the biases were corrected is recorded."""

    weights: dict[str, tuple[np.ndarray, np.ndarray]]  # layer → (W_q, s_w)
    biases: dict[str, np.ndarray]  # layer → float32 bias
    weight_max: int = WEIGHT_MAX
    rounding: str = "nearest"
    bias_correction: str = "none"

    @classmethod
    def nearest(cls, params: np.ndarray, model: AnyModel, weight_max: int = WEIGHT_MAX) -> "Int8Weights":
        """Round to nearest at each column's clip point, biases as trained: needs no data."""
        p = param_views(np.asarray(params, np.float32), model)
        layers = [w.removesuffix(".weight") for _, w in og.matmul_inputs(model)]
        return cls({layer: quantize_weight(p[f"{layer}.weight"], weight_max) for layer in layers},
                   {layer: np.array(p[f"{layer}.bias"], np.float32) for layer in layers if f"{layer}.bias" in p},
                   weight_max)

    def describe(self) -> dict[str, object]:
        """Metadata entries for the files that carry these weights."""
        return {"weight_range": [-self.weight_max, self.weight_max], "weight_rounding": self.rounding,
                "bias_correction": self.bias_correction}


class QdqLinear:
    """x → Q → DQ → MatMul ← DQ ← Q ← (W_q · s_w), then Sum with the bias."""

    def __init__(self, scales: Scales, weights: Int8Weights):
        self.scales, self.weights = scales, weights

    def linear(self, g: og.GraphBuilder, x: str, act_name: str, layer: str, weight: np.ndarray,
               bias: np.ndarray | None, out: str | None = None) -> str:
        """Emit the quantized x @ W (+ b); returns the output's name. `weight` and `bias` (the float
        ones) are ignored: the layer's W_q, s_w and bias come from the Int8Weights."""
        zero = g.const(f"{act_name}.zero_point", 0, np.int8)
        s_x = g.const(f"{act_name}.scale", self.scales.activation[act_name])
        x_q = g.op("QuantizeLinear", [x, s_x, zero], f"{act_name}.quantized")
        x_dq = g.op("DequantizeLinear", [x_q, s_x, zero], f"{act_name}.dequantized")
        w_q, s_w = self.weights.weights[layer]
        w_float = g.const(f"{layer}.weight", w_q.astype(np.float32) * s_w)  # exactly representable
        w_scale = g.const(f"{layer}.weight_scale", s_w)
        w_zero = g.const(f"{layer}.weight_zero_point", np.zeros(len(s_w)), np.int8)
        w_qt = g.op("QuantizeLinear", [w_float, w_scale, w_zero], f"{layer}.weight_quantized", axis=1)
        w_dq = g.op("DequantizeLinear", [w_qt, w_scale, w_zero], f"{layer}.weight_dequantized", axis=1)
        y = g.op("MatMul", [x_dq, w_dq], f"{layer}.matmul")
        if bias is None:
            return g.op("Sum", [y], f"{layer}.out")
        return g.op("Sum", [y, g.const(f"{layer}.bias", self.weights.biases[layer])], out or f"{layer}.out")


def build_qdq(params: np.ndarray, model: AnyModel, scales: Scales, metadata: dict[str, object],
              weights: Int8Weights | None = None) -> onnx.ModelProto:
    """The int8 QDQ model (same input and output as the fp32 one); `weights` default: Int8Weights.nearest."""
    weights = weights or Int8Weights.nearest(params, model)
    graph = og.build_graph(params, model, QdqLinear(scales, weights), name="litenet_int8_qdq")
    doc = ("LiteNet int8 (QDQ). Input images: float32 NHWC (N, 32, 32, 3) in [0, 1]; output logits. "
           "Per-tensor symmetric int8 activations, per-channel symmetric int8 weights; see docs/export.md.")
    return og.make_model(graph, {**metadata, "quantization": "int8-qdq",
                                 "calibration_method": scales.method, **weights.describe()}, doc)
