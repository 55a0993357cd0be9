"""The NCCL path on one GPU (`make gpu-parallel-check`): 100 steps of the plain CUDA backend against
the same 100 steps as the only rank of an NCCL group (NcclComm, world size 1), which takes the whole
data-parallel step — the gradient kernels' graph, the NCCL all-reduce on the step's stream, the
graph of grad_average, grad_norm_sq and the update — and the statistics' reduction. One case per
plan (litenet-seed at batch 256 runs the fused plan, litenet-base at 512 the ops plan).

Prints one line. Exit 0 when every case's weights are bit-identical or within the computed float32
bound (agreement.weights_bound), 1 when not, 2 without a GPU or NCCL. A world of one sums one buffer
and scales it by 1, so the update reads the same gradient; only the fused plan's ‖g_t‖² is measured
a second time in another order, which can move the clip rule's scale by a rounding on a step where
it fires — then the weights agree within the bound rather than bit for bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_multigpu import settings, steps_of, synthetic_data  # noqa: E402

from litenet.errors import LiteNetError  # noqa: E402
from litenet.model import init_params  # noqa: E402
from litenet.train.parallel.launch import CHILD_ENV  # noqa: E402

STEPS = 100
IMAGES = synthetic_data(8192)  # made once: every run trains on the same images


def train(preset: str, batch: int, comm=None):
    from litenet.train.gpu_backend import GpuBackend

    model, train = settings(preset, batch)
    cuda = GpuBackend(model, train, init_params(model, train.seed), comm=comm)
    cuda.load_dataset(*IMAGES)
    cuda.train_steps(*steps_of(train, STEPS, 8192))
    return cuda, cuda.fetch_stats(), cuda.state()["params"]


def check(preset: str, batch: int, comm) -> tuple[bool, str, str]:
    """(passed, what was found, the GPU's name) for one preset and batch."""
    from litenet.train.parallel.agreement import compare_runs, weights_bound

    plain, plain_stats, want = train(preset, batch)
    ranked, stats, got = train(preset, batch, comm)
    differ = int(np.count_nonzero(got != want))
    start = init_params(plain.model, plain.train.seed)
    result = compare_runs(got, want, weights_bound(plain.model, batch, STEPS, start, want))
    clipped = int(plain_stats["clipped"].sum())
    same_clips = bool(np.array_equal(stats["clipped"], plain_stats["clipped"]))
    loss = float(np.max(np.abs(stats["loss"] - plain_stats["loss"])))
    split = ranked._split is not None  # the step really ran as two graphs around the all-reduce
    ok = result["ok"] and same_clips and split and np.all(np.isfinite(stats["loss"]))
    weights = "bit-identical" if differ == 0 else (f"{differ} of {got.size} differ, max |Δw| {result['max_abs']:.2g} "
                                                   f"= {result['bound_ratio']:.2g} of the bound")
    return ok, (f"{preset} batch {batch} {ranked.plan}: {weights}, loss max |Δ| {loss:.2g}, clipped {clipped} "
                f"steps{'' if same_clips else ' (DIFFERENT)'}{'' if split else ', NOT split graphs'}"), plain.dev.name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["litenet-seed:256", "litenet-base:512"], help="preset:batch")
    args = parser.parse_args()
    os.environ.update(CHILD_ENV)  # NVLink multicast off, before NCCL starts
    started = time.perf_counter()
    try:
        from litenet.train.backends import cuda_unavailable_reason
        reason = cuda_unavailable_reason()
        if reason:
            raise LiteNetError(reason)
        from litenet.train.parallel.nccl import NcclComm, nccl_version, unique_id
        comm = NcclComm(0, 1, unique_id(), device=0)
    except LiteNetError as exc:
        print(f"gpu-parallel-check: SKIP ({exc})")
        return 2
    results = [check(p, int(b), comm) for p, b in (c.split(":") for c in args.cases)]
    comm.close()
    version = nccl_version()
    nccl = f"NCCL {version // 10000}.{version // 100 % 100}.{version % 100}" if version and version >= 10000 else \
        f"NCCL {version}"
    ok = all(r[0] for r in results)
    print(f"gpu-parallel-check: {'PASS' if ok else 'FAIL'} — {results[0][2]}, {nccl}, {STEPS} steps, plain vs "
          f"NcclComm world 1: " + "; ".join(r[1] for r in results) + f" ({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
