"""Data-parallel training on N GPUs against one GPU, same global batch (`make bench-multigpu`; needs ≥ 2 GPUs).

For each global batch B: the plain CUDA backend on one GPU, the same as the only rank of an NCCL
group (the data-parallel step's own cost: two graphs and an all-reduce per step), then 2, 4, …
GPUs (one process per GPU, started by the launcher's run_ranks, NVLink multicast off). Every run
trains the same 100 steps from the same initialisation on the same synthetic data; the weights
after them are compared with the one-GPU run's (max |Δw|, relative to max |w|, and as a fraction
of agreement.weights_bound — ≤ 1 passes), and every rank must hold the same bits. Then images/s:
the median over repeats of CUDA-event-timed runs of steps on rank 0 (its events span the waits
for the other ranks), after warm-up; speed-up and scaling efficiency (images/s on N GPUs ÷ N × the
plain one-GPU images/s). Prints a Markdown table; --out writes it with the raw numbers beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from litenet.model import init_params, load_preset, param_count  # noqa: E402
from litenet.train import schedule  # noqa: E402

DATASET = 16384  # synthetic images on every GPU (uint8)
CHECK_STEPS = 100


def synthetic_data(n: int = DATASET, seed: int = 0):
    """Images with something to learn (a faint pattern per class under noise), the same in every rank."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    patterns = rng.uniform(-1, 1, (10, 32, 32, 3)).astype(np.float32)
    noise = rng.normal(0, 50, (n, 32, 32, 3)).astype(np.float32)
    images = np.clip(128 + 25 * patterns[labels] + noise, 0, 255).astype(np.uint8)
    return images, labels.astype(np.uint8)


def steps_of(train, count: int, n: int = DATASET, first_epoch: int = 0):
    """(batches, lrs, flips) for `count` steps of the trainer's own schedule, epoch after epoch."""
    rows, flips = [], []
    epoch = first_epoch
    while sum(len(r) for r in rows) < count:
        b = schedule.epoch_batches(n, train, epoch)
        f = schedule.epoch_flips(b, train, epoch)
        rows.append(b)
        flips.append(np.zeros(b.shape, bool) if f is None else f)
        epoch += 1
    lrs = schedule.learning_rates(0, count, max(count, 1000), train)
    return np.concatenate(rows)[:count], lrs, np.concatenate(flips)[:count]


def settings(preset: str, batch: int):
    p = load_preset(preset)
    return p.model, dataclasses.replace(p.train, batch_size=batch)


def bench_rank(rank: int, world: int, uid, preset: str, batch: int, time_steps: int, repeats: int, out: str):
    """One rank: the 100 checked steps, the replica check, then the timed runs; rank 0 writes results."""
    import cupy

    from litenet.train.gpu_backend import GpuBackend
    from litenet.train.parallel.comm import agree

    cupy.cuda.Device(rank).use()
    comm = None
    if uid is not None:
        from litenet.train.parallel.nccl import NcclComm
        comm = NcclComm(rank, world, uid, device=rank)
    model, train = settings(preset, batch)
    cuda = GpuBackend(model, train, init_params(model, train.seed), comm=comm)
    cuda.load_dataset(*synthetic_data())
    cuda.train_steps(*steps_of(train, CHECK_STEPS))
    cuda.fetch_stats()
    weights = cuda.state()["params"]
    agree(comm, False, weights)  # every rank holds the same bits (ReplicaMismatch otherwise)
    time_steps = min(time_steps, cuda.capacity)  # no drain (a host wait) inside a timed run
    more = steps_of(train, time_steps * (repeats + 1), first_epoch=50)
    timer_start, timer_end = cupy.cuda.Event(), cupy.cuda.Event()
    seconds = []
    for r in range(repeats + 1):  # the first run warms up
        rows = slice(r * time_steps, (r + 1) * time_steps)
        if comm is not None:
            comm.barrier()
        timer_start.record(cuda.dev.stream)
        cuda.train_steps(more[0][rows], more[1][rows], more[2][rows])
        timer_end.record(cuda.dev.stream)
        timer_end.synchronize()
        cuda.fetch_stats()
        if r:
            seconds.append(cupy.cuda.get_elapsed_time(timer_start, timer_end) / 1e3)
    if rank == 0:
        np.save(Path(out) / "weights.npy", weights)
        Path(out, "times.json").write_text(json.dumps({
            "seconds": seconds, "steps": time_steps, "plan": cuda.plan, "device": cuda.dev.name,
            "split_graphs": cuda._split is not None}))
    if comm is not None:
        comm.close()


def run(world: int, nccl: bool, preset: str, batch: int, time_steps: int, repeats: int) -> dict:
    """One configuration in its own processes; its weights after the checked steps and its timings."""
    import multiprocessing

    from litenet.train.parallel.launch import run_ranks
    from litenet.train.parallel.nccl import unique_id

    with tempfile.TemporaryDirectory() as out:
        uid = unique_id() if nccl else None
        ctx = multiprocessing.get_context("spawn")
        codes = run_ranks(ctx, bench_rank, [(r, world, uid, preset, batch, time_steps, repeats, out)
                                            for r in range(world)])
        if any(codes):
            raise SystemExit(f"bench-multigpu: {world} GPU(s), batch {batch}: ranks exited with {codes}")
        result = json.loads(Path(out, "times.json").read_text())
        result["weights"] = np.load(Path(out) / "weights.npy")
    per_step = statistics.median(result["seconds"]) / result["steps"]
    result.update(world=world, nccl=nccl, batch=batch, step_ms=1e3 * per_step, images_per_s=batch / per_step)
    return result


def main() -> int:
    from litenet.train.parallel.agreement import compare_runs, weights_bound
    from litenet.train.parallel.launch import CHILD_ENV

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="litenet-base")
    parser.add_argument("--batches", type=int, nargs="+", default=[1024, 8192], help="global batch sizes")
    parser.add_argument("--gpus", type=int, nargs="+", help="GPU counts to run (default 2, 4, 8 … up to all)")
    parser.add_argument("--time-steps", type=int, default=200, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the table (Markdown) here and the raw numbers (JSON) beside it")
    args = parser.parse_args()

    import os

    from litenet.train.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        print(f"bench-multigpu: needs CuPy and ≥ 2 GPUs ({reason})", file=sys.stderr)
        return 2
    import cupy
    os.environ.update(CHILD_ENV)  # NVLink multicast off, here (the NCCL id) and in every rank
    available = cupy.cuda.runtime.getDeviceCount()
    counts = args.gpus or [n for n in (2, 4, 8) if n <= available]
    if available < 2 or not counts or max(counts) > available:
        print(f"bench-multigpu: needs the GPUs it is asked for (≥ 2); this machine has {available}", file=sys.stderr)
        return 2
    model, _ = settings(args.preset, args.batches[0])
    lines = [f"# Data-parallel training: {args.preset} ({param_count(model):,} parameters, "
             f"{4 * param_count(model) / 2**20:.1f} MiB all-reduced per step), {CHECK_STEPS} checked steps",
             "", "| global batch | GPUs | per GPU | step (ms) | images/s | speed-up | scaling efficiency | "
             f"weights vs 1 GPU after {CHECK_STEPS} steps: max abs, rel, of bound |", "|---|---|---|---|---|---|---|---|"]
    raw, rows = [], []
    for batch in args.batches:
        if any(batch % n for n in counts):
            print(f"bench-multigpu: batch {batch} does not split over {counts} GPUs; skipped", file=sys.stderr)
            continue
        _, train = settings(args.preset, batch)
        base = run(1, False, args.preset, batch, args.time_steps, args.repeats)
        bound = weights_bound(model, batch, CHECK_STEPS, init_params(model, train.seed), base["weights"])
        rows = [base, run(1, True, args.preset, batch, args.time_steps, args.repeats)]
        rows += [run(n, True, args.preset, batch, args.time_steps, args.repeats) for n in counts]
        for r in rows:
            agreement = compare_runs(r["weights"], base["weights"], bound)
            speedup = r["images_per_s"] / base["images_per_s"]
            name = "1 (plain)" if not r["nccl"] else f"{r['world']} (NCCL)"
            lines.append(f"| {batch} | {name} | {batch // r['world']} | {r['step_ms']:.3f} | {r['images_per_s']:,.0f} | "
                         f"{speedup:.2f}× | {100 * speedup / r['world']:.0f} % | {agreement['max_abs']:.2g}, "
                         f"{agreement['max_rel']:.2g}, {agreement['bound_ratio']:.2g}"
                         f"{'' if agreement['ok'] else ' FAIL'} |")
            raw.append({k: v for k, v in r.items() if k != "weights"} | {"agreement": agreement})
    if not raw:
        return 2
    lines += ["", f"Device: {rows[0]['device']}; plan {rows[0]['plan']}; the N-GPU runs take two graphs and an NCCL "
              f"all-reduce per step; images/s = median of {args.repeats} event-timed runs of {rows[0]['steps']} steps."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(raw, indent=1))
    return 0 if all(r["agreement"]["ok"] for r in raw) else 1


if __name__ == "__main__":
    sys.exit(main())
