"""The agreement checks every export runs: fp32 ONNX against the NumPy forward, the int8 plan against the QDQ model."""

from __future__ import annotations

import numpy as np

from litenet.model import AnyModel
from litenet.train import network

EPS32 = float(np.finfo(np.float32).eps)


def fp32_tolerance(z32: np.ndarray, z64: np.ndarray) -> float:
    """How far two correct float32 implementations may drift apart, from the reference's own error.

    The NumPy float32 forward misses the float64 one by e = max|z32 − z64|. Another float32
    implementation (ONNX Runtime: blocked GEMMs, fused LayerNorm, MLAS tanh) has an error of the
    same kind, so the two may differ by about 2e; a factor 2 more covers a different summation
    order. The floor, 8 ulp of the largest logit, covers the case where e happens to be tiny.
    """
    return max(4.0 * float(np.abs(z32 - z64).max()), 8.0 * EPS32 * float(np.abs(z64).max()))


def fp32_agreement(onnx_logits: np.ndarray, params: np.ndarray, model: AnyModel, images: np.ndarray) -> dict:
    """Compare ONNX Runtime's fp32 logits with the NumPy forward (litenet.train.network) on the same images."""
    z32 = network.forward(np.asarray(params, np.float32), images, model).z
    z64 = network.forward(np.asarray(params, np.float64), images, model).z
    diff = float(np.abs(onnx_logits - z32).max())
    return {"images": int(len(images)), "max_abs_diff": diff, "tolerance": fp32_tolerance(z32, z64),
            "argmax_agreement": float((onnx_logits.argmax(1) == z32.argmax(1)).mean()),
            "numpy_float64_error": float(np.abs(z32 - z64).max())}


def plan_tolerance(z: np.ndarray) -> float:
    """Plan and QDQ model agree to this unless some activation rounded to the other integer.

    Both dequantize the same int32 sums, so what is left is float32 rounding in the epilogue,
    GELU and LayerNorm (ONNX Runtime fuses the last two and approximates tanh): 64 ulp of the
    largest logit bounds it with room to spare.
    """
    return 64.0 * EPS32 * float(np.abs(z).max())


def plan_agreement(plan_logits: np.ndarray, onnx_logits: np.ndarray) -> dict:
    """How closely the NumPy plan executor reproduces ONNX Runtime on the QDQ model.

    An image beyond `plan_tolerance` had an activation within float rounding of a .5 boundary
    that the two rounded to neighbouring integers: expected, rare, and what "equal up to
    rounding" allows. The argmax must still agree almost everywhere.
    """
    per_image = np.abs(plan_logits - onnx_logits).max(axis=1)
    tol = plan_tolerance(onnx_logits)
    return {"images": int(len(per_image)), "max_abs_diff": float(per_image.max(initial=0.0)), "tolerance": tol,
            "images_with_rounding_flips": int((per_image > tol).sum()),
            "argmax_agreement": float((plan_logits.argmax(1) == onnx_logits.argmax(1)).mean())}
