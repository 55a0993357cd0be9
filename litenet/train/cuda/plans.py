"""A training step as a list of kernel launches over the arena, in two versions chosen in one
place (geometry.choose_plan):

  "fused"  embed → fused_rows → fused_weight_grads → sgd_clip_update     (4 or 5 launches)
  "ops"    one launch per operation of the reference network (about 15 + 7·blocks launches)

where "embed" is embed_forward_rows, or embed_inputs + embed_forward (geometry.embed_variant),

plus the forward alone for evaluation. Every launch reads its per-step inputs (batch indices,
flips, learning rate, statistics row) through the device step counter, so the list is captured
once into a CUDA graph and replayed for every step.

The tile products (`_product`) run in the precision geometry.Geometry was given: the fp32 kernels,
or their `_tf32` / `_bf16` versions on the tensor cores (mma.cuh). fused_rows, fused_weight_grads,
embed_forward_rows and the row kernels stay fp32 in every precision: the fused plan and the rows
embedding are chosen only for small models and batches, where the products are small.

A data-parallel rank's step (with_allreduce, docs/parallel.md) inserts, before the update, an
AllReduce of the flat gradient (a communicator call, not a kernel), grad_average and grad_norm_sq.

Every launch names its arguments as its kernel names its parameters, and kernel_args.launch puts
them in the kernel's order; the runs several kernels share are passed as groups (kernel_args.py):
Pixels (the step's images and how they are embedded), SplitK (a reduction's K split) and StatsRow
(the step's statistics row).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from litenet.gpu.launch import THREADS, Launch
from litenet.model import ModelConfig, TrainConfig, param_count, param_layout, param_views
from litenet.train.cuda.check import TOLERANCES
from litenet.train.cuda.geometry import Geometry
from litenet.train.cuda.kernel_args import Pixels, SplitK, StatsRow, launch
from litenet.train.cuda.layout import ArenaPlan, StatsLayout
from litenet.train.cuda.twins import Twins

i32, f32 = np.int32, np.float32


@dataclass
class AllReduce:
    """Not a kernel: the communicator sums `buffer` over the ranks, in place, on the step's stream.
    The backend makes the call between two graphs (docs/parallel.md says why not inside one)."""

    buffer: object
    kernel: str = "allreduce_sum"  # a name for logs and reports, like a launch's
    check: None = None


def arena_plan(model: ModelConfig, geometry: Geometry, plan: str, capacity: int) -> ArenaPlan:
    """Every buffer of a step of `plan` and of evaluation; docs/cuda.md explains the sharing."""
    B, d, H, C, L = geometry.batch, model.width, model.hidden, model.classes, model.blocks
    P, T, W = param_count(model), len(param_layout(model)), StatsLayout.of(model).width
    a = ArenaPlan()
    a.add("params", (P,), f32, "the parameters, flat (litenet.model.param_layout)")
    a.add("velocity", (P,), f32, "SGD momentum")
    a.add("grads", (P,), f32, "this step's gradient (every value rewritten each step)")
    a.add("layout", (T + 1,), i32, "offsets of the parameter tensors, then the total")
    a.add("ctr", (2,), i32, "step position in schedule and statistics; finished-block count")
    a.add("batches", (capacity, B), i32, "schedule: image indices of each step")
    a.add("flips", (capacity, B), np.uint8, "schedule: mirror flag of each image")
    a.add("lrs", (capacity,), f32, "schedule: learning rate of each step")
    a.add("stats", (capacity, W), f32, "one statistics row per step until fetch_stats")
    a.add("scratch", (geometry.scratch,), f32, "split-K partial tiles, consumed within each launch")
    a.add("counters", (geometry.counters,), np.uint32, "split-K arrival counts, always left at zero")
    a.add("S", (B, model.embed_inputs), f32, "s(x): the batch's embedding input rows (h0 and ∂We read them)")
    a.add("X", (L + 1, B, d), f32, "block inputs: X[0] = h0, X[i+1] = block i's output")
    a.add("U", (L, B, H), f32, "fc1's output u" + (", then ∂u in place" if plan == "fused" else ""))
    a.add("A", (L, B, H), f32, "GELU(u)")
    a.add("NRM", (L, B, d), f32, "LayerNorm's normalised n")
    a.add("RSTD", (L, B), f32, "LayerNorm's 1/√(σ²+eps)")
    a.add("Z", (B, C), f32, "logits" + (", then ∂z in place" if plan == "fused" else ""))
    if plan == "fused":
        a.add("DY", (L, B, d), f32, "∂y at each block's output (∂γ, ∂β)")
        a.add("DS", (L, B, d), f32, "∂s at each block (∂W2, ∂b2)")
        a.add("DH0", (B, d), f32, "∂h0 (∂We)")
        a.add("jobs", geometry.jobs.shape, i32, "fused_weight_grads' job table")
        a.add("V", (B, d), f32, "evaluation only: fc2's output v", alias="DS")
    else:
        a.add("G1", (B, d), f32, "∂y arriving at a block, then the ∂x leaving it (one buffer, as the seed's ∂h/∂x)")
        a.add("G2", (B, d), f32, "∂s")
        a.add("G3", (B, d), f32, "∂x_main, the main path's ∂x")
        a.add("V", (B, d), f32, "fc2's output v (forward only)", alias="G3")
        a.add("GH", (B, H), f32, "∂a, then ∂u in place")
        a.add("DZ", (B, C), f32, "∂z")
        a.add("PS", (B,), f32, "per-image losses")
    if plan != "fused":
        _add_bf16_copies(a, model, geometry)
    if "P16" not in a.offsets:  # sgd_clip_update's params16 with n16 = 0
        a.add("P16", (1,), np.uint16, "placeholder: no product reads the parameters in BF16")
    a.add("eval_images", (B, 32, 32, 3), np.uint8, "evaluation: one chunk of images")
    a.add("eval_index", (1, B), i32, "evaluation: 0 … B−1")
    a.add("eval_flips", (1, B), np.uint8, "evaluation: zeros")
    a.add("eval_ctr", (2,), i32, "evaluation: zeros")
    return a


# The buffers whose BF16 copies the wide BF16 products read, by the products that read (or write) them
# (geometry.gemms): a copy exists only where one of them is a wide BF16 product. Each is written by the
# kernel that produces the buffer, as it writes it: the parameters' by the update (sgd_clip_update), s(x)'s
# by embed_inputs_with_copy, h0's by the embedding's wide product, the blocks' outputs', ∂s's and ∂h0's by
# the `_with_copy` LayerNorm and join kernels, GELU's output's by fc1's forward product and ∂u's by fc2's
# ∂input product (linear.cu) — where those are themselves wide BF16 products; bf16_copy.cu copies the rest
# (e.g. s(x) from embed_forward_rows, ∂z for a wide head).
BF16_COPIES = {
    "P16": ("embed_forward", "fc1_forward", "fc2_forward", "head_forward", "head_backward_input",
            "fc2_backward_input", "fc1_backward_input"),
    "S16": ("embed_forward", "embed_backward"),
    "X16": ("embed_forward", "fc1_forward", "fc1_backward_weight", "head_forward", "head_backward_weight"),
    "A16": ("fc1_forward", "fc2_forward", "fc2_backward_weight"),
    "G16": ("head_backward_weight", "head_backward_input", "fc2_backward_weight", "fc2_backward_input",
            "embed_backward"),
    "GH16": ("fc2_backward_input", "fc1_backward_weight", "fc1_backward_input"),
}


def _add_bf16_copies(a: ArenaPlan, model: ModelConfig, geometry: Geometry) -> None:
    B, d, H, C, K, L = geometry.batch, model.width, model.hidden, model.classes, model.embed_inputs, model.blocks
    shapes = {"P16": ((param_count(model),), "the parameters in BF16 (refresh_copies makes, sgd_clip_update keeps)"),
              "S16": ((B, K), "s(x) in BF16"),
              "X16": ((L + 1, B, d), "block inputs (and the head's) in BF16"),
              "A16": ((L, B, H), "GELU(u) in BF16"),
              "G16": ((B * max(d, C),), "the gradient a backward product reads (∂z, ∂s, ∂h0), in BF16"),
              "GH16": ((B, H), "∂u in BF16 (fc1's backward products read it)")}
    for name, readers in BF16_COPIES.items():
        if any(geometry.gemms[r].reads_bf16 for r in readers):
            a.add(name, shapes[name][0], np.uint16, shapes[name][1])


class Plans:
    """Builds the launch lists over allocated arena views `v` and the device dataset.

    Every launch names its arguments as the kernel names its parameters (kernel_args.py), so the
    buffer each parameter receives is written beside it: `DU=v["U"]` is the ∂u that fused_rows left
    in U. `B`, `d`, `H`, `C`, `K` (Kin), `L` (blocks) are the batch, width, hidden, classes,
    embedding inputs and blocks.
    """

    def __init__(self, model: ModelConfig, train: TrainConfig, geometry: Geometry, v: dict, images, labels,
                 host=None):
        self.m, self.t, self.g, self.v = model, train, geometry, v
        self.images, self.labels = images, labels
        self.stats = StatsLayout.of(model)
        self.P, self.T = param_count(model), len(param_layout(model))
        self.pv = param_views(v["params"], model)
        self.pv16 = param_views(v["P16"], model) if v["P16"].size == self.P else {}
        unread = [k for k, gm in geometry.gemms.items()
                  if gm.reads_bf16 and not any(k in readers for readers in BF16_COPIES.values())]
        if unread:
            raise AssertionError(f"wide BF16 products without BF16 copies of their operands: {unread}")
        self.gv = param_views(v["grads"], model)
        self.tw = Twins(model, train, v, host)

    # -- pieces shared by the plans --------------------------------------------------------------

    def _dims(self):
        m = self.m
        return self.g.batch, m.width, m.hidden, m.classes, m.embed_inputs, m.blocks

    def _splitk(self, splits: int) -> SplitK:
        """`splits` ranges over the arena's shared scratch and counters."""
        return SplitK(i32(splits), self.v["scratch"], self.v["counters"])

    def _bf16(self, gemm: str, fp32, copy):
        """The operand product `gemm` reads: `copy` (a BF16 copy) for a wide BF16 product, else `fp32`."""
        return copy if self.g.gemms[gemm].reads_bf16 else fp32

    def _copy_bf16(self, src, name: str, index=None, readers=None, check=True) -> list[Launch]:
        """bf16_copy of `src` into copy `name` (BF16_COPIES) — its `index` row, or for G16 its first
        src.size values — where one of `readers` (default: all the copy's) reads it; nothing otherwise."""
        if not any(self.g.gemms[r].reads_bf16 for r in readers or BF16_COPIES[name]):
            return []
        dst = self.v[name] if index is None else self.v[name][index]
        if name == "G16":
            dst = dst[:src.size].reshape(src.shape)
        return [launch("bf16_copy", self._vector_grid(src.size), x=src, y=dst, n=i32(src.size),
                       check=self.tw.bf16_copy(src, dst) if check else None)]

    def _g16(self, shape):
        """G16 as a (rows, columns) matrix (see _copy_bf16), or None where there is no G16."""
        return self.v["G16"][:shape[0] * shape[1]].reshape(shape) if "G16" in self.v else None

    def _product(self, kernel: str, gemm: str, check, **named) -> Launch:
        """A matrix product in the tiles, K split and precision geometry.gemms[gemm] chose (its `_tall`,
        `_tf32` or `_bf16` version), held by check_kernels to the tolerance of that precision."""
        gm = self.g.gemms[gemm]
        if check is not None and gm.precision != "fp32":
            check = dataclasses.replace(check, tol=TOLERANCES[gm.precision])
        return launch(gm.kernel(kernel), gm.grid, self._splitk(gm.splits), check=check, **named)

    def _stats_row(self) -> StatsRow:
        return StatsRow(self.v["ctr"], self.v["stats"], i32(self.stats.width))

    def _elementwise_grid(self, n: int) -> int:
        return max(1, min(math.ceil(n / THREADS), 4 * self.g.sm_count))

    def _vector_grid(self, n: int) -> int:
        """Four elements per thread (sgd.cu): one pass for up to 4 blocks per multiprocessor."""
        return max(1, min(math.ceil(n / (4 * THREADS)), 4 * self.g.sm_count))

    def _embed_forward(self, images, batches, flips, ctr, check=True) -> list[Launch]:
        """h0 = s(x)·We into X[0], and s(x) into S, in the version geometry.embed_variant names."""
        B, d, _, _, K, _ = self._dims()
        v, g, tw = self.v, self.g, self.tw
        pixels = Pixels(images, batches, flips, ctr, i32(self.m.embed == "full"), f32(self.m.input_shift))
        out, W = v["X"][0], self.pv["embed.weight"]
        x16 = self._copy_bf16(out, "X16", 0, check=check)  # h0's copy, unless the product writes it
        if g.embed_variant == "rows":
            return [launch("embed_forward_rows", math.ceil(B / g.embed_rows) * g.embed_parts, pixels,
                           W=W, out=out, S=v["S"], B=i32(B), Kin=i32(K), d=i32(d), rows=i32(g.embed_rows),
                           parts=i32(g.embed_parts), shared=g.embed_smem,
                           check=tw.embed_forward_rows(out) if check else None),
                    *self._copy_bf16(v["S"], "S16", check=check), *x16]
        inputs = tw.embed_inputs() if check else None
        if "S16" in v:  # s(x) and its copy in one pass
            first = launch("embed_inputs_with_copy", B, pixels, S=v["S"], S16=v["S16"], B=i32(B),
                           check=inputs and inputs.with_copy("S", v["S16"]))
        else:
            first = launch("embed_inputs", B, pixels, S=v["S"], B=i32(B), check=inputs)
        product = tw.embed_forward(out) if check else None
        if self.g.gemms["embed_forward"].reads_bf16:  # the product writes h0's copy (X16[0]) too
            copy16, x16 = {"out16": v["X16"][0]}, []
            product = product and product.with_copy("h0", v["X16"][0])
        else:
            copy16 = {}
        return [first,
                self._product("embed_forward", "embed_forward", product,
                              S=self._bf16("embed_forward", v["S"], v.get("S16")),
                              W=self._bf16("embed_forward", W, self.pv16.get("embed.weight")),
                              out=out, **copy16, B=i32(B), Kin=i32(K), d=i32(d)), *x16]

    def _linear(self, kernel, gemm, x, x16, w, b, n_in, n_out, check, **outs) -> Launch:
        """y = x·W + b (linear_forward), or u = x·W + b and a = GELU(u) (linear_gelu_forward); `x16`: x's
        BF16 copy, if any."""
        twin = self.tw.linear_forward(kernel, x, w, b, tuple(outs.values())) if check else None
        return self._product(kernel, gemm, twin, x=self._bf16(gemm, x, x16),
                             W=self._bf16(gemm, self.pv[w], self.pv16.get(w)), bias=self.pv[b], **outs,
                             B=i32(self.g.batch), n_in=i32(n_in), n_out=i32(n_out))

    def _block_forward(self, i: int, check=True) -> list[Launch]:
        B, d, H, _, _, _ = self._dims()
        v, p = self.v, f"blocks.{i}."
        X16, A16 = (v[k][i] if k in v else None for k in ("X16", "A16"))
        a16_by_product = self.g.gemms["fc1_forward"].reads_bf16  # the wide BF16 kernel writes GELU's copy
        layernorm = self.tw.residual_layernorm_forward(i) if check else None
        if "X16" in v:  # the block's output in BF16 too, for the next block's (or the head's) products
            layernorm = layernorm and layernorm.with_copy(f"{p}ln y", v["X16"][i + 1])
            kernel, copy16 = "residual_layernorm_forward_with_copy", {"y16": v["X16"][i + 1]}
        else:
            kernel, copy16 = "residual_layernorm_forward", {}
        return [
            self._linear("linear_gelu_forward", "fc1_forward", v["X"][i], X16, p + "fc1.weight", p + "fc1.bias", d,
                         H, check, u=v["U"][i], a=v["A"][i], **({"a16": A16} if a16_by_product else {})),
            *([] if a16_by_product else self._copy_bf16(v["A"][i], "A16", i, check=check)),
            self._linear("linear_forward", "fc2_forward", v["A"][i], A16, p + "fc2.weight", p + "fc2.bias", H, d,
                         check, y=v["V"]),
            launch(kernel, self.g.row_blocks, x=v["X"][i], v=v["V"], gamma=self.pv[p + "ln.gamma"],
                   beta=self.pv[p + "ln.beta"], y=v["X"][i + 1], **copy16, nrm=v["NRM"][i], rstd=v["RSTD"][i],
                   B=i32(B), d=i32(d), eps=f32(self.m.ln_eps), check=layernorm),
        ]

    def _head_forward(self, check=True) -> list[Launch]:
        _, d, _, C, _, L = self._dims()
        v = self.v
        return [self._linear("linear_forward", "head_forward", v["X"][L], v["X16"][L] if "X16" in v else None,
                             "head.weight", "head.bias", d, C, check, y=v["Z"])]  # X16[L]: the last LayerNorm's

    # -- the plans ---------------------------------------------------------------------------------

    def step(self, plan: str) -> list[Launch]:
        return self.fused_step() if plan == "fused" else self.ops_step()

    def eval_forward(self) -> list[Launch]:
        """Logits of the images in eval_images (no checks: evaluation is not a training step)."""
        v = self.v
        out = self._embed_forward(v["eval_images"], v["eval_index"], v["eval_flips"], v["eval_ctr"], check=False)
        for i in range(self.m.blocks):
            out += self._block_forward(i, check=False)
        return out + self._head_forward(check=False)

    def fused_step(self) -> list[Launch]:
        B, d, H, C, K, L = self._dims()
        v, t, g = self.v, self.t, self.g
        shape = {"B": i32(B), "d": i32(d), "H": i32(H), "C": i32(C), "blocks": i32(L)}
        # the forward and backward of every row: activations into X, U, A, NRM, RSTD; ∂u into U and
        # ∂z into Z in place; ∂y, ∂s, ∂h0 into DY, DS, DH0 for the weight gradients
        rows = launch("fused_rows", math.ceil(B / g.rows), self._stats_row(),
                      params=v["params"], layout=v["layout"], X=v["X"], U=v["U"], A=v["A"], NRM=v["NRM"],
                      RSTD=v["RSTD"], DY=v["DY"], DS=v["DS"], Z=v["Z"], DH0=v["DH0"], labels=self.labels,
                      batches=v["batches"], path_slot=i32(self.stats.path), **shape, rows=i32(g.rows),
                      loss_kind=i32(0 if t.loss == "margin" else 1), margin=f32(t.margin), eps=f32(self.m.ln_eps),
                      shared=g.fused_smem, check=self.tw.fused_rows())
        # every weight gradient from what fused_rows left, one job (tile, K range) per block
        grads = launch("fused_weight_grads", len(g.jobs), self._stats_row(),
                       jobs=v["jobs"], grads=v["grads"], layout=v["layout"], X=v["X"], A=v["A"], DU=v["U"],
                       DS=v["DS"], DY=v["DY"], NRM=v["NRM"], DZ=v["Z"], DH0=v["DH0"], S=v["S"],
                       scratch=v["scratch"], counters=v["counters"], Kin=i32(K), **shape,
                       check=self.tw.fused_weight_grads())
        return self._embed_forward(self.images, v["batches"], v["flips"], v["ctr"]) + [rows, grads, self._update()]

    def _update(self) -> Launch:
        """Clip and SGD in one launch (the clip rule reads the ‖g_t‖² already in the statistics row)."""
        v, t = self.v, self.t
        return launch("sgd_clip_update", self._vector_grid(self.P), self._stats_row(),
                      params=v["params"], velocity=v["velocity"], grads=v["grads"], n=i32(self.P), T=i32(self.T),
                      lrs=v["lrs"], threshold=f32(t.clip_threshold), clip_norm=f32(t.clip_norm),
                      momentum=f32(t.momentum), weight_decay=f32(t.weight_decay), params16=v["P16"],
                      n16=i32(v["P16"].size if self.pv16 else 0), check=self.tw.sgd_clip_update())

    def refresh_copies(self) -> list[Launch]:
        """The parameters' BF16 copy from the parameters, where products read one: after the backend
        uploads parameters (sgd_clip_update keeps it from then on)."""
        return self._copy_bf16(self.v["params"], "P16", check=False)

    def ops_step(self) -> list[Launch]:
        B, d, H, C, K, L = self._dims()
        v, t, pv, gv, tw = self.v, self.t, self.pv, self.gv, self.tw
        loss_grid = math.ceil(B / THREADS)
        margin = {"margin": f32(t.margin)} if t.loss == "margin" else {}
        kind = "margin_loss" if t.loss == "margin" else "cross_entropy"
        targets = {"z": v["Z"], "labels": self.labels, "batches": v["batches"], "B": i32(B), "C": i32(C), **margin}
        out = self._embed_forward(self.images, v["batches"], v["flips"], v["ctr"])
        for i in range(L):
            out += self._block_forward(i)
        out += self._head_forward()
        out.append(launch(f"{kind}_forward", loss_grid, self._stats_row(), **targets, per_sample=v["PS"],
                          check=tw.loss_forward(kind)))
        out.append(launch(f"{kind}_backward", loss_grid, **targets, ctr=v["ctr"], dz=v["DZ"],
                          check=tw.loss_backward(kind)))
        out += self._copy_bf16(v["DZ"], "G16", readers=("head_backward_weight", "head_backward_input"))
        X16 = v["X16"][L] if "X16" in v else None
        out.append(self._backward_weight("head_backward_weight", v["X"][L], X16, v["DZ"], self._g16((B, C)),
                                         "head.weight", "head.bias", d, C))
        out.append(self._backward_input("head_backward_input", v["DZ"], self._g16((B, C)), "head.weight", v["G1"],
                                        d, C))
        ln = self.g.layernorm_grads
        reads_bf16 = lambda *gemms: any(self.g.gemms[k].reads_bf16 for k in gemms)  # noqa: E731
        for i in reversed(range(L)):  # G1: the ∂y arriving at block i, then the ∂x leaving it
            p = f"blocks.{i}."
            layernorm, copy16 = tw.residual_layernorm_backward(i), {}
            if reads_bf16("fc2_backward_weight", "fc2_backward_input"):  # ∂s in BF16 too, for fc2's products
                layernorm, copy16 = layernorm.with_copy(f"{p}∂s", self._g16((B, d))), {"ds16": self._g16((B, d))}
            out.append(launch("residual_layernorm_backward" + ("_with_copy" if copy16 else ""),
                              self.g.row_blocks + ln.tiles * ln.splits, self._splitk(ln.splits), dy=v["G1"],
                              nrm=v["NRM"][i], rstd=v["RSTD"][i], gamma=pv[p + "ln.gamma"], ds=v["G2"], **copy16,
                              dgamma=gv[p + "ln.gamma"], dbeta=gv[p + "ln.beta"], B=i32(B), d=i32(d),
                              row_blocks=i32(self.g.row_blocks), check=layernorm))
            X16, A16 = (v[k][i] if k in v else None for k in ("X16", "A16"))
            out.append(self._backward_weight("fc2_backward_weight", v["A"][i], A16, v["G2"], self._g16((B, d)),
                                             p + "fc2.weight", p + "fc2.bias", H, d))
            if self.g.gemms["fc2_backward_input"].reads_bf16:  # ∂u and its copy straight from the product
                out.append(self._backward_input_gelu(v["G2"], self._g16((B, d)), p + "fc2.weight", v["U"][i], H, d))
            else:
                out.append(self._backward_input("fc2_backward_input", v["G2"], self._g16((B, d)), p + "fc2.weight",
                                                v["GH"], H, d))
                out.append(launch("gelu_backward", self._elementwise_grid(B * H), da=v["GH"], u=v["U"][i],
                                  du=v["GH"], n=i32(B * H), check=tw.gelu_backward(i)))
                out += self._copy_bf16(v["GH"], "GH16", readers=("fc1_backward_weight", "fc1_backward_input"))
            GH16 = v.get("GH16")
            out.append(self._backward_weight("fc1_backward_weight", v["X"][i], X16, v["GH"], GH16, p + "fc1.weight",
                                             p + "fc1.bias", d, H))
            out.append(self._backward_input("fc1_backward_input", v["GH"], GH16, p + "fc1.weight", v["G3"], d, H))
            join, copy16 = tw.residual_join(i), {}
            if i == 0 and reads_bf16("embed_backward"):  # ∂h0 in BF16 too, for the embedding's ∂We
                join, copy16 = join.with_copy(f"blocks.{i} ∂x", self._g16((B, d))), {"dx16": self._g16((B, d))}
            out.append(launch("residual_join" + ("_with_copy" if copy16 else ""), self._elementwise_grid(B * d),
                              self._stats_row(), ds=v["G2"], dx_main=v["G3"], dx=v["G1"], **copy16, n=i32(B * d),
                              slot=i32(self.stats.path + 3 * i), check=join))
        if L == 0:  # no join: ∂h0 is the head's ∂input
            out += self._copy_bf16(v["G1"], "G16", readers=("embed_backward",))
        out.append(self._product("embed_backward", "embed_backward", tw.embed_backward(),
                                 S=self._bf16("embed_backward", v["S"], v.get("S16")),
                                 dH=self._bf16("embed_backward", v["G1"], self._g16((B, d))), dW=gv["embed.weight"],
                                 B=i32(B), Kin=i32(K), d=i32(d)))
        out.append(self._grad_norm_sq())
        out.append(self._update())
        return out

    def _grad_norm_sq(self) -> Launch:
        v = self.v
        return launch("grad_norm_sq", math.ceil(self.P / 4096), self._stats_row(),
                      grads=v["grads"], offsets=v["layout"], T=i32(self.T), check=self.tw.grad_norm_sq())

    def with_allreduce(self, steps: list[Launch], world_size: int) -> list:
        """A data-parallel rank's step: its gradient kernels, then the gradient summed over the ranks
        (AllReduce), averaged (grad_average, which also clears the rank's own ‖g_t‖²), measured again
        (grad_norm_sq), and only then clipped and applied (sgd_clip_update) — so every rank makes the
        same clip decision and the same update."""
        *grads, update = steps
        if grads[-1].kernel == "grad_norm_sq":  # the ops plan measures the rank's gradient here
            grads.pop()
        v = self.v
        average = launch("grad_average", self._elementwise_grid(self.P), self._stats_row(),
                         grads=v["grads"], n=i32(self.P), scale=f32(1.0 / world_size), T=i32(self.T),
                         check=self.tw.grad_average(world_size))
        return grads + [AllReduce(v["grads"]), average, self._grad_norm_sq(), update]

    def _backward_weight(self, gemm, x, x16, dy, dy16, w, b, n_in, n_out) -> Launch:
        """∂W = xᵀ·∂y and ∂b = Σ ∂y into the gradient's views of `w` and `b` (`x16`, `dy16`: BF16 copies,
        if any)."""
        return self._product("linear_backward_weight", gemm, self.tw.linear_backward_weight(x, dy, w, b),
                             x=self._bf16(gemm, x, x16), dy=self._bf16(gemm, dy, dy16), dW=self.gv[w], db=self.gv[b],
                             B=i32(self.g.batch), n_in=i32(n_in), n_out=i32(n_out))

    def _backward_input_gelu(self, dy, dy16, w, u, n_in, n_out) -> Launch:
        """∂u = (∂y·Wᵀ)·GELU'(u) into GH and its BF16 copy into GH16 (fc2's ∂input as a wide BF16 product)."""
        gemm, v = "fc2_backward_input", self.v
        return self._product("linear_backward_input_gelu", gemm,
                             self.tw.linear_backward_input(dy, w, v["GH"], u=u, dx16=v["GH16"]),
                             dy=dy16, W=self.pv16[w], u=u, du=v["GH"], du16=v["GH16"], B=i32(self.g.batch),
                             n_in=i32(n_in), n_out=i32(n_out))

    def _backward_input(self, gemm, dy, dy16, w, dx, n_in, n_out) -> Launch:
        """∂x = ∂y·Wᵀ into `dx` (`dy16`: ∂y's BF16 copy, if any)."""
        return self._product("linear_backward_input", gemm, self.tw.linear_backward_input(dy, w, dx),
                             dy=self._bf16(gemm, dy, dy16), W=self._bf16(gemm, self.pv[w], self.pv16.get(w)), dx=dx,
                             B=i32(self.g.batch), n_in=i32(n_in), n_out=i32(n_out))
