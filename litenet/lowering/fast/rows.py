"""Inference of the MLP family in its own kernels (kernels/infer_fp32.cu, kernels/infer_int8.cu): a rewrite
of the whole forward pass, from the packed model (litenet.runtime.cuda_net.PackedNet, what the runtime
loads: fp32 weights or the int8 plan) instead of the flat parameters.

Three ways to run a batch:
  fused   one launch of infer_<p>_rows: every phase, separated by grid barriers (small batches;
          grid ≤ SM count so all blocks are resident).
  phases  the same kernel once per phase, no grid barrier (any grid; what the CPU emulator runs).
  tiles   per layer one infer_<p>_tiles launch (64×64 tiles), a LayerNorm launch per block, the last
          one with the head (large batches).

The buffers are state tensors (bytes of their own, zeroed once): the kernels never write the pad
columns of a row and rely on them staying zero. The regions have no reference calls (the packed
model is not the flat parameters the reference kernels read); their twins are the NumPy forward for fp32
(litenet.runtime.cuda_net.forward_fp32) and the plan's executor for int8 (litenet.runtime.int8_plan.run_plan),
which the runtime's tests hold them to, int8 layer by layer.
"""

from __future__ import annotations

import math

import numpy as np

from litenet.errors import LiteNetError
from litenet.gpu.infer_layout import layers, pad64, phases
from litenet.gpu.launch import SMEM_LIMIT, THREADS
from litenet.graph import ops_of
from litenet.lowering.fast.common import packed_constant, unused_pointers
from litenet.lowering.program import Call, Program, Ref, Region

i32, f32 = np.int32, np.float32
ROWS = 8                  # IR_ROWS in infer_words.cuh: images per rowdot pass
TILE = 64                 # IT_TILE in infer_words.cuh (tests/cuda/test_kernel_args.py holds them equal)
STATIC_SMEM = 2 * 1024    # the rows kernels' own shared arrays (LUTs, partial sums), rounded up
MODES = ("fused", "phases", "tiles")


def rows_smem(net) -> int:
    """Dynamic shared memory of the rows kernel: ROWS staged rows of the widest layer."""
    per = 4 if net.precision == "fp32" else 1
    return ROWS * max(pad64(net.shape.width), pad64(net.shape.hidden)) * per


def fused_fits(net) -> bool:
    """Whether the rows kernel's staging buffer fits in shared memory."""
    return rows_smem(net) + STATIC_SMEM <= SMEM_LIMIT


def check_width(net) -> None:
    """The LayerNorm kernels stage ROWS rows of the residual stream: refuse a width they cannot hold."""
    if ROWS * pad64(net.shape.width) * 4 > SMEM_LIMIT:
        raise LiteNetError(f"width {net.shape.width} is too wide for the CUDA backend (at most "
                           f"{SMEM_LIMIT // (ROWS * 4)}); use --backend onnxruntime")


class _Packed:
    """The packed model's tensors in the program, and views of each layer's pieces."""

    def __init__(self, prog: Program, net, prefix: str, batch: int, mode: str):
        s, self.net, self.prog, self.prefix = net.shape, net, prog, prefix
        self.dp, self.hp = pad64(s.width), pad64(s.hidden)
        self.int8 = net.precision == "int8"
        self.words = packed_constant(prog, "infer.words", net.words, "the packed weights (litenet.runtime.cuda_net)")
        self.floats = self.words if not self.int8 else \
            packed_constant(prog, "infer.floats", net.floats, "multipliers, biases, scales, γ, β of the int8 plan")
        self.layout = packed_constant(prog, "infer.layout", net.layout.ravel(), "each layer's offsets in the arenas")
        self.sync = prog.add("infer.sync", (2,), np.uint32, life="state", purpose="the grid barrier's counter")
        self.dummy_f, self.dummy_i = unused_pointers(prog)
        buf = lambda name, cols, dtype=np.float32: prog.add(  # noqa: E731
            prefix + name, (batch, cols), dtype, life="state", purpose="a row buffer, pads kept zero")
        self.h, self.s = buf("h", self.dp), buf("s", self.dp)
        if mode == "tiles" and self.int8:
            self.qh, self.qa = buf("qh", self.dp // 4, np.int32), buf("qa", self.hp // 4, np.int32)
        else:
            self.a = buf("a", self.hp)

    def words_of(self, phase: int) -> Ref:
        _name, n, k = layers(self.net.shape)[phase]
        kw = pad64(k) if not self.int8 else pad64(k) // 4
        off = int(self.net.layout[phase, 0])
        return self.words[off:off + n * kw]

    def floats_of(self, phase: int, column: int, size: int) -> Ref | None:
        off = int(self.net.layout[phase, column])
        return None if off < 0 else self.floats[off:off + size]


def mlp_inference(prog: Program, net, batch: int, prefix: str, mode: str, grid: int) -> Program:
    """The forward program `prog` (litenet.lowering.walk.forward_program of net.shape) with all its regions
    replaced by the inference kernels' launches in `mode`; `net`: the runtime's packed model
    (litenet.runtime.cuda_net.PackedNet); `grid`: the rows kernel's block count."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    check_width(net)
    p = _Packed(prog, net, prefix, batch, mode)
    pixels = prog.ref(prefix + "images").reshape(batch, 3072)
    logits = prog.ref(prefix + ops_of(net.shape)[-1].name)
    if mode == "tiles":
        regions = _tiles(p, batch, pixels, logits)
    else:
        regions = _rows(p, batch, pixels, logits, mode, grid)
    prog.regions = regions
    prog.labels.update(batch=batch, tier="fast", precision=net.precision, plan=f"inference, {mode}")
    return prog


def _rows(p: _Packed, B: int, pixels: Ref, logits: Ref, mode: str, grid: int) -> list[Region]:
    s, int8 = p.net.shape, p.int8
    weights = dict(wq=p.words, wf=p.floats) if int8 else dict(wts=p.words)
    common = dict(pixels=pixels, B=i32(B), full=i32(s.embed == "full"), shift=f32(s.input_shift), **weights,
                  layout=p.layout, d=i32(s.width), H=i32(s.hidden), C=i32(s.classes), blocks=i32(s.blocks),
                  eps=f32(s.ln_eps), h=p.h, s=p.s, a=p.a, logits=logits, sync=p.sync)
    kernel = f"infer_{p.net.precision}_rows"
    names = [op.name for op in ops_of(s)]
    if mode == "fused":
        call = Call(kernel, grid, dict(common, phase_begin=i32(0), phase_end=i32(phases(s))), rows_smem(p.net))
        return [Region("the whole forward, one launch", "forward", tuple(names), [call], rewrite="rows: fused")]
    out = []
    for phase, (name, _n, _k) in enumerate(layers(s)):
        call = Call(kernel, grid, dict(common, phase_begin=i32(phase), phase_end=i32(phase + 1)), rows_smem(p.net))
        out.append(Region(f"{name}, a phase of the rows kernel", "forward", (name,), [call], rewrite="rows: phases"))
    return out


def _tile_grid(M: int, N: int) -> int:
    return -(-M // TILE) * -(-N // TILE)


def _tiles(p: _Packed, M: int, pixels: Ref, logits: Ref) -> list[Region]:
    s = p.net.shape
    d, H, C, dp, hp = s.width, s.hidden, s.classes, p.dp, p.hp
    ln_grid = math.ceil(M / (THREADS // 32))
    head = phases(s) - 1
    fz, iz = p.dummy_f, p.dummy_i
    region = lambda name, ops, call: Region(name, "forward", ops, [call], rewrite="rows: tiles")  # noqa: E731
    embed = dict(pixels=pixels, embed=i32(2 if s.embed == "full" else 1), shift=f32(s.input_shift), M=i32(M),
                 W=p.words_of(0), N=i32(d), use_res=i32(0), res=fz)
    hidden = dict(pixels=pixels, embed=i32(0), shift=f32(0), M=i32(M), N=i32(H), use_bias=i32(1), gelu=i32(1),
                  use_res=i32(0), res=fz)
    back = dict(pixels=pixels, embed=i32(0), shift=f32(0), M=i32(M), N=i32(d), use_bias=i32(1), gelu=i32(0),
                use_res=i32(1), res=p.h, out=p.s, stride=i32(dp))
    norm = dict(s=p.s, M=i32(M), d=i32(d), stride=i32(dp), eps=f32(s.ln_eps), h=p.h, C=i32(C), logits=logits)
    out = []
    if not p.int8:
        out.append(region("embed", ("embed.rows", "embed"), Call("infer_fp32_tiles", _tile_grid(M, d), dict(
            embed, x=fz, Kw=i32(s.embed_inputs), bias=fz, use_bias=i32(0), gelu=i32(0), out=p.h, stride=i32(dp)))))
    else:
        out.append(region("embed", ("embed.rows", "embed"), Call("infer_int8_tiles", _tile_grid(M, d), dict(
            embed, in_scale=f32(p.net.scale(0)), x=iz, Kw=i32(s.embed_inputs // 4), mult=p.floats_of(0, 2, d),
            bias=fz, use_bias=i32(0), gelu=i32(0), out=p.h, use_out=i32(1), q=p.qh, use_q=i32(1), stride=i32(dp),
            q_scale=f32(p.net.scale(1))))))
    for i in range(s.blocks):
        p1, p2, b = 1 + 2 * i, 2 + 2 * i, f"blocks.{i}"
        last = i == s.blocks - 1
        nxt = p2 + 1  # the next fc1, or the head
        if not p.int8:
            fc1 = Call("infer_fp32_tiles", _tile_grid(M, H), dict(
                hidden, x=p.h, Kw=i32(dp), W=p.words_of(p1), bias=p.floats_of(p1, 1, H), out=p.a, stride=i32(hp)))
            fc2 = Call("infer_fp32_tiles", _tile_grid(M, d), dict(
                back, x=p.a, Kw=i32(hp), W=p.words_of(p2), bias=p.floats_of(p2, 1, d)))
            ln = Call("infer_fp32_ln_rows", ln_grid, dict(
                norm, gamma=p.floats_of(p2, 4, d), beta=p.floats_of(p2, 5, d), head=i32(last),
                head_w=p.words_of(head) if last else fz, head_b=p.floats_of(head, 1, C) if last else fz),
                8 * dp * 4 if last else 0)
        else:
            fc1 = Call("infer_int8_tiles", _tile_grid(M, H), dict(
                hidden, in_scale=f32(1), x=p.qh, Kw=i32(dp // 4), W=p.words_of(p1), mult=p.floats_of(p1, 2, H),
                bias=p.floats_of(p1, 1, H), out=fz, use_out=i32(0), q=p.qa, use_q=i32(1), stride=i32(hp),
                q_scale=f32(p.net.scale(p2))))
            fc2 = Call("infer_int8_tiles", _tile_grid(M, d), dict(
                back, in_scale=f32(1), x=p.qa, Kw=i32(hp // 4), W=p.words_of(p2), mult=p.floats_of(p2, 2, d),
                bias=p.floats_of(p2, 1, d), use_out=i32(1), q=iz, use_q=i32(0), q_scale=f32(1)))
            ln = Call("infer_int8_ln_rows", ln_grid, dict(
                norm, gamma=p.floats_of(p2, 4, d), beta=p.floats_of(p2, 5, d), q=p.qh, q_scale=f32(p.net.scale(nxt)),
                head=i32(last), head_w=p.words_of(nxt) if last else iz,
                head_m=p.floats_of(nxt, 2, C) if last else fz, head_b=p.floats_of(nxt, 1, C) if last else fz),
                8 * dp if last else 0)
        out.append(region(f"{b}.fc1 + GELU", (f"{b}.fc1", f"{b}.gelu"), fc1))
        out.append(region(f"{b}.fc2 + residual", (f"{b}.fc2", f"{b}.residual"), fc2))
        out.append(region(f"{b}.ln" + (" + head" if last else ""), (f"{b}.ln",) + (("head",) if last else ()), ln))
    return out
