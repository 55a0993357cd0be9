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

from litenet.export.calibrate import activations
from litenet.export.int8_plan import plan_metadata, plan_tensors
from litenet.export.onnx_graph import matmul_inputs
from litenet.export.qdq import Int8Weights
from litenet.export.scales import Scales
from litenet.model import ModelConfig, param_views
from litenet.runtime import int8_plan as plan_rt
from litenet.train import network

ROUNDINGS = ("gptq", "nearest")
GPTQ_DAMP = 0.01  # λ = 1 % of mean(diag H) added to H's diagonal, GPTQ's default: keeps H⁻¹ well-conditioned
GPTQ_BLOCK = 128  # columns per lazy update; only speed, the result equals the unblocked algorithm
BATCH = 512


def input_grams(params: np.ndarray, model: ModelConfig, images: np.ndarray) -> dict[str, np.ndarray]:
    """H = XᵀX (float64, K × K) of every MatMul's fp32 input over the calibration images, by layer."""
    grams: dict[str, np.ndarray] = {}
    for i in range(0, len(images), BATCH):
        for name, x in activations(params, model, images[i:i + BATCH]).items():
            x = x.astype(np.float64)
            layer = name.removesuffix(".input")
            grams[layer] = grams.get(layer, 0) + x.T @ x
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


def gptq_weights(params: np.ndarray, model: ModelConfig, images: np.ndarray, weight_max: int) -> Int8Weights:
    """Every MatMul's W_q rounded by GPTQ on `images` (s_w: the clip points), biases as trained."""
    params = np.asarray(params, np.float32)
    p = param_views(params, model)
    nearest = Int8Weights.nearest(params, model, weight_max)
    grams = input_grams(params, model, images)
    chosen = {layer: (gptq_round(p[f"{layer}.weight"], grams[layer], s_w, weight_max), s_w)
              for layer, (_, s_w) in nearest.weights.items()}
    return Int8Weights(chosen, nearest.biases, weight_max, rounding="gptq")


def _fp32_targets(params, model: ModelConfig, images: np.ndarray) -> dict[str, np.ndarray]:
    """What each corrected layer's output should be on average: fc1 → u, fc2 → the residual sum h + v, head → logits."""
    p = param_views(params, model)
    tape = network.forward(params, images, model)
    out = {"head": tape.z}
    for i, b in enumerate(tape.blocks):
        out[f"blocks.{i}.fc1"] = b.u
        out[f"blocks.{i}.fc2"] = b.x + (b.a @ p[f"blocks.{i}.fc2.weight"] + p[f"blocks.{i}.fc2.bias"])
    return out


def _int8_output(plan: plan_rt.Plan, images: np.ndarray, layer: str) -> np.ndarray:
    """The plan executor's value at `layer` (same points as _fp32_targets), running only as far as needed."""
    t = plan.tensors
    h = plan.linear(plan_rt.embed_rows(images, plan.embed, plan.input_shift), "embed")
    for b in range(plan.blocks):
        u = plan.linear(h, f"blocks.{b}.fc1")
        if layer == f"blocks.{b}.fc1":
            return u
        s = h + plan.linear(plan_rt.gelu(u), f"blocks.{b}.fc2")
        if layer == f"blocks.{b}.fc2":
            return s
        h = plan_rt.layernorm(s, t[f"blocks.{b}.ln.gamma"], t[f"blocks.{b}.ln.beta"], plan.ln_eps)
    return plan.linear(h, "head")


def correct_biases(params: np.ndarray, model: ModelConfig, scales: Scales, weights: Int8Weights,
                   images: np.ndarray) -> dict[str, np.ndarray]:
    """Corrected float32 biases: layer by layer in graph order, bias += mean(fp32 − int8) at its output.

    In order, so each correction sees the int8 inputs the earlier corrections produce.
    """
    params = np.asarray(params, np.float32)
    tensors = plan_tensors(params, model, scales, weights)
    plan = plan_rt.plan_from_tensors(tensors, plan_metadata(model, scales, "bias-correction", [], weights))
    layers = [w.removesuffix(".weight") for _, w in matmul_inputs(model)]
    batches = [images[i:i + BATCH] for i in range(0, len(images), BATCH)]
    targets = [_fp32_targets(params, model, batch) for batch in batches]  # small: (N, H), (N, d), (N, C) per block
    for layer in (name for name in layers if f"{name}.bias" in tensors):
        total = np.zeros(tensors[f"{layer}.bias"].shape, np.float64)
        for batch, target in zip(batches, targets):
            total += (target[layer] - _int8_output(plan, batch, layer)).sum(axis=0, dtype=np.float64)
        tensors[f"{layer}.bias"] = (tensors[f"{layer}.bias"] + total / len(images)).astype(np.float32)
    return {layer: tensors[f"{layer}.bias"] for layer in layers if f"{layer}.bias" in tensors}


def int8_weights(params: np.ndarray, model: ModelConfig, scales: Scales, images: np.ndarray,
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
