"""LiteNet's int8 plan: read the safetensors file and execute it in NumPy, exactly as docs/int8-plan.md defines.

The plan holds int8 weights (one scale per output channel), one scale per quantized activation,
and float32 biases, γ and β. This executor is the reference the CUDA dp4a kernels are checked
against; it needs only NumPy and safetensors, so the runtime can use it without the trainer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError

PLAN_FORMAT = "litenet-int8-plan/1"
PLAN_FILE = "model.int8.plan.safetensors"
# Activations saturate to the full int8 range, as ONNX QuantizeLinear and TensorRT do.
ACT_MIN, ACT_MAX = -128, 127
# Weights are symmetric with scale max|W|/WEIGHT_MAX, so they lie in [−64, 64]. Not ±127: on x86
# CPUs without VNNI, ONNX Runtime's int8 GEMM adds u8 × s8 products in pairs into int16 with
# saturation (vpmaddubsw); with activations shifted to 0…255, |255·w₀ + 255·w₁| ≤ 32,767 only holds
# for |w| ≤ 64. Wider weights make ONNX Runtime's answers differ from this exact arithmetic.
WEIGHT_MAX = 64
GELU_C = 0.7978845608028654  # √(2/π), as litenet.train.reference
GELU_K = 0.044715


def quantize(x: np.ndarray, scale, lo: int = ACT_MIN, hi: int = ACT_MAX) -> np.ndarray:
    """q = clamp(round_half_even(x / scale), lo, hi) as int8 — ONNX QuantizeLinear with zero point 0.

    The division is done in float32, as QuantizeLinear defines it (not a multiply by 1/scale,
    which rounds differently near ties).
    """
    x = np.asarray(x, np.float32)
    return np.clip(np.rint(x / np.asarray(scale, np.float32)), lo, hi).astype(np.int8)


def int_matmul(x_q: np.ndarray, w_q_out_in: np.ndarray) -> np.ndarray:
    """acc[b, n] = Σ_k x_q[b, k] · W_q[n, k], exactly, as int32.

    Done as a float64 BLAS product: every partial sum is an integer below 2^53, so it is exact
    (and far faster than NumPy's integer matmul). K · 128 · 127 < 2^31 keeps it inside int32.
    """
    return (x_q.astype(np.float64) @ w_q_out_in.astype(np.float64).T).astype(np.int32)


def dequantize_acc(acc: np.ndarray, act_scale, weight_scale: np.ndarray) -> np.ndarray:
    """y = float32(acc) · (s_act · s_w[n]), the multiplier formed in float32 first."""
    multiplier = np.float32(act_scale) * np.asarray(weight_scale, np.float32)
    return acc.astype(np.float32) * multiplier


@dataclass(frozen=True)
class Plan:
    """An opened plan: the tensors by name and the settings from its metadata."""

    tensors: dict[str, np.ndarray]
    embed: str
    input_shift: float
    blocks: int
    ln_eps: float
    classes: tuple[str, ...]
    metadata: dict[str, str]

    def linear(self, x: np.ndarray, layer: str) -> np.ndarray:
        """Quantize the input, int8 × int8 → int32, dequantize, add the float bias (if any)."""
        t = self.tensors
        s_x = t[f"{layer}.input_scale"].reshape(())
        acc = int_matmul(quantize(x, s_x), t[f"{layer}.weight"])
        y = dequantize_acc(acc, s_x, t[f"{layer}.weight_scale"])
        bias = t.get(f"{layer}.bias")
        return y if bias is None else y + bias


def load_plan(path: str | Path) -> Plan:
    """Open a plan file, checking its format tag; raises LiteNetError on a missing or foreign file."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file, safe_open

    path = Path(path)
    if not path.is_file():
        raise LiteNetError(f"{path}: no int8 plan; run `litenet export --int8` first or fix the path")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as exc:
        raise LiteNetError(f"{path}: not a readable safetensors file ({exc}); re-run litenet export --int8") from None
    return plan_from_tensors(tensors, meta, str(path))


def plan_from_tensors(tensors: dict[str, np.ndarray], meta: dict[str, str], source: str = "plan") -> Plan:
    """A Plan from its tensors and string metadata, as a file would hold them."""
    if meta.get("format") != PLAN_FORMAT:
        raise LiteNetError(f"{source}: not a LiteNet int8 plan (format {meta.get('format')!r}, "
                           f"expected {PLAN_FORMAT}); re-run litenet export --int8")
    try:
        model = json.loads(meta["model"])
        return Plan(tensors=tensors, embed=model["embed"], input_shift=float(model["input_shift"]),
                    blocks=int(model["blocks"]), ln_eps=float(model["ln_eps"]),
                    classes=tuple(json.loads(meta.get("classes", "[]"))), metadata=dict(meta))
    except (KeyError, TypeError, ValueError):
        raise LiteNetError(f"{source}: the plan's model description is damaged; re-run litenet export --int8") from None


def embed_rows(images: np.ndarray, embed: str, input_shift: float) -> np.ndarray:
    """uint8 or [0, 1] float NHWC images → (B, 3072) shifted values or (B, 1024) colour sums, float32."""
    x = images.astype(np.float32) / np.float32(255) if images.dtype == np.uint8 else images.astype(np.float32)
    x = x.reshape(len(x), 1024, 3)
    if input_shift:
        x = x - np.float32(input_shift)
    return x.sum(axis=2) if embed == "channel-sum" else x.reshape(len(x), 3072)


def gelu(u: np.ndarray) -> np.ndarray:
    """½ u (1 + tanh(c (u + 0.044715 u³))) in float32, the tanh form of litenet.train.reference."""
    t = np.tanh(np.float32(GELU_C) * (u + np.float32(GELU_K) * (u * u * u)))
    return np.float32(0.5) * u * (np.float32(1.0) + t)


def layernorm(s: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """γ (s − μ) / √(σ² + eps) + β over the features, float32."""
    mu = s.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((s - mu) ** 2).mean(axis=1, keepdims=True) + np.float32(eps))
    return gamma * ((s - mu) * rstd) + beta


def run_plan(plan: Plan, images: np.ndarray, batch_size: int = 1000) -> np.ndarray:
    """Logits (N, classes) float32 for uint8 NHWC images (or floats in [0, 1]), in slices."""
    out = []
    for i in range(0, len(images), batch_size):
        t = plan.tensors
        h = plan.linear(embed_rows(images[i:i + batch_size], plan.embed, plan.input_shift), "embed")
        for b in range(plan.blocks):
            a = gelu(plan.linear(h, f"blocks.{b}.fc1"))
            v = plan.linear(a, f"blocks.{b}.fc2")
            h = layernorm(h + v, t[f"blocks.{b}.ln.gamma"], t[f"blocks.{b}.ln.beta"], plan.ln_eps)
        out.append(plan.linear(h, "head"))
    return np.concatenate(out) if out else np.zeros((0, len(plan.classes)), np.float32)
