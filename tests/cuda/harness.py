"""The one helper that holds any kernel to its NumPy twin: `compare_kernel(runner, name, **shape)`.

A case per kernel draws fresh random inputs at the given shape, poisons the outputs with NaN (an
unwritten value then fails), launches through the runner — the CPU emulator or CuPy on a GPU —
recomputes the outputs with the twin in float64, and compares every output (forward values and
every gradient) within the tolerances of litenet.train.check_kernels (computed from the number of
rounded terms behind each value). Split-K counters must come back to zero.
"""

from __future__ import annotations

import math

import numpy as np

from litenet.gpu.splitk import TILE_COUNTERS
from litenet.model import ModelConfig, param_layout, param_views
from litenet import ops
import fused_twins as ref
from litenet.train.check_kernels import TOLERANCES, compare
from litenet.lowering.fast.geometry import SLAB, TILE, Gemm, weight_grad_jobs
from litenet.lowering.stats import StatsLayout, param_offsets

i32, f32 = np.int32, np.float32


class Runner:
    """Launches kernels on the emulator ("emu") or on the GPU through CuPy ("cupy")."""

    def __init__(self, kind: str, defines: tuple[str, ...] = ()):
        self.kind = kind
        if kind == "emu":  # `defines`: e.g. emulator.WGMMA, the kernels as a Hopper compilation builds them
            import emulator
            self.xp, self._kernel = np, lambda name: emulator.kernel(name, defines)
        else:
            import cupy
            from litenet.gpu.device import CupyDevice
            self.xp, self._kernel = cupy, CupyDevice().kernel

    def put(self, a):
        return self.xp.array(np.ascontiguousarray(a))

    def get(self, a) -> np.ndarray:
        return a.get() if hasattr(a, "get") else np.array(a)

    def launch(self, name, grid, args, shared=0):
        self._kernel(name)((int(grid),), (256,), args, shared_mem=int(shared))


CASES = {}


def case(*names):
    def register(fn):
        for n in names:
            CASES[n] = fn
        return fn
    return register


def precision(name: str) -> tuple[str, str]:
    """(the kernel's name without its precision suffix, "fp32" | "tf32" | "bf16")."""
    for p in ("tf32", "bf16"):
        if name.endswith("_" + p):
            return name[:-5], p
    return name, "fp32"


def compare_kernel(runner: Runner, name: str, seed: int = 0, **shape) -> dict[str, float]:
    """Run kernel `name` at `shape` and compare it with its twin; returns output → error / bound.
    A `_tf32` / `_bf16` kernel is held to the tolerance of its precision (check.TOLERANCES)."""
    rng = np.random.default_rng(seed)
    got, want, terms, counters = CASES[precision(name)[0]](runner, rng, name, **shape)
    tol = TOLERANCES[precision(name)[1]]
    out = {}
    for k in want:
        value = runner.get(got[k])
        if value.dtype == np.uint16:  # BF16 bits (a product's operand copy): compared by value
            value = ref.bf16_values(value)
        if terms.get(k) == 0:  # exact by design (see the case)
            np.testing.assert_array_equal(value, want[k], err_msg=f"{name}: {k}")
            out[k] = 0.0
        else:
            out[k] = compare(name, k, value, want[k], terms.get(k, 1), tol)
    if counters is not None:
        assert not runner.get(counters).any(), f"{name}: split-K counters not returned to zero"
    return out


def _nan(r, shape):
    return r.put(np.full(shape, np.nan, f32))


def _splitk(r, tiles, splits, floats=SLAB):
    return r.put(np.zeros(max(tiles * splits * floats, 1), f32)), r.put(np.zeros(tiles * TILE_COUNTERS, np.uint32))


def _tiles(M, N, rows=TILE):
    return math.ceil(M / rows) * math.ceil(N / 64)


def _version(name):
    """The kernel's base name: the precision suffix (`_tf32`, `_bf16`) and the tile shape's (`_tall`,
    `_wide`) dropped."""
    return precision(name)[0].removesuffix("_tall").removesuffix("_wide")


def _product_launch(r, kernel, M, N, splits):
    """(grid, scratch, counters) of tile-product kernel `kernel` over an M × N output with K split
    `splits` ways, shaped as geometry.Gemm shapes its version (64-row, `_tall` or `_wide` tiles)."""
    shape, prec = precision(kernel)
    gm = Gemm(M, N, 0, splits, tall=shape.endswith("_tall"), precision=prec, wide=shape.endswith("_wide"))
    return gm.grid, *_splitk(r, gm.fixup_tiles, splits, gm.part_slab)


def _operand(r, kernel, a):
    """A product's operand as `kernel` reads it: the wide BF16 products take BF16 copies
    (kernels/bf16_copy.cu, made by the plan), the others fp32."""
    return r.put(ref.bf16_copy(a) if kernel.endswith("_wide_bf16") else a)


def _copy16(r, shape):
    """A `…_with_copy` kernel's BF16 copy buffer (bf16_copy.cuh), zeroed."""
    return r.put(np.zeros(shape, np.uint16))


def _rounded(r, out):
    """What a BF16 copy of the kernel's own output `out` must hold, bit for bit (compared by value)."""
    return ref.bf16_values(ref.bf16_copy(r.get(out)))


def _schedule(r, rng, N, B):
    """A 3-step schedule and the counter at step 1, so kernels must index by the counter."""
    batches = rng.integers(0, N, (3, B)).astype(i32)
    flips = (rng.random((3, B)) < 0.5).astype(np.uint8)
    return r.put(batches), r.put(flips), r.put(np.array([1, 0], i32)), batches[1], flips[1]


def _flipped(images, index, flip):
    x = images[index]
    return np.where(flip.astype(bool)[:, None, None, None], x[:, :, ::-1], x)


# -- the cases ---------------------------------------------------------------------------------------

@case("embed_inputs", "embed_inputs_with_copy", "embed_forward", "embed_forward_rows", "embed_backward",
      "embed_forward_tall", "embed_backward_tall", "embed_forward_wide", "embed_backward_wide")
def _embed(r, rng, kernel, B, d=1, embed="channel-sum", shift=0.0, splits=1, rows=1, parts=1):
    name = _version(kernel)
    N, K = B + 5, 1024 if embed == "channel-sum" else 3072
    images = rng.integers(0, 256, (N, 32, 32, 3), dtype=np.uint8)
    batches, flips, ctr, index, flip = _schedule(r, rng, N, B)
    x = _flipped(images, index, flip)
    W = (rng.standard_normal((K, d)) / np.sqrt(K)).astype(f32)
    pixels = (r.put(images), batches, flips, ctr, i32(embed == "full"), f32(shift))
    s64 = ops.embed_inputs(ops.pixels_to_float(x, np.float64), embed, shift)
    if name == "embed_inputs":
        S = _nan(r, (B, K))
        r.launch(name, max(1, B - 2), pixels + (S, i32(B)))  # fewer blocks than images: the grid strides
        return {"S": S}, {"S": s64}, {"S": 3}, None
    if name == "embed_inputs_with_copy":
        S, S16 = _nan(r, (B, K)), _copy16(r, (B, K))
        r.launch(name, max(1, B - 2), pixels + (S, S16, i32(B)))
        return {"S": S, "S16": S16}, {"S": s64, "S16": _rounded(r, S)}, {"S": 3, "S16": 0}, None
    if name == "embed_forward_rows":
        S, out = _nan(r, (B, K)), _nan(r, (B, d))
        r.launch(name, math.ceil(B / rows) * parts, pixels + (r.put(W), out, S, i32(B), i32(K), i32(d), i32(rows),
                                                              i32(parts)), shared=rows * K * 4)
        want = ops.embed_forward(x, W.astype(np.float64), embed, shift)
        return {"h0": out, "S": S}, {"h0": want, "S": s64}, {"h0": 3 * K, "S": 3}, None
    S = _operand(r, kernel, ops.embed_inputs(ops.pixels_to_float(x, f32), embed, f32(shift)).astype(f32))
    if name == "embed_forward":
        grid, scratch, counters = _product_launch(r, kernel, B, d, splits)
        out = _nan(r, (B, d))
        if kernel == "embed_forward_wide_bf16":  # also h0's BF16 copy
            out16 = _copy16(r, (B, d))
            r.launch(kernel, grid, (S, _operand(r, kernel, W), out, out16, i32(B), i32(K), i32(d), i32(splits),
                                    scratch, counters))
            want = ops.embed_forward(x, W.astype(np.float64), embed, shift)
            return {"h0": out, "h0 in BF16": out16}, {"h0": want, "h0 in BF16": _rounded(r, out)}, \
                {"h0": 3 * K, "h0 in BF16": 0}, counters
        r.launch(kernel, grid, (S, _operand(r, kernel, W), out, i32(B), i32(K), i32(d), i32(splits), scratch, counters))
        return {"h0": out}, {"h0": ops.embed_forward(x, W.astype(np.float64), embed, shift)}, {"h0": 3 * K}, counters
    dh = rng.standard_normal((B, d)).astype(f32)
    grid, scratch, counters = _product_launch(r, kernel, K, d, splits)
    out = _nan(r, (K, d))
    r.launch(kernel, grid, (S, _operand(r, kernel, dh), out, i32(B), i32(K), i32(d), i32(splits), scratch, counters))
    want = ops.embed_backward(dh.astype(np.float64), x, W.astype(np.float64), embed, shift)[0]
    return {"∂We": out}, {"∂We": want}, {"∂We": 3 * B}, counters


@case("linear_forward", "linear_gelu_forward", "linear_backward_input", "linear_backward_weight",
      "linear_forward_tall", "linear_gelu_forward_tall", "linear_backward_input_tall", "linear_backward_weight_tall",
      "linear_forward_wide", "linear_gelu_forward_wide", "linear_backward_input_wide", "linear_backward_weight_wide",
      "linear_backward_input_gelu_wide")
def _linear(r, rng, kernel, B, n_in, n_out, splits=1):
    """The MLP's products (the wide BF16 GELU kernels also write BF16 copies: of a, and of ∂u, which
    linear_backward_input_gelu_wide_bf16 computes as ∂u = (∂y Wᵀ)·GELU'(u))."""
    name = _version(kernel)
    x = rng.standard_normal((B, n_in)).astype(f32)
    W = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(f32)
    b = rng.standard_normal(n_out).astype(f32)
    dy = rng.standard_normal((B, n_out)).astype(f32)
    x64, W64, b64, dy64 = (a.astype(np.float64) for a in (x, W, b, dy))
    if name in ("linear_forward", "linear_gelu_forward"):
        grid, scratch, counters = _product_launch(r, kernel, B, n_out, splits)
        outs = [_nan(r, (B, n_out)) for _ in range(1 if name == "linear_forward" else 2)]
        if kernel == "linear_gelu_forward_wide_bf16":
            outs.append(r.put(np.zeros((B, n_out), np.uint16)))
        r.launch(kernel, grid, (_operand(r, kernel, x), _operand(r, kernel, W), r.put(b), *outs, i32(B), i32(n_in),
                                i32(n_out), i32(splits), scratch, counters))
        if name == "linear_forward":
            return {"y": outs[0]}, {"y": ops.linear_forward(x64, W64, b64)}, {"y": n_in}, counters
        u, a = ref.linear_gelu_forward(x64, W64, b64)
        got, want = {"u": outs[0], "a": outs[1]}, {"u": u, "a": a}
        if len(outs) == 3:  # a's BF16 copy: a rounded once more (within BF16's bound of the product)
            got["a in BF16"], want["a in BF16"] = outs[2], a
        return got, want, {k: n_in for k in got}, counters
    dx_ref, dW_ref, db_ref = ops.linear_backward(dy64, x64, W64)
    if name == "linear_backward_input_gelu":
        grid, scratch, counters = _product_launch(r, kernel, B, n_in, splits)
        u = (2 * rng.standard_normal((B, n_in))).astype(f32)
        du, du16 = _nan(r, (B, n_in)), r.put(np.zeros((B, n_in), np.uint16))
        r.launch(kernel, grid, (_operand(r, kernel, dy), _operand(r, kernel, W), r.put(u), du, du16, i32(B),
                                i32(n_in), i32(n_out), i32(splits), scratch, counters))
        want = ops.gelu_backward(dx_ref, u.astype(np.float64))
        names = ("∂u", "∂u in BF16")
        return dict(zip(names, (du, du16))), dict.fromkeys(names, want), dict.fromkeys(names, n_out), counters
    if name == "linear_backward_input":
        grid, scratch, counters = _product_launch(r, kernel, B, n_in, splits)
        dx = _nan(r, (B, n_in))
        r.launch(kernel, grid, (_operand(r, kernel, dy), _operand(r, kernel, W), dx, i32(B), i32(n_in), i32(n_out),
                                i32(splits), scratch, counters))
        return {"∂x": dx}, {"∂x": dx_ref}, {"∂x": n_out}, counters
    grid, scratch, counters = _product_launch(r, kernel, n_in, n_out, splits)
    dW, db = _nan(r, (n_in, n_out)), _nan(r, (n_out,))
    r.launch(kernel, grid, (_operand(r, kernel, x), _operand(r, kernel, dy), dW, db, i32(B), i32(n_in), i32(n_out),
                            i32(splits), scratch, counters))
    return {"∂W": dW, "∂b": db}, {"∂W": dW_ref, "∂b": db_ref}, {"∂W": B, "∂b": B}, counters


@case("gelu_forward", "gelu_backward")
def _gelu(r, rng, name, n, grid=3):
    u = (3 * rng.standard_normal(n)).astype(f32)
    da = rng.standard_normal(n).astype(f32)
    out = _nan(r, (n,))
    if name == "gelu_forward":
        r.launch(name, grid, (r.put(u), out, i32(n)))
        return {"a": out}, {"a": ops.gelu_forward(u.astype(np.float64))}, {}, None
    r.launch(name, grid, (r.put(da), r.put(u), out, i32(n)))
    return {"∂u": out}, {"∂u": ops.gelu_backward(da.astype(np.float64), u.astype(np.float64))}, {}, None


@case("residual_layernorm_forward", "residual_layernorm_backward", "residual_layernorm_forward_with_copy",
      "residual_layernorm_backward_with_copy")
def _layernorm(r, rng, name, B, d, splits=1):
    """The LayerNorms; the `_with_copy` versions' BF16 copy of y or ∂s must be the rounding of what they wrote."""
    copy = name.endswith("_with_copy")
    x, v, dy = (rng.standard_normal((B, d)).astype(f32) for _ in range(3))
    gamma, beta = (1 + 0.3 * rng.standard_normal(d)).astype(f32), rng.standard_normal(d).astype(f32)
    y_ref, (n_ref, rstd_ref) = ops.residual_layernorm_forward(x.astype(np.float64), v.astype(np.float64),
                                                             gamma.astype(np.float64), beta.astype(np.float64), 1e-5)
    rows = math.ceil(B / 8)
    if name.startswith("residual_layernorm_forward"):
        y, n, rstd, y16 = _nan(r, (B, d)), _nan(r, (B, d)), _nan(r, (B,)), _copy16(r, (B, d))
        r.launch(name, rows, (r.put(x), r.put(v), r.put(gamma), r.put(beta), y, *([y16] if copy else []), n, rstd,
                              i32(B), i32(d), f32(1e-5)))
        got, want = {"y": y, "n": n, "rstd": rstd}, {"y": y_ref, "n": n_ref, "rstd": rstd_ref[:, 0]}
        terms = {"y": d, "n": d, "rstd": d}
        if copy:
            got["y16"], want["y16"], terms["y16"] = y16, _rounded(r, y), 0
        return got, want, terms, None
    nrm, rstd = n_ref.astype(f32), rstd_ref[:, 0].astype(f32)
    ds_ref, dg_ref, db_ref = ops.residual_layernorm_backward(dy.astype(np.float64), (nrm.astype(np.float64),
                                                             rstd.astype(np.float64)[:, None]), gamma.astype(np.float64))
    tiles = math.ceil(2 * d / 64)
    scratch, counters = _splitk(r, tiles, splits, 64)
    ds, dg, db, ds16 = _nan(r, (B, d)), _nan(r, (d,)), _nan(r, (d,)), _copy16(r, (B, d))
    r.launch(name, rows + tiles * splits, (r.put(dy), r.put(nrm), r.put(rstd), r.put(gamma), ds,
                                           *([ds16] if copy else []), dg, db, i32(B), i32(d), i32(rows), i32(splits),
                                           scratch, counters))
    got, want = {"∂s": ds, "∂γ": dg, "∂β": db}, {"∂s": ds_ref, "∂γ": dg_ref, "∂β": db_ref}
    terms = {"∂s": d, "∂γ": B, "∂β": B}
    if copy:
        got["∂s16"], want["∂s16"], terms["∂s16"] = ds16, _rounded(r, ds), 0
    return got, want, terms, counters


@case("residual_join", "residual_join_with_copy")
def _join(r, rng, name, n, grid=3):
    copy = name.endswith("_with_copy")
    ds, dxm = rng.standard_normal(n).astype(f32), rng.standard_normal(n).astype(f32)
    stats = np.zeros((2, 8), f32)
    stats[1, 4:7] = [1.0, 2.0, 3.0]  # the join adds to what is already there
    dx, st, dx16 = _nan(r, (n,)), r.put(stats), _copy16(r, (n,))
    r.launch(name, grid, (r.put(ds), r.put(dxm), dx, *([dx16] if copy else []), i32(n), r.put(np.array([1, 0], i32)),
                          st, i32(8), i32(4)))
    want_dx, sums = ref.residual_join(ds.astype(np.float64), dxm.astype(np.float64))
    got, want = {"∂x": dx, "stats": st}, {"∂x": want_dx, "stats": _with(stats, 1, 4, np.array([1, 2, 3]) + sums)}
    terms = {"stats": n}
    if copy:
        got["∂x16"], want["∂x16"], terms["∂x16"] = dx16, _rounded(r, dx), 0
    return got, want, terms, None


def _with(stats, row, col, values):
    out = stats.astype(np.float64).copy()
    out[row, col:col + len(values)] = values
    return out


@case("margin_loss_forward", "margin_loss_backward", "cross_entropy_forward", "cross_entropy_backward")
def _loss(r, rng, name, B, C, ties=False):
    z = rng.standard_normal((B, C)).astype(f32)
    if ties:  # equal logits: the rival must be the first index, as reference.rival_class takes it
        z = np.round(z).astype(f32)
    N = B + 3
    labels = rng.integers(0, C, N).astype(np.uint8)
    batches, _, ctr, index, _ = _schedule(r, rng, N, B)
    y = labels[index].astype(np.int64)
    z64 = z.astype(np.float64)
    margin = name.startswith("margin")
    extra = (f32(0.3),) if margin else ()
    grid = math.ceil(B / 256)
    if name.endswith("forward"):
        per, stats = _nan(r, (B,)), r.put(np.zeros((2, 4), f32))
        r.launch(name, grid, (r.put(z), r.put(labels), batches, ctr, per, stats, i32(4), i32(B), i32(C)) + extra)
        value, per_ref = ops.margin_loss_forward(z64, y, 0.3) if margin else ops.cross_entropy_forward(z64, y)
        return {"ℓ": per, "stats": stats}, {"ℓ": per_ref, "stats": _with(np.zeros((2, 4)), 1, 0, [value])}, \
            {"ℓ": C, "stats": B}, None
    dz = _nan(r, (B, C))
    r.launch(name, grid, (r.put(z), r.put(labels), batches, ctr, dz, i32(B), i32(C)) + extra)
    want = ops.margin_loss_backward(z64, y, 0.3) if margin else ops.cross_entropy_backward(z64, y)
    return {"∂z": dz}, {"∂z": want}, {"∂z": C}, None


def _flat_grads(rng, model):
    specs = param_layout(model)
    g = rng.standard_normal(specs[-1].offset + specs[-1].size).astype(f32)
    return g, param_offsets(model), StatsLayout.of(model)


@case("bf16_copy")
def _bf16_copy(r, rng, name, n, grid=3, offset=0):
    """Random values, halfway cases (ties to even, both ways) and the extremes; `offset` starts the
    buffers off their 16-byte alignment (the element path)."""
    x = (rng.standard_normal(n + offset) * 10.0 ** rng.integers(-30, 30, n + offset)).astype(f32)
    ties = (np.arange(n + offset, dtype=np.uint32) & 1) << 16 | 0x3F808000  # 1 + 2⁻⁸ (+ 2⁻⁷): halfway
    x = np.where(np.arange(n + offset) % 3 == 0, ties.view(f32), x)
    x[:2] = np.float32(3.4e38), np.float32(-1e-45)
    xd, yd = r.put(x), r.put(np.zeros(n + offset, np.uint16))
    r.launch(name, grid, (xd[offset:], yd[offset:], i32(n)))
    want = np.concatenate([np.zeros(offset, np.uint16), ref.bf16_copy(x[offset:])])
    return {"y": yd}, {"y": ref.bf16_values(want)}, {"y": 0}, None


@case("grad_norm_sq", "grad_norm_clip", "sgd_momentum_update", "sgd_clip_update", "grad_average")
def _optimiser(r, rng, name, width, hidden, blocks=1, threshold=10.0, grid=5, world=2):
    model = ModelConfig(width=width, hidden=hidden, blocks=blocks)
    g, offsets, st = _flat_grads(rng, model)
    P, T = len(g), st.tensors
    if name == "grad_average":  # step 1's row holds the rank's own ‖g_t‖², which must go
        stats = rng.standard_normal((2, st.width)).astype(f32)
        gd, s = r.put(g), r.put(stats)
        r.launch(name, grid, (gd, i32(P), f32(1.0 / world), i32(T), r.put(np.array([1, 0], i32)), s, i32(st.width)))
        want_g, want_s = g.copy(), stats.copy()
        ref.grad_average(want_g, world)  # float32 twin, compared exactly: one rounded product each
        want_s[1, st.grad_sq:st.grad_sq + T] = 0
        return {"g": gd, "stats": s}, {"g": want_g, "stats": want_s}, {"g": 0, "stats": 0}, None
    g64 = g.astype(np.float64)
    sq = np.array([float(np.vdot(x, x)) for x in param_views(g64, model).values()])
    stats = np.zeros((2, st.width), f32)
    ctr = np.array([1, 0], i32)
    if name == "grad_norm_sq":
        s = r.put(stats)
        r.launch(name, math.ceil(P / 4096), (r.put(g), r.put(offsets), i32(T), r.put(ctr), s, i32(st.width)))
        return {"stats": s}, {"stats": _with(stats, 1, st.grad_sq, sq)}, {"stats": P}, None
    stats[1, st.grad_sq:st.grad_sq + T] = sq
    norm = float(np.sqrt(sq.sum()))
    if name == "grad_norm_clip":
        gd, s = r.put(g), r.put(stats)
        r.launch(name, grid, (gd, i32(P), i32(T), r.put(ctr), s, i32(st.width), f32(threshold), f32(1.0)))
        want_g = g64.copy()
        ref.grad_norm_clip(want_g, threshold, 1.0)
        return {"g": gd, "stats": s}, {"g": want_g, "stats": _with(stats, 1, 1, [norm, float(norm > threshold)])}, \
            {"g": P, "stats": P}, None
    w, v = rng.standard_normal(P).astype(f32), rng.standard_normal(P).astype(f32)
    lrs = np.array([0.3, 0.05, 0.7], f32)
    wd, vd, cd = r.put(w), r.put(v), r.put(ctr)
    if name == "sgd_momentum_update":
        r.launch(name, grid, (wd, vd, r.put(g), i32(P), r.put(lrs), cd, f32(0.9), f32(1e-4)))
        # float32 twin, compared exactly: the kernel rounds each operation as NumPy does (sgd.cu)
        ref.sgd_momentum_update(w, v, g.copy(), lrs[1], 0.9, 1e-4)
        exact = {"w": 0, "v": 0}
        want = {"w": w, "v": v, "ctr": np.array([2, 0])}
        got = {"w": wd, "v": vd, "ctr": cd}
        return got, want, exact, None
    s, w16 = r.put(stats), r.put(np.zeros(P, np.uint16))
    r.launch(name, grid, (wd, vd, r.put(g), i32(P), i32(T), r.put(lrs), cd, s, i32(st.width), f32(threshold), f32(1.0),
                          f32(0.9), f32(1e-4), w16, i32(P)))
    # the BF16 copy, bit for bit the rounding of what the kernel wrote to w
    np.testing.assert_array_equal(r.get(w16), ref.bf16_copy(r.get(wd)), err_msg=f"{name}: params16")
    w64, v64 = w.astype(np.float64), v.astype(np.float64)
    ref.sgd_clip_update(w64, v64, g64.copy(), float(lrs[1]), 0.9, 1e-4, threshold, 1.0)
    return {"w": wd, "v": vd, "stats": s, "ctr": cd}, \
        {"w": w64, "v": v64, "stats": _with(stats, 1, 1, [norm, float(norm > threshold)]), "ctr": np.array([2, 0])}, \
        {"w": P, "v": P, "stats": P}, None


def _model_arrays(rng, model):
    """Parameters like init_params' but with γ, β away from 1, 0 so they matter."""
    specs = param_layout(model)
    p = np.empty(specs[-1].offset + specs[-1].size)
    for s in specs:
        bound = 1 / np.sqrt(s.fan_in) if s.fan_in else 0.3
        p[s.offset:s.offset + s.size] = rng.uniform(-bound, bound, s.size) + (1.0 if s.kind == "gamma" else 0.0)
    return p.astype(f32)


@case("fused_rows")
def _fused_rows(r, rng, name, B, d, H, blocks=1, C=10, rows=4, loss="margin"):
    model = ModelConfig(width=d, hidden=H, blocks=blocks, classes=C)
    params, st = _model_arrays(rng, model), StatsLayout.of(model)
    N = B + 4
    labels = rng.integers(0, C, N).astype(np.uint8)
    batches, _, ctr, index, _ = _schedule(r, rng, N, B)
    h0 = rng.standard_normal((B, d)).astype(f32)
    L = blocks
    X = np.full((L + 1, B, d), np.nan, f32)
    X[0] = h0
    bufs = {"X": r.put(X), "U": _nan(r, (L, B, H)), "A": _nan(r, (L, B, H)), "NRM": _nan(r, (L, B, d)),
            "RSTD": _nan(r, (L, B)), "DY": _nan(r, (L, B, d)), "DS": _nan(r, (L, B, d)), "Z": _nan(r, (B, C)),
            "DH0": _nan(r, (B, d))}
    stats = r.put(np.zeros((3, st.width), f32))
    r16 = lambda n: (n + 15) // 16 * 16  # noqa: E731
    smem = 4 * (rows * (4 * r16(d) + r16(H) + r16(C)) + 32 + 256)
    r.launch(name, math.ceil(B / rows), (r.put(params), r.put(param_offsets(model)), *bufs.values(), r.put(labels),
                                         batches, ctr, stats, i32(st.width), i32(st.path), i32(B), i32(d), i32(H), i32(C),
                                         i32(L), i32(rows), i32(0 if loss == "margin" else 1), f32(0.3), f32(1e-5)),
             shared=smem)
    want = ref.fused_rows(params.astype(np.float64), h0.astype(np.float64), labels[index].astype(np.int64), model,
                          loss, 0.3)
    stats_want = np.zeros((3, st.width))
    stats_want[1, 0] = want["loss"]
    stats_want[1, st.path:] = want["path"].ravel()
    chain = 4 * L * (d + H) + C
    got = {**bufs, "stats": stats}
    return got, {**{k: want[k] for k in bufs}, "stats": stats_want}, {k: chain for k in got}, None


@case("fused_weight_grads")
def _fused_weight_grads(r, rng, name, B, d, H, blocks=1, C=10, embed="channel-sum", sm_count=4):
    model = ModelConfig(embed=embed, width=d, hidden=H, blocks=blocks, classes=C)
    st, L, K = StatsLayout.of(model), blocks, model.embed_inputs
    jobs, scratch_n, counters_n = weight_grad_jobs(model, B, sm_count)
    N = B + 4
    images = rng.integers(0, 256, (N, 32, 32, 3), dtype=np.uint8)
    _, _, ctr, index, flip = _schedule(r, rng, N, B)
    x = _flipped(images, index, flip)
    S = ops.embed_inputs(ops.pixels_to_float(x, f32), embed, f32(0.0)).astype(f32)  # as embed_inputs writes it
    saved = {"X": (L + 1, B, d), "A": (L, B, H), "U": (L, B, H), "DS": (L, B, d), "DY": (L, B, d), "NRM": (L, B, d),
             "Z": (B, C), "DH0": (B, d)}
    host = {k: rng.standard_normal(s).astype(f32) for k, s in saved.items()}
    host["RSTD"] = np.ones((L, B))
    P = sum(s.size for s in param_layout(model))
    grads = _nan(r, (P,))
    stats = r.put(np.zeros((2, st.width), f32))
    counters = r.put(np.zeros(counters_n, np.uint32))
    dev = {k: r.put(host[k]) for k in saved}
    r.launch(name, len(jobs), (r.put(jobs), grads, r.put(param_offsets(model)), dev["X"], dev["A"], dev["U"], dev["DS"],
                               dev["DY"], dev["NRM"], dev["Z"], dev["DH0"], r.put(S), ctr,
                               r.put(np.zeros(scratch_n, f32)), counters, stats, i32(st.width), i32(B), i32(K), i32(d),
                               i32(H), i32(C), i32(L)))
    p64 = param_views(np.zeros(P), model)
    want = ref.fused_weight_grads({k: v.astype(np.float64) for k, v in host.items()}, x, p64, L, embed)
    flat = np.concatenate([want[s.name].ravel() for s in param_layout(model)])
    stats_want = np.zeros((2, st.width))
    stats_want[1, st.grad_sq:st.path] = [float(np.vdot(want[s.name], want[s.name])) for s in param_layout(model)]
    return {"grads": grads, "stats": stats}, {"grads": flat, "stats": stats_want}, \
        {"grads": 3 * B, "stats": max(s.size for s in param_layout(model))}, counters
