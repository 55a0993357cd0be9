"""The trainer's evaluation on the GPU: what scoring a split costs, and whether it could hide behind training.

    python bench/bench_eval_gpu.py batches [--batches 128 256 512 1024] [--images 10000]
    python bench/bench_eval_gpu.py overlap [--batches 1024 256]

`batches`: GpuBackend.logits over `--images` seeded random images (what `litenet train` does twice an
epoch: the test set and the 10,000-image training prefix) at each evaluation batch, with the channel
products as the BF16 step runs them (wide tiles, the copy-only GELU product) and in 64 × 64 tiles with fp32
outputs (`wide=False`); the arena each needs, and each row's logits against the first's. Also the batch
GpuBackend chooses, with activations keep and recompute.

`overlap`: epochs of litenet-mixer-cutmix's step as the trainer runs them (chunks of 50 steps, statistics
and weights read after each) alone; 20,000 images scored alone by a second backend (its own arena and
stream); and both at once, the scoring from a thread, at each evaluation batch and stream priority. Where
"together" is no shorter than the two alone, evaluation cannot hide behind training.

Seeded weights and images: the times do not depend on what the network has learnt. Output: a table, and
JSON with --out (default bench/results/new/eval-<mode>.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from litenet.model import init_params, load_preset  # noqa: E402

PRESET = "litenet-mixer-cutmix"
CHUNK = 50  # the trainer's steps between two read-backs (LoopOptions.chunk_steps)


def hidden_share(epoch: float, evaluation: float, together: float) -> float:
    """The share of the evaluation's time that running it beside the training saved: 0 when together took
    as long as one after the other, 1 when it took no longer than the epoch alone."""
    return float(np.clip((epoch + evaluation - together) / evaluation, 0.0, 1.0)) if evaluation > 0 else 0.0


def time_logits(backend, images: np.ndarray, repeats: int) -> tuple[np.ndarray, list[float]]:
    backend.logits(images)  # the first call captures the graphs
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        logits = backend.logits(images)
        times.append(time.perf_counter() - start)
    return logits, times


def run_batches(args) -> dict:
    from litenet.train.gpu_backend import GpuBackend

    preset = load_preset(PRESET)
    images = np.random.default_rng(0).integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    params = init_params(preset.model, 0)
    out = {"chosen": {}, "rows": []}
    for activations in ("keep", "recompute"):
        train = dataclasses.replace(preset.train, activations=activations)
        chosen = GpuBackend(preset.model, train, params, precision="bf16")
        out["chosen"][activations] = {"eval_batch": chosen.eval_batch, "arena_mib": chosen.arena.size / 2**20}
        print(f"{activations}: evaluates at batch {chosen.eval_batch}, arena {chosen.arena.size / 2**20:.1f} MiB",
              flush=True)
        del chosen
    first = None
    for tiles, wide in (("wide", None), ("64x64", False)):
        for batch in args.batches:
            backend = GpuBackend(preset.model, preset.train, params, precision="bf16", eval_batch=batch, wide=wide)
            logits, times = time_logits(backend, images, args.repeats)
            first = logits if first is None else first
            row = {"tiles": tiles, "eval_batch": batch, "images": args.images, "ms_min": 1e3 * min(times),
                   "ms_median": 1e3 * float(np.median(times)), "arena_mib": backend.arena.size / 2**20,
                   "max_abs_diff_vs_first": float(np.abs(logits - first).max()),
                   "argmax_agree_vs_first": float(np.mean(logits.argmax(1) == first.argmax(1)))}
            out["rows"].append(row)
            print(f"{tiles:6s} batch {batch:5d}: {args.images:,} images in {row['ms_min']:7.2f} ms (median "
                  f"{row['ms_median']:7.2f}); arena {row['arena_mib']:6.1f} MiB; max |Δlogits| vs the first row "
                  f"{row['max_abs_diff_vs_first']:.3g}, argmax agree {row['argmax_agree_vs_first']:.4f}", flush=True)
            del backend
    return out


def run_overlap(args) -> dict:
    from litenet.train import schedule
    from litenet.train.gpu_backend import GpuBackend

    preset = load_preset(PRESET)
    train, rng, n = preset.train, np.random.default_rng(0), 50_000
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    test = rng.integers(0, 256, (10_000, 32, 32, 3), dtype=np.uint8)
    params = init_params(preset.model, 0)
    trainer = GpuBackend(preset.model, train, params, precision="bf16")
    trainer.load_dataset(images, rng.integers(0, 10, n))
    steps = schedule.steps_per_epoch(n, train)

    def epoch(e: int) -> float:
        batches = schedule.epoch_batches(n, train, e)
        draws = schedule.epoch_augments(batches, train, e)
        start = time.perf_counter()
        for s in range(0, steps, CHUNK):
            part = slice(s, min(s + CHUNK, steps))
            lrs = schedule.learning_rates(e * steps + s, part.stop - part.start, steps * train.epochs, train)
            trainer.train_steps(batches[part], lrs, **{k: d[part] for k, d in draws.items()})
            trainer.fetch_stats()
            trainer.weights()
        return time.perf_counter() - start

    def evaluate(backend, seconds: list) -> None:
        start = time.perf_counter()
        backend.logits(test)
        backend.logits(images[:10_000])
        seconds.append(time.perf_counter() - start)

    e = 0
    for e in range(3):  # warm-up: captures, clocks
        epoch(e)
    alone = [epoch(e) for e in range(e + 1, e + 1 + args.repeats)]
    e += args.repeats
    out = {"epoch_ms": 1e3 * float(np.median(alone)), "rows": []}
    print(f"an epoch alone: {out['epoch_ms']:.1f} ms", flush=True)
    for batch in args.batches:
        for priority in ("high", "low"):
            scorer = GpuBackend(preset.model, train, params, precision="bf16", eval_batch=batch)
            if priority == "low":
                scorer.dev.stream = scorer.dev.side  # CupyDevice's lowest-priority stream
            seconds: list[float] = []
            for _ in range(3):
                evaluate(scorer, seconds)
            evaluation = float(np.median(seconds[1:]))
            walls = []
            for _ in range(args.repeats):
                e += 1
                seconds = []
                thread = threading.Thread(target=evaluate, args=(scorer, seconds))
                start = time.perf_counter()
                thread.start()
                epoch(e)
                thread.join()
                walls.append(time.perf_counter() - start)
            together = float(np.median(walls))
            row = {"eval_batch": batch, "priority": priority, "evaluation_ms": 1e3 * evaluation,
                   "together_ms": 1e3 * together, "serial_ms": out["epoch_ms"] + 1e3 * evaluation,
                   "hidden_share": hidden_share(out["epoch_ms"] / 1e3, evaluation, together)}
            out["rows"].append(row)
            print(f"eval batch {batch:5d}, {priority:4s} priority: evaluation alone {row['evaluation_ms']:6.1f} ms; "
                  f"epoch + evaluation together {row['together_ms']:6.1f} ms, one after the other "
                  f"{row['serial_ms']:6.1f} ms: {100 * row['hidden_share']:.0f} % of it hidden", flush=True)
            del scorer
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("batches", "overlap"))
    p.add_argument("--batches", type=int, nargs="+")
    p.add_argument("--images", type=int, default=10_000, help="images scored (batches)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args(argv)
    args.batches = args.batches or ([128, 256, 512, 1024] if args.mode == "batches" else [1024, 256])
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    print(f"{name}, {PRESET}, BF16", flush=True)
    result = (run_batches if args.mode == "batches" else run_overlap)(args)
    path = Path(args.out or REPO / "bench" / "results" / "new" / f"eval-{args.mode}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mode": args.mode, "device": name, **result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
