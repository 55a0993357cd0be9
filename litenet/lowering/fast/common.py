"""What the fast tier's rewrites share: the split-K placeholders, the region that replaces others, where a
region's reference calls read ∂output and write ∂input, and the rules both kinds of network use."""

from __future__ import annotations

import math

import numpy as np

from litenet.lowering.fast.mlp_shape import bf16_copy, copy_of, has_copies, mlp_shape
from litenet.lowering.program import Call, Ref, Region

i32, f32 = np.int32, np.float32
SCRATCH, COUNTERS = "<split-K scratch>", "<split-K counters>"  # placeholders until the sizes are known
ROW_WARPS = 8  # the row kernels: one warp a row, 8 rows a block
LAYERNORM_REWRITE = "LayerNorm (a warp a row)"  # the region's name, which tokens.recompute also looks for


def replaced(rewrite: str, regions: list[Region], calls: list[Call]) -> Region:
    """One region standing for `regions` (consecutive), computed by `calls`."""
    ops = tuple(name for r in regions for name in r.ops)
    phase = next((r.phase for r in regions if r.phase != "input"), "input")  # images + embedding: a forward
    return Region(" + ".join(r.name for r in regions), phase, ops, calls,
                  [c for r in regions for c in r.reference], rewrite)


def packed_constant(prog, name: str, values: np.ndarray, purpose: str) -> Ref:
    """A state tensor uploaded once from host values (the inference rewrites' packed weights)."""
    ref = prog.add(name, values.shape, values.dtype, life="state", purpose=purpose)
    prog.constants[name] = values
    return ref


def unused_pointers(prog) -> tuple[Ref, Ref]:
    """A float and an int32 tensor for the pointer arguments a launch does not read (flag 0)."""
    return (prog.add("infer.dummy_f", (4,), life="state", purpose="an unused pointer argument"),
            prog.add("infer.dummy_i", (4,), np.int32, life="state", purpose="an unused pointer argument"))


def dy_of(region) -> Ref:
    """∂ of the op's output, as the region's reference calls read it."""
    for call in region.reference:
        for name in ("dy", "da"):
            if name in call.args:
                return call.args[name]
    raise ValueError(f"{region.name}: no ∂output among its calls")


def dins_of(region) -> Ref | None:
    """Where the region's reference calls put ∂input (None if they make none)."""
    for call in region.reference:
        for name in ("dx", "ds", "du"):
            if name in call.args and call.kernel.endswith("_reference") and "backward" in call.kernel:
                return call.args[name]
    return None


def rows_of(ref: Ref) -> int:
    return math.prod(ref.shape[:-1])


def one_op(net, regions, i, phase: str):
    """The op of region i if it covers one op in `phase`, else None."""
    if i >= len(regions) or regions[i].phase != phase:
        return None
    return net.op(regions[i])


def layernorm(net, regions, i):
    """LayerNorm alone, one warp a row."""
    op = one_op(net, regions, i, "forward")
    if not (op and op.kind == "layernorm"):
        return None
    w = net.w
    x, y = w.act(op.inputs[0]), w.act(op.name)
    rows, d = rows_of(x), x.shape[-1]
    # A forward pass alone (evaluation, inference) keeps nothing for a backward: the normalised n goes to y,
    # which the same thread stores after it — one tensor written instead of two.
    nrm = y if net.train is None else w.cache(op, "nrm", x.shape)
    call = Call("layernorm_forward", math.ceil(rows / ROW_WARPS),
                dict(x=x, gamma=w.param(op, "gamma"), beta=w.param(op, "beta"), y=y, nrm=nrm,
                     rstd=w.cache(op, "rstd", (rows,)), B=i32(rows), d=i32(d), eps=f32(op.attrs["eps"])))
    return 1, [replaced(LAYERNORM_REWRITE, regions[i:i + 1], [call])]


def gelu_backward(net, regions, i):
    op = one_op(net, regions, i, "backward")
    if op is None or op.kind != "gelu":
        return None
    da, du, u = dy_of(regions[i]), dins_of(regions[i]), net.w.act(op.inputs[0])
    calls = [Call("gelu_backward", net.tiles.elementwise_grid(u.size), dict(da=da, u=u, du=du, n=i32(u.size)))]
    if has_copies(net, "GH16"):
        mlp = mlp_shape(net)
        g = mlp.geometry.gemms
        if g["fc1_backward_weight"].reads_bf16 or g["fc1_backward_input"].reads_bf16:
            calls.append(bf16_copy(net, du, copy_of(net, du)))
    return 1, [replaced("GELU' (elementwise)", regions[i:i + 1], calls)]


def join(net, regions, i):
    """∂x = ∂s + ∂x_main at a residual's input (two parts), with the path sums, in one elementwise launch."""
    r = regions[i]
    if r.phase != "join" or len(r.reference) != 2 or r.reference[1].kernel != "path_sums_reference":
        return None
    total, sums = r.reference[0].args, r.reference[1].args
    ds, dm, dx = sums["ds"], sums["dm"], total["out"]
    args = dict(ds=ds, dx_main=dm, dx=dx, n=i32(dx.size), ctr=net.prog.ref("ctr"), stats=net.prog.ref("stats"),
                stat_width=i32(net.w.stats.width), slot=sums["slot"])
    mlp = mlp_shape(net)
    grid = net.tiles.elementwise_grid(dx.size)
    if mlp and mlp.geometry.gemms["embed_backward"].reads_bf16 and r.ops[0] == mlp.embed.name:
        call = Call("residual_join_with_copy", grid, {**args, "dx16": copy_of(net, dx)})  # ∂h0's copy for ∂We
    else:
        call = Call("residual_join", grid, args)
    return 1, [replaced("join + path sums (elementwise)", [r], [call])]


