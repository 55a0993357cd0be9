"""Rewrites for networks of vectors (the MLP family, and any op list without patch tensors), with
geometry tiles (products.GeometryTiles). Each covers the regions named, where the condition holds:

  embed            images + pixel_rows + linear (no bias): s(x) and h0 = s(x)·We straight from the
                   uint8 training set, flips applied as read (embed.cu) — one launch of rows in shared
                   memory for small batches and a small We, else s(x) then a tile product
                   (geometry.choose_embed). Augmentation: flip or none.
  linear + gelu    u = x W + b with a = GELU(u) in the product's epilogue (the GELU its only reader).
  linear           y = x W + b.
  residual + ln    s = x + v, then LayerNorm(s), in one pass a row (the LayerNorm its only reader).
  layernorm        alone.
  ∂linear          ∂W (and ∂b) and ∂x as two tile products; a wide BF16 ∂x with the GELU before it
                   takes GELU' into its epilogue (linear_backward_input_gelu), otherwise
  ∂gelu            is its own elementwise launch.
  ∂layernorm       ∂s, ∂γ, ∂β in one launch (rows, then column sums split over the rows).
  join             ∂x = ∂s + ∂x_main where a residual's input meets its branch, with the path sums.
  ∂embed           ∂We = s(x)ᵀ ∂h0 (a tile product; the images need no gradient).
  fused step       the whole step of a small MLP (ModelConfig) in 4 launches: embedding, fused_rows
                   (every image's forward and backward in shared memory), fused_weight_grads, the
                   update — when geometry.choose_plan says so; SGD with decay "all", margin or plain
                   cross-entropy, flips only.

The wide BF16 products read BF16 copies of their operands (mlp_shape.py says which and why).
"""

from __future__ import annotations

import math

import numpy as np

from litenet.graph import Op
from litenet.lowering.fast.common import COUNTERS, ROW_WARPS, SCRATCH, dins_of, dy_of, gelu_backward, join, layernorm
from litenet.lowering.fast.common import replaced, rows_of
from litenet.lowering.fast.geometry import choose_plan
from litenet.lowering.fast.mlp_shape import bf16_copy, copy_of, has_copies, mlp_shape, params_copy
from litenet.lowering.program import Call, Ref

i32, f32 = np.int32, np.float32

def _gemm(net, role: str | None, M: int, N: int, K: int, weight_grad: bool):
    """A product's tiling: the MLP shape's named gemm, or geometry tiles without wide BF16 (no copies)."""
    mlp = mlp_shape(net)
    if mlp is not None and role is not None:
        g = mlp.geometry.gemms[role]
        from litenet.lowering.fast.products import Tiling
        from litenet.gpu.splitk import TILE_COUNTERS
        return Tiling(g.version, g.grid, g.splits, g.scratch, g.fixup_tiles * TILE_COUNTERS, g.reads_bf16)
    t = net.tiles.product(M, N, K, weight_grad)
    if t.reads_bf16:
        from litenet.lowering.fast.products import GeometryTiles
        plain = GeometryTiles(net.precision, net.sm_count, net.tiles.tall, False)
        t = plain.product(M, N, K, weight_grad)
    return t


def _role(net, op: Op, what: str) -> str | None:
    """The MLP shape's name of a product: embed / fc1 / fc2 / head, + _forward, _backward_weight…"""
    mlp = mlp_shape(net)
    if mlp is None:
        return None
    if op is mlp.embed:
        return "embed_forward" if what == "forward" else "embed_backward"
    if op is mlp.head:
        return f"head_{what}"
    i = mlp.block_of(op.name)
    return None if i is None else f"{'fc1' if op is mlp.blocks[i][0] else 'fc2'}_{what}"


def _pick(t, fp32: Ref, net) -> Ref:
    """What a product reads: the operand, or its BF16 copy for a wide BF16 product."""
    return copy_of(net, fp32) if t.reads_bf16 else fp32


# -- forward rules ---------------------------------------------------------------------------------------


def _forward(regions, i, kind: str) -> bool:
    return i < len(regions) and regions[i].phase == "forward" and len(regions[i].ops) == 1 and regions[i].ops[0] != "images"


def linear_gelu(net, regions, i):
    if not (_forward(regions, i, "linear") and i + 1 < len(regions) and regions[i + 1].phase == "forward"):
        return None
    lin, gelu = net.op(regions[i]), net.op(regions[i + 1])
    if not (lin and gelu and lin.kind == "linear" and gelu.kind == "gelu" and gelu.inputs == (lin.name,)
            and net.only_reader(lin.name) is gelu and lin.param("bias")):
        return None
    w = net.w
    x, W = w.act(lin.inputs[0]), w.param(lin, "weight")
    u, a = w.act(lin.name), w.act(gelu.name)
    t = _gemm(net, _role(net, lin, "forward"), rows_of(x), W.shape[1], W.shape[0], False)
    by_product = t.reads_bf16  # the wide BF16 kernel writes GELU's copy too
    copy = {"a16": copy_of(net, a)} if by_product else {}
    calls = [net.product("linear_gelu_forward", t, x=_pick(t, x, net), W=_pick(t, W, net), bias=w.param(lin, "bias"),
                         u=u, a=a, **copy, B=i32(rows_of(x)), n_in=i32(W.shape[0]), n_out=i32(W.shape[1]))]
    if not by_product and has_copies(net, "A16"):
        calls.append(bf16_copy(net, a, copy_of(net, a)))
    return 2, [replaced("linear + GELU epilogue", regions[i:i + 2], calls)]


def linear(net, regions, i):
    if not _forward(regions, i, "linear"):
        return None
    op = net.op(regions[i])
    if not (op and op.kind == "linear" and op.param("bias")):
        return None
    w = net.w
    x, W, y = w.act(op.inputs[0]), w.param(op, "weight"), w.act(op.name)
    t = _gemm(net, _role(net, op, "forward"), rows_of(x), W.shape[1], W.shape[0], False)
    call = net.product("linear_forward", t, x=_pick(t, x, net), W=_pick(t, W, net), bias=w.param(op, "bias"), y=y,
                       B=i32(rows_of(x)), n_in=i32(W.shape[0]), n_out=i32(W.shape[1]))
    return 1, [replaced("linear (tile product)", regions[i:i + 1], [call])]


def residual_layernorm(net, regions, i):
    if not (_forward(regions, i, "residual") and i + 1 < len(regions) and regions[i + 1].phase == "forward"):
        return None
    res, ln = net.op(regions[i]), net.op(regions[i + 1])
    if not (res and ln and res.kind == "residual" and ln.kind == "layernorm" and ln.inputs == (res.name,)
            and net.only_reader(res.name) is ln):
        return None
    w = net.w
    y, x = w.act(ln.name), w.act(res.inputs[0])
    rows, d = rows_of(x), x.shape[-1]
    args = dict(x=x, v=w.act(res.inputs[1]), gamma=w.param(ln, "gamma"), beta=w.param(ln, "beta"), y=y,
                nrm=w.cache(ln, "nrm", x.shape), rstd=w.cache(ln, "rstd", (rows,)), B=i32(rows), d=i32(d),
                eps=f32(ln.attrs["eps"]))
    if has_copies(net, "X16"):  # the block's output in BF16 too, for the next block's (or the head's) products
        call = Call("residual_layernorm_forward_with_copy", math.ceil(rows / ROW_WARPS), {**args, "y16": copy_of(net, y)})
    else:
        call = Call("residual_layernorm_forward", math.ceil(rows / ROW_WARPS), args)
    return 2, [replaced("residual + LayerNorm in one pass", regions[i:i + 2], [call])]


# -- backward rules --------------------------------------------------------------------------------------


def _backward(net, regions, i, kind: str) -> Op | None:
    if i >= len(regions) or regions[i].phase != "backward":
        return None
    op = net.op(regions[i])
    return op if op is not None and op.kind == kind else None


def linear_backward(net, regions, i):
    """∂W, ∂b and ∂x of a linear with a bias; with the GELU before it when its ∂x takes GELU'."""
    op = _backward(net, regions, i, "linear")
    if op is None or not op.param("bias"):
        return None
    w = net.w
    x, W, dy = w.act(op.inputs[0]), w.param(op, "weight"), dy_of(regions[i])
    rows, n_in, n_out = rows_of(x), W.shape[0], W.shape[1]
    tw = _gemm(net, _role(net, op, "backward_weight"), n_in, n_out, rows, True)
    ti = _gemm(net, _role(net, op, "backward_input"), rows, n_in, n_out, False)
    dy16 = copy_of(net, dy)
    calls = []
    if (tw.reads_bf16 or ti.reads_bf16) and op is mlp_shape(net).head:  # ∂z's copy, for the head's products
        calls.append(bf16_copy(net, dy, dy16))
    calls.append(net.product("linear_backward_weight", tw, x=_pick(tw, x, net), dy=dy16 if tw.reads_bf16 else dy,
                             dW=w.grad(op, "weight"), db=w.grad(op, "bias"), B=i32(rows), n_in=i32(n_in),
                             n_out=i32(n_out)))
    dx = dins_of(regions[i])
    if dx is None:
        return 1, [replaced("∂W, ∂b (tile product)", regions[i:i + 1], calls)]
    shape = dict(B=i32(rows), n_in=i32(n_in), n_out=i32(n_out))
    gelu = _backward(net, regions, i + 1, "gelu")
    if gelu is not None and gelu.name == op.inputs[0] and ti.reads_bf16:
        du = dins_of(regions[i + 1])
        calls.append(net.product("linear_backward_input_gelu", ti, dy=dy16, W=copy_of(net, W), u=w.act(gelu.inputs[0]),
                                 du=du, du16=copy_of(net, du), **shape))
        return 2, [replaced("∂W, ∂b; ∂x with GELU' in the epilogue", regions[i:i + 2], calls)]
    calls.append(net.product("linear_backward_input", ti, dy=dy16 if ti.reads_bf16 else dy, W=_pick(ti, W, net), dx=dx,
                             **shape))
    return 1, [replaced("∂W, ∂b and ∂x (tile products)", regions[i:i + 1], calls)]


def layernorm_backward(net, regions, i):
    """∂s, ∂γ, ∂β of a LayerNorm (its input's gradient needing no join)."""
    op = _backward(net, regions, i, "layernorm")
    if op is None:
        return None
    w = net.w
    dy, ds = dy_of(regions[i]), dins_of(regions[i])
    rows, d = rows_of(ds), ds.shape[-1]
    mlp = mlp_shape(net)
    if mlp is not None:
        ln = mlp.geometry.layernorm_grads
        splits, tiles = ln.splits, ln.tiles
    else:
        from litenet.lowering.fast.geometry import ColSum, choose_splits
        tiles = ColSum(2 * d, rows, 1).tiles
        splits = choose_splits(tiles, rows, net.sm_count, 0.5)
    row_blocks = math.ceil(rows / ROW_WARPS)
    args = dict(dy=dy, nrm=w.cache(op, "nrm", ds.shape), rstd=w.cache(op, "rstd", (rows,)), gamma=w.param(op, "gamma"),
                ds=ds, dgamma=w.grad(op, "gamma"), dbeta=w.grad(op, "beta"), B=i32(rows), d=i32(d),
                row_blocks=i32(row_blocks), splits=i32(splits), scratch=_scratch(net, tiles * splits * 64 if splits > 1 else 0),
                counters=_counters(net, tiles))
    g = mlp.geometry.gemms if mlp else None
    if g and "G16" in mlp.copies and (g["fc2_backward_weight"].reads_bf16 or g["fc2_backward_input"].reads_bf16):
        call = Call("residual_layernorm_backward_with_copy", row_blocks + tiles * splits, {**args, "ds16": copy_of(net, ds)})
    else:
        call = Call("residual_layernorm_backward", row_blocks + tiles * splits, args)
    return 1, [replaced("∂LayerNorm in one launch", regions[i:i + 1], [call])]


def _scratch(net, floats: int):
    net.scratch = max(net.scratch, floats)
    return SCRATCH


def _counters(net, tiles: int):
    from litenet.gpu.splitk import TILE_COUNTERS
    net.counters = max(net.counters, tiles * TILE_COUNTERS)
    return COUNTERS


def embed_backward(net, regions, i):
    """∂We = s(x)ᵀ ∂h0 for the embedding of the pixel rows (no ∂images)."""
    op = _backward(net, regions, i, "linear")
    mlp = mlp_shape(net)
    if op is None or mlp is None or op is not mlp.embed:
        return None
    w = net.w
    S, dh = w.act(mlp.rows.name), dy_of(regions[i])
    K, d = S.shape[1], dh.shape[1]
    t = _gemm(net, "embed_backward", K, d, net.B, False)
    calls = []
    if t.reads_bf16 and not mlp.blocks:  # no join wrote ∂h0's copy
        calls.append(bf16_copy(net, dh, copy_of(net, dh)))
    calls.append(net.product("embed_backward", t, S=_pick(t, S, net), dH=copy_of(net, dh) if t.reads_bf16 else dh,
                             dW=w.grad(op, "weight"), B=i32(net.B), Kin=i32(K), d=i32(d)))
    return 1, [replaced("∂We (tile product)", regions[i:i + 1], calls)]


RULES = [linear_gelu, linear, residual_layernorm, layernorm, embed_backward, linear_backward, gelu_backward,
         layernorm_backward, join]


# -- the embedding -----------------------------------------------------------------------------------------


def embed_rules(embed: str = "auto"):
    """The embedding rule (images + pixel_rows + linear), with `embed` auto | rows | tiles."""
    def rule(net, regions, i):
        return embed_forward(net, regions, i, embed)
    return [rule]


def embed_forward(net, regions, i, variant: str):
    mlp = mlp_shape(net)
    if mlp is None:
        return None
    # In training, with flips alone, the embedding reads the training set through the schedule (the
    # images region goes); otherwise it reads the images the images region (or the caller) wrote.
    training = regions[i].name == "images" and not set(net.train.augmentations) - {"flip"}
    first = i + 1 if training else i
    if first + 1 >= len(regions) or regions[first].ops != (mlp.rows.name,) or regions[first + 1].ops != (mlp.embed.name,):
        return None
    w, p, B = net.w, net.prog, net.B
    S, out, W = w.act(mlp.rows.name), w.act(mlp.embed.name), w.param(mlp.embed, "weight")
    K, d = S.shape[1], out.shape[1]
    pixels = dict(images=p.ref("dataset.images"), batches=p.ref("batches"), flips=p.ref("flips"), ctr=p.ref("ctr")) \
        if training else _eval_pixels(net)
    pixels.update(full=i32(mlp.rows.attrs["embed"] == "full"), shift=f32(mlp.rows.attrs["input_shift"]))
    g = mlp.geometry
    variant = g.embed_variant if variant == "auto" else variant
    x16 = [bf16_copy(net, out, copy_of(net, out))] if "X16" in mlp.copies else []
    if variant == "rows":
        calls = [Call("embed_forward_rows", math.ceil(B / g.embed_rows) * g.embed_parts,
                      dict(**pixels, W=W, out=out, S=S, B=i32(B), Kin=i32(K), d=i32(d), rows=i32(g.embed_rows),
                           parts=i32(g.embed_parts)), shared=g.embed_smem)]
        if "S16" in mlp.copies:
            calls.append(bf16_copy(net, S, copy_of(net, S)))
        calls += x16
    else:
        if "S16" in mlp.copies:  # s(x) and its copy in one pass
            calls = [Call("embed_inputs_with_copy", B, dict(**pixels, S=S, S16=copy_of(net, S), B=i32(B)))]
        else:
            calls = [Call("embed_inputs", B, dict(**pixels, S=S, B=i32(B)))]
        t = _gemm(net, "embed_forward", B, d, K, False)
        copy16 = {}
        if t.reads_bf16:  # the product writes h0's copy too
            copy16, x16 = {"out16": copy_of(net, out)}, []
        calls.append(net.product("embed_forward", t, S=_pick(t, S, net), W=_pick(t, W, net), out=out, **copy16,
                                 B=i32(B), Kin=i32(K), d=i32(d)))
        calls += x16
    count = 3 if training else 2
    return count, [replaced(f"embedding ({variant})", regions[i:i + count], calls)]


def _eval_pixels(net) -> dict:
    """Images already in the "images" tensor as embed.cu reads them: one row of indices 0 … B−1, no
    flips, step 0."""
    p, B = net.prog, net.B
    index = net.w.state(net.w.name("pixels.index"), (1, B), np.int32, "0 … B−1: the images in order")
    flips = net.w.state(net.w.name("pixels.flips"), (1, B), np.uint8, "zeros: no flips")
    ctr = net.w.state(net.w.name("pixels.ctr"), (2,), np.int32, "zeros: row 0")
    p.constants[index.tensor] = np.arange(B, dtype=np.int32)[None]
    return dict(images=net.w.act("images"), batches=index, flips=flips, ctr=ctr)


def finish_copies(net, program) -> None:
    """The parameters' copy is remade after every upload of parameters (refresh)."""
    copy = params_copy(net)
    if copy is not None:
        program.refresh = [bf16_copy(net, program.ref("params"), copy)]


# -- the fused small-model step ------------------------------------------------------------------------------


def fused_step(net, plan: str, embed: str):
    """The whole step of a small MLP in 4 launches (module docstring), or None where it does not apply."""
    from litenet.model import ModelConfig

    t, mlp = net.train, mlp_shape(net)
    if plan == "ops" or mlp is None or not isinstance(net.model, ModelConfig):
        return None
    g = mlp.geometry
    covered = (t.optimizer == "sgd" and t.decay == "all" and not t.label_smoothing and t.activations == "keep"
               and not set(t.augmentations) - {"flip"} and g.fused_ok and not mlp.copies)
    if plan == "fused" and not covered:
        from litenet.errors import UsageError
        raise UsageError("the fused step covers SGD with decay all, no label smoothing, flips only and small rows")
    if not covered or (plan == "auto" and choose_plan(g) != "fused"):
        return None
    m, B, w, p = net.model, net.B, net.w, net.prog
    d, H, C, L, K = m.width, m.hidden, m.classes, m.blocks, m.embed_inputs
    X = w.state("fused.X", (L + 1, B, d), purpose="block inputs: X[0] = h0, X[i+1] = block i's output")
    S = w.act(mlp.rows.name)
    tensors = {name: p.add(f"fused.{name}", shape, purpose=purpose) for name, shape, purpose in (
        ("U", (L, B, H), "fc1's u, then ∂u in place"), ("A", (L, B, H), "GELU(u)"), ("NRM", (L, B, d), "LayerNorm's n"),
        ("RSTD", (L, B), "LayerNorm's 1/σ"), ("DY", (L, B, d), "∂y at each block's output"),
        ("DS", (L, B, d), "∂s at each block"), ("DH0", (B, d), "∂h0"), ("Z", (B, C), "logits, then ∂z in place"))}
    jobs = w.state("fused.jobs", g.jobs.shape, np.int32, "fused_weight_grads' job table")
    p.constants[jobs.tensor] = g.jobs
    stats = dict(ctr=p.ref("ctr"), stats=p.ref("stats"), stat_width=i32(w.stats.width))
    shape = dict(B=i32(B), d=i32(d), H=i32(H), C=i32(C), blocks=i32(L))
    regions = net.prog.regions
    embed_regions = embed_forward(net, regions, 0, embed)[1]
    embed_calls = [c for r in embed_regions for c in r.calls]
    for c in embed_calls:  # h0 goes into X[0]
        for k, v in c.args.items():
            if isinstance(v, Ref) and v.tensor == w.act(mlp.embed.name).tensor:
                c.args[k] = X[0]
    rows = Call("fused_rows", math.ceil(B / g.rows),
                dict(params=p.ref("params"), layout=p.ref("layout"), X=X, **{k: tensors[k] for k in
                     ("U", "A", "NRM", "RSTD", "DY", "DS", "Z", "DH0")}, labels=p.ref("dataset.labels"),
                     batches=p.ref("batches"), **stats, path_slot=i32(w.stats.path), **shape, rows=i32(g.rows),
                     loss_kind=i32(0 if t.loss == "margin" else 1), margin=f32(t.margin), eps=f32(m.ln_eps)),
                shared=g.fused_smem)
    grads = Call("fused_weight_grads", len(g.jobs),
                 dict(jobs=jobs, grads=p.ref("grads"), layout=p.ref("layout"), X=X, A=tensors["A"], DU=tensors["U"],
                      DS=tensors["DS"], DY=tensors["DY"], NRM=tensors["NRM"], DZ=tensors["Z"], DH0=tensors["DH0"], S=S,
                      ctr=p.ref("ctr"), scratch=_scratch(net, g.scratch), counters=_counters_raw(net, g.counters),
                      stats=p.ref("stats"), stat_width=i32(w.stats.width), Kin=i32(K), **shape))
    body = [r for r in regions if r.phase != "update"]  # fused_weight_grads measures ‖g‖² too
    from litenet.lowering.fast.step import update
    tail = [r for r in regions if r.phase == "update"]
    return [replaced("fused step: embedding, fused_rows, fused_weight_grads (+ ‖g‖²)", body, embed_calls + [rows, grads]),
            *update(net, tail, 0)[1]]


def _counters_raw(net, counters: int):
    net.counters = max(net.counters, counters)
    return COUNTERS
