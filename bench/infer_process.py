"""Benchmark: the wall time of a whole `litenet-infer IMAGE --model DIR` process, fp32 and int8, interleaved.

bench/bench_infer_cpu.py times the same processes for the shipped MLP (all runs of one command, then
the next) beside its PyTorch twin; this times them for any exported model folder (a Mixer too), one
run of each command per round so background load falls on both alike, and reports medians.

    python bench/infer_process.py --model /tmp/mixer-export --image cat.png --runs 20
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="exported model folder (model.onnx, model.int8.onnx)")
    ap.add_argument("--image", required=True)
    ap.add_argument("--runs", type=int, default=20, help="rounds; each runs every command once (default 20)")
    args = ap.parse_args()
    commands = {
        "fp32": [sys.executable, "-m", "litenet.runtime", args.image, "--model", args.model],
        "int8": [sys.executable, "-m", "litenet.runtime", args.image, "--model", args.model, "--precision", "int8"],
        "floor: python -c 'import onnxruntime'": [sys.executable, "-c", "import onnxruntime"],
    }
    # As bench_infer_cpu.py: pip compiles an installed wheel's modules; a checkout run under
    # PYTHONDONTWRITEBYTECODE would recompile them in every process and overstate the start-up.
    compileall.compile_dir(str(REPO / "litenet"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    outputs: dict[str, str] = {}
    load_before = os.getloadavg()[0]
    for _ in range(args.runs):
        for name, cmd in commands.items():
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(usage.ru_utime + usage.ru_stime)
            outputs[name] = proc.stdout.read().decode().strip()
            if status != 0:
                raise SystemExit(f"{cmd} failed ({status}): {proc.stderr.read().decode()}")
    print(f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f}; {args.runs} interleaved rounds")
    print("| command | wall, median (s) | wall, min (s) | CPU user+sys, median (s) | output |")
    print("|---|---|---|---|---|")
    for name in commands:
        print(f"| {name} | {statistics.median(walls[name]):.3f} | {min(walls[name]):.3f} | "
              f"{statistics.median(cpus[name]):.3f} | {outputs[name] or '-'} |")


if __name__ == "__main__":
    main()
