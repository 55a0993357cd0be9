"""Benchmark: a Mixer training step of the NumPy backend against the same model and recipe in PyTorch eager on the CPU.

Both start from litenet.model.init_params and take the same batches (the preset's crop+flip drawn by
litenet.train.schedule and applied once by litenet.train.augment: the same uint8 images go to both)
at the same learning rates (warm-up, then cosine), with the same number of threads. The peer is
bench/torch_twin.py's TorchMixerTrainer on bench/torch_mixer.py's TorchMixer (nn.Linear /
nn.LayerNorm on (B, T, C)): torch.optim.AdamW with the preset's lr, betas, eps and weight decay (none
on biases nor LayerNorm's γ, β), cross-entropy with the preset's label smoothing.

1. The first --check-steps steps run one after the other on both; their losses (and the weights
   after them) are compared to show it is the same computation.
2. Both go on from there: --warmup untimed steps each, then --steps timed steps each, in --rounds
   interleaved chunks (NumPy chunk, PyTorch chunk, NumPy chunk, …) so drifting machine load hits
   both alike. A step is timed whole (forward, backward, optimiser update; the NumPy backend's step
   also takes its per-step statistics, as it does in training); making the batch is not timed.
   The figure is the median of the per-step times; the ratio is NumPy / PyTorch.

    python bench/bench_cpu_mixer.py --threads 2 --out bench/results/new/cpu-mixer.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import cpu_name  # noqa: E402

# timed steps per side for each preset: about 10 s (litenet-mixer-cpu) and 1–2 min (litenet-mixer)
# of one side's steps on a quiet 2-core CPU
DEFAULT_STEPS = {"litenet-mixer-cpu": 100, "litenet-mixer": 40}
TORCH_KIND = {"weight": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}  # LiteNet's → nn.Module's




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--presets", nargs="+", default=list(DEFAULT_STEPS))
    ap.add_argument("--check-steps", type=int, default=5, help="steps whose losses are compared (default 5)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per side before timing (default 3)")
    ap.add_argument("--steps", type=int, help="timed steps per side (default: per preset, DEFAULT_STEPS)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved chunks the timed steps are split into")
    ap.add_argument("--adamw", choices=("default", "foreach", "fused"), default="default",
                    help="torch.optim.AdamW implementation of the peer (default: what torch picks on the CPU)")
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

    torch.set_num_threads(args.threads)
    ds = open_cifar10(data=args.data, progress=False)
    rows = [measure(load_preset(name), ds, args, np, torch, init_params) for name in args.presets]
    report = render(rows, args, torch.__version__, np.__version__)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")


def measure(preset, ds, args, np, torch, init_params) -> dict:
    """Check then time one preset; returns the figures of its report row."""
    from torch_twin import TorchMixerTrainer

    from litenet.model import param_layout
    from litenet.train import augment, schedule
    from litenet.train.numpy_backend import NumpyBackend

    model, train = preset.model, preset.train
    if model.family != "mixer":
        raise SystemExit(f"{preset.name} is not a Mixer preset (bench/bench_cpu.py times the MLPs)")
    images, labels = ds.train.images, ds.train.labels
    steps = args.steps or DEFAULT_STEPS.get(preset.name, 50)
    total = args.check_steps + args.warmup + steps
    per_epoch = schedule.steps_per_epoch(len(images), train)
    batches = np.concatenate([schedule.epoch_batches(len(images), train, e) for e in range(total // per_epoch + 1)])
    flips = np.concatenate([schedule.epoch_flips(schedule.epoch_batches(len(images), train, e), train, e)
                            for e in range(total // per_epoch + 1)]) if "flip" in train.augmentations else None
    crops = np.concatenate([schedule.epoch_crops(schedule.epoch_batches(len(images), train, e), train, e)
                            for e in range(total // per_epoch + 1)]) if "crop" in train.augmentations else None
    lrs = schedule.learning_rates(0, total, train.epochs * per_epoch, train)

    def batch(s: int):
        x = augment.apply(images, batches[s], None if flips is None else flips[s],
                          None if crops is None else crops[s], train.crop_padding)
        return x, labels[batches[s]].astype(np.int64)

    params = init_params(model, train.seed)
    ours = NumpyBackend(model, train, params)  # (sets glibc's malloc to keep freed memory: litenet/train/heap.py)
    peer = TorchMixerTrainer(model, train, params, args.adamw)
    times = {"numpy": [], "torch": []}
    losses = {"numpy": [], "torch": []}

    def run(side: str, s: int, timed: bool) -> None:
        x, y = batch(s)
        if side == "numpy":
            start = time.perf_counter()
            loss = ours.step(x, y, float(lrs[s]))["loss"]
            elapsed = time.perf_counter() - start
        else:
            xt, yt = torch.from_numpy(x), torch.from_numpy(y)
            start = time.perf_counter()
            loss = float(peer.step(xt, yt, float(lrs[s])))  # CPU eager: the step is done when it returns
            elapsed = time.perf_counter() - start
        losses[side].append(loss)
        if timed:
            times[side].append(elapsed)

    load_before = os.getloadavg()
    print(f"{preset.name}: {args.check_steps} checked steps", flush=True)
    for s in range(args.check_steps):
        run("numpy", s, False)
        run("torch", s, False)
    check = {"losses_numpy": losses["numpy"][:args.check_steps], "losses_torch": losses["torch"][:args.check_steps]}
    diff = np.abs(np.array(check["losses_numpy"]) - np.array(check["losses_torch"]))
    check["max_abs"] = float(diff.max()) if len(diff) else float("nan")
    check["max_rel"] = float((diff / np.abs(check["losses_torch"])).max()) if len(diff) else float("nan")
    check["weights_max_abs"] = weights_difference(ours.params, peer.net, model, param_layout, np)
    print(f"  losses NumPy {check['losses_numpy']}\n  losses torch {check['losses_torch']}\n"
          f"  max |Δloss| {check['max_abs']:.2e}, max |Δweight| after them {check['weights_max_abs']:.2e}", flush=True)

    first = args.check_steps
    for side in ("numpy", "torch"):
        for s in range(first, first + args.warmup):
            run(side, s, False)
    first += args.warmup
    bounds = np.linspace(first, first + steps, args.rounds + 1).astype(int)
    chunks = {"numpy": [], "torch": []}
    for r, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        for side in ("numpy", "torch"):
            for s in range(lo, hi):
                run(side, s, True)
            chunks[side].append(1e3 * statistics.median(times[side][-(hi - lo):]))
        print(f"  round {r + 1}/{args.rounds}: NumPy {chunks['numpy'][-1]:.1f} ms/step, "
              f"PyTorch {chunks['torch'][-1]:.1f} ms/step (load {os.getloadavg()[0]:.2f})", flush=True)
    med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    mean = {k: 1e3 * statistics.fmean(v) for k, v in times.items()}
    later = np.abs(np.array(losses["numpy"]) - np.array(losses["torch"]))
    print(f"{preset.name}: NumPy {med['numpy']:.1f} ms/step, PyTorch {med['torch']:.1f} ms/step, "
          f"ratio {med['numpy'] / med['torch']:.2f}", flush=True)
    return {"name": preset.name, "model": model, "train": train, "steps": steps, "check": check, "median": med,
            "mean": mean, "chunks": chunks, "load_before": load_before, "load_after": os.getloadavg(),
            "all_steps_max_abs": float(later.max()), "all_steps": len(later)}


def weights_difference(flat, net, model, param_layout, np) -> float:
    """max |w_NumPy − w_PyTorch| over every parameter, the PyTorch Linear weights transposed back to (in, out)."""
    named = dict(net.named_parameters())
    worst = 0.0
    for p in param_layout(model):
        mine = flat[p.offset:p.offset + p.size].reshape(p.shape)
        module, kind = p.name.rsplit(".", 1)  # TorchMixer's modules carry LiteNet's op names
        theirs = named[f"{module}.{TORCH_KIND[kind]}"].detach().numpy()
        theirs = theirs.T if kind == "weight" else theirs
        worst = max(worst, float(np.abs(mine - theirs).max()))
    return worst


def render(rows, args, torch_version, numpy_version) -> str:
    cmd = (f"python bench/bench_cpu_mixer.py --threads {args.threads} --presets {' '.join(args.presets)} "
           f"--check-steps {args.check_steps} --warmup {args.warmup} --rounds {args.rounds}"
           + (f" --steps {args.steps}" if args.steps else "") + (f" --adamw {args.adamw}" if args.adamw != "default" else ""))
    lines = [
        f"# Mixer training step: NumPy backend against PyTorch eager on the CPU — {time.strftime('%Y-%m-%d')}",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores; threads: {args.threads} for both "
        f"(OPENBLAS/OMP/MKL_NUM_THREADS and torch.set_num_threads). NumPy {numpy_version} (OpenBLAS), "
        f"PyTorch {torch_version}, torch.optim.AdamW {args.adamw}. fp32.",
        f"Command: `{cmd}`",
        "",
        "| preset | batch | timed steps per side | NumPy backend (ms/step, median) | PyTorch eager (ms/step, median) "
        "| ratio NumPy/PyTorch | means (ms/step) | 1-min load before → after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        med, mean = r["median"], r["mean"]
        lines.append(f"| {r['name']} | {r['train'].batch_size} | {r['steps']} | {med['numpy']:.1f} | {med['torch']:.1f} | "
                     f"{med['numpy'] / med['torch']:.2f} | {mean['numpy']:.1f} / {mean['torch']:.1f} | "
                     f"{r['load_before'][0]:.2f} → {r['load_after'][0]:.2f} |")
    lines += ["", "Per round (median ms/step of each chunk, NumPy / PyTorch):", ""]
    for r in rows:
        lines.append(f"- {r['name']}: " + "; ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(r["chunks"]["numpy"],
                                                                                     r["chunks"]["torch"])))
    lines += ["", "Same computation: the first steps from the same weights and the same (augmented) batches:", ""]
    for r in rows:
        c = r["check"]
        lines.append(f"- {r['name']}: losses NumPy {', '.join(f'{v:.7f}' for v in c['losses_numpy'])}; PyTorch "
                     f"{', '.join(f'{v:.7f}' for v in c['losses_torch'])}; max |Δloss| {c['max_abs']:.1e} "
                     f"(relative {c['max_rel']:.1e}); max |Δweight| after them {c['weights_max_abs']:.1e}. Over all "
                     f"{r['all_steps']} steps of the run (the two trajectories then drift apart by rounding): "
                     f"max |Δloss| {r['all_steps_max_abs']:.1e}.")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
