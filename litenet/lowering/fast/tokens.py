"""Rewrites for networks with patch tensors (the Mixer family, and any op list with tokens-major
(T, B, n) tensors), with split-K tiles (products.SplitTiles). Each covers the regions named:

  patches           images + patches: the batch gathered from the uint8 training set, cropped,
                    flipped, cut out and CutMixed as it is read (patches.cu) — every augmentation.
  product + gelu    u = x W + b (over the channels or the patches) with a = GELU(u) in the epilogue.
  wide products     in a BF16 training step, products over the channels take the wide 128 × 128 tiles of
                    litenet-base's products where geometry.choose_wide does, reading BF16 copies of their
                    operands (`tiling`, `read`); each copy is written by the launch that writes the operand
                    where that kernel has a `_with_copy` version (`fuse_copies`), else by a bf16_copy launch.
  product + residual  y = r + x W + b: the residual's join in the product's epilogue (the product's
                    output its only reader).
  linear            y = x W + b (a product over the patches alone has no fast kernel: reference).
  layernorm         one warp a row.
  mean_tokens       the mean over the patches.
  ∂product + ∂gelu  ∂u = (∂y Wᵀ)·GELU'(u) in one product, then ∂W, ∂b.
  ∂product          ∂W, ∂b and ∂x.
  ∂layernorm + join ∂x = ∂skip + LayerNorm'(∂y): a residual stream's gradient and the LayerNorm's
                    meet in the LayerNorm's backward, with the path sums (layernorm_backward_join).
  ∂layernorm        alone; ∂mean_tokens.
  recompute         (activations = "recompute") each block's LayerNorm outputs and GELU products are
                    not kept: the block's forward launches run again just before its backward, the
                    same kernels on the same inputs, so the same bits. Blocks are the ops named
                    "blocks.{b}.…" (graph.py names them so); the last block's are still live.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from litenet.gpu import splitk
from litenet.gpu.splitk import TILE, TILE_COUNTERS
from litenet.lowering.fast.common import COUNTERS, LAYERNORM_REWRITE, ROW_WARPS, SCRATCH, dins_of, dy_of, gelu_backward
from litenet.lowering.fast.common import join, layernorm
from litenet.lowering.fast.common import one_op, replaced, rows_of
from litenet.lowering.fast.geometry import WIDE_ROWS, Gemm, choose_summed_splits, choose_wide
from litenet.lowering.fast.mlp_shape import bf16_copy, copy_of
from litenet.lowering.fast.products import VERSIONS, GeometryTiles, Tiling
from litenet.lowering.program import Call, Ref

i32, f32 = np.int32, np.float32
CUTOUT_FILL = 121  # the grey a cutout square is filled with (litenet.train.augment.CUTOUT_FILL)
PRODUCT_GELU_REWRITE = "product + GELU epilogue"  # the region's name, which recompute also looks for


def _cols(ref: Ref) -> int:
    return ref.size // ref.shape[0]


# -- the tiles of a product, and the BF16 copies wide BF16 tiles read -------------------------------------


def tiling(net, product: str, M: int, N: int, K: int, weight_grad: bool = False) -> Tiling:
    """The split 64 × 64 tiles, or for a product over the channels the wide tiles where `net.wide` takes
    them and the product has a wide version. None: in BF16 where geometry.choose_wide chooses them (fp32's
    256 × 128 tiles made the Mixer's fp32 step slower: docs/decisions.md, "Wide tiles"); True: always."""
    if product.startswith("linear") and net.wide is not False and net.precision in WIDE_ROWS:
        if net.wide or (net.precision == "bf16" and choose_wide(M, N, K, net.precision)):
            t = GeometryTiles(net.precision, net.sm_count, tall=False, wide=True).product(M, N, K, weight_grad)
            if t.version in VERSIONS[product]:
                return t
    return net.tiles.product(M, N, K, weight_grad)


def bf16(net, ref: Ref, calls: list[Call]) -> Ref:
    """The BF16 copy of `ref` a wide BF16 product reads: the parameters' (which the update and every upload
    remake), or a tensor's, written by a bf16_copy launch appended to `calls` unless a launch before wrote it."""
    copy = copy_of(net, ref)
    if ref.tensor == "params":
        net.params16 = True
    elif copy.tensor not in net.copied:
        calls.append(bf16_copy(net, ref, copy))
        net.copied.add(copy.tensor)
    return copy


def read(net, t: Tiling, calls: list[Call], **operands: Ref) -> dict[str, Ref]:
    """The operands as a product in tiling `t` reads them: their BF16 copies (`bf16`) for a wide BF16 tile."""
    return {name: bf16(net, ref, calls) for name, ref in operands.items()} if t.reads_bf16 else operands


def written_copy(net, ref: Ref) -> Ref:
    """The BF16 copy of `ref` that the launch being made writes beside it."""
    copy = copy_of(net, ref)
    net.copied.add(copy.tensor)
    return copy


# A kernel that can write its output's BF16 copy as it writes the output: its `_with_copy` version, the
# output's parameter and the copy's.
WRITES_COPY = {"layernorm_forward": ("layernorm_forward_with_copy", "y", "y16"),
               "layernorm_backward_join": ("layernorm_backward_join_with_copy", "dx", "dx16"),
               "residual_layernorm_backward": ("residual_layernorm_backward_with_copy", "ds", "ds16")}


def fuse_copies(regions):
    """The regions with each bf16_copy launch folded into the launch that last wrote its source, where that
    kernel has a `_with_copy` version (WRITES_COPY): one pass over the rows fewer, and one launch."""
    regions = [dataclasses.replace(r, calls=[dataclasses.replace(c, args=dict(c.args)) for c in r.calls])
               for r in regions]
    last_writer: dict[str, Call] = {}
    for region in regions:
        kept = []
        for call in region.calls:
            if call.kernel == "bf16_copy":
                src, producer = call.args["x"], last_writer.get(call.args["x"].tensor)
                fused, output, copy = WRITES_COPY.get(producer.kernel, (None, None, None)) if producer else (None,) * 3
                if fused and producer.args[output] == src:
                    producer.kernel = fused
                    producer.args[copy] = call.args["y"]
                    continue
            kept.append(call)
            for name in call.writes():
                if isinstance(call.args[name], Ref):
                    last_writer[call.args[name].tensor] = call
        region.calls = kept
    return regions


# A kernel that can leave out an fp32 output where nothing reads it: its version without that output's
# parameter. The GELU forward drops a (the wide BF16 products read its copy), then, in a forward pass with no
# backward after it, u too.
TO_COPY = {"linear_gelu_forward_wide_bf16": ("linear_gelu_forward_to_copy_wide_bf16", "a"),
           "linear_gelu_forward_to_copy_wide_bf16": ("linear_gelu_forward_copy_only_wide_bf16", "u"),
           "linear_backward_input_gelu_wide_bf16": ("linear_backward_input_gelu_to_copy_wide_bf16", "du")}


def drop_unread(regions):
    """The regions with each TO_COPY launch whose fp32 output no other launch touches switched to its version
    without it (the wide BF16 products read the copies), as far as the table goes: those bytes are never
    written, nor placed in the arena. --check-kernels gives the reference calls that read such an output its
    copy's values (check_kernels.Checker._source)."""
    touched: dict[str, int] = {}
    for region in regions:
        for call in region.calls:
            for tensor in call.tensors():
                touched[tensor] = touched.get(tensor, 0) + 1
    for region in regions:
        for call in region.calls:
            version, output = TO_COPY.get(call.kernel, (None, None))
            while version and touched[call.args[output].tensor] == 1:
                call.kernel = version
                del call.args[output]
                version, output = TO_COPY.get(call.kernel, (None, None))
    return regions


# -- forward ----------------------------------------------------------------------------------------------


def patches(net, regions, i):
    training = regions[i].name == "images"
    at = i + 1 if training else i
    op = one_op(net, regions, at, "forward")
    if op is None or op.kind != "patches":
        return None
    w, p, t = net.w, net.prog, net.train
    out, B = w.act(op.name), net.B
    if training:
        augs = t.augmentations
        draws = dict(images=p.ref("dataset.images"), batches=p.ref("batches"), flips=p.ref("flips"),
                     crops=p.ref("crops"), cutouts=p.ref("cutouts"), mixes=p.ref("mixes"), ctr=p.ref("ctr"))
        on = dict(pad=i32(t.crop_padding if "crop" in augs else 0), cut=i32(t.cutout_size if "cutout" in augs else 0),
                  mix=i32("cutmix" in augs))
    else:
        draws, on = _eval_draws(net), dict(pad=i32(0), cut=i32(0), mix=i32(0))
    call = Call("patches_gather", net.tiles.elementwise_grid(out.size),
                dict(**draws, out=out, B=i32(B), patch=i32(op.attrs["patch"]), **on, fill=i32(CUTOUT_FILL),
                     shift=f32(op.attrs["input_shift"]), scale=f32(op.attrs["input_scale"])))
    count = at - i + 1
    return count, [replaced("patches, augmented as read", regions[i:i + count], [call])]


def _eval_draws(net) -> dict:
    """A forward pass's images as patches.cu reads them: indices 0 … B−1, no augmentation, step 0."""
    w, B = net.w, net.B
    state = lambda name, shape, dt, what: w.state(w.name(name), shape, dt, what)  # noqa: E731
    index = state("pixels.index", (1, B), np.int32, "0 … B−1: the forward pass's images in order")
    net.prog.constants[index.tensor] = np.arange(B, dtype=np.int32)[None]
    return dict(images=w.act("images"), batches=index, flips=state("pixels.flips", (1, B), np.uint8, "zeros"),
                crops=state("pixels.crops", (1, B, 2), np.int8, "zeros"),
                cutouts=state("pixels.cutouts", (1, B, 2), np.int8, "zeros"),
                mixes=state("pixels.mixes", (1, B, 5), np.int32, "zeros"),
                ctr=state("pixels.ctr", (2,), np.int32, "zeros: row 0"))


def _product_args(net, op, x: Ref, W: Ref) -> tuple[dict, tuple[int, int, int]]:
    """A product's shape arguments and its (M, N, K) as the tile choice sees it."""
    if op.kind == "linear":
        rows = rows_of(x)
        return dict(B=i32(rows), n_in=i32(W.shape[0]), n_out=i32(W.shape[1])), (rows, W.shape[1], W.shape[0])
    N = _cols(x)
    return dict(T=i32(W.shape[0]), T_out=i32(W.shape[1]), N=i32(N)), (W.shape[1], N, W.shape[0])


def product_gelu(net, regions, i):
    lin, gelu = one_op(net, regions, i, "forward"), one_op(net, regions, i + 1, "forward")
    if not (lin and gelu and lin.kind in ("linear", "token_linear") and lin.param("bias") and gelu.kind == "gelu"
            and gelu.inputs == (lin.name,) and net.only_reader(lin.name) is gelu):
        return None
    w = net.w
    x, W = w.act(lin.inputs[0]), w.param(lin, "weight")
    shape, mnk = _product_args(net, lin, x, W)
    kernel = "linear_gelu_forward" if lin.kind == "linear" else "token_linear_gelu_forward"
    t, calls, a = tiling(net, kernel, *mnk), [], w.act(gelu.name)
    operands = read(net, t, calls, x=x, W=W) | ({"a16": written_copy(net, a)} if t.reads_bf16 else {})
    calls.append(net.product(kernel, t, bias=w.param(lin, "bias"), u=w.act(lin.name), a=a, **operands, **shape))
    return 2, [replaced(PRODUCT_GELU_REWRITE, regions[i:i + 2], calls)]


def product_residual(net, regions, i):
    lin, res = one_op(net, regions, i, "forward"), one_op(net, regions, i + 1, "forward")
    if not (lin and res and lin.kind in ("linear", "token_linear") and lin.param("bias") and res.kind == "residual"
            and res.inputs[1] == lin.name and net.only_reader(lin.name) is res):
        return None
    w = net.w
    x, W = w.act(lin.inputs[0]), w.param(lin, "weight")
    shape, mnk = _product_args(net, lin, x, W)
    kernel = "linear_residual_forward" if lin.kind == "linear" else "token_linear_residual_forward"
    t, calls = tiling(net, kernel, *mnk), []
    calls.append(net.product(kernel, t, bias=w.param(lin, "bias"), r=w.act(res.inputs[0]), y=w.act(res.name),
                             **read(net, t, calls, x=x, W=W), **shape))
    return 2, [replaced("product + residual epilogue", regions[i:i + 2], calls)]


def linear(net, regions, i):
    op = one_op(net, regions, i, "forward")
    if not (op and op.kind == "linear" and op.param("bias")):
        return None
    w = net.w
    x, W = w.act(op.inputs[0]), w.param(op, "weight")
    shape, mnk = _product_args(net, op, x, W)
    t, calls = tiling(net, "linear_forward", *mnk), []
    calls.append(net.product("linear_forward", t, bias=w.param(op, "bias"), y=w.act(op.name),
                             **read(net, t, calls, x=x, W=W), **shape))
    return 1, [replaced("linear (tile product)", regions[i:i + 1], calls)]


def mean_tokens(net, regions, i):
    op = one_op(net, regions, i, "forward")
    if not (op and op.kind == "mean_tokens"):
        return None
    x, y = net.w.act(op.inputs[0]), net.w.act(op.name)
    call = Call("mean_tokens_forward", net.tiles.elementwise_grid(y.size), dict(x=x, y=y, T=i32(x.shape[0]), N=i32(y.size)))
    return 1, [replaced("mean over the patches", regions[i:i + 1], [call])]


# -- backward ---------------------------------------------------------------------------------------------


def product_backward(net, regions, i):
    """∂W, ∂b, and ∂x — with GELU' in the ∂x product where the GELU's backward comes next."""
    op = one_op(net, regions, i, "backward")
    if not (op and op.kind in ("linear", "token_linear") and op.param("bias")):
        return None
    w = net.w
    x, W, dy = w.act(op.inputs[0]), w.param(op, "weight"), dy_of(regions[i])
    shape, (M, N, K) = _product_args(net, op, x, W)
    token = op.kind == "token_linear"
    # ∂W: (n_in × n_out) over the rows, or (T × T_out) over the columns
    weight_kernel = "token_linear_backward_weight" if token else "linear_backward_weight"
    weight_tiles, copies = tiling(net, weight_kernel, W.shape[0], W.shape[1], N if token else M, True), []
    operands = read(net, weight_tiles, copies, x=x, dy=dy)
    if token:
        weight = token_weight_sums_apart(net, weight_tiles, operands, w.grad(op, "weight"), w.grad(op, "bias"), shape)
    elif weight_tiles.version == "wide_bf16":
        weight = weight_sums_apart(net, operands, w.grad(op, "weight"), w.grad(op, "bias"), shape)
    else:
        weight = [net.product(weight_kernel, weight_tiles, dW=w.grad(op, "weight"), db=w.grad(op, "bias"), **operands,
                              **shape)]
    dx = dins_of(regions[i])
    if dx is None:
        return 1, [replaced("∂W, ∂b (tile product)", regions[i:i + 1], copies + weight)]
    input_mnk = (W.shape[0], N, W.shape[1]) if token else (M, W.shape[0], W.shape[1])
    gelu = one_op(net, regions, i + 1, "backward")
    if gelu is not None and gelu.kind == "gelu" and gelu.name == op.inputs[0]:
        kernel = "token_linear_backward_input_gelu" if token else "linear_backward_input_gelu"
        t, du = tiling(net, kernel, *input_mnk), dins_of(regions[i + 1])
        operands = read(net, t, copies, dy=dy, W=W) | ({"du16": written_copy(net, du)} if t.reads_bf16 else {})
        first = net.product(kernel, t, u=w.act(gelu.inputs[0]), du=du, **operands, **shape)
        return 2, [replaced("∂x with GELU' in the epilogue; ∂W, ∂b", regions[i:i + 2], copies + [first] + weight)]
    kernel = "token_linear_backward_input" if token else "linear_backward_input"
    t = tiling(net, kernel, *input_mnk)
    product = net.product(kernel, t, dx=dx, **read(net, t, copies, dy=dy, W=W), **shape)
    return 1, [replaced("∂W, ∂b and ∂x (tile products)", regions[i:i + 1], copies + weight + [product])]


def weight_sums_apart(net, operands: dict[str, Ref], dW: Ref, db: Ref, shape: dict) -> list[Call]:
    """A channel ∂W, ∂b in wide BF16 tiles as two launches: the partials of more K splits than one block could
    sum (geometry.choose_summed_splits), then their sum, an output a thread (kernels/linear.cu says why). The
    same values as the one-launch kernel at the same split, bit for bit."""
    n_in, n_out, K = int(shape["n_in"]), int(shape["n_out"]), int(shape["B"])
    g = Gemm(n_in, n_out, K, 1, precision="bf16", wide=True)
    splits = choose_summed_splits(g.tiles, K, net.sm_count)
    net.scratch = max(net.scratch, g.fixup_tiles * splits * g.part_slab)  # every split stores, even one
    sizes = dict(n_in=shape["n_in"], n_out=shape["n_out"], splits=i32(splits))
    partials = Call("linear_backward_weight_partials_wide_bf16", g.tiles * splits,
                    dict(**operands, B=shape["B"], scratch=SCRATCH, **sizes))
    total = Call("linear_backward_weight_sum_wide", net.tiles.elementwise_grid(dW.size + db.size),
                 dict(scratch=SCRATCH, dW=dW, db=db, **sizes))
    return [partials, total]


def token_weight_sums_apart(net, t: Tiling, operands: dict[str, Ref], dW: Ref, db: Ref, shape: dict) -> list[Call]:
    """A token ∂W, ∂b (a few 64 × 64 tiles over K = B·d, split hundreds of ways) as two launches: every split's
    partial tile, then their sum in the one launch's order, an output a thread (kernels/token_linear.cu):
    the same bits, without a tile's last blocks reading all its partials alone."""
    T, T_out = int(shape["T"]), int(shape["T_out"])
    tiles = splitk.tiles(T, T_out)
    net.scratch = max(net.scratch, tiles * t.splits * splitk.SLAB)  # every split stores, even one
    suffix = "" if t.version == "tile" else f"_{t.version}"
    partials = Call(f"token_linear_backward_weight_partials{suffix}", t.grid,
                    dict(**operands, **shape, splits=i32(t.splits), scratch=SCRATCH))
    total = Call("token_linear_backward_weight_sum", math.ceil(tiles * splitk.SLAB / 16),
                 dict(scratch=SCRATCH, dW=dW, db=db, T=shape["T"], T_out=shape["T_out"], splits=i32(t.splits)))
    return [partials, total]


def mean_tokens_backward(net, regions, i):
    op = one_op(net, regions, i, "backward")
    if not (op and op.kind == "mean_tokens"):
        return None
    dy, dx = dy_of(regions[i]), dins_of(regions[i])
    call = Call("mean_tokens_backward", net.tiles.elementwise_grid(dx.size),
                dict(dy=dy, dx=dx, T=i32(dx.shape[0]), N=i32(dy.size)))
    return 1, [replaced("∂mean over the patches", regions[i:i + 1], [call])]


def _layernorm_common(net, op, ds_shape) -> dict:
    w = net.w
    rows, d = math.prod(ds_shape[:-1]), ds_shape[-1]
    splits = net.tiles.colsum_splits(2 * d, rows)
    tiles = math.ceil(2 * d / TILE)
    net.scratch = max(net.scratch, tiles * splits * TILE if splits > 1 else 0)
    net.counters = max(net.counters, tiles * TILE_COUNTERS)
    return dict(nrm=w.cache(op, "nrm", ds_shape), rstd=w.cache(op, "rstd", (rows,)), gamma=w.param(op, "gamma"),
                dgamma=w.grad(op, "gamma"), dbeta=w.grad(op, "beta"), B=i32(rows), d=i32(d), splits=i32(splits),
                scratch=SCRATCH, counters=COUNTERS), tiles * splits


def layernorm_backward(net, regions, i):
    """∂LayerNorm, joined with the residual stream's gradient where the join of its input comes next."""
    op = one_op(net, regions, i, "backward")
    if not (op and op.kind == "layernorm"):
        return None
    dy, ds = dy_of(regions[i]), dins_of(regions[i])
    common, param_blocks = _layernorm_common(net, op, ds.shape)
    rows = math.prod(ds.shape[:-1])
    nxt = regions[i + 1] if i + 1 < len(regions) else None
    if (nxt is not None and nxt.phase == "join" and nxt.ops == (op.inputs[0],) and len(nxt.reference) == 2
            and nxt.reference[1].kernel == "path_sums_reference" and nxt.reference[1].args["dm"] == ds):
        sums, total = nxt.reference[1].args, nxt.reference[0].args["out"]
        row_blocks = min(math.ceil(rows / ROW_WARPS), 8 * net.sm_count)
        call = Call("layernorm_backward_join", row_blocks + param_blocks,
                    dict(dy=dy, skip=sums["ds"], dx=total, row_blocks=i32(row_blocks), ctr=net.prog.ref("ctr"),
                         stats=net.prog.ref("stats"), stat_width=i32(net.w.stats.width), slot=sums["slot"], **common))
        return 2, [replaced("∂LayerNorm + join + path sums", regions[i:i + 2], [call])]
    row_blocks = math.ceil(rows / ROW_WARPS)
    call = Call("residual_layernorm_backward", row_blocks + param_blocks,
                dict(dy=dy, ds=ds, row_blocks=i32(row_blocks), **common))
    return 1, [replaced("∂LayerNorm in one launch", regions[i:i + 1], [call])]


RULES = [patches, product_gelu, product_residual, linear, layernorm, mean_tokens, product_backward,
         mean_tokens_backward, layernorm_backward, gelu_backward, join]


# -- recompute --------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"^blocks\.(\d+)\.")
RECOMPUTED = (LAYERNORM_REWRITE, PRODUCT_GELU_REWRITE)  # the regions whose outputs a block's backward reads


def recompute(net, regions):
    """Each block's LayerNorm and GELU-product regions run again before the block's backward (all
    blocks but the last); their forward launches write short-lived "…/fwd" tensors instead, which the
    rest of the forward reads."""
    def block(region) -> int | None:
        found = {int(m.group(1)) for name in region.ops if (m := _BLOCK.match(name))}
        return found.pop() if len(found) == 1 else None

    blocks = [b for r in regions if (b := block(r)) is not None]
    if not net.tokens:
        from litenet.errors import UsageError
        raise UsageError("--activations recompute re-runs the LayerNorms and GELU products of networks with patch "
                         "tensors (the Mixer); an MLP keeps its activations: use --activations keep")
    if not blocks:
        from litenet.errors import UsageError
        raise UsageError("--activations recompute re-runs blocks named blocks.N.…; this network has none")
    last = max(blocks)
    again: dict[int, list] = {}
    renamed: dict[str, Ref] = {}  # a kept tensor → its forward-only copy
    out = []
    for r in regions:
        b = block(r)
        if r.phase == "forward":
            rerun = b is not None and b != last and r.rewrite in RECOMPUTED
            if rerun:
                again.setdefault(b, []).append(dataclasses.replace(r, name=r.name + " (again)", phase="recompute",
                                                                   calls=[dataclasses.replace(c) for c in r.calls]))
            out.append(_renamed(net, r, renamed, rerun))
            continue
        if r.phase in ("backward", "join") and b in again:
            out += again.pop(b)
        out.append(r)
    return out


def _renamed(net, region, renamed: dict, rename_outputs: bool):
    """The forward region reading the forward-only copies made so far, and (rename_outputs) writing its
    own outputs to new "…/fwd" tensors."""
    calls = []
    for call in region.calls:
        args = {k: renamed.get(v.tensor, v) if isinstance(v, Ref) and v.offset == 0 else v for k, v in call.args.items()}
        if rename_outputs:
            for name in call.writes():
                ref = call.args[name]
                if not isinstance(ref, Ref) or net.prog.tensors[ref.tensor].life != "step":
                    continue  # split-K scratch and counters, the statistics: not activations
                t = net.prog.tensors[ref.tensor]
                copy = net.prog.add(ref.tensor + "/fwd", t.shape, t.dtype, purpose="a recomputed block's forward copy")
                renamed[ref.tensor] = copy
                args[name] = copy
        calls.append(dataclasses.replace(call, args=args))
    return dataclasses.replace(region, calls=calls)
