"""LiteNet's int8 plan: read the safetensors file and execute it in NumPy, exactly as docs/int8-plan.md defines:
the op list (litenet.graph) walked with int8 products, everything else litenet.ops' float32 maths.

The plan holds int8 weights (one scale per output channel), one scale per quantized activation,
and float32 biases, γ and β. This executor is the reference the CUDA dp4a kernels are checked
against; it needs only NumPy and safetensors, so the runtime can use it without the trainer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet import forward
from litenet.errors import LiteNetError
from litenet.graph import Op, ops_of
from litenet.model import AnyModel, model_from_dict

PLAN_FORMAT = "litenet-int8-plan/1"
PLAN_FILE = "model.int8.plan.safetensors"
# Activations saturate to the full int8 range, as ONNX QuantizeLinear and TensorRT do.
ACT_MIN, ACT_MAX = -128, 127
# Weights are symmetric with scale max|W|/WEIGHT_MAX, so they lie in [−64, 64]. Not ±127: on x86
# CPUs without VNNI, ONNX Runtime's int8 GEMM adds u8 × s8 products in pairs into int16 with
# saturation (vpmaddubsw); with activations shifted to 0…255, |255·w₀ + 255·w₁| ≤ 32,767 only holds
# for |w| ≤ 64. Wider weights make ONNX Runtime's answers differ from this exact arithmetic.
WEIGHT_MAX = 64


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
    """An opened plan: the tensors by name, the model it was exported from and its metadata."""

    tensors: dict[str, np.ndarray]
    model: AnyModel
    classes: tuple[str, ...]
    metadata: dict[str, str]

    @property
    def ops(self) -> tuple[Op, ...]:
        return ops_of(self.model)

    def product(self, op: Op, x: np.ndarray) -> np.ndarray:
        """The int8 product step: quantize the input, int8 × int8 → int32, dequantize, add the float bias.

        linear: over the last axis; token_linear: over the first (the patches), per output patch j.
        """
        return self.integer_product(op, quantize(x, self.tensors[f"{op.name}.input_scale"].reshape(())))

    def integer_product(self, op: Op, x_q: np.ndarray) -> np.ndarray:
        """The product step from its already quantized input x_q (int8, the layout of `product`'s x):
        int8 × int8 → int32, dequantize, add the float bias."""
        t, x = self.tensors, x_q
        s_x = t[f"{op.name}.input_scale"].reshape(())
        w_q, s_w = t[f"{op.name}.weight"], t[f"{op.name}.weight_scale"]  # (out, in) int8, (out,)
        bias = t.get(f"{op.name}.bias")
        if op.kind == "linear":
            acc = int_matmul(x_q.reshape(-1, x.shape[-1]), w_q)
            y = dequantize_acc(acc, s_x, s_w)
            return (y if bias is None else y + bias).reshape(*x.shape[:-1], len(s_w))
        acc = int_matmul(x_q.reshape(x.shape[0], -1).T, w_q).T  # (T', B·d): the patches are the sum's axis
        y = dequantize_acc(acc, s_x, s_w[:, None])
        return (y if bias is None else y + bias[:, None]).reshape(len(s_w), *x.shape[1:])


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
        model = model_from_dict(json.loads(meta["model"]), source)
        classes = tuple(json.loads(meta.get("classes", "[]")))
    except (KeyError, TypeError, ValueError, LiteNetError):
        raise LiteNetError(f"{source}: the plan's model description is damaged; re-run litenet export --int8") from None
    return Plan(tensors=tensors, model=model, classes=classes, metadata=dict(meta))


def run_plan(plan: Plan, images: np.ndarray, batch_size: int = 1000) -> np.ndarray:
    """Logits (N, classes) float32 for uint8 NHWC images (or floats in [0, 1]), in slices: the op
    list walked with the plan's int8 products and its float32 biases, γ and β."""
    return forward.logits(plan.ops, plan.tensors, images, batch_size, product=plan.product)
