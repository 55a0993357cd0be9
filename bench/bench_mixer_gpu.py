"""Benchmark: LiteNet's CUDA kernels training the Mixer against the same model and recipe in PyTorch,
eager and torch.compile (TF32 on, data and augmentation on the GPU), timed in the same run.

    python bench/bench_mixer_gpu.py steps --batches 256 1024 --out steps.json
        per-step time (median of CUDA-event-timed runs of 20 steps) of LiteNet in fp32/tf32/bf16 and of
        PyTorch eager and compiled; peak GPU memory of each (the uint8 data set aside; LiteNet's: its
        arena); FLOP floors. A LiteNet contender is litenet[:precision[:activations]], e.g.
        litenet:bf16:recompute (TrainConfig.activations: the smaller arena, blocks re-run in the backward)
    python bench/bench_mixer_gpu.py train [--data DIR] --epochs 40 --runs litenet:bf16 torch torch-compile
        whole training runs on CIFAR-10 with the preset's recipe: test accuracy after every epoch and
        the training time to reach each of --targets (80 %, 82 %) — evaluation time excluded throughout;
        also each contender's usual epoch and what its first epoch took beyond it (compilation), with
        the times to the targets less that (one_time_costs)
Both print a table and write JSON (--out). Both contenders train on the same batches, flips, crop
offsets and cutout / CutMix draws (litenet.train.schedule) from the same initial weights; PyTorch gets
each epoch's draws on the GPU before its steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from litenet.model import init_params, load_preset, override  # noqa: E402
from litenet.train import schedule  # noqa: E402

PEAK_TFLOPS = {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0}  # H200 SXM dense, NVIDIA's data sheet
PEAK_TBPS = 4.8


def step_flops(model, batch: int) -> float:
    """Multiply-adds ×2 of one training step's products: the forward's, ×3 (∂x and ∂W)."""
    T, d, th, ch, L, C = model.tokens, model.width, model.token_hidden, model.channel_hidden, model.blocks, model.classes
    per_image = T * model.patch ** 2 * 3 * d + L * (2 * th * T * d + 2 * T * d * ch) + d * C
    return 3 * 2 * per_image * batch


def litenet_settings(name: str) -> dict:
    """"litenet:bf16:recompute" → {"precision": "bf16", "activations": "recompute"} (fp32, keep if left out)."""
    parts = name.split(":")[1:]
    return {"precision": parts[0] if parts else "fp32", "activations": parts[1] if len(parts) > 1 else "keep"}


def contenders(names: list[str], model, train, params, images, labels):
    """name → an object with step(rows, lrs) (rows: the step's batch, flips, crops) and logits(images)."""
    import torch

    from litenet.train.gpu_backend import GpuBackend
    from torch_mixer import TorchTrainer

    out = {}
    for name in names:
        if name.startswith("litenet"):
            backend = GpuBackend(model, override(train, litenet_settings(name)), params)
            backend.load_dataset(images, labels)
            out[name] = backend
        else:
            out[name] = TorchTrainer(model, train, params, images, labels, compile=name == "torch-compile")
    torch.cuda.synchronize()
    return out


def run_steps(contender, batches, flips, crops, lrs, cutouts=None, mixes=None) -> None:
    """Enqueue the steps (LiteNet: its schedule; PyTorch: one step call each)."""
    if hasattr(contender, "train_steps"):
        contender.train_steps(batches, lrs, flips, crops, cutouts, mixes)
        contender.fetch_stats()
        return
    import torch
    dev = contender.images.device
    # Every draw goes to the GPU once, before the steps, as a PyTorch user with the data on the GPU would
    # do it: a copy from pageable host memory per step makes PyTorch wait for the GPU each time (a
    # stream synchronisation), so the host could not enqueue ahead of it.
    batches, flips, crops = (torch.as_tensor(np.asarray(a), device=dev) for a in (batches, flips, crops.astype(np.int64)))
    cutouts = [None] * len(batches) if cutouts is None else torch.as_tensor(cutouts, device=dev)
    mixes = [None] * len(batches) if mixes is None else torch.as_tensor(mixes.astype(np.int64), device=dev)
    for b, f, c, lr, cut, mix in zip(batches, flips, crops, lrs, cutouts, mixes):
        contender.step(b, f, c, float(lr), cut, mix)


def timed(contender, batches, flips, crops, lrs, cutouts=None, mixes=None) -> float:
    """Seconds for the steps, the GPU drained before and after (CUDA events would not see CuPy's stream)."""
    import torch
    import cupy
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    run_steps(contender, batches, flips, crops, lrs, cutouts, mixes)
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t


def steps_mode(args) -> dict:
    import torch
    preset = load_preset(args.preset)
    rows = []
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (8192, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, len(images)).astype(np.uint8)
    for batch in args.batches:
        train = override(preset.train, {"batch_size": batch})
        params = init_params(preset.model, train.seed)
        n = args.steps
        batches = np.stack([rng.permutation(len(images))[:batch] for _ in range(n)])
        flips, crops = rng.random(batches.shape) < 0.5, rng.integers(0, 9, (*batches.shape, 2)).astype(np.int8)
        lrs = np.full(n, train.lr)
        for name in args.contenders:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            c = contenders([name], preset.model, train, params, images, labels)[name]
            timed(c, batches[:3], flips[:3], crops[:3], lrs[:3])  # warm-up (compilation, graph capture)
            times = [timed(c, batches, flips, crops, lrs) / n for _ in range(args.repeats)]
            if hasattr(c, "memory_report"):
                memory = c.memory_report()["arena_bytes"]
            else:
                memory = torch.cuda.max_memory_allocated() - base - c.images.nbytes
            ms = 1e3 * statistics.median(times)
            precision = name.split(":")[1] if ":" in name else ("tf32" if name.startswith("torch") else "fp32")
            floor_ms = 1e3 * step_flops(preset.model, batch) / (PEAK_TFLOPS[precision] * 1e12)
            rows.append({"batch": batch, "contender": name, "ms_per_step": ms, "memory_bytes": int(memory),
                         "flop_floor_ms": floor_ms, "times_floor": ms / floor_ms})
            print(f"batch {batch:5d}  {name:22s} {ms:8.3f} ms/step  {memory / 2**20:8.1f} MiB  "
                  f"{ms / floor_ms:6.1f}× its {precision} FLOP floor", flush=True)
            del c
    return {"rows": rows, "gpu": torch.cuda.get_device_name()}


def one_time_costs(history: list[dict], reached: dict) -> dict:
    """What the first epoch took beyond a usual one — compilation: LiteNet's kernels by NVRTC where
    CuPy's kernel cache is cold (about 19 s on a fresh H200 host), torch.compile's graphs, PyTorch's
    library start-up — and the times to the targets without it, so contenders compare alike whichever
    of them found its caches warm."""
    epochs = np.diff([0.0] + [h["train_seconds"] for h in history])
    if len(epochs) < 2:
        return {}
    usual = float(np.median(epochs[1:]))
    extra = max(0.0, float(epochs[0]) - usual)
    return {"usual_epoch_seconds": round(usual, 3), "first_epoch_extra_seconds": round(extra, 3),
            "seconds_to_targets_without_first_extra": {str(k): round(v - extra, 3) for k, v in reached.items()}}


def train_mode(args) -> dict:
    import torch

    from litenet.data import open_cifar10
    preset = load_preset(args.preset)
    changes = {"epochs": args.epochs, **dict(item.split("=", 1) for item in args.set)}
    model, train = override(preset.model, changes), override(preset.train, changes)
    ds = open_cifar10(data=args.data, progress=False)
    images, labels = np.asarray(ds.train.images), np.asarray(ds.train.labels)
    test_x, test_y = np.asarray(ds.test.images), np.asarray(ds.test.labels)
    params = init_params(model, train.seed)
    spe = schedule.steps_per_epoch(len(images), train)
    total = spe * train.epochs
    results = {}
    for name in args.runs:
        c = contenders([name], model, train, params, images, labels)[name]
        history, train_s, reached = [], 0.0, {}
        for epoch in range(train.epochs):
            batches = schedule.epoch_batches(len(images), train, epoch)
            draws = schedule.epoch_augments(batches, train, epoch)  # those switched on
            flips = draws.get("flips", np.zeros(batches.shape, bool))
            crops = draws.get("crops", np.zeros((*batches.shape, 2), np.int8))
            lrs = schedule.learning_rates(epoch * spe, spe, total, train)
            train_s += timed(c, batches, flips, crops, lrs, draws.get("cutouts"), draws.get("mixes"))
            accuracy = float(np.mean(c.logits(test_x).argmax(1) == test_y))
            history.append({"epoch": epoch + 1, "train_seconds": round(train_s, 3), "test_accuracy": accuracy})
            for target in args.targets:
                if target not in reached and accuracy >= target:
                    reached[target] = round(train_s, 3)
            print(f"{name:16s} epoch {epoch + 1:3d}  {train_s:7.1f} s  test {100 * accuracy:.2f}%", flush=True)
            if args.stop_at is not None and accuracy >= args.stop_at:
                break  # the time to the target is known; the rest of the schedule would not change it
        results[name] = {"history": history, "seconds_to_targets": {str(k): v for k, v in reached.items()},
                         "final_accuracy": history[-1]["test_accuracy"], "stopped_early": len(history) < train.epochs,
                         **one_time_costs(history, reached)}
        del c
        torch.cuda.empty_cache()
    return {"epochs": train.epochs, "targets": args.targets, "runs": results, "gpu": torch.cuda.get_device_name()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("steps")
    s.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    s.add_argument("--contenders", nargs="+",
                   default=["litenet:fp32", "litenet:tf32", "litenet:bf16", "litenet:bf16:recompute", "torch",
                            "torch-compile"])
    s.add_argument("--steps", type=int, default=20)
    s.add_argument("--repeats", type=int, default=5)
    t = sub.add_parser("train")
    t.add_argument("--data", help="CIFAR-10 location (default: litenet data's search order)")
    t.add_argument("--epochs", type=int, default=40)
    t.add_argument("--targets", type=float, nargs="+", default=[0.80, 0.82])
    t.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="override preset settings (model or train), e.g. augment=none input_scale=4")
    t.add_argument("--runs", nargs="+", default=["litenet:bf16", "torch", "torch-compile"])
    t.add_argument("--stop-at", type=float, metavar="ACC",
                   help="end a contender's run after the first epoch at ≥ ACC test accuracy (e.g. 0.82)")
    for p in (s, t):
        p.add_argument("--preset", default="litenet-mixer")
        p.add_argument("--out")
    args = ap.parse_args()
    result = steps_mode(args) if args.mode == "steps" else train_mode(args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
