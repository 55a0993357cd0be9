"""One lowering from the op list to CUDA, for the trainer and the runtime alike.

  walk.py       the op list walked forward and in reverse into reference calls (the reference tier,
                reference.py: one plain kernel per op kind, loss and optimiser, kernels/reference/)
  fast/         the fast tier: rewrites over those regions, each declaring what it covers; where none
                covers a region, its reference calls stay
  arena.py      every tensor placed in one allocation by liveness
  program.py    the pieces: tensors, calls, regions, the printable launch list
  stats.py      the per-step statistics row the kernels fill
  evaluation.py a forward program wrapped to score a split kept on the GPU, a batch per graph replay
`--check-kernels` (fast regions held to their reference calls, reference calls to their NumPy twins) is
the trainer's: litenet/train/check_kernels.py.
"""

from __future__ import annotations

from litenet.lowering.program import Program
from litenet.lowering.walk import forward_program, training_program

KERNEL_TIERS = ("fast", "reference")


def lower_training(model, train, batch: int, capacity: int, kernels: str = "fast", world_size: int | None = None,
                   **options) -> Program:
    """A training step of `model` under `train` at `batch` images, in the `kernels` tier; `options` go to
    the fast tier (precision, sm_count, tile choices: fast/__init__.py). With a `world_size` (a
    communicator's, 1 included) the step is one rank's of a data-parallel run (data_parallel)."""
    program = training_program(model, train, batch, capacity)
    if kernels == "fast":
        from litenet.lowering import fast
        program = fast.rewrite_training(program, model, train, batch, **options)
    return program if world_size is None else data_parallel(program, model, world_size, options.get("sm_count", 1))


def data_parallel(program: Program, model, world_size: int, sm_count: int) -> Program:
    """One rank's step: its gradient, then — after the call at `allreduce_at`, where the communicator sums
    the gradient over the ranks (docs/parallel.md) — the average (grad_average, which also clears the
    rank's own ‖g‖²), ‖g‖² of the average, and only then the clip rule and the update, so every rank
    makes the same clip decision and the same update."""
    import dataclasses
    import math

    import numpy as np

    from litenet.lowering.program import Call, Region

    regions = [r for r in program.regions if r.phase != "norm"]
    at = next(k for k, r in enumerate(regions) if r.phase == "update")
    p, P = program, program.tensors["params"].size
    T = program.tensors["layout"].size - 1
    width = program.tensors["stats"].shape[1]
    row = dict(ctr=p.ref("ctr"), stats=p.ref("stats"), stat_width=np.int32(width))
    average = Call("grad_average", max(1, min(math.ceil(P / 256), 4 * sm_count)),
                   dict(grads=p.ref("grads"), n=np.int32(P), scale=np.float32(1.0 / world_size), T=np.int32(T), **row))
    norm = Call("grad_norm_sq", math.ceil(P / 4096), dict(grads=p.ref("grads"), offsets=p.ref("layout"), T=np.int32(T), **row))
    extra = Region("all-reduced gradient: average, ‖g‖²", "norm", (), [average, norm], [average, norm])
    regions = regions[:at] + [extra] + regions[at:]
    return dataclasses.replace(program, regions=regions, allreduce_at=sum(len(r.calls) for r in regions[:at]))


def lower_forward(model, batch: int, kernels: str = "fast", prefix: str = "eval/", **options) -> Program:
    """A forward pass of `model` for `batch` images in `prefix + "images"`, logits in `prefix + <last op>`."""
    program = forward_program(model, batch, prefix)
    if kernels == "fast":
        from litenet.lowering import fast
        program = fast.rewrite_forward(program, model, batch, prefix, **options)
    return program
