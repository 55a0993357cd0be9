"""Write LiteNet's int8 plan: the QDQ model's integers and scales in one safetensors file (docs/int8-plan.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from litenet.export.qdq import quantized_weights
from litenet.export.scales import Scales
from litenet.model import ModelConfig, param_views
from litenet.runtime.int8_plan import ACT_MAX, ACT_MIN, PLAN_FORMAT, WEIGHT_MAX


def plan_tensors(params: np.ndarray, model: ModelConfig, scales: Scales,
                 weight_max: int = WEIGHT_MAX) -> dict[str, np.ndarray]:
    """Every tensor of the plan, by name.

    Weights are stored (out, in), i.e. transposed against the float weights file, so that the
    in-features of one output channel are contiguous: four consecutive int8 form the 32-bit word
    one dp4a instruction consumes.
    """
    p = param_views(np.asarray(params, np.float32), model)
    tensors: dict[str, np.ndarray] = {}
    for layer, (w_q, s_w) in quantized_weights(params, model, weight_max).items():
        tensors[f"{layer}.weight"] = np.ascontiguousarray(w_q.T)
        tensors[f"{layer}.weight_scale"] = s_w
        tensors[f"{layer}.input_scale"] = np.array([scales.activation[f"{layer}.input"]], np.float32)
        if f"{layer}.bias" in p:
            tensors[f"{layer}.bias"] = np.ascontiguousarray(p[f"{layer}.bias"])
    for i in range(model.blocks):
        for name in ("gamma", "beta"):
            tensors[f"blocks.{i}.ln.{name}"] = np.ascontiguousarray(p[f"blocks.{i}.ln.{name}"])
    return tensors


def plan_metadata(model: ModelConfig, scales: Scales, preset: str, classes: list[str],
                  weight_max: int = WEIGHT_MAX, **extra) -> dict[str, str]:
    """The plan's string metadata: format, architecture, class names and the arithmetic contract."""
    return {
        "format": PLAN_FORMAT,
        "preset": preset,
        "model": json.dumps(dataclasses.asdict(model)),
        "classes": json.dumps(list(classes)),
        "weight_layout": "out,in (row-major, int8, symmetric per output channel)",
        "activation_quantization": f"per tensor, symmetric, zero point 0, round half to even, "
                                   f"saturate to [{ACT_MIN}, {ACT_MAX}]",
        "weight_range": f"[-{weight_max}, {weight_max}]",
        "accumulate": "int32; y = float32(acc) * (input_scale * weight_scale[n]) + bias[n]",
        "calibration_method": scales.method,
        **{k: v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()},
    }


def plan_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """The plan file's contents (the caller writes them, atomically with the other exports)."""
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def write_plan(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write a plan file directly (tests and tools; litenet export writes plan_bytes atomically)."""
    Path(path).write_bytes(plan_bytes(tensors, metadata))
