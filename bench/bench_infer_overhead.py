"""`litenet bench-infer`'s own overhead: its timing loop against a hand-timed loop over the same ONNX
Runtime InferenceSession doing the same work (x / 255, then session.run), rounds interleaved so
background load falls on both alike; also session.run alone on input scaled beforehand, to show what
the scaling costs. Target: bench-infer's median within 5 % of the hand loop's.

    python bench/bench_infer_overhead.py --model models/litenet-base --out overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litenet.runtime import bench  # noqa: E402
from litenet.runtime.model_files import ModelFiles  # noqa: E402
from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference  # noqa: E402


def hand_loop(session, name: str, images, loops: int, scale: bool) -> list[float]:
    """Seconds of each session.run, timed by hand; with `scale`, the x / 255 inside the timed call."""
    feed = None if scale else np.divide(images, np.float32(255), dtype=np.float32)
    out = []
    for _ in range(loops):
        start = time.perf_counter()
        session.run(None, {name: np.divide(images, np.float32(255), dtype=np.float32) if scale else feed})
        out.append(time.perf_counter() - start)
    return out


def measure(model: ModelFiles, precision: str, batch: int, rounds: int, loops: int) -> dict:
    backend = OnnxRuntimeInference(model, precision, threads=1)
    images = bench.random_images(batch, 0)
    samples = {"bench-infer": [], "hand loop": [], "session.run alone": []}
    for _ in range(rounds):
        samples["bench-infer"] += bench.time_calls(backend.predict, images, warmup=10, loops=loops)[0]
        samples["hand loop"] += hand_loop(backend.session, backend.input_name, images, loops, scale=True)
        samples["session.run alone"] += hand_loop(backend.session, backend.input_name, images, loops, scale=False)
    medians = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
    return {"precision": precision, "batch": batch, "threads": 1, "rounds": rounds, "loops": loops,
            "median_ms": medians, "ratio": medians["bench-infer"] / medians["hand loop"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="models/litenet-base")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args()
    model = ModelFiles.locate(args.model)
    rows = [measure(model, p, b, args.rounds, args.loops) for p in ("fp32", "int8") for b in args.batches]
    for r in rows:
        m = r["median_ms"]
        print(f"{r['precision']} batch {r['batch']}: bench-infer {m['bench-infer']:.4f} ms, hand loop "
              f"{m['hand loop']:.4f} ms ({100 * (r['ratio'] - 1):+.1f} %), session.run alone {m['session.run alone']:.4f} ms",
              file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
