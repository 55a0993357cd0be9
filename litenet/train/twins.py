"""The NumPy twin of every reference kernel (kernels/reference/): what it must write, from the values its
arguments held before it ran, computed in float64 with litenet.ops' functions and the optimisers of
litenet.train.optim — the one definition of each formula. `--check-kernels` holds each reference
launch to its twin (check_kernels.py); the tests hold every kernel to it on random inputs.

A twin takes `a`: the call's arguments by parameter name (pointer arguments as float64 / integer host
arrays shaped as the call's Refs, scalars as Python numbers) and returns {parameter: (expected value,
terms[, term norms])}: the values the kernel writes through that pointer, how many rounded terms stand
behind each, and — for sums whose terms may cancel (check_kernels.py) — each value's ‖terms‖₂.
"""

from __future__ import annotations

import numpy as np

from litenet import ops
from litenet.lowering.stats import StatsLayout

IMAGE = (32, 32, 3)
GRAD_SQ = StatsLayout.grad_sq  # the first ‖g‖² slot of a statistics row (the fast kernels' LN_STAT_GRAD_SQ)


def _images(a, key="images"):
    return a[key].reshape(-1, *IMAGE).astype(np.uint8)


def _float_images(a, key="images"):
    return ops.pixels_to_float(_images(a, key), np.float64)


def images_gather(a):
    from litenet.train import augment

    B, s = a["B"], int(a["ctr"].ravel()[0])
    rows = lambda name, tail: a[name].reshape(-1, B, *tail)[s]  # noqa: E731
    dataset = a["dataset"].reshape(-1, *IMAGE).astype(np.uint8)
    crops = rows("crops", (2,)) if a["pad"] else None
    cutouts = rows("cutouts", (2,)) if a["cut"] else None
    mixes = rows("mixes", (5,)) if a["mix"] else None
    out = augment.apply(dataset, rows("batches", ()), rows("flips", ()), crops, a["pad"], cutouts, a["cut"], mixes)
    return {"out": (out, 0)}


def labels_gather(a):
    from litenet.train import augment

    B, s = a["B"], int(a["ctr"].ravel()[0])
    indices = a["batches"].reshape(-1, B)[s]
    labels = a["dataset_labels"].ravel().astype(np.int64)[indices]
    if a["mix"]:
        partners, shares = augment.mixed_targets(labels, a["mixes"].reshape(-1, B, 5)[s])
    else:
        partners, shares = labels, np.zeros(B)
    return {"labels": (labels, 0), "partners": (partners, 0), "shares": (shares, 1)}


def pixel_rows_forward(a):
    embed = "full" if a["full"] else "channel-sum"
    return {"rows": (ops.embed_inputs(_float_images(a), embed, a["shift"]), 3)}


def pixel_rows_backward(a):
    return {"dimages": (ops.embed_inputs_backward(a["drows"].reshape(a["B"], -1), "full" if a["full"] else "channel-sum"), 1)}


def patches_forward(a):
    return {"out": (ops.patchify(_float_images(a), a["patch"], a["shift"], a["scale"]), 2)}


def patches_backward(a):
    T = (32 // a["patch"]) ** 2
    dp = a["dpatches"].reshape(T, a["B"], -1)
    return {"dimages": (ops.patchify_backward(dp, a["patch"], a["scale"]), 1)}


def _matrix(x, rows):
    return x.reshape(rows, -1)


def _norms(A, B):
    """‖terms‖₂ of each value of the product A·B: √((A∘A)·(B∘B))."""
    return np.sqrt((A * A) @ (B * B))


def linear_forward(a):
    x, W = _matrix(a["x"], a["rows"]), a["W"].reshape(a["n_in"], a["n_out"])
    b = a["bias"].ravel()[:a["n_out"]] if a["has_bias"] else None
    return {"y": (ops.linear_forward(x, W, b), a["n_in"] + 1, _norms(x, W))}


def linear_backward_input(a):
    dy, W = _matrix(a["dy"], a["rows"]), a["W"].reshape(a["n_in"], a["n_out"])
    return {"dx": (dy @ W.T, a["n_out"], _norms(dy, W.T))}


def linear_backward_weight(a):
    x, dy = _matrix(a["x"], a["rows"]), _matrix(a["dy"], a["rows"])
    return {"dW": (x.T @ dy, a["rows"], _norms(x.T, dy))}


def linear_backward_bias(a):
    dy = _matrix(a["dy"], a["rows"])
    return {"db": (dy.sum(axis=0), a["rows"], np.sqrt((dy * dy).sum(axis=0)))}


def token_linear_forward(a):
    x, W = a["x"].reshape(a["T"], a["N"]), a["W"].reshape(a["T"], a["T_out"])
    return {"y": (ops.token_linear_forward(x, W, a["bias"].ravel()), a["T"] + 1, _norms(W.T, x))}


def token_linear_backward_input(a):
    dy, W = a["dy"].reshape(a["T_out"], a["N"]), a["W"].reshape(a["T"], a["T_out"])
    return {"dx": (W @ dy, a["T_out"], _norms(W, dy))}


def token_linear_backward_weight(a):
    x, dy = a["x"].reshape(a["T"], a["N"]), a["dy"].reshape(a["T_out"], a["N"])
    return {"dW": (x @ dy.T, a["N"], _norms(x, dy.T))}


def token_linear_backward_bias(a):
    dy = a["dy"].reshape(a["T_out"], a["N"])
    return {"db": (dy.sum(axis=1), a["N"], np.sqrt((dy * dy).sum(axis=1)))}


def gelu_forward(a):
    return {"a": (ops.gelu_forward(a["u"]), 4)}


def gelu_backward(a):
    return {"du": (ops.gelu_backward(a["da"], a["u"]), 8)}


def residual_forward(a):
    return {"y": (a["x"] + a["branch"], 1, np.abs(a["x"]) + np.abs(a["branch"]))}


def gradient_sum(a):
    return {"out": (a["a"] + a["b"], 1, np.abs(a["a"]) + np.abs(a["b"]))}


def path_sums(a):
    stats = a["stats"].copy()
    ds, dm, s = a["ds"].ravel(), a["dm"].ravel(), int(a["ctr"].ravel()[0])
    row = stats.reshape(-1, a["stat_width"])[s]
    row[a["slot"]:a["slot"] + 3] = (ds @ ds, dm @ dm, ds @ dm)
    return {"stats": (stats, a["n"])}


def layernorm_rows(a):
    s = a["s"].reshape(a["rows"], a["d"])
    mu = s.mean(axis=1)
    return {"mean": (mu, a["d"], np.sqrt((s * s).sum(axis=1)) / a["d"]),
            "rstd": (1.0 / np.sqrt(((s - mu[:, None]) ** 2).mean(axis=1) + a["eps"]), 2 * a["d"])}


def layernorm_forward(a):
    s = a["s"].reshape(a["rows"], a["d"])
    rstd = a["rstd"].ravel()[:, None]
    n = (s - a["mean"].ravel()[:, None]) * rstd
    size = (np.abs(s) + np.abs(a["mean"].ravel()[:, None])) * rstd  # s − μ may cancel
    return {"nrm": (n, 2, size), "y": (a["gamma"].ravel() * n + a["beta"].ravel(), 3,
                                       np.abs(a["gamma"].ravel()) * size + np.abs(a["beta"].ravel()))}


def layernorm_backward_rows(a):
    dn = a["dy"].reshape(a["rows"], a["d"]) * a["gamma"].ravel()
    n = a["nrm"].reshape(a["rows"], a["d"])
    norms = np.stack([np.sqrt((dn * dn).sum(axis=1)), np.sqrt(((dn * n) ** 2).sum(axis=1))], axis=1) / a["d"]
    return {"means": (np.stack([dn.mean(axis=1), (dn * n).mean(axis=1)], axis=1), a["d"], norms)}


def layernorm_backward_input(a):
    dy, n = a["dy"].reshape(a["rows"], a["d"]), a["nrm"].reshape(a["rows"], a["d"])
    rstd, dn, m = a["rstd"].reshape(-1, 1), dy * a["gamma"].ravel(), a["means"].reshape(-1, 2)
    ds, _, _ = ops.layernorm_backward(dy, (n, rstd), a["gamma"].ravel())
    size = rstd * (np.abs(dn) + np.abs(m[:, :1]) + np.abs(n * m[:, 1:]))  # the three terms may cancel
    return {"ds": (ds, 2 * a["d"], size)}


def layernorm_backward_params(a):
    dy, n = a["dy"].reshape(a["rows"], a["d"]), a["nrm"].reshape(a["rows"], a["d"])
    return {"dgamma": ((dy * n).sum(axis=0), a["rows"], np.sqrt(((dy * n) ** 2).sum(axis=0))),
            "dbeta": (dy.sum(axis=0), a["rows"], np.sqrt((dy * dy).sum(axis=0)))}


def mean_tokens_forward(a):
    x = a["x"].reshape(a["T"], a["N"])
    return {"y": (ops.mean_tokens_forward(x), a["T"], np.sqrt((x * x).sum(axis=0)) / a["T"])}


def mean_tokens_backward(a):
    return {"dx": (ops.mean_tokens_backward(a["dy"].ravel(), a["T"]), 1)}


def _logits(a):
    return a["z"].reshape(a["B"], a["C"])


def margin_loss_forward(a):
    return {"per_sample": (ops.margin_loss_forward(_logits(a), a["labels"].ravel(), a["margin"])[1], 3)}


def margin_loss_backward(a):
    return {"dz": (ops.margin_loss_backward(_logits(a), a["labels"].ravel(), a["margin"]), 1)}


def _mix(a):
    return a["partners"].ravel(), a["shares"].ravel()


def cross_entropy_forward(a):
    per = ops.cross_entropy_forward(_logits(a), a["labels"].ravel(), a["smoothing"], _mix(a))[1]
    return {"per_sample": (per, 2 * a["C"])}


def cross_entropy_backward(a):
    return {"dz": (ops.cross_entropy_backward(_logits(a), a["labels"].ravel(), a["smoothing"], _mix(a)), 2 * a["C"])}


def loss_mean(a):
    stats = a["stats"].copy()
    stats.reshape(-1, a["stat_width"])[int(a["ctr"].ravel()[0]), 0] = a["per_sample"].ravel()[:a["B"]].mean()
    return {"stats": (stats, a["B"])}


def grad_norm_sq(a):
    stats, g, off = a["stats"].copy(), a["grads"].ravel(), a["offsets"].ravel()
    row = stats.reshape(-1, a["stat_width"])[int(a["ctr"].ravel()[0])]
    for t in range(a["T"]):
        part = g[off[t]:off[t + 1]]
        row[a["first"] + t] = part @ part
    return {"stats": (stats, int(np.diff(off).max()))}


def _clipped(a):
    """(the clipped gradient, the statistics after the update writes ‖g‖ and the decision, lr, row)."""

    stats, s = a["stats"].copy(), int(a["ctr"].ravel()[0])
    row = stats.reshape(-1, a["stat_width"])[s]
    g = a["grads"].ravel().copy()
    norm = float(np.sqrt(row[a["first"]:a["first"] + a["T"]].sum()))
    clipped = norm > a["threshold"]
    if clipped:
        g *= a["clip_norm"] / norm
    row[1], row[2] = norm, float(clipped)
    return g, stats, float(a["lrs"].ravel()[s]), s


def sgd_update(a):
    from litenet.train.optim import sgd_momentum_update

    g, stats, lr, _ = _clipped(a)
    params, velocity = a["params"].ravel().copy(), a["velocity"].ravel().copy()
    sgd_momentum_update(params, velocity, g, lr, a["momentum"], a["decay"].ravel())
    return {"params": (params, 4), "velocity": (velocity, 4), "stats": (stats, a["T"])}


def adamw_update(a):
    from litenet.train.optim import adamw_update as update

    g, stats, lr, s = _clipped(a)
    params, m, v = (a[k].ravel().copy() for k in ("params", "m", "v"))
    update(params, m, v, g, int(a["steps"].ravel()[s]), lr, a["beta1"], a["beta2"], a["eps"], a["decay"].ravel())
    return {"params": (params, 8), "m": (m, 2), "v": (v, 2), "stats": (stats, a["T"])}


def step_advance(a):
    ctr = a["ctr"].copy()
    ctr.ravel()[0] += 1
    return {"ctr": (ctr, 0)}


def grad_average(a):
    """(fast kernel, data-parallel steps) ḡ = g · scale, and the row's ‖g‖² slots cleared."""
    stats = a["stats"].copy()
    stats.reshape(-1, a["stat_width"])[int(a["ctr"].ravel()[0]), GRAD_SQ:GRAD_SQ + a["T"]] = 0.0
    return {"grads": (a["grads"] * a["scale"], 1), "stats": (stats, 0)}


def grad_norm_sq_added(a):
    """(fast kernel) the row's ‖g‖² slots += Σ g² of each tensor."""
    out, g, off = a["stats"].copy(), a["grads"].ravel(), a["offsets"].ravel()
    row = out.reshape(-1, a["stat_width"])[int(a["ctr"].ravel()[0])]
    for t in range(a["T"]):
        part = g[off[t]:off[t + 1]]
        row[GRAD_SQ + t] += part @ part
    return {"stats": (out, int(np.diff(off).max()))}


# kernel → its twin
TWINS = {f"{name}_reference": twin for name, twin in {
    "images_gather": images_gather, "labels_gather": labels_gather,
    "pixel_rows_forward": pixel_rows_forward, "pixel_rows_backward": pixel_rows_backward,
    "patches_forward": patches_forward, "patches_backward": patches_backward,
    "linear_forward": linear_forward, "linear_backward_input": linear_backward_input,
    "linear_backward_weight": linear_backward_weight, "linear_backward_bias": linear_backward_bias,
    "token_linear_forward": token_linear_forward, "token_linear_backward_input": token_linear_backward_input,
    "token_linear_backward_weight": token_linear_backward_weight, "token_linear_backward_bias": token_linear_backward_bias,
    "gelu_forward": gelu_forward, "gelu_backward": gelu_backward, "residual_forward": residual_forward,
    "gradient_sum": gradient_sum, "path_sums": path_sums, "layernorm_rows": layernorm_rows,
    "layernorm_forward": layernorm_forward, "layernorm_backward_rows": layernorm_backward_rows,
    "layernorm_backward_input": layernorm_backward_input, "layernorm_backward_params": layernorm_backward_params,
    "mean_tokens_forward": mean_tokens_forward, "mean_tokens_backward": mean_tokens_backward,
    "margin_loss_forward": margin_loss_forward, "margin_loss_backward": margin_loss_backward,
    "cross_entropy_forward": cross_entropy_forward, "cross_entropy_backward": cross_entropy_backward,
    "loss_mean": loss_mean, "grad_norm_sq": grad_norm_sq, "sgd_update": sgd_update, "adamw_update": adamw_update,
    "step_advance": step_advance}.items()}
# the two fast kernels a data-parallel step adds after the all-reduce, in both tiers (lowering.data_parallel)
TWINS.update(grad_average=grad_average, grad_norm_sq=grad_norm_sq_added)
