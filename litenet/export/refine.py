"""Data-aware int8 weights: GPTQ rounding of W_q and bias correction, both chosen on the calibration images.

Neither changes the int8 arithmetic (docs/int8-plan.md): the plan and the QDQ model still hold one
int8 W_q and one s_w per output channel, and a float32 bias. What changes is which integers and
which bias the exporter writes:

  rounding "gptq"   Round W_q column by column and push each weight's rounding error onto the
                    weights of the same output channel not yet rounded, weighted by the inverse of
                    H = XᵀX of the layer's calibration inputs (Frantar et al., "GPTQ", ICLR 2023;
                    Optimal Brain Quantization). It minimises the error of the layer's OUTPUT,
                    ‖X W − X (W_q · s_w)‖², instead of each weight's own error. s_w stays the
                    per-channel clip point of litenet.export.qdq.weight_scales.
  rounding "nearest"  W_q = clamp(rne(W / s_w)), the exporter's rule before GPTQ.
  bias correction   Run the calibration images through the int8 network (the plan executor,
                    i.e. exactly the deployed arithmetic) one layer at a time and add to each bias
                    the mean of (fp32 output − int8 output) at that point, so the quantized network
                    has no systematic offset there (empirical bias correction; Nagel et al.,
                    "Data-Free Quantization", ICCV 2019, corrected with data). The embedding has no
                    bias; its mean error reaches the residual sum s = h + v of block 0, which the
                    fc2 correction targets, and fc1's input, which fc1's own correction absorbs.

Measured choice and figures: docs/export.md, "Choosing W_q and the biases".
"""

from __future__ import annotations

import numpy as np

from litenet import forward, ops
from litenet.export.calibrate import activations
from litenet.export.int8_plan import plan_metadata, plan_tensors
from litenet.export.qdq import Int8Weights
from litenet.export.scales import Scales
from litenet.graph import IMAGES, PRODUCTS, Op, consumers, ops_of, products
from litenet.model import AnyModel, param_views
from litenet.runtime import int8_plan as plan_rt

ROUNDINGS = ("gptq", "nearest")
GPTQ_DAMP = 0.01  # λ = 1 % of mean(diag H) added to H's diagonal, GPTQ's default: keeps H⁻¹ well-conditioned
GPTQ_BLOCK = 128  # columns per lazy update; only speed, the result equals the unblocked algorithm
BATCH = 512


def contraction_rows(op: Op, x: np.ndarray) -> np.ndarray:
    """A product's input as (samples, K) rows, K the axis the product sums over: the last axis for a
    linear op, the patches for a token_linear op (every image and channel is then one sample)."""
    return x.reshape(-1, x.shape[-1]) if op.kind == "linear" else x.reshape(x.shape[0], -1).T


def input_grams(params: np.ndarray, model: AnyModel, images: np.ndarray) -> dict[str, np.ndarray]:
    """H = XᵀX (float64, K × K) of every MatMul's fp32 input over the calibration images, by layer."""
    grams: dict[str, np.ndarray] = {}
    for i in range(0, len(images), BATCH):
        acts = activations(params, model, images[i:i + BATCH])
        for op in products(model):
            x = contraction_rows(op, acts[f"{op.name}.input"]).astype(np.float64)
            grams[op.name] = grams.get(op.name, 0) + x.T @ x
    return grams


def gptq_round(weight: np.ndarray, gram: np.ndarray, scale: np.ndarray, weight_max: int,
               damp: float = GPTQ_DAMP) -> np.ndarray:
    """W_q (K, N) int8 in [−weight_max, weight_max] for W (K, N) ≈ W_q · scale, minimising ‖X (W − W_q·s)‖².

    Input k is rounded for all N outputs at once; its error e_k = (w_k − q_k s) / U_kk is then
    subtracted from the inputs after it, w_j −= U_kj e_k, where U is the upper Cholesky factor
    of H⁻¹ (the OBQ update, in GPTQ's order-free, blocked form).
    """
    w = np.asarray(weight, np.float64).copy()
    k_in = w.shape[0]
    h = np.asarray(gram, np.float64).copy()
    dead = np.diag(h) == 0  # an input that is always 0: its weights cannot matter, round them to 0
    h[dead, dead] = 1.0
    w[dead, :] = 0.0
    h[np.diag_indices(k_in)] += damp * float(np.mean(np.diag(h)))
    u = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: H⁻¹ = Uᵀ U
    s = np.asarray(scale, np.float64)[None, :]
    q = np.zeros(w.shape, np.int8)
    for b0 in range(0, k_in, GPTQ_BLOCK):
        b1 = min(b0 + GPTQ_BLOCK, k_in)
        block, err = w[b0:b1].copy(), np.zeros((b1 - b0, w.shape[1]))
        for i in range(b1 - b0):
            qi = np.clip(np.rint(block[i] / s[0]), -weight_max, weight_max)
            q[b0 + i] = qi
            err[i] = (block[i] - qi * s[0]) / u[b0 + i, b0 + i]
            block[i:] -= np.outer(u[b0 + i, b0 + i:b1], err[i])
        w[b1:] -= u[b0:b1, b1:].T @ err  # the block's errors reach the later inputs in one product
    return q


def gptq_weights(params: np.ndarray, model: AnyModel, images: np.ndarray, weight_max: int) -> Int8Weights:
    """Every MatMul's W_q rounded by GPTQ on `images` (s_w: the clip points), biases as trained."""
    params = np.asarray(params, np.float32)
    p = param_views(params, model)
    nearest = Int8Weights.nearest(params, model, weight_max)
    grams = input_grams(params, model, images)
    chosen = {layer: (gptq_round(p[f"{layer}.weight"], grams[layer], s_w, weight_max), s_w)
              for layer, (_, s_w) in nearest.weights.items()}
    return Int8Weights(chosen, nearest.biases, weight_max, rounding="gptq")


def correction_points(model: AnyModel) -> dict[str, str]:
    """Product with a bias → the tensor whose mean error its bias correction removes: its own output,
    or the residual sum when that is its only reader (what the next layer reads is the sum, so the
    error the residual stream carried in is folded in too: fc1 → u, fc2 → h + v, head → logits)."""
    readers = consumers(ops_of(model))
    points = {}
    for op in products(model):
        if op.param("bias"):
            after = readers.get(op.name, [])
            points[op.name] = after[0].name if len(after) == 1 and after[0].kind == "residual" else op.name
    return points


def _bias_sum(op: Op, diff: np.ndarray) -> np.ndarray:
    """Σ of an error over everything but the bias's own axis (the last for linear, the patches for token_linear)."""
    if op.kind == "linear":
        return diff.reshape(-1, diff.shape[-1]).sum(axis=0, dtype=np.float64)
    return diff.reshape(diff.shape[0], -1).sum(axis=1, dtype=np.float64)


def correct_biases(params: np.ndarray, model: AnyModel, scales: Scales, weights: Int8Weights,
                   images: np.ndarray) -> dict[str, np.ndarray]:
    """Corrected float32 biases: layer by layer in graph order, bias += mean(fp32 − int8) at its
    correction point, so each correction sees the int8 inputs the earlier corrections produce.

    The fp32 network and the int8 plan walk the op list side by side, one op at a time over every
    calibration batch, keeping only the tensors still to be read: each op runs once per network
    (plus once more for a corrected product), whatever the depth.
    """
    params = np.asarray(params, np.float32)
    tensors = plan_tensors(params, model, scales, weights)
    plan = plan_rt.plan_from_tensors(tensors, plan_metadata(model, scales, "bias-correction", [], weights))
    graph_ops, views = ops_of(model), param_views(params, model)
    points = correction_points(model)
    awaiting = {point: layer for layer, point in points.items()}  # correction point → its product
    by_name = {op.name: op for op in graph_ops}
    batches = [images[i:i + BATCH] for i in range(0, len(images), BATCH)]
    fp32 = [{IMAGES: ops.pixels_to_float(b, np.float32)} for b in batches]
    int8 = [dict(values) for values in fp32]
    last_read = {name: i for i, op in enumerate(graph_ops) for name in op.inputs}
    position = {op.name: i for i, op in enumerate(graph_ops)}
    for layer, point in points.items():  # a product corrected at a later sum is run again there
        last_read[by_name[layer].inputs[0]] = max(last_read[by_name[layer].inputs[0]], position[point])
    float_product = forward.float_product(views)

    def step(op: Op, values: dict, product) -> np.ndarray:
        inputs = [values[name] for name in op.inputs]
        return product(op, inputs[0]) if op.kind in PRODUCTS else forward.STEPS[op.kind](op, inputs, tensors, False)[0]

    for i, op in enumerate(graph_ops):
        for f, q in zip(fp32, int8):
            f[op.name] = step(op, f, float_product)
            q[op.name] = step(op, q, plan.product)
        if op.name in awaiting:
            layer = by_name[awaiting[op.name]]
            total, count = np.zeros(tensors[layer.param("bias")].shape, np.float64), 0
            for f, q in zip(fp32, int8):
                diff = f[op.name] - q[op.name]
                total += _bias_sum(layer, diff)
                count += diff.size // total.size  # values per bias entry: images × patches (× channels)
            tensors[layer.param("bias")] = (tensors[layer.param("bias")] + total / count).astype(np.float32)
            for q in int8:  # the int8 network from here on runs with the corrected bias
                q[layer.name] = step(layer, q, plan.product)
                if op is not layer:
                    q[op.name] = step(op, q, plan.product)
        for values in fp32 + int8:
            for name in op.inputs:
                if last_read.get(name) == i:
                    values.pop(name, None)
    return {layer: tensors[f"{layer}.bias"] for layer in points}


def int8_weights(params: np.ndarray, model: AnyModel, scales: Scales, images: np.ndarray,
                 weight_max: int, rounding: str = "gptq", bias_correction: bool = True) -> Int8Weights:
    """W_q, s_w and the float bias of every MatMul, chosen on the calibration `images`."""
    params = np.asarray(params, np.float32)
    weights = Int8Weights.nearest(params, model, weight_max)
    if rounding == "gptq":
        weights = gptq_weights(params, model, images, weight_max)
    if bias_correction:
        weights = Int8Weights(weights.weights, correct_biases(params, model, scales, weights, images), weight_max,
                              weights.rounding, bias_correction=f"empirical, {len(images)} calibration images")
    return weights
