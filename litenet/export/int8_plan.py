"""Write LiteNet's int8 plan: the QDQ model's integers and scales in one safetensors file (docs/int8-plan.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from litenet.export.qdq import Int8Weights
from litenet.export.scales import Scales
from litenet.graph import ops_of
from litenet.model import AnyModel, model_to_dict, param_views
from litenet.runtime.int8_plan import ACT_MAX, ACT_MIN, PLAN_FORMAT


def plan_tensors(params: np.ndarray, model: AnyModel, scales: Scales,
                 weights: Int8Weights | None = None) -> dict[str, np.ndarray]:
    """Every tensor of the plan, by name; `weights` (W_q, s_w, biases) default: Int8Weights.nearest.

    Weights are stored (out, in), i.e. transposed against the float weights file, so that the
    in-features of one output channel are contiguous: four consecutive int8 form the 32-bit word
    one dp4a instruction consumes.
    """
    p = param_views(np.asarray(params, np.float32), model)
    weights = weights or Int8Weights.nearest(params, model)
    tensors: dict[str, np.ndarray] = {}
    for layer, (w_q, s_w) in weights.weights.items():
        tensors[f"{layer}.weight"] = np.ascontiguousarray(w_q.T)
        tensors[f"{layer}.weight_scale"] = s_w
        tensors[f"{layer}.input_scale"] = np.array([scales.activation[f"{layer}.input"]], np.float32)
        if layer in weights.biases:
            tensors[f"{layer}.bias"] = np.array(weights.biases[layer], np.float32)
    for op in ops_of(model):  # what stays float besides the biases: LayerNorm's γ and β
        if op.kind == "layernorm":
            for kind in ("gamma", "beta"):
                tensors[op.param(kind)] = np.ascontiguousarray(p[op.param(kind)])
    return tensors


def plan_metadata(model: AnyModel, scales: Scales, preset: str, classes: list[str],
                  weights: Int8Weights, **extra) -> dict[str, str]:
    """The plan's string metadata: format, architecture, class names and the arithmetic contract
    (plus, for people, how W_q was rounded and whether the biases were corrected)."""
    weight_max = weights.weight_max
    return {
        "format": PLAN_FORMAT,
        "preset": preset,
        "model": json.dumps(model_to_dict(model)),
        "classes": json.dumps(list(classes)),
        "weight_layout": "out,in (row-major, int8, symmetric per output channel)",
        "activation_quantization": f"per tensor, symmetric, zero point 0, round half to even, "
                                   f"saturate to [{ACT_MIN}, {ACT_MAX}]",
        "weight_range": f"[-{weight_max}, {weight_max}]",
        "accumulate": "int32; y = float32(acc) * (input_scale * weight_scale[n]) + bias[n]",
        "calibration_method": scales.method,
        "weight_rounding": weights.rounding,
        "bias_correction": weights.bias_correction,
        **{k: v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()},
    }


def plan_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """The plan file's contents (the caller writes them, atomically with the other exports)."""
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def write_plan(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write a plan file directly (tests and tools; litenet export writes plan_bytes atomically)."""
    Path(path).write_bytes(plan_bytes(tensors, metadata))
