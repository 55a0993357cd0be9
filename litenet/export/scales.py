"""The activation scales of one calibration, and the JSON file that lets a run be repeated and inspected."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np

from litenet.errors import LiteNetError
from litenet.export import calibrate as cal
from litenet.export.onnx_graph import matmul_inputs
from litenet.model import AnyModel, model_to_dict

SCALES_FORMAT = "litenet-int8-scales/1"


@dataclass
class Scales:
    """One float32 scale per quantized activation, plus what every method would have chosen."""

    method: str
    percentile: float
    activation: dict[str, float]  # tensor → scale (amax / 127) under `method`
    amax: dict[str, dict[str, float]] = field(default_factory=dict)  # tensor → method → amax
    source: dict = field(default_factory=dict)  # where the calibration images came from


def calibrate(params: np.ndarray, model: AnyModel, images: np.ndarray, method: str = "entropy",
              percentile: float = cal.DEFAULT_PERCENTILE, source: dict | None = None) -> Scales:
    """Histogram every MatMul input on `images` and pick each range with `method` (all three are recorded)."""
    if method not in cal.METHODS:
        raise LiteNetError(f"unknown calibration method {method!r}; choose one of {', '.join(cal.METHODS)}")
    hists = cal.collect_histograms(params, model, images)
    amax = {name: {m: cal.choose_amax(h, m, percentile) for m in cal.METHODS} for name, h in hists.items()}
    return Scales(method=method, percentile=percentile,
                  activation={name: cal.scale_from_amax(a[method]) for name, a in amax.items()},
                  amax=amax, source=dict(source or {}, images=int(len(images))))


def with_method(scales: Scales, method: str) -> Scales:
    """The same histograms' verdict under another method (no second pass over the images)."""
    if method not in cal.METHODS or any(method not in a for a in scales.amax.values()):
        raise LiteNetError(f"these scales hold no {method!r} ranges; re-run the calibration")
    return dataclasses.replace(scales, method=method,
                               activation={n: cal.scale_from_amax(a[method]) for n, a in scales.amax.items()})


def to_json(scales: Scales, model: AnyModel, preset: str) -> str:
    """The scales file: every tensor's scale and all methods' ranges, plus what produced them."""
    doc = {
        "format": SCALES_FORMAT,
        "preset": preset,
        "model": model_to_dict(model),
        "method": scales.method,
        "percentile": scales.percentile,
        "histogram_bins": cal.BINS,
        "calibration": scales.source,
        "note": "scale = amax / 127; q = clamp(round_half_even(x / scale), -128, 127); zero point 0",
        "activations": {name: {"scale": scales.activation[name], "amax": scales.amax.get(name, {})}
                        for name in scales.activation},
    }
    return json.dumps(doc, indent=2) + "\n"


def from_json(text: str, model: AnyModel, source: str = "scales file") -> Scales:
    """Read a scales file, refusing one written for another architecture."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LiteNetError(f"{source}: not valid JSON ({exc.msg}); re-run the calibration") from None
    if not isinstance(doc, dict) or doc.get("format") != SCALES_FORMAT:
        raise LiteNetError(f"{source}: not a LiteNet scales file (expected format {SCALES_FORMAT})")
    if doc.get("model") != model_to_dict(model):
        raise LiteNetError(f"{source}: calibrated for another model configuration; re-run without --scales")
    acts = doc.get("activations", {})
    wanted = [a for a, _ in matmul_inputs(model)]
    if sorted(acts) != sorted(wanted):
        raise LiteNetError(f"{source}: scales for {sorted(acts)}, the model needs {wanted}; re-run the calibration")
    try:
        activation = {n: float(acts[n]["scale"]) for n in wanted}
    except (KeyError, TypeError, ValueError):
        raise LiteNetError(f"{source}: an activation entry lacks a numeric scale; re-run the calibration") from None
    if not all(np.isfinite(s) and s > 0 for s in activation.values()):
        raise LiteNetError(f"{source}: every scale must be a positive finite number")
    source_doc = doc.get("calibration", {})
    try:
        percentile = float(doc.get("percentile", cal.DEFAULT_PERCENTILE))
        amax = {n: dict(acts[n].get("amax", {})) for n in wanted}
        source_doc = dict(source_doc)
        for key in ("images", "seed"):  # the calibration images are drawn again from these two
            if key in source_doc and (isinstance(source_doc[key], bool) or not isinstance(source_doc[key], int)
                                      or source_doc[key] < (1 if key == "images" else 0)):
                raise ValueError(f'"calibration": "{key}" must be a whole number ≥ {1 if key == "images" else 0}, '
                                 f"got {source_doc[key]!r}")
    except (TypeError, ValueError, AttributeError) as exc:
        detail = str(exc) if "calibration" in str(exc) else "a field has the wrong type"
        raise LiteNetError(f"{source}: {detail}; fix the file or re-run without --scales") from None
    return Scales(method=str(doc.get("method", "?")), percentile=percentile,
                  activation=activation, amax=amax, source=source_doc)
