"""How close an N-rank run must end to a one-rank run of the same global batch: the computed
float32 tolerances for the weights and the per-step statistics after T steps, and the comparison.

Both runs compute the same mean gradient; they differ only in rounding (N partial means summed
and scaled by 1/N, against one mean over B). A forward-error model with litenet.train.check_kernels's
constants (u = 2⁻²⁴, safety 16, √n growth for n rounded terms):

  weights     |Δw| ≤ 16·u·(√T·max|w_T| + √(chain·T)·max|w_T − w_0|), the maxima per tensor
              — every update rounds each weight once (T roundings of a value of size |w|), and
              each update's content carries the rounding of one step's chain of sums
              (`chain_terms`), T times, in proportion to how far the weights moved;
  statistics  |Δs| ≤ atol + rtol·|s|, rtol = 16·u·√(chain·T), atol = rtol·max|s| (check.Tolerance).

The model leaves out how the training dynamics amplify a difference; for 100 steps of a smooth
loss that amplification is small (docs/parallel.md gives the measured numbers: the N-rank runs
stay as close to the one-rank run as float32 NumPy stays to float64). A mistake — a missing or
wrong 1/N, a rank training on the wrong images, a clip decision from one rank's own norm — moves
the weights by a whole update, orders of magnitude beyond the bound.
"""

from __future__ import annotations

import math

import numpy as np

from litenet.model import ModelConfig, param_layout
from litenet.train.check_kernels import FLOAT32, Tolerance


def chain_terms(model: ModelConfig, batch: int) -> int:
    """Rounded terms behind one step's gradient (tests/cuda/backend_helpers counts it the same way):
    the embedding's sums, four products per block each way, the batch reductions."""
    return 3 * model.embed_inputs + 4 * model.blocks * (model.width + model.hidden) + 3 * batch


def weights_bound(model: ModelConfig, batch: int, steps: int, start: np.ndarray, end: np.ndarray,
                  tol: Tolerance = FLOAT32) -> np.ndarray:
    """The largest |Δw| allowed for every weight, between two runs whose reference moved the weights
    start → end; max|w| and max|w_T − w_0| are taken per parameter tensor (as check.py's atol)."""
    t = max(1, steps)
    end64 = np.asarray(end, np.float64)
    moved = np.abs(end64 - np.asarray(start, np.float64))
    bound = np.empty_like(end64)
    for p in param_layout(model):
        part = slice(p.offset, p.offset + p.size)
        bound[part] = tol.safety * tol.unit * (math.sqrt(t) * np.max(np.abs(end64[part]))
                                               + math.sqrt(chain_terms(model, batch) * t) * np.max(moved[part]))
    return bound


def stats_bounds(model: ModelConfig, batch: int, steps: int, want: np.ndarray,
                 tol: Tolerance = FLOAT32) -> tuple[float, float]:
    """(atol, rtol) for a per-step statistic of step ≤ `steps` (loss, ‖g‖, ‖g_t‖², path sums)."""
    return tol.bounds(chain_terms(model, batch) * max(1, steps), np.asarray(want, np.float64))


def compare_runs(got: np.ndarray, want: np.ndarray, atol, rtol: float = 0.0) -> dict:
    """max |got − want|, that relative to max |want|, and the largest error as a fraction of the
    allowed atol + rtol·|want| (≤ 1 passes)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shapes differ: {got.shape} against {want.shape}")
    if not want.size:
        return {"max_abs": 0.0, "max_rel": 0.0, "bound_ratio": 0.0, "ok": True}
    err = np.abs(got - want)
    scale = float(np.max(np.abs(want)))
    ratio = float(np.max(err / np.maximum(atol + rtol * np.abs(want), np.finfo(np.float64).tiny)))
    return {"max_abs": float(err.max()), "max_rel": float(err.max() / scale) if scale > 0 else 0.0,
            "bound_ratio": ratio, "ok": ratio <= 1.0}
