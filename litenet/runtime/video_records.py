"""What `litenet-infer --video` prints: a record per classified frame, one per problem, and a summary
at the end — JSON Lines with --json (schema litenet-video/1, docs/runtime.md), else human lines.

    {"schema": "litenet-video/1", "type": "frame", "source": "clip.mp4", "frame": 12, "time_s": 0.4,
     "class": "cat", "index": 3, "score": 0.8731, "topk": [...], "logits": [...],
     "backend": "onnxruntime", "precision": "int8", "model": "models/litenet-base", "batch": 4, "latency_ms": 0.05}
    {"schema": "litenet-video/1", "type": "error", "source": "clip.avi", "error": "clip.avi: frame 45 could not ..."}
    {"schema": "litenet-video/1", "type": "summary", ...}          # the fields: video.Pipeline.summary

"score" is the softmax of the logits at "index", as in litenet-infer/1 (records.py).
"""

from __future__ import annotations

from litenet.runtime.records import to_json  # noqa: F401 - one JSON writer for both schemas

SCHEMA = "litenet-video/1"


def frame_records(source: str, frames: list[int], times: list[float], logits, classes, topk: int, backend: str,
                  precision: str, model: str, latency_ms: float) -> list[dict]:
    """The records of one classified batch (logits float32 (N, C)), in frame order."""
    import numpy as np

    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    scores = e / e.sum(axis=1, keepdims=True)
    # ties go to the lower index, as in records.ok_record: a stable sort of the negated logits
    order = np.argsort(-z, axis=1, kind="stable")[:, :max(1, topk)]
    out = []
    for row, (frame, t) in enumerate(zip(frames, times)):
        best = int(order[row, 0])
        out.append({"schema": SCHEMA, "type": "frame", "source": source, "frame": frame, "time_s": round(t, 4),
                    "class": classes[best], "index": best, "score": float(scores[row, best]),
                    "topk": [{"class": classes[i], "index": int(i), "score": float(scores[row, i])} for i in order[row]],
                    "logits": [float(v) for v in np.asarray(logits[row], dtype=np.float32)],
                    "backend": backend, "precision": precision, "model": model, "batch": len(frames),
                    "latency_ms": round(latency_ms, 4)})
    return out


def error_record(source: str, message: str) -> dict:
    return {"schema": SCHEMA, "type": "error", "source": source, "error": message}


def frame_line(record: dict) -> str:
    """`frame 12 @ 0.400 s: cat 0.873, dog 0.051 [onnxruntime int8, batch 4, 0.05 ms]`."""
    ranked = ", ".join(f"{t['class']} {t['score']:.3f}" for t in record["topk"])
    return (f"frame {record['frame']} @ {record['time_s']:.3f} s: {ranked} [{record['backend']} {record['precision']}, "
            f"batch {record['batch']}, {record['latency_ms']:.2f} ms]")


def summary_lines(s: dict) -> list[str]:
    """The summary in three or four lines: frames and rate, where the time went, CPU, real-time pacing."""
    st = s["stages"]
    how = "pre-decoded frames in memory" if s["predecoded"] else "read, decoded and classified as they came"
    end = " (interrupted)" if s["interrupted"] else " (ended early)" if s["ended_early"] else ""
    lines = [f"{s['source']['name']}: {s['frames']} frames, {s['classified']} classified in {s['wall_s']:.2f} s = "
             f"{s['fps']:,.1f} frames/s{end}; {how}",
             f"  decode {_stage(st['decode'])} · resize {_stage(st['resize'])} · inference {_stage(st['inference'])} "
             f"({s['backend']} {s['precision']}, batches of {st['inference']['mean_batch']:.1f} on average) · "
             f"output {_stage(st['output'])}",
             f"  CPU {s['cpu_s']:.2f} s over {s['wall_s']:.2f} s = {s['cpu_cores']:.2f} cores "
             f"({s['cpu_ms_per_frame']:.2f} ms a frame); {s['failed']} frames undecodable, {s['drops']} drops"]
    if s["realtime"]:
        r = s["realtime"]
        lines.append(f"  paced at {r['fps']:g} frames/s: {r['late_frames']} frames late (beyond --max-latency and a "
                     f"frame), largest lag {r['max_lag_ms']:.1f} ms, at the end {r['end_lag_ms']:.1f} ms")
    return lines


def _stage(stage: dict) -> str:
    return f"{stage['ms_per_frame']:.3f} ms/frame" + (f" ({stage['fps']:,.0f} fps)" if stage["fps"] else "")
