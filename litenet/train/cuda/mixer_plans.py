"""The Mixer's training step on the GPU as a list of kernel launches over one arena.

Activations are tokens-major, as in litenet.ops: a patch tensor (T, B, d) is at once the matrix
(T·B, d) a channel product multiplies (linear.cu, the MLP's kernels) and the matrix (T, B·d) a
product across the patches multiplies (token_linear.cu): no transposed copy anywhere. The forward
keeps, per block, what the backward needs (LayerNorm's n and 1/σ and outputs, each product's
pre-activation u and GELU(u)) — or, under activations = "recompute", the residual stream and one
block's worth, re-running each block's LayerNorms and GELU products just before its backward
(ActivationSlots says which slot a LayerNorm or block uses). The backward runs the op list in
reverse with each GELU's derivative fused into the product before it and each residual's join done
by the LayerNorm backward before it (layernorm_backward_join), which also adds the two paths' sums
to the step's statistics row.

A step: patches_gather → embedding → blocks → final LayerNorm → mean over the patches → head →
cross_entropy_smoothed → the backward → grad_norm_sq → adamw_update (the last: it advances the
step counter, so the list is captured once as a CUDA graph and replayed for every step).
Precision: the products' kernels in fp32, or their `_tf32` / `_bf16` versions (mma.cuh).
"""

from __future__ import annotations

import math

import numpy as np

from litenet.gpu.launch import THREADS
from litenet.gpu.splitk import TILE, split_k_sizes, tiles
from litenet.gpu.splitk import splits_for as splits_at
from litenet.graph import residuals
from litenet.model import MixerConfig, TrainConfig, param_count, param_layout, param_views
from litenet.train.augment import CUTOUT_FILL
from litenet.train.cuda.kernel_args import SplitK, StatsRow, launch
from litenet.train.cuda.layout import ArenaPlan, StatsLayout
from litenet.train.cuda.schedule_ring import PRECISIONS

i32, f32 = np.int32, np.float32
# Split-K aims for this many blocks per multiprocessor: 3 (the product kernels' 76–84 registers fit
# 2–3) took the BF16 step from 4.97 to 4.87 ms at batch 256, 17.0 to 15.2 ms at 1024 on an H200.
BLOCKS_PER_SM = 3


def splits_for(M: int, N: int, K: int, sm_count: int) -> int:
    """How many ways a training product's sum over K is cut (litenet.gpu.splitk.splits_for)."""
    return splits_at(M, N, K, sm_count, BLOCKS_PER_SM)


class ActivationSlots:
    """Which slot of the arena's Y, NRM, RSTD (LayerNorm i: 2·block, 2·block + 1, 2·blocks the final one)
    and U1, A1, U2, A2 (block b) holds what the backward reads.

    "keep": each LayerNorm and block has its own slot, written by the forward. "recompute": all blocks
    share one block's slots (the final LayerNorm keeps its own), so the backward re-runs block b's
    LayerNorms and GELU products into them from the residual stream H, which is kept whole."""

    def __init__(self, blocks: int, activations: str = "keep"):
        self.recompute = activations == "recompute"
        self.blocks = 1 if self.recompute else blocks
        self.layernorms = 2 * self.blocks + 1
        self._final = 2 * blocks

    def layernorm(self, i: int) -> int:
        """LayerNorm i's slot: the final one's is the last; a block's two follow that block's slot."""
        return self.layernorms - 1 if i == self._final else 2 * self.block(i // 2) + i % 2

    def block(self, b: int) -> int:
        return b % self.blocks


class MixerShapes:
    """The sizes every launch uses: T patches, B images, d channels, the MLPs' widths, R = T·B rows, N = B·d;
    and the activation slots (`activations`: TrainConfig.activations)."""

    def __init__(self, model: MixerConfig, batch: int, activations: str = "keep"):
        self.T, self.B, self.d = model.tokens, batch, model.width
        self.th, self.ch, self.L, self.C = model.token_hidden, model.channel_hidden, model.blocks, model.classes
        self.pixels = model.patch * model.patch * 3
        self.R, self.N = self.T * batch, batch * model.width
        self.slots = ActivationSlots(model.blocks, activations)

    def products(self) -> list[tuple[int, int, int]]:
        """(M, N, K) of every product a step runs (for the split-K scratch size)."""
        T, th, ch, d, R, N, B, C = self.T, self.th, self.ch, self.d, self.R, self.N, self.B, self.C
        return [(R, d, self.pixels), (self.pixels, d, R), (th, N, T), (T, N, th), (T, th, N), (th, T, N),
                (1, T, N), (1, th, N), (R, ch, d), (R, d, ch), (d, ch, R), (ch, d, R), (B, C, d), (d, C, B), (B, d, C)]


def arena_plan(model: MixerConfig, shapes: MixerShapes, capacity: int, sm_count: int, cutmix: bool = False) -> ArenaPlan:
    """Every buffer of a step and of evaluation (one allocation). Without `cutmix` the CutMix draws
    get one row (no kernel reads it; 20 MiB less at batch 256's 4,096 steps of capacity)."""
    s, W = shapes, StatsLayout(len(param_layout(model)), len(residuals(model))).width
    P, L, kept = param_count(model), s.L, s.slots
    scratch, counters = split_k_sizes(s.products(), sm_count, BLOCKS_PER_SM)
    a = ArenaPlan()
    a.add("params", (P,), f32, "the parameters, flat (litenet.model.param_layout)")
    a.add("grads", (P,), f32, "this step's gradient")
    a.add("m", (P,), f32, "AdamW's first moment")
    a.add("v", (P,), f32, "AdamW's second moment")
    a.add("decay", (P,), f32, "the weight decay of every parameter (0 on biases and γ, β under decay = weights)")
    a.add("layout", (len(param_layout(model)) + 1,), i32, "offsets of the parameter tensors, then the total")
    a.add("ctr", (2,), i32, "step position in schedule and statistics; finished-block count")
    a.add("batches", (capacity, s.B), i32, "schedule: image indices of each step")
    a.add("flips", (capacity, s.B), np.uint8, "schedule: mirror flag of each image")
    a.add("crops", (capacity, s.B, 2), np.int8, "schedule: crop offsets (row, column) of each image")
    a.add("cutouts", (capacity, s.B, 2), np.int8, "schedule: cutout centre (row, column) of each image")
    a.add("mixes", (capacity if cutmix else 1, s.B, 5), i32, "schedule: CutMix partner and box of each image")
    a.add("lrs", (capacity,), f32, "schedule: learning rate of each step")
    a.add("steps", (capacity,), i32, "schedule: AdamW's 1-based update count of each step")
    a.add("stats", (capacity, W), f32, "one statistics row per step until fetch_stats")
    a.add("scratch", (max(scratch, 1),), f32, "split-K partial tiles, consumed within each launch")
    a.add("counters", (counters,), np.uint32, "split-K arrival counts, always left at zero")
    a.add("X0", (s.R, s.pixels), f32, "the step's patches, tokens-major")
    a.add("H", (2 * L + 1, s.R, s.d), f32, "the residual stream: embedding, then each block's two joins")
    whose = "one block's (recomputed)" if kept.recompute else "each block's"
    for name, what in (("Y", "LayerNorm outputs"), ("NRM", "LayerNorm's normalised n")):
        a.add(name, (kept.layernorms, s.R, s.d), f32, f"{what}: {whose} two, then the final one")
    a.add("RSTD", (kept.layernorms, s.R), f32, "LayerNorm's 1/√(σ²+eps), as Y")
    a.add("U1", (kept.blocks, s.th, s.N), f32, f"the token MLP's pre-activation u, {whose}")
    a.add("A1", (kept.blocks, s.th, s.N), f32, "GELU(u) of the token MLP, as U1")
    a.add("U2", (kept.blocks, s.R, s.ch), f32, "the channel MLP's pre-activation u, as U1")
    a.add("A2", (kept.blocks, s.R, s.ch), f32, "GELU(u) of the channel MLP, as U1")
    a.add("POOL", (s.B, s.d), f32, "the mean over the patches")
    a.add("Z", (s.B, s.C), f32, "logits")
    a.add("DZ", (s.B, s.C), f32, "∂z")
    a.add("DPOOL", (s.B, s.d), f32, "∂ of the mean")
    a.add("DH", (2, s.R, s.d), f32, "∂ of the residual stream, two buffers taking turns")
    a.add("DY", (s.R, s.d), f32, "∂ of a LayerNorm's output")
    a.add("DU2", (s.R, s.ch), f32, "∂u of the channel MLP")
    a.add("DU1", (s.th, s.N), f32, "∂u of the token MLP")
    a.add("eval_images", (s.B, 32, 32, 3), np.uint8, "evaluation: one chunk of images")
    a.add("eval_index", (1, s.B), i32, "evaluation: 0 … B−1")
    a.add("eval_flips", (1, s.B), np.uint8, "evaluation: zeros")
    a.add("eval_crops", (1, s.B, 2), np.int8, "evaluation: zeros (as eval_cutouts)")
    a.add("eval_cutouts", (1, s.B, 2), np.int8, "evaluation: zeros (cut = 0 switches cutout off anyway)")
    a.add("eval_mixes", (1, s.B, 5), i32, "evaluation: zeros (mix = 0 switches CutMix off anyway)")
    a.add("eval_ctr", (2,), i32, "evaluation: zeros")
    return a


class MixerPlans:
    """The launch lists of a step and of evaluation, over allocated arena views `v`."""

    def __init__(self, model: MixerConfig, train: TrainConfig, shapes: MixerShapes, v: dict, sm_count: int,
                 precision: str = "fp32"):
        self.m, self.t, self.s, self.v, self.sm = model, train, shapes, v, sm_count
        self.suffix = PRECISIONS[precision]
        self.p = param_views(v["params"], model)
        self.g = param_views(v["grads"], model)
        self.stats_layout = StatsLayout(len(param_layout(model)), len(residuals(model)))
        self.row = StatsRow(v["ctr"], v["stats"], i32(self.stats_layout.width))
        # The views of LayerNorm i's and block b's activations, through their slots (ActivationSlots).
        slots = shapes.slots
        self.ln = [{k: v[k][slots.layernorm(i)] for k in ("Y", "NRM", "RSTD")} for i in range(2 * shapes.L + 1)]
        self.act = [{k: v[k][slots.block(b)] for k in ("U1", "A1", "U2", "A2")} for b in range(shapes.L)]

    # -- building blocks ---------------------------------------------------------------------------

    def _splitk(self, M: int, N: int, K: int) -> tuple[int, SplitK]:
        n = splits_for(M, N, K, self.sm)
        return tiles(M, N) * n, SplitK(i32(n), self.v["scratch"], self.v["counters"])

    def _product(self, kernel: str, rows: int, cols: int, depth: int, **named):
        """A product's launch (output rows × cols, a sum over depth): the precision's version of
        `kernel`, split as splits_for says."""
        grid, split = self._splitk(rows, cols, depth)
        return launch(kernel + self.suffix, grid, split, **named)

    def _rows(self, n: int) -> int:
        return max(1, min(math.ceil(n / THREADS), 8 * self.sm))

    def _layernorm(self, x, i: int, rows: int) -> object:
        name = self._ln_name(i)
        return launch("layernorm_forward", math.ceil(rows / (THREADS // 32)), x=x, gamma=self.p[f"{name}.gamma"],
                      beta=self.p[f"{name}.beta"], y=self.ln[i]["Y"], nrm=self.ln[i]["NRM"], rstd=self.ln[i]["RSTD"],
                      B=i32(rows), d=i32(self.s.d), eps=f32(self.m.ln_eps))

    def _ln_name(self, i: int) -> str:
        """LayerNorm i of the step: 2·block (token), 2·block + 1 (channel), 2·blocks (final)."""
        return "final_ln" if i == 2 * self.s.L else f"blocks.{i // 2}.{'token' if i % 2 == 0 else 'channel'}_ln"

    def _layernorm_backward(self, dy, ds, i: int) -> object:
        """LayerNorm i's backward from ∂y to ∂s (the final one's: the stream's gradient starts there)."""
        s = self.s
        row_blocks = math.ceil(s.R / (THREADS // 32))
        return launch("residual_layernorm_backward", row_blocks + self._ln_param_blocks(), self._ln_split(), dy=dy,
                      ds=ds, row_blocks=i32(row_blocks), **self._ln_backward_common(i))

    def _layernorm_backward_join(self, i: int, skip, dx, slot: int) -> object:
        """LayerNorm i's backward joined with the residual stream's gradient `skip` into dx (kernels/
        residual_layernorm.cu layernorm_backward_join), the join's sums at `slot` of the statistics row.
        Its rows are walked by at most 8 blocks a multiprocessor, as residual_join's elements were."""
        row_blocks = min(math.ceil(self.s.R / (THREADS // 32)), 8 * self.sm)
        return launch("layernorm_backward_join", row_blocks + self._ln_param_blocks(), self._ln_split(),
                      dy=self.v["DY"], skip=skip, dx=dx, row_blocks=i32(row_blocks), ctr=self.v["ctr"],
                      stats=self.v["stats"], stat_width=self.row.stat_width, slot=i32(slot),
                      **self._ln_backward_common(i))

    def _ln_backward_common(self, i: int) -> dict:
        s, name = self.s, self._ln_name(i)
        return dict(nrm=self.ln[i]["NRM"], rstd=self.ln[i]["RSTD"], gamma=self.p[f"{name}.gamma"],
                    dgamma=self.g[f"{name}.gamma"], dbeta=self.g[f"{name}.beta"], B=i32(s.R), d=i32(s.d))

    def _ln_param_splits(self) -> int:
        """The ∂γ, ∂β column sums: one row of tiles over R rows, split as splits_for says."""
        return splits_for(1, 2 * self.s.d, self.s.R, self.sm)

    def _ln_param_blocks(self) -> int:
        return math.ceil(2 * self.s.d / TILE) * self._ln_param_splits()

    def _ln_split(self) -> SplitK:
        return SplitK(i32(self._ln_param_splits()), self.v["scratch"], self.v["counters"])

    # -- the forward -------------------------------------------------------------------------------

    def forward(self, images, batches, draws: dict, ctr, pad: int, cut: int, mix: int) -> list:
        """From the step's images to the logits Z (training and evaluation alike). `draws`: the
        flips, crops, cutouts and mixes buffers; pad, cut and mix (crop padding, cutout side, CutMix
        on) 0 switch those off."""
        s, v, p = self.s, self.v, self.p
        out = [launch("patches_gather", self._rows(s.R * s.pixels), images=images, batches=batches, **draws,
                      ctr=ctr, out=v["X0"], B=i32(s.B), patch=i32(self.m.patch), pad=i32(pad), cut=i32(cut), mix=i32(mix),
                      fill=i32(CUTOUT_FILL), shift=f32(self.m.input_shift), scale=f32(self.m.input_scale)),
               self._product("linear_forward", s.R, s.d, s.pixels, x=v["X0"], W=p["embed.weight"],
                             bias=p["embed.bias"], y=v["H"][0], B=i32(s.R), n_in=i32(s.pixels), n_out=i32(s.d))]
        for b in range(s.L):
            k, a = f"blocks.{b}", self.act[b]
            out += [*self._token_activations(b),
                    self._product("token_linear_residual_forward", s.T, s.N, s.th, x=a["A1"],
                                  W=p[f"{k}.token_fc2.weight"], bias=p[f"{k}.token_fc2.bias"], r=v["H"][2 * b],
                                  y=v["H"][2 * b + 1], T=i32(s.th), T_out=i32(s.T), N=i32(s.N)),
                    *self._channel_activations(b),
                    self._product("linear_residual_forward", s.R, s.d, s.ch, x=a["A2"],
                                  W=p[f"{k}.channel_fc2.weight"], bias=p[f"{k}.channel_fc2.bias"],
                                  r=v["H"][2 * b + 1], y=v["H"][2 * b + 2], B=i32(s.R), n_in=i32(s.ch),
                                  n_out=i32(s.d))]
        out += [self._layernorm(v["H"][2 * s.L], 2 * s.L, s.R),
                launch("mean_tokens_forward", self._rows(s.N), x=self.ln[2 * s.L]["Y"], y=v["POOL"], T=i32(s.T),
                       N=i32(s.N)),
                self._product("linear_forward", s.B, s.C, s.d, x=v["POOL"], W=p["head.weight"], bias=p["head.bias"],
                              y=v["Z"], B=i32(s.B), n_in=i32(s.d), n_out=i32(s.C))]
        return out

    def _token_activations(self, b: int) -> list:
        """Block b's token LayerNorm and first product across the patches with its GELU: every
        activation the token MLP's backward reads (its input H[2b] is kept)."""
        s, k, a = self.s, f"blocks.{b}", self.act[b]
        return [self._layernorm(self.v["H"][2 * b], 2 * b, s.R),
                self._product("token_linear_gelu_forward", s.th, s.N, s.T, x=self.ln[2 * b]["Y"],
                              W=self.p[f"{k}.token_fc1.weight"], bias=self.p[f"{k}.token_fc1.bias"], u=a["U1"],
                              a=a["A1"], T=i32(s.T), T_out=i32(s.th), N=i32(s.N))]

    def _channel_activations(self, b: int) -> list:
        """Block b's channel LayerNorm and first channel product with its GELU, as _token_activations."""
        s, k, a = self.s, f"blocks.{b}", self.act[b]
        return [self._layernorm(self.v["H"][2 * b + 1], 2 * b + 1, s.R),
                self._product("linear_gelu_forward", s.R, s.ch, s.d, x=self.ln[2 * b + 1]["Y"],
                              W=self.p[f"{k}.channel_fc1.weight"], bias=self.p[f"{k}.channel_fc1.bias"], u=a["U2"],
                              a=a["A2"], B=i32(s.R), n_in=i32(s.d), n_out=i32(s.ch))]

    def eval_forward(self) -> list:
        v = self.v
        draws = {"flips": v["eval_flips"], "crops": v["eval_crops"], "cutouts": v["eval_cutouts"],
                 "mixes": v["eval_mixes"]}
        return self.forward(v["eval_images"], v["eval_index"], draws, v["eval_ctr"], pad=0, cut=0, mix=0)

    # -- a training step -----------------------------------------------------------------------------

    def step(self, images, labels) -> list:
        """Forward, loss, backward, gradient norms and the AdamW update of one step."""
        s, v, p, g, t = self.s, self.v, self.p, self.g, self.t
        draws = {"flips": v["flips"], "crops": v["crops"], "cutouts": v["cutouts"], "mixes": v["mixes"]}
        mix = int("cutmix" in t.augmentations)
        out = self.forward(images, v["batches"], draws, v["ctr"], pad=t.crop_padding if "crop" in t.augmentations else 0,
                           cut=t.cutout_size if "cutout" in t.augmentations else 0, mix=mix)
        out += [launch("cross_entropy_smoothed", math.ceil(s.B / THREADS), self.row, z=v["Z"], labels=labels,
                       batches=v["batches"], mixes=v["mixes"], dz=v["DZ"], B=i32(s.B), C=i32(s.C),
                       eps=f32(t.label_smoothing), mix=i32(mix)),
                self._product("linear_backward_weight", s.d, s.C, s.B, x=v["POOL"], dy=v["DZ"], dW=g["head.weight"],
                              db=g["head.bias"], B=i32(s.B), n_in=i32(s.d), n_out=i32(s.C)),
                self._product("linear_backward_input", s.B, s.d, s.C, dy=v["DZ"], W=p["head.weight"],
                              dx=v["DPOOL"], B=i32(s.B), n_in=i32(s.d), n_out=i32(s.C)),
                launch("mean_tokens_backward", self._rows(s.R * s.d), dy=v["DPOOL"], dx=v["DY"], T=i32(s.T),
                       N=i32(s.N)),
                self._layernorm_backward(v["DY"], v["DH"][0], 2 * s.L)]
        dh = 0  # v["DH"][dh] holds ∂ of the stream after the block being walked back
        for b in reversed(range(s.L)):
            out += self._recomputed(b) + self._block_backward(b, dh)
        out += [self._product("linear_backward_weight", s.pixels, s.d, s.R, x=v["X0"], dy=v["DH"][dh],
                              dW=g["embed.weight"], db=g["embed.bias"], B=i32(s.R), n_in=i32(s.pixels),
                              n_out=i32(s.d)),
                launch("grad_norm_sq", math.ceil(v["grads"].size / 4096), self.row, grads=v["grads"],
                       offsets=v["layout"], T=i32(self.stats_layout.tensors)),
                launch("adamw_update", self._rows(v["params"].size), self.row, params=v["params"], m=v["m"],
                       v=v["v"], grads=v["grads"], decay=v["decay"], lrs=v["lrs"], steps=v["steps"],
                       n=i32(v["params"].size), T=i32(self.stats_layout.tensors), beta1=f32(t.beta1),
                       beta2=f32(t.beta2), eps=f32(t.adam_eps), threshold=f32(t.clip_threshold),
                       clip_norm=f32(t.clip_norm))]
        return out

    def _recomputed(self, b: int) -> list:
        """Under activations = "recompute", block b's activations again, into the one block's slots,
        just before its backward reads them: the same launches on the same inputs as the forward's, so
        the same bits. The residual products are not re-run (H is kept), nor is the last block's
        (the forward left its activations in the slots; the final LayerNorm has its own)."""
        if not self.s.slots.recompute or b == self.s.L - 1:
            return []
        return self._token_activations(b) + self._channel_activations(b)

    def _block_backward(self, b: int, dh: int) -> list:
        """Block b in reverse: ∂ of its output in DH[dh] → ∂ of its input in DH[dh] (via DH[1 − dh])."""
        s, v, p, g, k, a = self.s, self.v, self.p, self.g, f"blocks.{b}", self.act[b]
        d_out, d_mid = v["DH"][dh], v["DH"][1 - dh]
        path = self.stats_layout.path
        return [
            # the channel MLP: ∂u = (∂y W2ᵀ)·GELU'(u), ∂W2 = aᵀ ∂y, ∂W1 = yᵀ ∂u, ∂(its LayerNorm's output)
            self._product("linear_backward_input_gelu", s.R, s.ch, s.d, dy=d_out, W=p[f"{k}.channel_fc2.weight"],
                          u=a["U2"], du=v["DU2"], B=i32(s.R), n_in=i32(s.ch), n_out=i32(s.d)),
            self._product("linear_backward_weight", s.ch, s.d, s.R, x=a["A2"], dy=d_out,
                          dW=g[f"{k}.channel_fc2.weight"], db=g[f"{k}.channel_fc2.bias"], B=i32(s.R),
                          n_in=i32(s.ch), n_out=i32(s.d)),
            self._product("linear_backward_input", s.R, s.d, s.ch, dy=v["DU2"], W=p[f"{k}.channel_fc1.weight"],
                          dx=v["DY"], B=i32(s.R), n_in=i32(s.d), n_out=i32(s.ch)),
            self._product("linear_backward_weight", s.d, s.ch, s.R, x=self.ln[2 * b + 1]["Y"], dy=v["DU2"],
                          dW=g[f"{k}.channel_fc1.weight"], db=g[f"{k}.channel_fc1.bias"], B=i32(s.R),
                          n_in=i32(s.d), n_out=i32(s.ch)),
            self._layernorm_backward_join(2 * b + 1, d_out, d_mid, path + 3 * (2 * b + 1)),
            # the token MLP, on (T, N) matrices
            self._product("token_linear_backward_input_gelu", s.th, s.N, s.T, dy=d_mid,
                          W=p[f"{k}.token_fc2.weight"], u=a["U1"], du=v["DU1"], T=i32(s.th), T_out=i32(s.T),
                          N=i32(s.N)),
            self._product("token_linear_backward_weight", s.th, s.T, s.N, x=a["A1"], dy=d_mid,
                          dW=g[f"{k}.token_fc2.weight"], db=g[f"{k}.token_fc2.bias"], T=i32(s.th), T_out=i32(s.T),
                          N=i32(s.N)),
            self._product("token_linear_backward_input", s.T, s.N, s.th, dy=v["DU1"], W=p[f"{k}.token_fc1.weight"],
                          dx=v["DY"], T=i32(s.T), T_out=i32(s.th), N=i32(s.N)),
            self._product("token_linear_backward_weight", s.T, s.th, s.N, x=self.ln[2 * b]["Y"], dy=v["DU1"],
                          dW=g[f"{k}.token_fc1.weight"], db=g[f"{k}.token_fc1.bias"], T=i32(s.T), T_out=i32(s.th),
                          N=i32(s.N)),
            self._layernorm_backward_join(2 * b, d_mid, d_out, path + 3 * (2 * b)),
        ]
