"""Where a LiteNet step's time goes: each launch of the step timed alone, replayed from a CUDA
graph of 20 copies of it (so launch latency, which a step's graph hides, stays out of the
figures; median of 11 replays), and the whole step replayed from graphs of 8 steps as
bench_gpu.py runs it. A helper of bench_gpu.py for docs/cuda.md's notes; several cases per
process, each a preset, batch, plan and optionally the versions geometry would otherwise choose:

    python3 bench/gpu_kernel_times.py "litenet-seed 64 fused" "wide 4096 ops tall=no" "litenet-seed 512 ops embed=tiles"
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import PRESETS  # noqa: E402
from litenet.model import TrainConfig, init_params  # noqa: E402

COPIES, REPEATS = 20, 11


def parse_case(text: str) -> dict:
    words = text.split()
    case = {"preset": words[0], "batch": int(words[1]), "plan": words[2], "embed": "auto", "tall": None}
    for word in words[3:]:
        key, value = word.split("=")
        case[key] = {"yes": True, "no": False, "auto": None}[value] if key == "tall" else value
    return case


def timed(cupy, stream, fn, per: int) -> float:
    """Median µs of fn() over REPEATS event-timed runs, divided by `per`."""
    times = []
    for _ in range(REPEATS):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1e3 / per)
    return statistics.median(times)


def kernel_times(case: dict) -> dict:
    import cupy
    from litenet.train.gpu_backend import GpuBackend

    model, batch = PRESETS[case["preset"]], case["batch"]
    backend = GpuBackend(model, TrainConfig(batch_size=batch), init_params(model, 0), plan=case["plan"],
                          embed=case["embed"], tall=case["tall"])
    rng = np.random.default_rng(0)
    backend.load_dataset(rng.integers(0, 256, (4096, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 4096))
    backend.train_steps(rng.integers(0, 4096, (1, batch)), np.full(1, 1e-3))  # loads every module
    backend.fetch_stats()
    dev, stream = backend.dev, backend.dev.stream
    rows = []
    for launch in backend._steps:  # the step's launches in order; each reruns on the same buffers
        graph = dev.capture([launch] * COPIES)
        dev.replay(graph)
        rows.append((f"{launch.kernel} (grid {launch.grid})", timed(cupy, stream, lambda: dev.replay(graph), COPIES)))
        dev.fill(backend.v["ctr"], 0)  # the update advances the step counter: rewind it
    step_graph = dev.capture(backend._steps * 8)
    dev.replay(step_graph)
    step_us = timed(cupy, stream, lambda: dev.replay(step_graph), 8)
    dev.fill(backend.v["ctr"], 0)
    dev.fill(backend.v["stats"], 0)
    g = backend.geometry
    label = (f"{case['preset']} batch {batch} plan {backend.plan} embed {g.embed_variant} "
             f"tall {[k for k, v in g.gemms.items() if v.tall] or 'none'}")
    return {"case": label, "launches": rows, "sum_us": sum(t for _, t in rows), "step_us": step_us}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help='"PRESET BATCH PLAN [embed=rows|tiles] [tall=yes|no|auto]"')
    parser.add_argument("--out", help="also write the numbers as JSON here")
    args = parser.parse_args(argv)
    results = []
    for text in args.cases:
        r = kernel_times(parse_case(text))
        results.append(r)
        print(f"{r['case']}: step {r['step_us']:.1f} µs (graphs of 8 steps); launches alone "
              f"{r['sum_us']:.1f} µs in {len(r['launches'])}", flush=True)
        for name, t in r["launches"]:
            print(f"  {t:8.1f} µs  {name}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
