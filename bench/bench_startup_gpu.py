"""Benchmark: how long a CUDA training process takes to start, with an empty kernel cache and a full one.

`make bench-startup` (about 1–3 minutes on one GPU).

For litenet-mixer (BF16) and litenet-base, each in fresh processes:
  cold  the first process with an empty kernel cache (CUPY_CACHE_DIR pointed at an empty folder, which
        holds LiteNet's cubins, litenet-<target>/, and CuPy's own): every kernel the run launches is
        compiled, in parallel (litenet/gpu/kernel_cache.py)
  warm  a second process on the same cache: every cubin is loaded from it
Each process builds the CUDA backend and runs one training step on random images (no data set needed),
and reports, measured from the process's own start (so the interpreter and every import count): when
its imports were done, when the CUDA device was ready, the kernel preparation (kernels, compiled, workers,
seconds, and the CPU seconds of the compiles summed: over the wall time, how many compiled at once) and when its first step was done (synchronised). Targets: warm ≤ 2 s, cold ≤ 8 s to the first step.

With --train (make bench-startup does it), a `litenet train` run of each preset on --limit images for
--epochs on the warm cache: its `kernels` and `process` records from metrics.jsonl (the process's wall
time against the sum of its epochs). On so few images the epochs are short, so that ratio shows what a
start costs, not what a full run's 1.1× target measures.

    python bench/bench_startup_gpu.py --out bench/results/new/startup.md   (+ .json beside it)
    python bench/bench_startup_gpu.py --train --data /tmp/cifar --allow-partial --limit 4096 --out …
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PRESETS = {"litenet-mixer": {"precision": "bf16"}, "litenet-base": {}}  # preset → its overrides
TARGETS = {"cold": 8.0, "warm": 2.0}  # seconds from the process's start to its first step done


def child(preset: str, overrides: dict) -> dict:
    """In a fresh process: build the backend, run one step, say when each stage was done."""
    from litenet.train.progress import process_seconds

    marks = {"started": process_seconds()}
    import numpy as np

    from litenet.gpu.device import CupyDevice
    from litenet.model import init_params, load_preset, override_preset
    from litenet.train import schedule
    from litenet.train.gpu_backend import GpuBackend
    marks["imported"] = process_seconds()
    device = CupyDevice()
    marks["device_ready"] = process_seconds()
    model, train = override_preset(load_preset(preset), overrides)
    backend = GpuBackend(model, train, init_params(model, train.seed), device=device)
    marks["backend_ready"] = process_seconds()
    n = 2 * train.batch_size
    rng = np.random.default_rng(0)
    backend.load_dataset(rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                         rng.integers(0, model.classes, n).astype(np.uint8))
    batches = schedule.epoch_batches(n, train, 0)[:1]
    draws = schedule.epoch_augments(batches, train, 0)
    backend.train_steps(batches, schedule.learning_rates(0, 1, 100, train), **draws)
    loss = float(backend.fetch_stats()["loss"][0])  # waits for the GPU
    marks["first_step_done"] = process_seconds()
    return {"device": device.name, "capability": device.capability, "target": device.target,
            "kernels": backend.kernel_preparation.record(), "marks": {k: round(v, 3) for k, v in marks.items()},
            "loss": loss}


def run_child(preset: str, overrides: dict, cache: Path, timeout: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LITENET_KERNEL_CACHE"}
    env.update(CUPY_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", preset, "--overrides", json.dumps(overrides)],
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no first step within {timeout} s"}
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1],
                "wall_seconds": round(wall, 3)}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "wall_seconds": round(wall, 3)}


def train_run(preset: str, overrides: dict, cache: Path, work: Path, args) -> dict:
    """`litenet train` on the warm cache: its kernels and process records."""
    out = work / f"run-{preset}"
    command = [sys.executable, "-m", "litenet", "train", "--backend", "cuda", "--preset", preset, "--out", str(out),
               "--epochs", str(args.epochs), "--limit", str(args.limit), "--test-limit", str(args.test_limit),
               "--maps", str(work / "maps"), "--no-progress", "--force"]
    command += [x for k, v in overrides.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    command += (["--data", args.data] if args.data else []) + (["--allow-partial"] if args.allow_partial else [])
    env = {k: v for k, v in os.environ.items() if k != "LITENET_KERNEL_CACHE"}
    env.update(CUPY_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.train_timeout, cwd=work)
    except subprocess.TimeoutExpired:
        return {"error": f"litenet train did not finish within {args.train_timeout} s"}
    wall = time.perf_counter() - started
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("litenet train:")]
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1], "lines": lines}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {"wall_seconds": round(wall, 3), "lines": lines,
            "kernels": next((r.get("kernel_preparation") for r in records if r.get("type") == "run"), None),
            "process": next((r for r in records if r.get("type") == "process"), None)}


def table(rows: list[dict]) -> str:
    head = ("| preset | start | kernels | compiled | workers | kernel prep s | Σ compile CPU s | device ready s "
            "| first step done s | target |\n|---|---|---|---|---|---|---|---|---|---|")
    out = [head]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['label']} | {r['start']} | {r['error']} |||||||| ")
            continue
        k, m = r["kernels"], r["marks"]
        done, limit = m["first_step_done"], TARGETS[r["start"]]
        out.append(f"| {r['label']} | {r['start']} | {k['kernels']} | {k['compiled']} | {k['workers'] or '–'} "
                   f"| {k['seconds']:.2f} | {k['compile_seconds']:.2f} | {m['device_ready']:.2f} | {done:.2f} "
                   f"| ≤ {limit:.0f} s: {'yes' if done <= limit else 'no'} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--train", action="store_true", help="also a litenet train run of each preset (needs data)")
    parser.add_argument("--data", help="CIFAR-10 folder or archive for --train (default: litenet's search)")
    parser.add_argument("--allow-partial", action="store_true", help="--train on the training batches present")
    parser.add_argument("--limit", type=int, default=4096, help="training images of a --train run")
    parser.add_argument("--test-limit", type=int, default=1000, help="test images of a --train run")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of a --train run")
    parser.add_argument("--child-timeout", type=int, default=150, help="seconds a start may take")
    parser.add_argument("--train-timeout", type=int, default=120, help="seconds a --train run may take")
    parser.add_argument("--out", default="bench/results/new/startup.md", help="the table (and .json beside it)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, json.loads(args.overrides))))
        return 0

    rows, runs = [], {}
    with tempfile.TemporaryDirectory(prefix="litenet-startup-") as tmp:
        for preset in args.presets:
            overrides = PRESETS[preset]
            label = preset + "".join(f" {v}" for v in overrides.values())
            cache = Path(tmp) / f"cache-{preset}"
            cache.mkdir()
            for start in ("cold", "warm"):
                row = {"label": label, "start": start, **run_child(preset, overrides, cache, args.child_timeout)}
                rows.append(row)
                print(json.dumps(row), flush=True)
            if args.train:
                runs[label] = train_run(preset, overrides, cache, Path(tmp), args)
                print(json.dumps({label: runs[label]}), flush=True)
    device = next((r["device"] for r in rows if "device" in r), "no GPU answered")
    text = [f"# Start-up of a CUDA training process ({device})", "",
            "Seconds from the process's start; cold: an empty kernel cache, warm: the same cache again.", "",
            table(rows)]
    for label, run in runs.items():
        p = run.get("process") or {}
        text += ["", f"`litenet train` {label}, {args.epochs} epochs of {args.limit} images, warm cache: " +
                 (run["error"] if "error" in run else
                  f"process {p.get('seconds')} s for {p.get('epoch_seconds')} s of epochs ({p.get('ratio')}×), "
                  f"{run['wall_seconds']} s seen from outside"), ""]
        text += [f"    {line}" for line in run.get("lines", [])]
    report = "\n".join(text) + "\n"
    print("\n" + report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "train_runs": runs, "targets": TARGETS}, indent=1))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
