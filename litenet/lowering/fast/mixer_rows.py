"""The Mixer's forward for a few images in one launch (kernels/infer_mixer.cu): a rewrite of the whole
forward pass of a Mixer op list, in float32 from the flat parameters where they lie, or in int8 from
the plan packed by litenet.runtime.cuda_mixer_net (MixerWeights).

Two ways to run it, as the MLP's rows kernel (rows.py):
  fused   one launch: every phase, separated by grid barriers (grid ≤ SM count, all blocks resident)
  phases  one launch a phase, no grid barrier (any grid; what the CPU emulator runs)
The phases are the embedding, three per block (the token MLP with its LayerNorm and residual; the
channel MLP's first product with its LayerNorm and GELU; its second with the residual) and the head
(final LayerNorm, the mean over the patches, the logits). Each phase is cut into about as many units as
the grid has blocks (unit_widths). The region keeps the reference calls of every op beside it (fp32's
twin); the runtime's tests hold the logits to the NumPy forward (fp32) and the plan's executor (int8).
"""

from __future__ import annotations

import numpy as np

from litenet.gpu.infer_layout import pad16, padded_k
from litenet.gpu.launch import SMEM_LIMIT, THREADS
from litenet.lowering.fast.common import packed_constant
from litenet.lowering.program import Call, Program, Region
from litenet.lowering.walk import Walk

i32, f32 = np.int32, np.float32
MODES = ("fused", "phases")
TG = 8  # ML_TG in infer_mixer.cu: patches a channel-MLP unit (one warp each for their LayerNorm)
BLOCK_OPS = ("layernorm", "token_linear", "gelu", "token_linear", "residual",
             "layernorm", "linear", "gelu", "linear", "residual")


def is_mixer(ops) -> bool:
    """Whether the op list is the Mixer's, the only one the kernel computes: patches, the embedding,
    blocks of BLOCK_OPS wired as graph.py wires them, LayerNorm, mean over the patches, the head."""
    kinds = [op.kind for op in ops]
    blocks, rest = divmod(len(ops) - 5, len(BLOCK_OPS))
    if rest or blocks < 1 or kinds[:2] != ["patches", "linear"] or kinds[-3:] != ["layernorm", "mean_tokens", "linear"]:
        return False
    if kinds[2:-3] != list(BLOCK_OPS) * blocks:
        return False
    for b in range(blocks):
        block = ops[2 + len(BLOCK_OPS) * b:2 + len(BLOCK_OPS) * (b + 1)]
        stream = ops[1 + len(BLOCK_OPS) * b].name  # the residual stream entering the block
        chain = [stream] + [op.name for op in block]
        if any(op.inputs[0] != chain[j] for j, op in enumerate(block) if op.kind != "residual"):
            return False
        if block[4].inputs != (stream, block[3].name) or block[9].inputs != (block[4].name, block[8].name):
            return False
        if not all(block[j].param("bias") for j in (1, 3, 6, 8)):
            return False
    return all(op.param("bias") for op in (ops[1], ops[-1]))


PART = TG * THREADS  # rows_dots' partial sums (the channel fc2 unit's), in 4-byte slots


def token_words(m, int8: bool) -> int:
    """Both token products' weights as the kernel stages them in shared memory, in 4-byte words: fp32 as the
    parameters hold them, int8 as the plan packs them (rows of padded_k bytes)."""
    return m.token_hidden * pad16(m.tokens) // 4 + m.tokens * pad16(m.token_hidden) // 4 if int8 else \
        2 * m.tokens * m.token_hidden


def token_staged(m, ct: int, int8: bool) -> int:
    """TW: the words of token_words where they fit beside a token unit's CT channels, else 0 (read from L2)."""
    words = token_words(m, int8)
    return words if (2 * m.tokens + m.token_hidden) * ct + words <= SMEM_LIMIT // 4 else 0


def unit_widths(model, batch: int, grid: int) -> tuple[int, int, int]:
    """(CT, HS, CS): channels a token unit, hidden channels a channel-fc1 unit, channels a channel-fc2
    unit — each as small as keeps the phase's units within one per block of the grid, and within shared
    memory (a small grid takes more units a block instead)."""
    m, slots = model, SMEM_LIMIT // 4
    tiles = -(-m.tokens // TG)
    ct = max(1, min(-(-batch * m.width // grid), slots // (2 * m.tokens + m.token_hidden)))
    hs = max(1, min(-(-batch * tiles * m.channel_hidden // grid), (slots - TG * m.width) // m.width))
    cs = max(1, min(-(-batch * tiles * m.width // grid),
                    (slots - TG * m.channel_hidden - PART) // (m.channel_hidden + TG)))
    return ct, hs, cs


def smem_floats(model, widths: tuple[int, int, int], int8: bool = False) -> int:
    """Dynamic shared memory of the kernel, in 4-byte slots: the largest phase's (a patch's values and its
    row; the token unit's columns, normalised and through the first product, and both products' weights where
    they fit; a channel unit's rows, its slice of the weights (fc2's with the stream values its residual adds to)
    and its products' partial sums; the head's tile of the stream, its sums and the patches' statistics)."""
    (ct, hs, cs), m, warps = widths, model, THREADS // 32
    token = (2 * m.tokens + m.token_hidden) * ct + token_staged(m, ct, int8)
    return max(m.patch * m.patch * 3 + m.width, token, (TG + hs) * m.width,
               (TG + cs) * m.channel_hidden + TG * cs + PART, m.tokens * m.width + (warps + 1) * m.width + 2 * m.tokens)


def fits(model, batch: int, grid: int) -> bool:
    """Whether the kernel's shared memory holds this model at this batch (else the launch-per-op forward).
    (The token weights are staged only where they fit: they never decide it.)"""
    return 4 * smem_floats(model, unit_widths(model, batch, grid)) <= SMEM_LIMIT


class _Layout:
    """infer_mixer.cu's layout table: a record (ML_REC ints) a product, γ and β offsets a LayerNorm."""

    def __init__(self, w: Walk, packed):
        self.w, self.packed, self.values = w, packed, []

    def layernorm(self, op) -> None:
        if self.packed is None:
            self.values += [self.w.param(op, "gamma").offset, self.w.param(op, "beta").offset]
        else:
            self.values += [self.packed.at[f"{op.name}.gamma"], self.packed.at[f"{op.name}.beta"]]

    def product(self, op) -> None:
        if self.packed is None:
            self.values += [self.w.param(op, "weight").offset, self.w.param(op, "bias").offset, -1, 0, 0]
        else:
            at = self.packed.at
            s_x = np.float32(self.packed.scales[op.name]).view(np.int32)
            self.values += [at[f"{op.name}.weight"], at[f"{op.name}.bias"], at[f"{op.name}.mult"], padded_k(op), int(s_x)]


def mixer_rows_inference(prog: Program, model, batch: int, prefix: str, mode: str, grid: int,
                         packed=None) -> Program:
    """The forward program `prog` (walk.forward_program of a Mixer) as one region of infer_mixer_<p>_rows
    launches: one (fused) or one a phase (phases), `grid` blocks each; float32 from the flat parameters,
    or int8 from `packed` (litenet.runtime.cuda_mixer_net.MixerWeights)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    w = Walk(model, batch, prefix, prog)
    ops = w.ops
    if not is_mixer(ops):
        raise ValueError("infer_mixer.cu computes the Mixer's op list only")
    int8 = packed is not None
    if not fits(model, batch, grid):
        raise ValueError(f"the one-launch Mixer forward does not fit shared memory at batch {batch}")
    T, d, blocks = model.tokens, model.width, model.blocks
    table = _Layout(w, packed)
    table.product(ops[1])
    for b in range(blocks):
        block = ops[2 + len(BLOCK_OPS) * b:]
        table.layernorm(block[0])
        table.product(block[1])
        table.product(block[3])
        table.layernorm(block[5])
        table.product(block[6])
        table.product(block[8])
    table.layernorm(ops[-3])
    table.product(ops[-1])
    layout = packed_constant(prog, "infer.mixer_layout", np.asarray(table.values, np.int32),
                             "infer_mixer.cu's records: each product's and LayerNorm's offsets")
    state = lambda name, shape, what, dtype=np.float32: prog.add(prefix + name, shape, dtype, life="state", purpose=what)  # noqa: E731
    x0 = state("mixer.x0", (batch, T, d), "the residual stream, image-major (even blocks read it)")
    x1 = state("mixer.x1", (batch, T, d), "the residual stream, image-major (odd blocks read it)")
    a = state("mixer.a", (batch, T, model.channel_hidden), "the channel MLP's hidden activations (int8: quantized "
              "for the second product, an int's bits in each float)")
    stats = state("mixer.stats", (batch, T, 2), "each patch's LayerNorm statistics (μ, √(σ² + eps)), taken once for "
                  "the next token LayerNorm or the head")
    counts = state("mixer.counts", (batch, -(-T // TG)), "the channel fc2 units finished on each tile of TG patches, "
                   "left at zero", np.uint32)
    sync = state("infer.sync", (2,), "the grid barrier's counters, left at zero", np.uint32)
    ct, hs, cs = unit_widths(model, batch, grid)
    patches = ops[0].attrs
    if packed is None:
        precision, weights = "fp32", dict(params=prog.ref("params"))
    else:
        precision = "int8"
        weights = dict(floats=packed_constant(prog, "infer.floats", packed.floats, "multipliers, biases, γ, β of the int8 plan"),
                       words=packed_constant(prog, "infer.words", packed.words, "the packed int8 weights, four to a word"))
    args = dict(pixels=prog.ref(prefix + "images").reshape(batch, 3072), B=i32(batch), patch=i32(patches["patch"]),
                shift=f32(patches["input_shift"]), scale=f32(patches["input_scale"]), **weights,
                layout=layout, T=i32(T), d=i32(d), Th=i32(model.token_hidden), Hc=i32(model.channel_hidden),
                blocks=i32(blocks), C=i32(model.classes), eps=f32(model.ln_eps), CT=i32(ct), HS=i32(hs), CS=i32(cs),
                TW=i32(token_staged(model, ct, int8)),
                x0=x0, x1=x1, a=a, stats=stats, counts=counts, logits=prog.ref(prefix + ops[-1].name), sync=sync)
    smem = 4 * smem_floats(model, (ct, hs, cs), int8)
    count = 3 * blocks + 2
    spans = [(0, count)] if mode == "fused" else [(p, p + 1) for p in range(count)]
    kernel = f"infer_mixer_{precision}_rows"
    calls = [Call(kernel, grid, dict(args, phase_begin=i32(lo), phase_end=i32(hi)), smem) for lo, hi in spans]
    reference = [call for region in prog.regions for call in (region.reference or region.calls)] if packed is None else []
    prog.regions = [Region("the whole Mixer forward, " + ("one launch" if mode == "fused" else "a launch a phase"),
                           "forward", tuple(op.name for op in ops), calls, reference=reference,
                           rewrite=f"mixer rows: {mode}")]
    prog.labels.update(batch=batch, tier="fast", precision=precision, plan=f"inference, mixer rows {mode}")
    return prog
