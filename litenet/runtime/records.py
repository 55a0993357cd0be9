"""Per-image results of litenet-infer: scores from logits, the JSON record (schema below) and the human line.

JSON Lines, one object per input image, in input order (docs/runtime.md is the reference):

    {"schema": "litenet-infer/1", "image": "cat.png", "ok": true,
     "class": "cat", "index": 3, "score": 0.8731,          # top-1 class, its logit index, its score
     "topk": [{"class": "cat", "index": 3, "score": 0.8731}, ...],   # --topk entries, best first
     "logits": [...],                                     # all C raw logits (float32 values)
     "backend": "onnxruntime", "precision": "fp32", "model": "models/litenet-base",
     "batch": 1, "latency_ms": 0.41}                      # the batch it ran in; its time / images
    {"schema": "litenet-infer/1", "image": "bad.png", "ok": false, "error": "bad.png: damaged ..."}

"score" is softmax(logits)[class] computed in float64. For a model trained with cross-entropy
(litenet-base) that is the model's probability estimate (uncalibrated); for the margin-trained
seed preset the logits are hinge margins, so the score only ranks the classes.
"""

from __future__ import annotations

import json
import math

SCHEMA = "litenet-infer/1"


def softmax(logits) -> list[float]:
    """exp(z − max z) / Σ exp(z − max z), in float64 (Python floats), for one image's logits."""
    z = [float(v) for v in logits]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    total = math.fsum(e)
    return [v / total for v in e]


def ok_record(image: str, logits, classes, topk: int, backend: str, precision: str, model: str,
              batch: int, latency_ms: float) -> dict:
    """The record of a classified image."""
    z = [float(v) for v in logits]
    scores = softmax(z)
    order = sorted(range(len(z)), key=lambda i: (-z[i], i))[:max(1, topk)]
    best = order[0]
    return {"schema": SCHEMA, "image": image, "ok": True,
            "class": classes[best], "index": best, "score": scores[best],
            "topk": [{"class": classes[i], "index": i, "score": scores[i]} for i in order],
            "logits": z, "backend": backend, "precision": precision, "model": model,
            "batch": batch, "latency_ms": round(latency_ms, 4)}


def error_record(image: str, message: str) -> dict:
    """The record of an input that could not be classified."""
    return {"schema": SCHEMA, "image": image, "ok": False, "error": message}


def to_json(record: dict) -> str:
    """One line of JSON; floats keep every digit, so float32 logits round-trip exactly."""
    return json.dumps(record, ensure_ascii=False, allow_nan=False)


def shown_path(path: str) -> str:
    """A file name for a one-line human record: control characters (a newline would split the line) escaped."""
    return path if path.isprintable() else path.encode("unicode_escape").decode("ascii")


def to_human(record: dict) -> str:
    """`cat.png: cat 0.873 [onnxruntime fp32, 0.41 ms]`, with more classes after commas for --topk."""
    ranked = ", ".join(f"{t['class']} {t['score']:.3f}" for t in record["topk"])
    return (f"{shown_path(record['image'])}: {ranked} [{record['backend']} {record['precision']}, "
            f"{record['latency_ms']:.2f} ms]")
