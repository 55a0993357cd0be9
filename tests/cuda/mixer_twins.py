"""The NumPy twin of every fast kernel the Mixer's training step launches, keyed by kernel name and read
from the launch's own arguments (by parameter name, as kernels/*.cu declares them), for the kernel tests
(mixer_cases.py).

A twin recomputes, in float64, what its kernel writes from what the kernel reads — the maths is
litenet.ops (and litenet.train.optim / augment for the training-only steps) — and says where in each
written buffer the values land and how many rounded terms stand behind each (its tolerance,
litenet.train.check_kernels). In training, --check-kernels holds these kernels to the reference tier instead
(litenet/train/check_kernels.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from litenet import ops
from litenet.train import augment
import fused_twins as ref
from litenet.lowering.stats import StatsLayout

ROW = StatsLayout(tensors=0, blocks=0)  # the statistics row's fixed slots (loss, ‖g‖, clipped, ‖g_t‖²…)


@dataclass(frozen=True)
class Out:
    """What a kernel leaves in one buffer it writes: `want` at index `at` of it (() the whole buffer)."""

    want: np.ndarray
    terms: int = 1  # rounded terms behind each value (check.Tolerance)
    at: tuple = ()
    term_norms: np.ndarray | None = None  # ‖terms‖₂ of each value, where its terms may cancel (check.py)


@dataclass(frozen=True)
class KernelTwin:
    """`reads`: the pointer parameters the twin needs, as they are just before the launch (floats in
    float64); `outputs(a)` from those and every scalar parameter: written parameter → Out."""

    reads: tuple[str, ...]
    outputs: Callable[[dict], dict[str, Out]]


MIXER_TWINS: dict[str, KernelTwin] = {}


def twin(kernel: str, *reads: str):
    def register(fn):
        MIXER_TWINS[kernel] = KernelTwin(reads, fn)
        return fn
    return register


def _stats_at(a: dict, slot: int, values) -> tuple[tuple, np.ndarray]:
    """(where, what) of values added at `slot` of the step's statistics row (row ctr[0])."""
    pos, values = int(a["ctr"][0]), np.atleast_1d(np.asarray(values, np.float64))
    at = (pos, slice(slot, slot + len(values)))
    return at, a["stats"][at] + values


def _zeros_like_rows(rows: int, cols: int) -> np.ndarray:
    """An input the ∂x formula does not read (ops' backward functions take x for ∂W too)."""
    return np.broadcast_to(0.0, (rows, cols))


# -- the step's images ---------------------------------------------------------------------------------

@twin("patches_gather", "images", "batches", "flips", "crops", "cutouts", "mixes", "ctr")
def _patches_gather(a):
    """augment.apply (crop, flip, cutout, CutMix) of the step's images, then ops.patchify: (x/255 − shift)·scale."""
    pos, pad, cut = int(a["ctr"][0]), a["pad"], a["cut"]
    x = augment.apply(a["images"], a["batches"][pos], a["flips"][pos], a["crops"][pos] if pad else None, pad,
                      a["cutouts"][pos] if cut else None, cut, a["mixes"][pos] if a["mix"] else None)
    patches = ops.patchify(ops.pixels_to_float(x, np.float64), a["patch"], float(a["shift"]), float(a["scale"]))
    return {"out": Out(patches, 2)}  # a rounded x/255, then a rounded shift and scale


# -- products over the channels (rows × n_in) · (n_in × n_out) -------------------------------------------

@twin("linear_forward", "x", "W", "bias")
def _linear_forward(a):
    x = a["x"].reshape(a["B"], a["n_in"])
    return {"y": Out(ops.linear_forward(x, a["W"], a["bias"]), a["n_in"])}


@twin("linear_gelu_forward", "x", "W", "bias")
def _linear_gelu_forward(a):
    u, act = ref.linear_gelu_forward(a["x"].reshape(a["B"], a["n_in"]), a["W"], a["bias"])
    return {"u": Out(u, a["n_in"]), "a": Out(act, a["n_in"])}


@twin("linear_residual_forward", "x", "W", "bias", "r")
def _linear_residual_forward(a):
    x = a["x"].reshape(a["B"], a["n_in"])
    return {"y": Out(a["r"].reshape(a["B"], a["n_out"]) + ops.linear_forward(x, a["W"], a["bias"]), a["n_in"])}


def _channel_input_grad(a) -> np.ndarray:
    dy = a["dy"].reshape(a["B"], a["n_out"])
    return ops.linear_backward(dy, _zeros_like_rows(a["B"], a["n_in"]), a["W"])[0]


@twin("linear_backward_input", "dy", "W")
def _linear_backward_input(a):
    return {"dx": Out(_channel_input_grad(a), a["n_out"])}


@twin("linear_backward_input_gelu", "dy", "W", "u")
def _linear_backward_input_gelu(a):
    du = ops.gelu_backward(_channel_input_grad(a), a["u"].reshape(a["B"], a["n_in"]))
    return {"du": Out(du, a["n_out"])}


@twin("linear_backward_weight", "x", "dy")
def _linear_backward_weight(a):
    """∂W = xᵀ ∂y, ∂b = Σ_rows ∂y: sums over the batch's rows, which may cancel (check.py), so each
    value also gets ‖terms‖₂ = √((x²)ᵀ ∂y²), the same product of the squares."""
    x, dy = a["x"].reshape(a["B"], a["n_in"]), a["dy"].reshape(a["B"], a["n_out"])
    _, dW, db = ops.linear_backward(dy, x, None, want_dx=False)
    _, dW_sq, db_sq = ops.linear_backward(dy * dy, x * x, None, want_dx=False)
    return {"dW": Out(dW, a["B"], term_norms=np.sqrt(dW_sq)), "db": Out(db, a["B"], term_norms=np.sqrt(db_sq))}


# -- products across the patches on (T, N) matrices: W (T, T'), bias (T') ----------------------------------

@twin("token_linear_gelu_forward", "x", "W", "bias")
def _token_linear_gelu_forward(a):
    u = ops.token_linear_forward(a["x"].reshape(a["T"], a["N"]), a["W"], a["bias"])
    return {"u": Out(u, a["T"]), "a": Out(ops.gelu_forward(u), a["T"])}


@twin("token_linear_residual_forward", "x", "W", "bias", "r")
def _token_linear_residual_forward(a):
    y = ops.token_linear_forward(a["x"].reshape(a["T"], a["N"]), a["W"], a["bias"])
    return {"y": Out(a["r"].reshape(a["T_out"], a["N"]) + y, a["T"])}


def _token_input_grad(a) -> np.ndarray:
    dy = a["dy"].reshape(a["T_out"], a["N"])
    return ops.token_linear_backward(dy, _zeros_like_rows(a["T"], a["N"]), a["W"])[0]


@twin("token_linear_backward_input", "dy", "W")
def _token_linear_backward_input(a):
    return {"dx": Out(_token_input_grad(a), a["T_out"])}


@twin("token_linear_backward_input_gelu", "dy", "W", "u")
def _token_linear_backward_input_gelu(a):
    du = ops.gelu_backward(_token_input_grad(a), a["u"].reshape(a["T"], a["N"]))
    return {"du": Out(du, a["T_out"])}


@twin("token_linear_backward_weight", "x", "dy")
def _token_linear_backward_weight(a):
    """∂W = x ∂yᵀ, ∂b = Σ_n ∂y: sums over all B·d columns, which may cancel, with ‖terms‖₂ as linear's."""
    x, dy = a["x"].reshape(a["T"], a["N"]), a["dy"].reshape(a["T_out"], a["N"])
    _, dW, db = ops.token_linear_backward(dy, x, None, want_dx=False)
    _, dW_sq, db_sq = ops.token_linear_backward(dy * dy, x * x, None, want_dx=False)
    return {"dW": Out(dW, a["N"], term_norms=np.sqrt(dW_sq)), "db": Out(db, a["N"], term_norms=np.sqrt(db_sq))}


# -- LayerNorm, the mean over the patches, the residual joins ------------------------------------------------

@twin("layernorm_forward", "x", "gamma", "beta")
def _layernorm_forward(a):
    y, (n, rstd) = ops.layernorm_forward(a["x"].reshape(a["B"], a["d"]), a["gamma"], a["beta"], float(a["eps"]))
    return {"y": Out(y, a["d"]), "nrm": Out(n, a["d"]), "rstd": Out(rstd[:, 0], a["d"])}


@twin("residual_layernorm_backward", "dy", "nrm", "rstd", "gamma")
def _residual_layernorm_backward(a):
    B, d = a["B"], a["d"]
    cache = (a["nrm"].reshape(B, d), a["rstd"].reshape(B, 1))
    ds, dgamma, dbeta = ops.residual_layernorm_backward(a["dy"].reshape(B, d), cache, a["gamma"])
    return {"ds": Out(ds, d), "dgamma": Out(dgamma, B), "dbeta": Out(dbeta, B)}


@twin("layernorm_backward_join", "dy", "nrm", "rstd", "gamma", "skip", "ctr", "stats")
def _layernorm_backward_join(a):
    """residual_layernorm_backward, then residual_join with the LayerNorm's ∂s as the main path."""
    B, d = a["B"], a["d"]
    cache = (a["nrm"].reshape(B, d), a["rstd"].reshape(B, 1))
    ds, dgamma, dbeta = ops.residual_layernorm_backward(a["dy"].reshape(B, d), cache, a["gamma"])
    dx, sums = ref.residual_join(a["skip"].reshape(B, d), ds)
    at, row = _stats_at(a, a["slot"], sums)
    return {"dx": Out(dx, d), "dgamma": Out(dgamma, B), "dbeta": Out(dbeta, B), "stats": Out(row, B * d, at)}


@twin("mean_tokens_forward", "x")
def _mean_tokens_forward(a):
    return {"y": Out(ops.mean_tokens_forward(a["x"].reshape(a["T"], a["N"])), a["T"])}


@twin("mean_tokens_backward", "dy")
def _mean_tokens_backward(a):
    return {"dx": Out(ops.mean_tokens_backward(a["dy"].reshape(a["N"]), a["T"]))}


@twin("residual_join", "ds", "dx_main", "ctr", "stats")
def _residual_join(a):
    dx, sums = ref.residual_join(a["ds"].reshape(a["n"]), a["dx_main"].reshape(a["n"]))
    at, row = _stats_at(a, a["slot"], sums)
    return {"dx": Out(dx), "stats": Out(row, a["n"], at)}


# -- the loss, the gradient norms, the update -----------------------------------------------------------

@twin("cross_entropy_smoothed", "z", "labels", "batches", "mixes", "ctr", "stats")
def _cross_entropy_smoothed(a):
    B, C, eps, pos = a["B"], a["C"], float(a["eps"]), int(a["ctr"][0])
    z, labels = a["z"].reshape(B, C), a["labels"][a["batches"][pos]].astype(np.int64)
    mix = augment.mixed_targets(labels, a["mixes"][pos]) if a["mix"] else None
    value, _ = ops.cross_entropy_forward(z, labels, eps, mix)
    at, row = _stats_at(a, ROW.loss, value)
    return {"dz": Out(ops.cross_entropy_backward(z, labels, eps, mix), C), "stats": Out(row, B * C, at)}


def _tensor_grad_sq(a) -> np.ndarray:
    o, g = a["offsets"], a["grads"]
    return np.array([float(np.vdot(g[o[t]:o[t + 1]], g[o[t]:o[t + 1]])) for t in range(a["T"])])


@twin("grad_norm_sq", "grads", "offsets", "ctr", "stats")
def _grad_norm_sq(a):
    at, row = _stats_at(a, ROW.grad_sq, _tensor_grad_sq(a))
    return {"stats": Out(row, int(np.max(np.diff(a["offsets"]))), at)}


@twin("adamw_update", "params", "m", "v", "grads", "decay", "lrs", "steps", "ctr", "stats")
def _adamw_update(a):
    """The clip rule from the row's ‖g_t‖² (what grad_norm_sq left there), then reference.adamw_update."""
    pos, T = int(a["ctr"][0]), a["T"]
    grad_sq = a["stats"][pos, ROW.grad_sq:ROW.grad_sq + T]
    norm = float(np.sqrt(grad_sq.sum()))
    clipped = norm > float(a["threshold"])
    g = a["grads"] * (float(a["clip_norm"]) / norm if clipped else 1.0)
    w, m, v = a["params"].copy(), a["m"].copy(), a["v"].copy()
    ref.adamw_update(w, m, v, g, int(a["steps"][pos]), float(a["lrs"][pos]), float(a["beta1"]), float(a["beta2"]),
                     float(a["eps"]), a["decay"])
    at = (pos, slice(ROW.grad_norm, ROW.clipped + 1))
    # w: a decay, a quotient and a difference over rounded m, v (8 roundings); m, v: 2 each
    return {"params": Out(w, 8), "m": Out(m, 2), "v": Out(v, 2), "stats": Out(np.array([norm, float(clipped)]), T, at),
            "ctr": Out(np.array([pos + 1, 0]), 0)}  # the last kernel advances the step
