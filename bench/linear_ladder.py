"""The ladder of one op for docs/linear-ladder.md: y = x W + b, from the reference kernel (one thread an
output) to the 64 × 64 tiles and the wide tiles, each rung checked against NumPy (float64) and timed on
the GPU in hand with cuBLAS (CuPy's `@`) beside it, in TFLOP/s.

    python3 bench/linear_ladder.py --out bench/results/new/linear-ladder.json

Each rung is a Call through the lowering's own tile choice (litenet.lowering.fast.products), timed as a
CUDA graph of `--count` copies replayed `--repeats` times (median).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litenet.gpu.launch import Launch  # noqa: E402
from litenet.lowering.fast.geometry import Gemm  # noqa: E402
from litenet.lowering.fast.products import VERSIONS  # noqa: E402

i32 = np.int32
SHAPES = [(1024, 2048, 1024), (4096, 4096, 4096), (16384, 512, 128)]  # (rows, n_out, n_in)


def rungs(M: int, N: int, K: int, sm: int):
    """(name, kernel, grid, splits) of each rung: reference, 64 × 64 tiles, wide tiles (fp32), and the BF16
    tensor-core tile for scale."""
    out = [("reference: a thread an output", "linear_forward_reference", max(1, min(math.ceil(M * N / 256), 65535)), 0)]
    for name, gemm in (("tiled: 64 × 64, K split", Gemm.plan(M, N, K, sm, wide=False)),
                       ("wide: 256 × 128 (fp32)", Gemm.plan(M, N, K, sm, wide=True)),
                       ("tiled on tensor cores (TF32 operands)", Gemm.plan(M, N, K, sm, precision="tf32", wide=False))):
        out.append((name, VERSIONS["linear_forward"][gemm.version], gemm.grid, gemm.splits, gemm))
    return out


def timed(cupy, dev, launch, count: int, repeats: int) -> float:
    """ms per copy of `launch` (a Launch, or a list of them run in order) in a graph of `count` copies,
    the median of `repeats` replays."""
    graph = dev.capture((launch if isinstance(launch, list) else [launch]) * count)
    dev.replay(graph)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record(dev.stream)
        dev.replay(graph)
        end.record(dev.stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / count)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    import cupy

    from litenet.gpu.device import CupyDevice

    dev, rng, report = CupyDevice(), np.random.default_rng(0), {"device": None, "rows": []}
    report["device"] = f"{dev.name} ({dev.capability}, {dev.sm_count} SMs)"
    for M, N, K in SHAPES:
        x, W, b = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
        want = x.astype(np.float64) @ W.astype(np.float64) + b
        X, Wd, bd, Y = (cupy.asarray(a) for a in (x, W, b, np.zeros((M, N), np.float32)))
        flops = 2.0 * M * N * K
        for rung in rungs(M, N, K, dev.sm_count):
            name, kernel, grid = rung[:3]
            if kernel.endswith("_reference"):
                launch = Launch(kernel, grid, (X, Wd, bd, Y, i32(M), i32(K), i32(N), i32(1)))
                count = max(1, args.count // 10)
            else:
                gemm = rung[4]
                scratch = cupy.zeros(max(gemm.scratch, 1), np.float32)
                counters = cupy.zeros(gemm.fixup_tiles * 32, np.uint32)
                launch = Launch(kernel, grid, (X, Wd, bd, Y, i32(M), i32(K), i32(N), i32(gemm.splits), scratch, counters))
                count = args.count
            dev.fill(Y, np.nan)
            dev.launch(launch)
            got = dev.download(Y)  # waits for the launch on the device's stream
            err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            ms = timed(cupy, dev, launch, count, args.repeats)
            report["rows"].append({"shape": [M, N, K], "rung": name, "kernel": kernel, "ms": ms,
                                   "tflops": flops / ms / 1e9, "max_rel_error": err})
        cupy.cuda.Device().synchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for _ in range(args.repeats):
            start.record()
            for _ in range(args.count):
                cupy.matmul(X, Wd, out=Y)
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / args.count)
        ms = statistics.median(times)
        report["rows"].append({"shape": [M, N, K], "rung": "cuBLAS (CuPy's @, fp32, no bias)", "kernel": "cublas",
                               "ms": ms, "tflops": flops / ms / 1e9, "max_rel_error": None})
    print(f"{report['device']}\n| M × N × K | rung | kernel | ms | TFLOP/s | max rel. error vs NumPy |\n|---|---|---|---|---|---|")
    for r in report["rows"]:
        err = "" if r["max_rel_error"] is None else f"{r['max_rel_error']:.1e}"
        print(f"| {' × '.join(map(str, r['shape']))} | {r['rung']} | {r['kernel']} | {r['ms']:.4f} | {r['tflops']:.1f} | {err} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
