"""The Mixer's kernels in the one compare helper (harness.compare_kernel): a case each, registered
into harness.CASES when this module is imported. A case draws the inputs and launches; the twin is
the kernel's entry in mixer_twins.py (litenet.ops, litenet.train.optim and litenet.train.augment, in
float64)."""

from __future__ import annotations

import math

import numpy as np
import fused_twins as ref
from harness import SLAB, _copy16, _nan, _operand, _product_launch, _rounded, _schedule, _splitk, _tiles, case, precision

from litenet import ops
from litenet.gpu import sources
from litenet.model import MixerConfig, TrainConfig, param_count, param_layout
from litenet.train import augment, schedule
from litenet.lowering.program import Call
from mixer_twins import MIXER_TWINS
from litenet.train.numpy_backend import decay_mask

i32, f32 = np.int32, np.float32


def _operands(rng, *shapes, scale=None):
    return [(rng.standard_normal(s) * (scale or 1.0)).astype(f32) for s in shapes]


def _by_twin(runner, kernel, grid, **named):
    """Launch `kernel` with its arguments by name, and its twin's outputs from the inputs it reads as
    they were before the launch: the (got, want, terms, counters) a case returns."""
    twin = MIXER_TWINS[precision(kernel)[0].removesuffix("_with_copy")]
    params = sources.signatures(sources.kernel_file(kernel))[kernel]
    a = {p.name: named[p.name].item() for p in params if p.kind != "pointer"}
    for name in twin.reads:
        host = runner.get(named[name])
        a[name] = host.astype(np.float64) if host.dtype.kind == "f" else host
    runner.launch(kernel, grid, Call(kernel, grid, named).ordered_args())
    outs = twin.outputs(a)
    got = {k: named[k][o.at] if o.at else named[k] for k, o in outs.items()}
    return got, {k: o.want for k, o in outs.items()}, {k: o.terms for k, o in outs.items()}, named.get("counters")


@case("linear_residual_forward", "linear_backward_input_gelu", "linear_residual_forward_wide")
def _linear_mixer(r, rng, kernel, B, n_in, n_out, splits=1):
    """The two channel-product kernels the Mixer adds to linear.cu (64-row tiles), and the residual
    product in wide BF16 tiles (from BF16 copies of x and W)."""
    x, b, res = _operands(rng, (B, n_in), (n_out,), (B, n_out))
    W = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(f32)
    sizes = {"B": i32(B), "n_in": i32(n_in), "n_out": i32(n_out), "splits": i32(splits)}
    if kernel == "linear_residual_forward_wide_bf16":
        grid, scratch, counters = _product_launch(r, kernel, B, n_out, splits)
        y = _nan(r, (B, n_out))
        r.launch(kernel, grid, Call(kernel, grid, dict(x=_operand(r, kernel, x), W=_operand(r, kernel, W), bias=r.put(b),
                                                       r=r.put(res), y=y, scratch=scratch, counters=counters,
                                                       **sizes)).ordered_args())
        want = ops.linear_forward(x.astype(np.float64), W.astype(np.float64), b.astype(np.float64)) + res
        return {"y": y}, {"y": want}, {"y": n_in}, counters
    if kernel.startswith("linear_residual_forward"):
        tiles = _tiles(B, n_out)
        scratch, counters = _splitk(r, tiles, splits)
        return _by_twin(r, kernel, tiles * splits, x=r.put(x), W=r.put(W), bias=r.put(b), r=r.put(res),
                        y=_nan(r, (B, n_out)), scratch=scratch, counters=counters, **sizes)
    dy, u = _operands(rng, (B, n_out), (B, n_in))
    tiles = _tiles(B, n_in)
    scratch, counters = _splitk(r, tiles, splits)
    return _by_twin(r, kernel, tiles * splits, dy=r.put(dy), W=r.put(W), u=r.put(u), du=_nan(r, (B, n_in)),
                    scratch=scratch, counters=counters, **sizes)


@case("linear_backward_weight_partials_wide")
def _weight_sums_apart(r, rng, kernel, B, n_in, n_out, splits, sum_grid=3):
    """The wide BF16 ∂W as two launches (the partials, then linear_backward_weight_sum_wide over a grid of
    `sum_grid` blocks): ∂W, ∂b against NumPy, and bit for bit the one-launch kernel's at the same split."""
    x, dy = _operands(rng, (B, n_in), (B, n_out))
    x16, dy16 = _operand(r, kernel, x), _operand(r, kernel, dy)
    grid, scratch, counters = _product_launch(r, kernel, n_in, n_out, splits)
    sizes = dict(B=i32(B), n_in=i32(n_in), n_out=i32(n_out), splits=i32(splits))
    r.launch(kernel, grid, Call(kernel, grid, dict(x=x16, dy=dy16, scratch=scratch, **sizes)).ordered_args())
    dW, db = _nan(r, (n_in, n_out)), _nan(r, (n_out,))
    r.launch("linear_backward_weight_sum_wide", sum_grid, (scratch, dW, db, i32(n_in), i32(n_out), i32(splits)))
    one = "linear_backward_weight_wide_bf16"
    dW1, db1 = _nan(r, (n_in, n_out)), _nan(r, (n_out,))
    r.launch(one, grid, Call(one, grid, dict(x=x16, dy=dy16, dW=dW1, db=db1, scratch=scratch, counters=counters,
                                             **sizes)).ordered_args())
    np.testing.assert_array_equal(r.get(dW), r.get(dW1), err_msg="∂W summed apart differs from the one launch's")
    np.testing.assert_array_equal(r.get(db), r.get(db1), err_msg="∂b summed apart differs from the one launch's")
    x64, dy64 = ref.bf16_values(ref.bf16_copy(x)), ref.bf16_values(ref.bf16_copy(dy))
    return {"∂W": dW, "∂b": db}, {"∂W": x64.T @ dy64, "∂b": dy64.sum(axis=0)}, {"∂W": B, "∂b": B}, counters


@case("linear_gelu_forward_to_copy_wide", "linear_gelu_forward_copy_only_wide", "linear_backward_input_gelu_to_copy_wide")
def _gelu_to_copy(r, rng, kernel, B, n_in, n_out, splits=1):
    """The wide BF16 GELU products that write no fp32 GELU output / ∂u, only its BF16 copy (and the forward's
    copy-only version, not u either): what they write bit for bit the full kernel's (which the harness holds
    to NumPy), the copy within BF16's bound of NumPy."""
    full = kernel.replace("_to_copy", "").replace("_copy_only", "")
    x, W, b, dy, u = _operands(rng, (B, n_in), (n_in, n_out), (n_out,), (B, n_out), (B, n_in))
    W /= np.sqrt(n_in)
    sizes = dict(B=i32(B), n_in=i32(n_in), n_out=i32(n_out), splits=i32(splits))
    forward = kernel.startswith("linear_gelu_forward")
    rows, cols = (B, n_out) if forward else (B, n_in)
    grid, scratch, counters = _product_launch(r, full, rows, cols, splits)
    outs = {}
    for name in (kernel, full):
        copy = _copy16(r, (rows, cols))
        if forward:
            named = dict(x=_operand(r, full, x), W=_operand(r, full, W), bias=r.put(b), a16=copy)
            if "_copy_only" not in name:
                named["u"] = _nan(r, (rows, cols))
            if name == full:
                named["a"] = _nan(r, (rows, cols))
        else:
            named = dict(dy=_operand(r, full, dy), W=_operand(r, full, W), u=r.put(u), du16=copy)
            if name == full:
                named["du"] = _nan(r, (rows, cols))
        r.launch(name, grid, Call(name, grid, dict(named, scratch=scratch, counters=counters, **sizes)).ordered_args())
        outs[name] = {k: r.get(v) for k, v in named.items() if k in ("u", "a16", "du16")}
    for k, v in outs[kernel].items():
        np.testing.assert_array_equal(v, outs[full][k], err_msg=f"{kernel}: {k} differs from {full}'s")
    x64, W64, b64 = (ref.bf16_values(ref.bf16_copy(m)) for m in (x, W, b))
    if forward:
        _, want = ref.linear_gelu_forward(x64, W64, b.astype(np.float64))
        got = outs[kernel]["a16"]
    else:
        want = ops.gelu_backward(ref.bf16_values(ref.bf16_copy(dy)) @ W64.T, u.astype(np.float64))
        got = outs[kernel]["du16"]
    return {"copy": r.put(got)}, {"copy": want}, {"copy": n_in if forward else n_out}, counters


@case("token_linear_backward_weight_partials")
def _token_weight_sums_apart(r, rng, kernel, T, T_out, N, splits):
    """The token ∂W as two launches (the partials, then token_linear_backward_weight_sum): ∂W, ∂b against
    NumPy, and bit for bit the one-launch kernel's at the same split (its two-level order included)."""
    x, dy = _operands(rng, (T, N), (T_out, N))
    tiles = _tiles(T, T_out)
    scratch, counters = _splitk(r, tiles, splits)
    sizes = dict(T=i32(T), T_out=i32(T_out), N=i32(N), splits=i32(splits))
    xs, dys = r.put(x), r.put(dy)
    r.launch(kernel, tiles * splits, Call(kernel, tiles * splits, dict(x=xs, dy=dys, scratch=scratch,
                                                                       **sizes)).ordered_args())
    dW, db = _nan(r, (T, T_out)), _nan(r, (T_out,))
    total = "token_linear_backward_weight_sum"
    grid = math.ceil(tiles * SLAB / 16)
    r.launch(total, grid, Call(total, grid, dict(scratch=scratch, dW=dW, db=db, T=i32(T), T_out=i32(T_out),
                                                 splits=i32(splits))).ordered_args())
    one = kernel.replace("_partials", "")
    dW1, db1 = _nan(r, (T, T_out)), _nan(r, (T_out,))
    r.launch(one, tiles * splits, Call(one, tiles * splits, dict(x=xs, dy=dys, dW=dW1, db=db1, scratch=scratch,
                                                                 counters=counters, **sizes)).ordered_args())
    np.testing.assert_array_equal(r.get(dW), r.get(dW1), err_msg="∂W summed apart differs from the one launch's")
    np.testing.assert_array_equal(r.get(db), r.get(db1), err_msg="∂b summed apart differs from the one launch's")
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    return {"∂W": dW, "∂b": db}, {"∂W": x64 @ dy64.T, "∂b": dy64.sum(axis=1)}, {"∂W": N, "∂b": N}, counters


@case("token_linear_gelu_forward", "token_linear_residual_forward", "token_linear_backward_input",
      "token_linear_backward_input_gelu", "token_linear_backward_weight")
def _token(r, rng, kernel, T, T_out, N, splits=1):
    """The product across the patches on (T, N) matrices: W (T, T'), bias (T',)."""
    name = precision(kernel)[0]
    x, b, dy, res = _operands(rng, (T, N), (T_out,), (T_out, N), (T_out, N))
    W = (rng.standard_normal((T, T_out)) / np.sqrt(T)).astype(f32)
    sizes = {"T": i32(T), "T_out": i32(T_out), "N": i32(N), "splits": i32(splits)}
    rows, cols = {"token_linear_backward_weight": (T, T_out)}.get(name, (T_out, N) if name.endswith("forward")
                                                                  else (T, N))
    tiles = _tiles(rows, cols)
    scratch, counters = _splitk(r, tiles, splits)
    grid, common = tiles * splits, {"scratch": scratch, "counters": counters, **sizes}
    if name == "token_linear_gelu_forward":
        return _by_twin(r, kernel, grid, x=r.put(x), W=r.put(W), bias=r.put(b), u=_nan(r, (T_out, N)),
                        a=_nan(r, (T_out, N)), **common)
    if name == "token_linear_residual_forward":
        return _by_twin(r, kernel, grid, x=r.put(x), W=r.put(W), bias=r.put(b), r=r.put(res), y=_nan(r, (T_out, N)),
                        **common)
    if name == "token_linear_backward_weight":
        return _by_twin(r, kernel, grid, x=r.put(x), dy=r.put(dy), dW=_nan(r, (T, T_out)), db=_nan(r, (T_out,)),
                        **common)
    if name == "token_linear_backward_input":
        return _by_twin(r, kernel, grid, dy=r.put(dy), W=r.put(W), dx=_nan(r, (T, N)), **common)
    u = _operands(rng, (T, N))[0]
    return _by_twin(r, kernel, grid, dy=r.put(dy), W=r.put(W), u=r.put(u), du=_nan(r, (T, N)), **common)


def _with_copy(r, name, out: str, copy: str, shape, launch):
    """`launch(**copy_buffer)`'s (got, want, terms, counters), and for a `_with_copy` kernel its BF16 copy
    of `out`, which must be the rounding of what it wrote."""
    buffer = {copy: _copy16(r, shape)} if name.endswith("_with_copy") else {}
    got, want, terms, counters = launch(**buffer)
    if buffer:
        got[copy], want[copy], terms[copy] = buffer[copy], _rounded(r, got[out]), 0
    return got, want, terms, counters


@case("layernorm_forward", "layernorm_forward_with_copy")
def _plain_layernorm(r, rng, name, B, d):
    x = (3 + 2 * rng.standard_normal((B, d))).astype(f32)
    gamma, beta = (1 + 0.3 * rng.standard_normal(d)).astype(f32), rng.standard_normal(d).astype(f32)
    return _with_copy(r, name, "y", "y16", (B, d), lambda **copy: _by_twin(
        r, name, math.ceil(B / 8), x=r.put(x), gamma=r.put(gamma), beta=r.put(beta), y=_nan(r, (B, d)),
        nrm=_nan(r, (B, d)), rstd=_nan(r, (B,)), B=i32(B), d=i32(d), eps=f32(1e-5), **copy))


@case("layernorm_backward_join", "layernorm_backward_join_with_copy")
def _layernorm_join(r, rng, name, B, d, splits=1, row_blocks=None):
    """A LayerNorm's backward joined with the stream's gradient (skip), its sums added to the
    statistics row at step 1 (what is there already stays). row_blocks below ⌈B/8⌉: each block
    walks several groups of rows."""
    x, dy, skip = _operands(rng, (B, d), (B, d), (B, d))
    gamma = (1 + 0.3 * rng.standard_normal(d)).astype(f32)
    _, (nrm, rstd) = ops.layernorm_forward(x.astype(np.float64), gamma.astype(np.float64), np.zeros(d), 1e-5)
    rows = row_blocks or math.ceil(B / 8)
    tiles = math.ceil(2 * d / 64)
    scratch, counters = _splitk(r, tiles, splits, 64)
    stats = np.zeros((3, 9), f32)
    stats[1, 5:8] = [1.0, 2.0, 3.0]
    return _with_copy(r, name, "dx", "dx16", (B, d), lambda **copy: _by_twin(
        r, name, rows + tiles * splits, dy=r.put(dy), nrm=r.put(nrm.astype(f32)), rstd=r.put(rstd[:, 0].astype(f32)),
        gamma=r.put(gamma), skip=r.put(skip), dx=_nan(r, (B, d)), dgamma=_nan(r, (d,)), dbeta=_nan(r, (d,)), B=i32(B),
        d=i32(d), row_blocks=i32(rows), splits=i32(splits), scratch=scratch, counters=counters,
        ctr=r.put(np.array([1, 0], i32)), stats=r.put(stats), stat_width=i32(9), slot=i32(5), **copy))


def _mixes(rng, B, seed):
    """A 3-step schedule's CutMix draws (schedule.epoch_mixes; about a third of the images without a
    partner), step 1's first image given a box over two edges and its second the whole image."""
    train = TrainConfig(batch_size=B, augment="cutmix", cutmix_prob=0.7, loss="cross-entropy", seed=seed)
    mixes = schedule.epoch_mixes(np.zeros((3, B), np.int64), train, epoch=int(rng.integers(100)))
    mixes[1, 0] = (B - 1, 20, 0, 32, 9)
    if B > 1:
        mixes[1, 1] = (0, 0, 0, 32, 32)
    return mixes


@case("patches_gather")
def _patches(r, rng, name, B, patch, pad=4, cut=0, mix=0, shift=0.5, scale=1.0, grid=5):
    """The step's images from the uint8 set, cropped, flipped, cut out and CutMix-ed: exactly augment.apply
    then ops.patchify."""
    N = B + 3
    images = rng.integers(0, 256, (N, 32, 32, 3), dtype=np.uint8)
    batches, flips, ctr, _, _ = _schedule(r, rng, N, B)
    crops = rng.integers(0, 2 * pad + 1, (3, B, 2)).astype(np.int8)
    cutouts = rng.integers(0, 32, (3, B, 2)).astype(np.int8)
    cutouts[1, 0] = (0, 31)  # a square over two edges at once
    T, per = (32 // patch) ** 2, patch * patch * 3
    return _by_twin(r, name, grid, images=r.put(images), batches=batches, flips=flips, crops=r.put(crops),
                    cutouts=r.put(cutouts), mixes=r.put(_mixes(rng, B, B + patch)), ctr=ctr,
                    out=_nan(r, (T, B, per)), B=i32(B), patch=i32(patch), pad=i32(pad), cut=i32(cut), mix=i32(mix),
                    fill=i32(augment.CUTOUT_FILL), shift=f32(shift), scale=f32(scale))


@case("mean_tokens_forward", "mean_tokens_backward")
def _mean_tokens(r, rng, name, T, N, grid=3):
    x, dy = _operands(rng, (T, N), (N,))
    if name.endswith("forward"):
        return _by_twin(r, name, grid, x=r.put(x), y=_nan(r, (N,)), T=i32(T), N=i32(N))
    return _by_twin(r, name, grid, dy=r.put(dy), dx=_nan(r, (T, N)), T=i32(T), N=i32(N))


@case("cross_entropy_smoothed")
def _smoothed(r, rng, name, B, C, eps=0.1, mix=0):
    """The smoothed cross-entropy of a step's images, with CutMix's mixed targets when `mix`."""
    z = rng.standard_normal((B, C)).astype(f32)
    N = B + 3
    labels = rng.integers(0, C, N).astype(np.uint8)
    batches, _, ctr, _, _ = _schedule(r, rng, N, B)
    return _by_twin(r, name, math.ceil(B / 256), z=r.put(z), labels=r.put(labels), batches=batches,
                    mixes=r.put(_mixes(rng, B, C)), ctr=ctr, dz=_nan(r, (B, C)), stats=r.put(np.zeros((2, 4), f32)),
                    stat_width=i32(4), B=i32(B), C=i32(C), eps=f32(eps), mix=i32(mix))


@case("adamw_update")
def _adamw(r, rng, name, width=8, blocks=1, t=3, threshold=float("inf"), grid=3):
    """One update from a step's gradient and moments (the clip rule first, with the step's ‖g_t‖²)."""
    model = MixerConfig(patch=16, width=width, token_hidden=5, channel_hidden=7, blocks=blocks)
    train = TrainConfig(optimizer="adamw", weight_decay=0.05, decay="weights", clip_threshold=threshold, clip_norm=1.0)
    P, specs = param_count(model), param_layout(model)
    w, g = rng.standard_normal(P).astype(f32), rng.standard_normal(P).astype(f32)
    m, v = (0.1 * rng.standard_normal(P)).astype(f32), np.abs(0.1 * rng.standard_normal(P)).astype(f32)
    decay = np.broadcast_to(decay_mask(model, train), (P,)).astype(f32)
    width_row = 3 + len(specs)
    stats = np.zeros((2, width_row), f32)
    stats[1, 3:] = [float(np.dot(g[p.offset:p.offset + p.size].astype(np.float64), g[p.offset:p.offset + p.size]))
                    for p in specs]
    return _by_twin(r, name, grid, params=r.put(w), m=r.put(m), v=r.put(v), grads=r.put(g), decay=r.put(decay),
                    lrs=r.put(np.array([0.0, 0.01], f32)), steps=r.put(np.array([0, t], i32)),
                    ctr=r.put(np.array([1, 0], i32)), stats=r.put(stats), stat_width=i32(width_row), n=i32(P),
                    T=i32(len(specs)), beta1=f32(0.9), beta2=f32(0.999), eps=f32(1e-8), threshold=f32(threshold),
                    clip_norm=f32(1.0))


MIXER_KERNEL_SHAPES = [
    ("linear_residual_forward", dict(B=70, n_in=36, n_out=68, splits=2)),
    ("linear_residual_forward", dict(B=5, n_in=130, n_out=7)),
    ("linear_backward_input_gelu", dict(B=66, n_in=65, n_out=20, splits=3)),
    ("token_linear_gelu_forward", dict(T=16, T_out=9, N=70)),
    ("token_linear_gelu_forward", dict(T=64, T_out=70, N=40, splits=2)),
    ("token_linear_residual_forward", dict(T=9, T_out=16, N=130, splits=1)),
    ("token_linear_backward_input", dict(T=16, T_out=9, N=67)),
    ("token_linear_backward_input_gelu", dict(T=64, T_out=33, N=66, splits=2)),
    ("token_linear_backward_weight", dict(T=16, T_out=9, N=300, splits=4)),
    ("token_linear_backward_weight", dict(T=65, T_out=64, N=129, splits=3)),
    ("token_linear_backward_weight", dict(T=1, T_out=9, N=1000, splits=7)),  # a bias gradient: X a row (of ones)
    # past 16 splits the partials are summed in two levels (splitk.cuh): 3 groups, the last of 8
    ("token_linear_backward_weight", dict(T=65, T_out=64, N=2000, splits=40)),
    ("linear_residual_forward", dict(B=9, n_in=1300, n_out=70, splits=33)),
    # wide BF16 tiles: ragged tiles both ways with a K split; whole aligned tiles (the plain-load path)
    ("linear_residual_forward_wide_bf16", dict(B=130, n_in=40, n_out=136, splits=2)),
    ("linear_residual_forward_wide_bf16", dict(B=256, n_in=256, n_out=128)),
    # the token ∂W summed apart: one level, two levels (3 groups, the last of 8) with ragged tiles, a bias row
    ("token_linear_backward_weight_partials", dict(T=16, T_out=9, N=300, splits=4)),
    ("token_linear_backward_weight_partials", dict(T=65, T_out=64, N=2000, splits=40)),
    ("token_linear_backward_weight_partials", dict(T=1, T_out=9, N=1000, splits=7)),
    # the wide BF16 GELU products that write only the BF16 copy of their GELU output / ∂u
    ("linear_gelu_forward_to_copy_wide_bf16", dict(B=130, n_in=40, n_out=136, splits=2)),
    ("linear_gelu_forward_copy_only_wide_bf16", dict(B=130, n_in=40, n_out=136, splits=2)),
    ("linear_gelu_forward_copy_only_wide_bf16", dict(B=256, n_in=128, n_out=256)),
    ("linear_backward_input_gelu_to_copy_wide_bf16", dict(B=70, n_in=129, n_out=50)),
    # the wide BF16 ∂W summed apart: ragged tiles both ways, past LN_GROUP splits; one split, whole tiles
    ("linear_backward_weight_partials_wide_bf16", dict(B=600, n_in=130, n_out=200, splits=19)),
    ("linear_backward_weight_partials_wide_bf16", dict(B=64, n_in=128, n_out=256, splits=1, sum_grid=1)),
    ("layernorm_forward", dict(B=13, d=64)),
    ("layernorm_forward", dict(B=9, d=7)),
    ("layernorm_backward_join", dict(B=13, d=64)),
    ("layernorm_backward_join", dict(B=300, d=33, splits=3)),
    ("layernorm_backward_join", dict(B=100, d=128, splits=2, row_blocks=3)),
    ("layernorm_forward_with_copy", dict(B=13, d=64)),
    ("layernorm_forward_with_copy", dict(B=9, d=7)),
    ("layernorm_backward_join_with_copy", dict(B=100, d=128, splits=2, row_blocks=3)),
    ("layernorm_backward_join_with_copy", dict(B=300, d=33, splits=3)),
    ("patches_gather", dict(B=5, patch=4)),
    ("patches_gather", dict(B=3, patch=8, pad=0, shift=0.0)),
    ("patches_gather", dict(B=2, patch=16, pad=2, shift=0.47, scale=4.0)),
    ("patches_gather", dict(B=6, patch=4, cut=8, shift=0.47, scale=4.0)),
    ("patches_gather", dict(B=4, patch=2, pad=0, cut=5)),
    ("patches_gather", dict(B=7, patch=4, mix=1, shift=0.47, scale=4.0)),
    ("patches_gather", dict(B=5, patch=8, pad=2, cut=8, mix=1)),
    ("mean_tokens_forward", dict(T=16, N=70)),
    ("mean_tokens_backward", dict(T=9, N=33)),
    ("cross_entropy_smoothed", dict(B=37, C=10)),
    ("cross_entropy_smoothed", dict(B=300, C=3, eps=0.3)),
    ("cross_entropy_smoothed", dict(B=37, C=10, mix=1)),
    ("cross_entropy_smoothed", dict(B=300, C=3, eps=0.0, mix=1)),
    ("adamw_update", dict()),
    ("adamw_update", dict(width=12, blocks=2, t=1, threshold=1.0)),
]
# Every product again on the tensor cores (the emulator runs mma.cuh's fragment code).
MIXER_KERNEL_SHAPES += [(f"{name}_{p}", shape) for p in ("tf32", "bf16") for name, shape in [
    ("linear_forward", dict(B=70, n_in=36, n_out=68, splits=2)),
    ("linear_gelu_forward", dict(B=66, n_in=64, n_out=132)),
    ("linear_residual_forward", dict(B=5, n_in=130, n_out=7, splits=2)),
    ("linear_backward_input", dict(B=37, n_in=65, n_out=10)),
    ("linear_backward_input_gelu", dict(B=66, n_in=65, n_out=20, splits=3)),
    ("linear_backward_weight", dict(B=150, n_in=68, n_out=70, splits=4)),
    ("linear_backward_weight", dict(B=1500, n_in=68, n_out=70, splits=20)),  # two levels, with the ∂b column sums
    ("token_linear_gelu_forward", dict(T=64, T_out=70, N=40)),
    ("token_linear_residual_forward", dict(T=9, T_out=16, N=130, splits=2)),
    ("token_linear_backward_input", dict(T=16, T_out=9, N=67)),
    ("token_linear_backward_input_gelu", dict(T=64, T_out=33, N=66)),
    ("token_linear_backward_weight", dict(T=65, T_out=64, N=129, splits=3)),
    ("token_linear_backward_weight", dict(T=16, T_out=70, N=300, splits=2)),  # ∂b over two tile columns
    ("token_linear_backward_weight_partials", dict(T=65, T_out=70, N=600, splits=19)),  # two levels, 4 tiles
]]
