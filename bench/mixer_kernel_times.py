"""Each launch of the Mixer's training step timed alone on the GPU, summed by kernel: where a step's time goes.

    python bench/mixer_kernel_times.py --batch 256 --precision bf16
Every launch of one step is captured as a CUDA graph of `--count` copies (after a full warm-up step)
and the graph replayed `--repeats` times between two CUDA events: the median per launch, with no host
launch time in it, is reported, grouped by kernel, largest first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_infer_gpu import launch_graph_ms

from litenet.model import init_params, load_preset, override
from litenet.train.gpu_backend import GpuBackend


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="litenet-mixer")
    ap.add_argument("--batch", type=int, nargs="+", default=[256])
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--count", type=int, default=10, help="copies of the launch in its graph")
    ap.add_argument("--repeats", type=int, default=5, help="graph replays timed (median)")
    ap.add_argument("--slowest", type=int, default=25, help="list this many of the slowest launches")
    ap.add_argument("--out")
    args = ap.parse_args()
    preset, report = load_preset(args.preset), {}
    for batch in args.batch:
        train = override(preset.train, {"batch_size": batch, "precision": args.precision})
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (4 * batch, 32, 32, 3), dtype=np.uint8)
        be = GpuBackend(preset.model, train, init_params(preset.model, 0), graph=False)
        be.load_dataset(images, rng.integers(0, 10, len(images)).astype(np.uint8))
        be.train_steps(np.arange(batch)[None], np.full(1, 1e-3))
        be.fetch_stats()
        dev, per_kernel, total, launches = be.dev, defaultdict(float), 0.0, []
        for position, launch in enumerate(be._steps):
            ms = launch_graph_ms(dev, launch, args.count, args.repeats)
            per_kernel[launch.kernel] += ms
            total += ms
            # the scalar arguments (sizes, strides, flags) tell the launches of one kernel apart
            scalars = [a.item() for a in launch.args if isinstance(a, (np.int32, np.float32))]
            launches.append({"position": position, "kernel": launch.kernel, "grid": launch.grid,
                             "scalars": scalars, "ms": ms})
        rows = sorted(per_kernel.items(), key=lambda kv: -kv[1])
        print(f"batch {batch} {args.precision}: {total:.3f} ms summed over {len(be._steps)} launches")
        for name, ms in rows:
            print(f"  {name:40s} {ms:8.3f} ms  {100 * ms / total:5.1f} %")
        print("  the slowest launches:")
        for one in sorted(launches, key=lambda row: -row["ms"])[:args.slowest]:
            print(f"    #{one['position']:<4d} {one['kernel']:36s} grid {one['grid']:<6d} {one['ms']:7.3f} ms  {one['scalars']}")
        report[batch] = {"total_ms": total, "kernels": dict(rows), "launches": len(be._steps),
                         "each_launch": launches}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
