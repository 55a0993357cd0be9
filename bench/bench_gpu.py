"""LiteNet's CUDA training step against the same model in PyTorch on the same GPU (`make bench-gpu`).

fp32 everywhere, TF32 off. For each preset and batch size: LiteNet (its chosen plan, the other
plan, and one step per graph), PyTorch eager, and PyTorch with the whole step captured in one CUDA
graph. Time per step = median over repeats of (CUDA-event time of a run of steps) / steps, after
warm-up; peak device memory (LiteNet: arena + dataset; PyTorch: max_memory_allocated, which
includes its copy of the same dataset). The floor of a step — its FLOPs at the measured fp32
matmul rate, its unavoidable bytes at the measured copy bandwidth, its launches at the measured
graph-replay cost per kernel — is measured in the same run. Prints a Markdown table; --out writes
it with the raw numbers (JSON) beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from litenet.model import ModelConfig, TrainConfig, init_params, load_preset, param_count  # noqa: E402

PRESETS = {"litenet-seed": load_preset("litenet-seed").model,
           "wide": ModelConfig(embed="full", width=256, hidden=512, blocks=2)}
BATCHES = (64, 512, 4096)
DATASET = 16384  # images on the GPU (uint8), the same for every contender


def median_ms(run, steps_per_run: int, repeats: int, stream_record, before=None) -> float:
    """Median over `repeats` of event-timed runs, divided by the steps in a run; `before` runs
    untimed ahead of each (LiteNet: fetch_stats, so the statistics ring never drains mid-run)."""
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        times.append(stream_record(run) / steps_per_run)
    return statistics.median(times)


def torch_timer(torch):
    def record(run):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    return record


def cupy_timer(cupy, stream):
    def record(run):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end)
    return record


def ceilings(torch, cupy) -> dict:
    """Copy bandwidth, fp32 matmul rate (TF32 off) and the graph-replay cost of one empty kernel."""
    timer = torch_timer(torch)
    a = torch.empty(2 ** 28, device="cuda")  # 1 GiB
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    copy_ms = median_ms(lambda: b.copy_(a), 1, 10, timer)
    del a, b
    n = 8192
    x, y = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    for _ in range(3):
        x @ y
    mm_ms = median_ms(lambda: x @ y, 1, 10, timer)
    del x, y
    empty = cupy.RawKernel('extern "C" __global__ void empty_kernel() {}', "empty_kernel")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        empty((1,), (32,), ())
        stream.begin_capture()
        for _ in range(64):
            empty((1,), (32,), ())
        graph = stream.end_capture()
    for _ in range(10):
        graph.launch(stream)
    launch_ms = median_ms(lambda: [graph.launch(stream) for _ in range(10)], 640, 10, cupy_timer(cupy, stream))
    torch.cuda.empty_cache()
    return {"copy_GBps": 2 * 2 ** 30 / copy_ms / 1e6, "fp32_TFLOPs": 2 * n ** 3 / mm_ms / 1e9,
            "kernel_in_graph_us": launch_ms * 1e3}


def step_cost(model: ModelConfig, batch: int) -> tuple[float, float]:
    """(FLOPs, least bytes) of one training step. FLOPs: the products (2 per multiply-add) of the
    forward, ∂input and ∂weight passes (the embedding's ∂input is never needed). Bytes: the batch's
    images read once, and per parameter w, g, v read and w, v, g written once (6 × 4 bytes)."""
    B, d, H, C, K, L = batch, model.width, model.hidden, model.classes, model.embed_inputs, model.blocks
    macs = 2 * B * K * d + 6 * L * B * d * H + 3 * B * d * C
    return 2.0 * macs, B * 3072 + 24.0 * param_count(model)


def bench_litenet(cupy, model, train, params, images, labels, sched, plan, steps_per_graph, steps, repeats):
    from litenet.train.gpu_backend import GpuBackend

    backend = GpuBackend(model, train, params, plan=plan, steps_per_graph=steps_per_graph)
    backend.load_dataset(images, labels)
    batches, lrs, flips = sched
    backend.train_steps(batches[:2 * steps], lrs[:2 * steps], flips[:2 * steps])  # warm-up, capture
    backend.fetch_stats()
    cursor = [0]

    def run():
        i = cursor[0] % (len(batches) - steps)
        backend.train_steps(batches[i:i + steps], lrs[i:i + steps], flips[i:i + steps])
        cursor[0] += steps
    ms = median_ms(run, steps, repeats, cupy_timer(cupy, backend.dev.stream), before=backend.fetch_stats)
    backend.train_steps(batches[:steps], lrs[:steps], flips[:steps])
    loss = backend.fetch_stats()["loss"]
    report = backend.memory_report()
    g = backend.geometry
    out = {"ms": ms, "plan": backend.plan, "embed": g.embed_variant,
           "tall": [k for k, v in g.gemms.items() if v.tall], "arena_bytes": report["arena_bytes"],
           "memory_bytes": report["arena_bytes"] + report["dataset_bytes"], "last_loss": float(loss[-1]),
           "launches_per_step": len(backend._steps)}
    del backend
    cupy.get_default_memory_pool().free_all_blocks()
    return out


def bench_torch(torch, model, train, params, images, labels, sched, graphed, steps, repeats):
    from gpu_torch_twin import GraphedStep, TorchTwin

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    twin = TorchTwin(model, train, params, images, labels, *sched)
    step = GraphedStep(twin) if graphed else twin.step
    for _ in range(5):
        step()

    def run():  # no host synchronisation inside: the twin reads its step counter on the device
        for _ in range(steps):
            step()
    ms = median_ms(run, steps, repeats, torch_timer(torch))
    torch.cuda.synchronize()
    out = {"ms": ms, "memory_bytes": int(torch.cuda.max_memory_allocated())}
    del twin, step
    torch.cuda.empty_cache()
    return out


def first_loss_agreement(torch, model, train, params, images, labels, sched) -> tuple[float, float]:
    """The loss of step 0 from LiteNet and from the PyTorch twin: checks the twin is the same model."""
    from gpu_torch_twin import TorchTwin
    from litenet.train.gpu_backend import GpuBackend

    backend = GpuBackend(model, train, params)
    backend.load_dataset(images, labels)
    backend.train_steps(*(a[:1] for a in sched))
    mine = float(backend.fetch_stats()["loss"][0])
    twin = TorchTwin(model, train, params, images, labels, *sched)
    idx, flip = twin.batches[0], twin.flips[0]
    with torch.no_grad():
        theirs = float(twin.loss(twin.forward(twin.images[idx], flip), twin.labels[idx]))
    return mine, theirs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the table (Markdown) here, and the numbers as .json beside it")
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    parser.add_argument("--presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    import cupy
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    ceiling = ceilings(torch, cupy)
    print(f"# ceilings: copy {ceiling['copy_GBps']:.0f} GB/s, fp32 matmul (TF32 off) {ceiling['fp32_TFLOPs']:.1f} "
          f"TFLOP/s, one kernel in a graph {ceiling['kernel_in_graph_us']:.2f} µs", flush=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (DATASET, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, DATASET)
    rows = []
    for preset in args.presets:
        model = PRESETS[preset]
        params = init_params(model, 0)
        for batch in args.batches:
            train = TrainConfig(batch_size=batch, lr_base=0.01)
            n_sched = 4096 if batch <= 512 else 512
            sched = (rng.integers(0, DATASET, (n_sched, batch)), np.full(n_sched, train.lr, np.float32),
                     rng.random((n_sched, batch)) < 0.5)
            steps = {64: 200, 512: 100, 4096: 20}.get(batch, 50)
            started = time.perf_counter()
            mine, theirs = first_loss_agreement(torch, model, train, params, images, labels, sched)
            row = {"preset": preset, "batch": batch, "loss0_litenet": mine, "loss0_torch": theirs}
            row["litenet"] = bench_litenet(cupy, model, train, params, images, labels, sched, "auto", 8, steps, args.repeats)
            other = "ops" if row["litenet"]["plan"] == "fused" else "fused"
            try:
                row["litenet_other"] = bench_litenet(cupy, model, train, params, images, labels, sched, other, 8, steps,
                                                     args.repeats)
            except Exception as exc:  # the fused plan may not fit a model's rows in shared memory
                row["litenet_other"] = {"plan": other, "error": str(exc)}
            row["litenet_1graph"] = bench_litenet(cupy, model, train, params, images, labels, sched, "auto", 1, steps,
                                                  args.repeats)
            row["torch_graph"] = bench_torch(torch, model, train, params, images, labels, sched, True, steps, args.repeats)
            row["torch_eager"] = bench_torch(torch, model, train, params, images, labels, sched, False,
                                             max(10, steps // 4), max(5, args.repeats // 2))
            flops, least_bytes = step_cost(model, batch)
            row["floor_ms"] = {"flops": flops / ceiling["fp32_TFLOPs"] / 1e9,
                               "bytes": least_bytes / ceiling["copy_GBps"] / 1e6,
                               "launches": row["litenet"]["launches_per_step"] * ceiling["kernel_in_graph_us"] / 1e3}
            row["flops"], row["least_bytes"] = flops, least_bytes
            rows.append(row)
            print(json.dumps(row), f"({time.perf_counter() - started:.0f} s)", flush=True)
    table = render(rows, ceiling)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps({"ceilings": ceiling, "rows": rows}, indent=1))


def render(rows, ceiling) -> str:
    mib = lambda b: f"{b / 2 ** 20:.1f}"  # noqa: E731
    lines = ["| preset | batch | LiteNet ms (plan) | other plan ms | 1-step graphs ms | PyTorch graph ms | PyTorch eager ms "
             "| graph / LiteNet | eager / LiteNet | LiteNet img/s | memory MiB LiteNet / PyTorch | floor ms (FLOP / bytes / launches) "
             "| LiteNet / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ln, tg, te = r["litenet"], r["torch_graph"], r["torch_eager"]
        other = r["litenet_other"]
        other_ms = f"{other['ms']:.4f} ({other['plan']})" if "ms" in other else f"— ({other['plan']})"
        floor = max(r["floor_ms"].values())
        lines.append(
            f"| {r['preset']} | {r['batch']} | {ln['ms']:.4f} ({ln['plan']}) | {other_ms} | {r['litenet_1graph']['ms']:.4f} "
            f"| {tg['ms']:.4f} | {te['ms']:.4f} | {tg['ms'] / ln['ms']:.1f}× | {te['ms'] / ln['ms']:.1f}× "
            f"| {r['batch'] / ln['ms'] * 1e3:,.0f} | {mib(ln['memory_bytes'])} / {mib(tg['memory_bytes'])} "
            f"| {r['floor_ms']['flops']:.4f} / {r['floor_ms']['bytes']:.4f} / {r['floor_ms']['launches']:.4f} "
            f"| {ln['ms'] / floor:.1f}× |")
    lines.append("")
    lines.append(f"Ceilings measured in the same run: device-to-device copy {ceiling['copy_GBps']:.0f} GB/s (read + write), "
                 f"fp32 matmul 8192³ with TF32 off {ceiling['fp32_TFLOPs']:.1f} TFLOP/s, one empty kernel replayed in a "
                 f"CUDA graph {ceiling['kernel_in_graph_us']:.2f} µs.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
