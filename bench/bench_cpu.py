"""Benchmark: one training epoch of the NumPy backend against the same model in PyTorch on the CPU.

Both train from the same initial weights on the same batches (same order, same lrs) with the same
number of threads; the first steps' losses are compared to show it is the same computation. The
two are timed alternately, a full epoch each, and the median of the repeats is reported.

    python bench/bench_cpu.py --threads 2 --repeats 3 --out bench/results/new/cpu.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--presets", nargs="+", default=["litenet-seed", "litenet-base"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, help="steps per timed run (default: one epoch, 781)")
    ap.add_argument("--data", help="CIFAR-10 location (litenet data's search order otherwise)")
    ap.add_argument("--out", help="write a markdown report here")
    args = ap.parse_args()
    # Thread counts must be fixed before NumPy and PyTorch start their pools.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import torch

    from litenet.data import open_cifar10
    from litenet.model import init_params, load_preset
    from litenet.train import schedule
    from litenet.train.numpy_backend import NumpyBackend
    from torch_twin import TorchTrainer

    torch.set_num_threads(args.threads)
    ds = open_cifar10(data=args.data, progress=False)
    images, labels = ds.train.images, ds.train.labels
    rows = []
    for name in args.presets:
        preset = load_preset(name)
        model, train = preset.model, preset.train
        batches = schedule.epoch_batches(len(images), train, 0)[:args.steps]
        lrs = schedule.learning_rates(0, len(batches), len(batches), train)
        params = init_params(model, train.seed)

        def run_numpy():
            backend = NumpyBackend(model, train, params)
            backend.load_dataset(images, labels)
            t = time.perf_counter()
            backend.train_steps(batches, lrs)
            return time.perf_counter() - t, backend.fetch_stats()["loss"]

        def run_torch():
            trainer = TorchTrainer(model, train, params)
            losses = []
            t = time.perf_counter()
            for idx, lr in zip(batches, lrs):
                x = torch.from_numpy(images[idx])
                y = torch.from_numpy(labels[idx].astype(np.int64))
                losses.append(trainer.step(x, y, float(lr)))
            elapsed = time.perf_counter() - t
            return elapsed, np.array([float(v) for v in losses])

        times = {"numpy": [], "torch": []}
        for _ in range(args.repeats):  # alternate, so drifting machine load hits both alike
            t_np, loss_np = run_numpy()
            t_torch, loss_torch = run_torch()
            times["numpy"].append(t_np)
            times["torch"].append(t_torch)
        agree = float(np.max(np.abs(loss_np[:20] - loss_torch[:20]) / np.abs(loss_torch[:20])))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((name, len(batches), med["numpy"], med["torch"], agree, times))
        print(f"{name}: {len(batches)} steps  NumPy {med['numpy']:.2f} s  PyTorch {med['torch']:.2f} s  "
              f"ratio {med['numpy'] / med['torch']:.2f}  (first 20 losses agree to {agree:.1e} relative)", flush=True)
    report = render(rows, args, torch.__version__, np.__version__)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")


def render(rows, args, torch_version, numpy_version) -> str:
    lines = [
        f"# NumPy backend against PyTorch on the CPU — {time.strftime('%Y-%m-%d')}",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; threads: {args.threads} "
        f"for both. NumPy {numpy_version} (OpenBLAS), PyTorch {torch_version}. Batch 64, fp32. "
        f"Load average when the report was written: {os.getloadavg()[0]:.1f} (other jobs share the "
        "cores: compare the ratio, measured alternately, rather than the absolute seconds).",
        f"Command: `python bench/bench_cpu.py --threads {args.threads} --repeats {args.repeats}`",
        "",
        "| preset | steps | NumPy backend (s) | PyTorch eager (s) | ratio NumPy/PyTorch | losses agree (rel) |",
        "|---|---|---|---|---|---|",
    ]
    for name, steps, t_np, t_torch, agree, _ in rows:
        lines.append(f"| {name} | {steps} | {t_np:.2f} | {t_torch:.2f} | {t_np / t_torch:.2f} | {agree:.1e} |")
    lines += ["", "Every repeat (s): " + "; ".join(
        f"{name}: NumPy {', '.join(f'{t:.2f}' for t in times['numpy'])} / PyTorch "
        f"{', '.join(f'{t:.2f}' for t in times['torch'])}" for name, *_, times in rows), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
