"""The Mixer's channel-MLP products, one at a time, in the two BF16 tile families LiteNet has: the 64 × 64
tiles the Mixer runs today (fp32 operands rounded as staged, K split for 3 blocks a multiprocessor) and
the wide 128 × 128 tiles of litenet-base's products (BF16 copies of the operands; wgmma on sm_90), with
PyTorch's BF16 matmul (cuBLAS) beside them for scale. Each is checked against NumPy (float64) and timed
as a CUDA graph of `--count` copies replayed `--repeats` times (median). The ∂W products also run as the
BF16 training step runs them: in two launches, the wide tile's partials over more K splits, then their
sum (tokens.weight_sums_apart).

    python3 bench/mixer_products.py --batches 128 256 --out bench/results/raw/mixer-products.json

Shapes: litenet-mixer's channel MLP over batch·64 patch rows, 128 → 512 → 128.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from litenet.gpu.launch import Launch  # noqa: E402
from litenet.lowering.fast.geometry import Gemm, choose_summed_splits  # noqa: E402
from litenet.lowering.fast.products import VERSIONS, GeometryTiles, SplitTiles  # noqa: E402
from linear_ladder import timed  # noqa: E402

i32 = np.int32
WIDTH, HIDDEN, PATCHES = 128, 512, 64


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 → BF16 bits (uint16), rounded to nearest even, as kernels/bf16_copy.cu rounds."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def products(rows: int):
    """(name, product kernel, (M, N, K), weight_grad, n_in, n_out): the channel MLP's six products."""
    return [("fc1 forward + GELU", "linear_gelu_forward", (rows, HIDDEN, WIDTH), False, WIDTH, HIDDEN),
            ("fc2 forward + residual", "linear_residual_forward", (rows, WIDTH, HIDDEN), False, HIDDEN, WIDTH),
            ("fc2 ∂input + GELU′", "linear_backward_input_gelu", (rows, HIDDEN, WIDTH), False, HIDDEN, WIDTH),
            ("fc1 ∂input", "linear_backward_input", (rows, WIDTH, HIDDEN), False, WIDTH, HIDDEN),
            ("fc2 ∂W, ∂b", "linear_backward_weight", (HIDDEN, WIDTH, rows), True, HIDDEN, WIDTH),
            ("fc1 ∂W, ∂b", "linear_backward_weight", (WIDTH, HIDDEN, rows), True, WIDTH, HIDDEN)]


def expected(product: str, ops: dict) -> np.ndarray:
    """NumPy's float64 value of the output each product writes (u, y, ∂x or ∂W; bias and residual zero)."""
    x, W, dy = ops["x"], ops["W"], ops["dy"]
    if product in ("linear_gelu_forward", "linear_residual_forward"):
        return x @ W
    if product.startswith("linear_backward_input"):
        return dy @ W.T
    return x.T @ dy


def summed_apart(cupy, dev, name, src, dW, M, N, K, batch, want, args) -> dict:
    """The wide BF16 ∂W as the training step runs it: partials over choose_summed_splits' K splits, then
    their sum; checked against NumPy like the others, timed as the pair."""
    g = Gemm(M, N, K, 1, precision="bf16", wide=True)
    splits = choose_summed_splits(g.tiles, K, dev.sm_count)
    scratch = cupy.zeros(g.fixup_tiles * splits * g.part_slab, np.float32)
    sizes = (i32(M), i32(N), i32(splits))
    pair = [Launch("linear_backward_weight_partials_wide_bf16", g.tiles * splits,
                   (src["x"], src["dy"], i32(K)) + sizes + (scratch,)),
            Launch("linear_backward_weight_sum_wide", math.ceil((M * N + N) / 256),
                   (scratch, dW, cupy.zeros(N, np.float32)) + sizes)]
    dW.fill(np.nan)
    cupy.cuda.Device().synchronize()  # the fill and zeros (CuPy's stream) before the launches (the device's)
    for launch in pair:
        dev.launch(launch)
    got = dev.download(dW)
    ms = timed(cupy, dev, pair, args.count, args.repeats)
    return {"batch": batch, "product": name, "kernel": "partials + sum (summed apart)", "grid": pair[0].grid,
            "splits": splits, "ms": ms, "tflops": 2.0 * M * N * K / ms / 1e9,
            "max_rel_error": float(np.max(np.abs(got - want)) / np.max(np.abs(want)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[128])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()
    import cupy
    import torch

    from litenet.gpu.device import CupyDevice

    dev, rng = CupyDevice(), np.random.default_rng(0)
    report = {"device": f"{dev.name} ({dev.capability}, {dev.sm_count} SMs)", "rows": []}
    split, wide = SplitTiles("bf16", dev.sm_count, 3), GeometryTiles("bf16", dev.sm_count, wide=True)

    def torch_ms(a, b) -> float:
        ta, tb = (torch.tensor(m, dtype=torch.bfloat16, device="cuda") for m in (a, b))
        out = ta @ tb
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(args.count):
                torch.matmul(ta, tb, out=out)
        g.replay()
        times = []
        for _ in range(args.repeats):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / args.count)
        return statistics.median(times)

    for batch in args.batches:
        rows = batch * PATCHES
        for name, product, (M, N, K), weight_grad, n_in, n_out in products(rows):
            # operands already BF16-exact, so both tile families multiply the same values
            x16, W16, dy16 = (bf16_bits(rng.standard_normal(s).astype(np.float32))
                              for s in ((rows, n_in), (n_in, n_out), (rows, n_out)))
            ops = {"x": bf16_value(x16), "W": bf16_value(W16), "dy": bf16_value(dy16)}
            want = expected(product, ops)
            u = rng.standard_normal((rows, n_in)).astype(np.float32)  # GELU's input for the ∂input + GELU′
            if product == "linear_backward_input_gelu":
                want = None  # its output is ∂x·GELU′(u): held to the plain ∂x of "fc1 ∂input"'s check
            d = {k: cupy.asarray(v.astype(np.float32)) for k, v in ops.items()}
            d16 = {k: cupy.asarray(v) for k, v in (("x", x16), ("W", W16), ("dy", dy16))}
            bias = cupy.zeros(n_out, np.float32)
            for family, tiles in (("64 × 64, fp32 operands", split), ("wide 128 × 128, BF16 copies", wide)):
                t = tiles.product(M, N, K, weight_grad)
                if family.startswith("wide") and not t.reads_bf16:
                    continue
                src = d16 if t.reads_bf16 else d
                kernel = VERSIONS[product][t.version]
                scratch = cupy.zeros(max(t.scratch, 1), np.float32)
                counters = cupy.zeros(max(t.counters, 1), np.uint32)
                tail = (i32(rows), i32(n_in), i32(n_out), i32(t.splits), scratch, counters)
                out = cupy.zeros(want.shape if want is not None else (rows, n_in), np.float32)
                if product == "linear_gelu_forward":
                    a = cupy.zeros_like(out)
                    mid = (src["x"], src["W"], bias, out, a) + ((cupy.zeros(out.shape, np.uint16),) if t.reads_bf16 else ())
                elif product == "linear_residual_forward":
                    mid = (src["x"], src["W"], bias, cupy.zeros_like(out), out)
                elif product == "linear_backward_input_gelu":
                    mid = (src["dy"], src["W"], cupy.asarray(u), out) + (
                        (cupy.zeros(out.shape, np.uint16),) if t.reads_bf16 else ())
                elif product == "linear_backward_input":
                    mid = (src["dy"], src["W"], out)
                else:
                    mid = (src["x"], src["dy"], out, cupy.zeros(n_out, np.float32))
                launch = Launch(kernel, t.grid, mid + tail)
                cupy.cuda.Device().synchronize()  # the buffers' zero fills (CuPy's stream) before the launch (the device's)
                dev.launch(launch)
                got = dev.download(out)
                err = None if want is None else float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                ms = timed(cupy, dev, launch, args.count, args.repeats)
                report["rows"].append({"batch": batch, "product": name, "kernel": kernel, "grid": t.grid,
                                       "splits": t.splits, "ms": ms, "tflops": 2.0 * M * N * K / ms / 1e9,
                                       "max_rel_error": err})
                if weight_grad and t.reads_bf16:
                    report["rows"].append(summed_apart(cupy, dev, name, src, out, M, N, K, batch, want, args))
            a, b = (ops["x"].T, ops["dy"]) if weight_grad else (
                (ops["dy"], ops["W"].T) if "input" in product else (ops["x"], ops["W"]))
            ms = torch_ms(a, b)
            report["rows"].append({"batch": batch, "product": name, "kernel": "torch.matmul bf16 (cuBLAS)", "grid": None,
                                   "splits": None, "ms": ms, "tflops": 2.0 * M * N * K / ms / 1e9, "max_rel_error": None})
    print(report["device"])
    print("| batch | product | kernel | grid | splits | µs | TFLOP/s | max rel. error vs NumPy |\n|---:|---|---|---:|---:|---:|---:|---|")
    for r in report["rows"]:
        err = "" if r["max_rel_error"] is None else f"{r['max_rel_error']:.1e}"
        print(f"| {r['batch']} | {r['product']} | {r['kernel']} | {r['grid'] or ''} | {r['splits'] or ''} | "
              f"{1000 * r['ms']:.1f} | {r['tflops']:.0f} | {err} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
