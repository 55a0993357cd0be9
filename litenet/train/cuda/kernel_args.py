"""A launch's arguments by parameter name, put in the order its kernel declares them.

plans.py names every argument it passes (`DU=v["U"]`), and `launch` orders them by the kernel's
`extern "C" __global__` declaration in kernels/*.cu (litenet.gpu.sources), so a parameter list is
written once, in the `.cu` file, and a reader of a plan sees which buffer each parameter receives.
That matters because the arena's names are shared and reused (docs/cuda.md): fused_weight_grads
reads ∂u from U and ∂z from Z, which fused_rows overwrote in place; the ops plan's G1 holds the ∂y
arriving at a block and then the ∂x leaving it.

Runs of parameters that several kernels take are small groups, passed whole (their fields are
named as the kernels name those parameters):

  Pixels    the step's images and how they become s(x): the dataset, the step's batch indices
            and mirror flags, the step counter that picks the step's row of them, the embedding
            kind (full RGB or channel sum) and the input shift (embed_inputs, embed_forward_rows)
  SplitK    a reduction cut into `splits` ranges: the partial tiles (scratch) and the arrival
            counts (counters) the last block of a tile sums them with (every matrix product,
            LayerNorm's ∂γ/∂β)
  StatsRow  where a kernel adds to the step's statistics: the step counter (which row), the
            statistics buffer and its row width (losses, residual_join, gradient norms, the update,
            the fused kernels)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from litenet.gpu import sources
from litenet.gpu.launch import Launch


class Pixels(NamedTuple):
    images: np.ndarray  # uint8 (N, 32, 32, 3): the dataset (or one evaluation chunk)
    batches: np.ndarray  # int32 (steps, B): each step's image indices
    flips: np.ndarray  # uint8 (steps, B): each step's mirror flags
    ctr: np.ndarray  # int32 (2,): the step counter that picks the row of batches and flips
    full: np.int32  # 1: the full RGB embedding, 0: the channel sum
    shift: np.float32  # subtracted from every scaled pixel


class SplitK(NamedTuple):
    splits: np.int32  # how many ranges the reduction is cut into
    scratch: np.ndarray  # float32: the ranges' partial tiles
    counters: np.ndarray  # uint32: arrivals, TILE_COUNTERS per tile (always left at zero)


class StatsRow(NamedTuple):
    ctr: np.ndarray  # int32 (2,): the step counter, which picks the statistics row
    stats: np.ndarray  # float32 (steps, stat_width): one row per step
    stat_width: np.int32  # StatsLayout.width


def kernel_args(kernel: str, *groups: NamedTuple, **named) -> tuple:
    """`kernel`'s arguments in its parameter order, from the groups' fields and `named` (by parameter name).

    A parameter given twice, missed, or not the kernel's is a bug in the plan: TypeError.
    """
    given = dict(named)
    for group in groups:
        for name, value in group._asdict().items():
            if name in given:
                raise TypeError(f"{kernel}: parameter {name} given twice")
            given[name] = value
    params = [p.name for p in sources.signatures(sources.kernel_file(kernel))[kernel]]
    missing, unknown = [p for p in params if p not in given], [n for n in given if n not in params]
    if missing or unknown:
        raise TypeError(f"{kernel}: missing {missing}, not its parameters {unknown}")
    return tuple(given[p] for p in params)


def launch(kernel: str, grid: int, *groups: NamedTuple, shared: int = 0, check=None, **named) -> Launch:
    """A Launch of `kernel` whose arguments are given by name (kernel_args)."""
    return Launch(kernel, grid, kernel_args(kernel, *groups, **named), shared, check)
