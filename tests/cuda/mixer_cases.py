"""The Mixer's kernels in the one compare helper (harness.compare_kernel): a case each, registered
into harness.CASES when this module is imported. Twins: litenet.ops (and the training twins of
litenet.train.reference and litenet.train.augment), recomputed in float64."""

from __future__ import annotations

import math

import numpy as np
from harness import _nan, _schedule, _splitk, _tiles, _with, case

from litenet import ops
from litenet.model import MixerConfig, TrainConfig, param_count, param_layout
from litenet.train import augment
from litenet.train import reference as ref
from litenet.train.numpy_backend import decay_mask

i32, f32 = np.int32, np.float32


def _operands(rng, *shapes, scale=None):
    return [(rng.standard_normal(s) * (scale or 1.0)).astype(f32) for s in shapes]


@case("linear_residual_forward", "linear_backward_input_gelu")
def _linear_mixer(r, rng, kernel, B, n_in, n_out, splits=1):
    """The two channel-product kernels the Mixer adds to linear.cu (64-row tiles)."""
    x, b, res = _operands(rng, (B, n_in), (n_out,), (B, n_out))
    W = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(f32)
    x64, W64, b64 = (a.astype(np.float64) for a in (x, W, b))
    if kernel.startswith("linear_residual_forward"):
        tiles = _tiles(B, n_out)
        scratch, counters = _splitk(r, tiles, splits)
        y = _nan(r, (B, n_out))
        r.launch(kernel, tiles * splits, (r.put(x), r.put(W), r.put(b), r.put(res), y, i32(B), i32(n_in), i32(n_out),
                                        i32(splits), scratch, counters))
        return {"y": y}, {"y": res + ops.linear_forward(x64, W64, b64)}, {"y": n_in}, counters
    dy, u = _operands(rng, (B, n_out), (B, n_in))
    tiles = _tiles(B, n_in)
    scratch, counters = _splitk(r, tiles, splits)
    du = _nan(r, (B, n_in))
    r.launch(kernel, tiles * splits, (r.put(dy), r.put(W), r.put(u), du, i32(B), i32(n_in), i32(n_out), i32(splits),
                                    scratch, counters))
    da = ops.linear_backward(dy.astype(np.float64), x64, W64)[0]
    return {"∂u": du}, {"∂u": ops.gelu_backward(da, u.astype(np.float64))}, {"∂u": n_out}, counters


@case("token_linear_gelu_forward", "token_linear_residual_forward", "token_linear_backward_input",
      "token_linear_backward_input_gelu", "token_linear_backward_weight")
def _token(r, rng, kernel, T, T_out, N, splits=1):
    """The product across the patches on (T, N) matrices: W (T, T'), bias (T',)."""
    name = kernel.removesuffix("_tf32").removesuffix("_bf16")
    x, b, dy, res = _operands(rng, (T, N), (T_out,), (T_out, N), (T_out, N))
    W = (rng.standard_normal((T, T_out)) / np.sqrt(T)).astype(f32)
    x64, W64, b64, dy64 = (a.astype(np.float64) for a in (x, W, b, dy))
    if name.endswith("forward"):
        tiles = _tiles(T_out, N)
        scratch, counters = _splitk(r, tiles, splits)
        y64 = ops.token_linear_forward(x64, W64, b64)
        if name == "token_linear_gelu_forward":
            u, a = _nan(r, (T_out, N)), _nan(r, (T_out, N))
            r.launch(kernel, tiles * splits, (r.put(x), r.put(W), r.put(b), u, a, i32(T), i32(T_out), i32(N),
                                            i32(splits), scratch, counters))
            return {"u": u, "a": a}, {"u": y64, "a": ops.gelu_forward(y64)}, {"u": T, "a": T}, counters
        y = _nan(r, (T_out, N))
        r.launch(kernel, tiles * splits, (r.put(x), r.put(W), r.put(b), r.put(res), y, i32(T), i32(T_out), i32(N),
                                        i32(splits), scratch, counters))
        return {"y": y}, {"y": res + y64}, {"y": T}, counters
    dx_ref, dW_ref, _ = ops.token_linear_backward(dy64, x64, W64)
    if name == "token_linear_backward_weight":
        tiles = _tiles(T, T_out)
        scratch, counters = _splitk(r, tiles, splits)
        dW = _nan(r, (T, T_out))
        r.launch(kernel, tiles * splits, (r.put(x), r.put(dy), dW, i32(T), i32(T_out), i32(N), i32(splits), scratch,
                                        counters))
        return {"∂W": dW}, {"∂W": dW_ref}, {"∂W": N}, counters
    tiles = _tiles(T, N)
    scratch, counters = _splitk(r, tiles, splits)
    dx = _nan(r, (T, N))
    if name == "token_linear_backward_input":
        r.launch(kernel, tiles * splits, (r.put(dy), r.put(W), dx, i32(T), i32(T_out), i32(N), i32(splits), scratch,
                                        counters))
        return {"∂x": dx}, {"∂x": dx_ref}, {"∂x": T_out}, counters
    u = _operands(rng, (T, N))[0]
    r.launch(kernel, tiles * splits, (r.put(dy), r.put(W), r.put(u), dx, i32(T), i32(T_out), i32(N), i32(splits),
                                    scratch, counters))
    return {"∂u": dx}, {"∂u": ops.gelu_backward(dx_ref, u.astype(np.float64))}, {"∂u": T_out}, counters


@case("layernorm_forward")
def _plain_layernorm(r, rng, name, B, d):
    x = (3 + 2 * rng.standard_normal((B, d))).astype(f32)
    gamma, beta = (1 + 0.3 * rng.standard_normal(d)).astype(f32), rng.standard_normal(d).astype(f32)
    y_ref, (n_ref, rstd_ref) = ops.layernorm_forward(x.astype(np.float64), gamma.astype(np.float64),
                                                     beta.astype(np.float64), 1e-5)
    y, n, rstd = _nan(r, (B, d)), _nan(r, (B, d)), _nan(r, (B,))
    r.launch(name, math.ceil(B / 8), (r.put(x), r.put(gamma), r.put(beta), y, n, rstd, i32(B), i32(d), f32(1e-5)))
    return {"y": y, "n": n, "rstd": rstd}, {"y": y_ref, "n": n_ref, "rstd": rstd_ref[:, 0]}, \
        {"y": d, "n": d, "rstd": d}, None


@case("patches_gather")
def _patches(r, rng, name, B, patch, pad=4, cut=0, shift=0.5, scale=1.0, grid=5):
    """The step's images from the uint8 set, cropped, flipped and cut out: exactly augment.apply then ops.patchify."""
    N = B + 3
    images = rng.integers(0, 256, (N, 32, 32, 3), dtype=np.uint8)
    batches, flips, ctr, index, flip = _schedule(r, rng, N, B)
    crops = rng.integers(0, 2 * pad + 1, (3, B, 2)).astype(np.int8)
    cutouts = rng.integers(0, 32, (3, B, 2)).astype(np.int8)
    cutouts[1, 0] = (0, 31)  # a square over two edges at once
    T, per = (32 // patch) ** 2, patch * patch * 3
    out = _nan(r, (T, B, per))
    r.launch(name, grid, (r.put(images), batches, flips, r.put(crops), r.put(cutouts), ctr, out, i32(B), i32(patch),
                          i32(pad), i32(cut), i32(augment.CUTOUT_FILL), f32(shift), f32(scale)))
    x = augment.apply(images, index, flip, crops[1] if pad else None, pad, cutouts[1] if cut else None, cut)
    return {"patches": out}, {"patches": ops.patchify(ops.pixels_to_float(x, np.float64), patch, shift, scale)}, \
        {"patches": 2}, None


@case("mean_tokens_forward", "mean_tokens_backward")
def _mean_tokens(r, rng, name, T, N, grid=3):
    x, dy = _operands(rng, (T, N), (N,))
    out = _nan(r, (N,) if name.endswith("forward") else (T, N))
    if name.endswith("forward"):
        r.launch(name, grid, (r.put(x), out, i32(T), i32(N)))
        return {"y": out}, {"y": ops.mean_tokens_forward(x.astype(np.float64))}, {"y": T}, None
    r.launch(name, grid, (r.put(dy), out, i32(T), i32(N)))
    return {"∂x": out}, {"∂x": ops.mean_tokens_backward(dy.astype(np.float64), T)}, {}, None


@case("cross_entropy_smoothed")
def _smoothed(r, rng, name, B, C, eps=0.1):
    z = rng.standard_normal((B, C)).astype(f32)
    N = B + 3
    labels = rng.integers(0, C, N).astype(np.uint8)
    batches, _, ctr, index, _ = _schedule(r, rng, N, B)
    y, z64 = labels[index].astype(np.int64), z.astype(np.float64)
    dz, stats = _nan(r, (B, C)), r.put(np.zeros((2, 4), f32))
    r.launch(name, math.ceil(B / 256), (r.put(z), r.put(labels), batches, ctr, dz, stats, i32(4), i32(B), i32(C), f32(eps)))
    value, _ = ops.cross_entropy_forward(z64, y, eps)
    return {"∂z": dz, "stats": stats}, {"∂z": ops.cross_entropy_backward(z64, y, eps),
                                        "stats": _with(np.zeros((2, 4)), 1, 0, [value])}, {"∂z": C, "stats": B * C}, None


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
    lrs, steps = np.array([0.0, 0.01], f32), np.array([0, t], i32)
    ctr = r.put(np.array([1, 0], i32))
    wd, md, vd, st = r.put(w), r.put(m), r.put(v), r.put(stats)
    r.launch(name, grid, (wd, md, vd, r.put(g), r.put(decay), r.put(lrs), r.put(steps), ctr, st, i32(width_row), i32(P),
                          i32(len(specs)), f32(0.9), f32(0.999), f32(1e-8), f32(threshold), f32(1.0)))
    w64, m64, v64, g64 = (a.astype(np.float64) for a in (w, m, v, g))
    norm, clipped = ref.grad_norm_clip(g64, threshold, 1.0)
    ref.adamw_update(w64, m64, v64, g64, t, 0.01, 0.9, 0.999, 1e-8, decay.astype(np.float64))
    want_stats = _with(stats, 1, 1, [norm, float(clipped)])
    return {"w": wd, "m": md, "v": vd, "stats": st}, {"w": w64, "m": m64, "v": v64, "stats": want_stats}, \
        {"w": 8, "m": 2, "v": 2, "stats": P}, None


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
    ("layernorm_forward", dict(B=13, d=64)),
    ("layernorm_forward", dict(B=9, d=7)),
    ("patches_gather", dict(B=5, patch=4)),
    ("patches_gather", dict(B=3, patch=8, pad=0, shift=0.0)),
    ("patches_gather", dict(B=2, patch=16, pad=2, shift=0.47, scale=4.0)),
    ("patches_gather", dict(B=6, patch=4, cut=8, shift=0.47, scale=4.0)),
    ("patches_gather", dict(B=4, patch=2, pad=0, cut=5)),
    ("mean_tokens_forward", dict(T=16, N=70)),
    ("mean_tokens_backward", dict(T=9, N=33)),
    ("cross_entropy_smoothed", dict(B=37, C=10)),
    ("cross_entropy_smoothed", dict(B=300, C=3, eps=0.3)),
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
    ("token_linear_gelu_forward", dict(T=64, T_out=70, N=40)),
    ("token_linear_residual_forward", dict(T=9, T_out=16, N=130, splits=2)),
    ("token_linear_backward_input", dict(T=16, T_out=9, N=67)),
    ("token_linear_backward_input_gelu", dict(T=64, T_out=33, N=66)),
    ("token_linear_backward_weight", dict(T=65, T_out=64, N=129, splits=3)),
]]
