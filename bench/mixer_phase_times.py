"""Where the Mixer's one-launch forward spends its time: each phase's work and each grid barrier's wait,
from globaltimer marks every block takes as it starts and as it finishes each phase (kernels/infer_mixer.cu
built with LITENET_PHASE_TIMES; the product's build has no marks). Nsight Compute times a launch, not the
phases inside it.

    python bench/mixer_phase_times.py --out bench/results/new/mixer-phase-times.md
    python bench/mixer_phase_times.py --models models/litenet-mixer --batches 1 2 8

Without --models it builds litenet-mixer with seeded weights and a calibrated int8 plan, as
bench_infer_mixer_gpu.py does (the timings do not depend on the weights' values). Per precision and batch,
and per kind of phase (embed, token MLP, channel fc1, channel fc2, head), averaged over the phases of that
kind in one forward: the slowest block's work, the median block's, and the barrier after the phase — from
the last block's arrival to the first block's start of the next phase, and from there to the last block's.
The forward is the shortest of --repeats marked ones; the unmarked one-launch forward's device time is
given beside it (the marks add a __syncthreads a phase). Needs CuPy and a GPU; about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_infer_gpu import LiteNet  # noqa: E402
from bench_infer_mixer_gpu import build_model, synthetic_images  # noqa: E402

from litenet.runtime.model_files import ModelFiles  # noqa: E402

KINDS = ("embed", "token", "channel fc1", "channel fc2", "head")


def kind_of(p: int, phases: int) -> str:
    """The kind of phase p of the one launch: 0 embed, then token / fc1 / fc2 of each block, the head last."""
    return "embed" if p == 0 else "head" if p == phases - 1 else KINDS[1 + (p - 1) % 3]


def phase_table(marks: np.ndarray, phases: int, grid: int) -> dict:
    """µs per kind of phase from one forward's marks ((phase, block, start | end) globaltimer ns)."""
    t = marks.reshape(phases, grid, 2).astype(np.int64)
    t -= t[0, :, 0].min()
    rows = {kind: {"work_max": [], "work_median": [], "release": [], "departure": []} for kind in KINDS}
    for p in range(phases):
        row, work = rows[kind_of(p, phases)], t[p, :, 1] - t[p, :, 0]
        row["work_max"].append(work.max() / 1e3)
        row["work_median"].append(float(np.median(work)) / 1e3)
        if p + 1 < phases:  # the barrier: the last arrival → the first start of the next phase → the last start
            row["release"].append((t[p + 1, :, 0].min() - t[p, :, 1].max()) / 1e3)
            row["departure"].append((t[p + 1, :, 0].max() - t[p + 1, :, 0].min()) / 1e3)
    out = {kind: {name: float(np.mean(v)) if v else 0.0 for name, v in row.items()} | {"count": len(row["work_max"])}
           for kind, row in rows.items()}
    out["total_us"] = float(t[-1, :, 1].max() / 1e3)
    return out


def marked_forward(folder: Path, precision: str, images: np.ndarray, repeats: int) -> dict:
    """The phase table of the shortest of `repeats` marked one-launch forwards of `images`."""
    import cupy

    from litenet.gpu.device import CupyDevice
    from litenet.runtime.cuda_backend import CudaInference

    be = CudaInference(ModelFiles.locate(folder), precision, device=CupyDevice(defines=("LITENET_PHASE_TIMES",)),
                       mode="fused")
    run = be.prepare(len(images))
    (launch,) = run.launches
    phases = 3 * be.model.blocks + 2  # (kernels/infer_mixer.cu: embed, three a block, the head)
    be.dev.upload(run.pixels, images.reshape(len(images), 3072))
    marks = cupy.ndarray((phases * launch.grid * 2,), cupy.uint64,
                         memptr=be.dev.module_global(launch.kernel, "ml_phase_times"))
    tables = []
    for _ in range(repeats):
        be.execute(run)
        be.dev.stream.synchronize()
        tables.append(phase_table(marks.get(), phases, launch.grid))
    best = min(tables, key=lambda table: table["total_us"])
    return best | {"grid": launch.grid, "phase_count": phases}


def render(results: dict, device: str) -> str:
    lines = [f"Device: {device}. µs per phase of each kind, averaged over the forward's phases of that kind "
             "(slowest block's work / median block's; the barrier after it: last arrival → first start of the "
             "next phase, then → last start).", "",
             "| precision | batch | one launch µs (unmarked) | marked forward µs | phase | count "
             "| work, slowest block | work, median block | barrier: to first start | then to last start |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for (precision, batch), r in results.items():
        for kind in KINDS:
            k = r["phases"][kind]
            lines.append(f"| {precision} | {batch} | {r['plain_us']:.1f} | {r['phases']['total_us']:.1f} | {kind} | "
                         f"{k['count']} | {k['work_max']:.2f} | {k['work_median']:.2f} | {k['release']:.2f} | "
                         f"{k['departure']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="a Mixer folder (weights, config, int8 plan); default: litenet-mixer, "
                                         "built with seeded weights")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=20, help="marked forwards (the shortest is kept)")
    parser.add_argument("--out", help="write the table (Markdown) here and the numbers as .json beside it")
    args = parser.parse_args()
    import cupy

    folder = Path(args.models) if args.models else build_model(Path(tempfile.mkdtemp()) / "litenet-mixer",
                                                               "litenet-mixer")
    images = synthetic_images(max(args.batches), seed=2)
    results = {}
    for precision in ("fp32", "int8"):
        plain = LiteNet(folder, precision, mode="fused")
        for batch in args.batches:
            x = images[:batch]
            plain_ms = plain.device_ms(x, count=10, repeats=5)
            results[(precision, batch)] = {"plain_us": 1e3 * plain_ms,
                                           "phases": marked_forward(folder, precision, x, args.repeats)}
            print(f"  {precision} batch {batch}: {json.dumps(results[(precision, batch)], default=float)}", flush=True)
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    table = render(results, device.decode() if isinstance(device, bytes) else str(device))
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table)
        out.with_suffix(".json").write_text(json.dumps({f"{p} {b}": r for (p, b), r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
