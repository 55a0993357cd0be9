"""The Mixer's int8 inference (the int8 plan, docs/int8-plan.md): a rewrite of the whole forward pass that
walks the op list, each product reading its input already quantized by the op before it — patches_infer,
layernorm_quantize (layernorm_int8.cu), the GELU epilogue of the previous product, mean_tokens_quantize —
as rows for a channel product (infer_int8_tiles, infer_int8.cu) or as token words for a product across the
patches (token_linear_int8.cu). Each product takes the GELU or the residual join after it into its
epilogue; the residual stream H is updated in place.

The weights come packed (litenet.runtime.cuda_mixer_net.MixerWeights). Activations are tokens-major, as
in litenet.ops: a patch tensor (T, B, n) is at once the matrix (T·B, n) a channel product multiplies and
the matrix (T, B·n) a product across the patches multiplies, so no op needs a transposed copy. The
buffers are state tensors (bytes of their own, zeroed once), named by the role they play ("H" the
stream, "QC" a channel product's quantized input, …): the kernels never write the pad columns and rely
on them staying zero. Program.outputs says which buffer holds each op's output. The regions have no
reference calls; their twin is the plan's executor (litenet.runtime.int8_plan.run_plan), which the
runtime's tests hold every launch to.
"""

from __future__ import annotations

import math

import numpy as np

from litenet import graph
from litenet.gpu import splitk
from litenet.gpu.infer_layout import pad16, pad64, padded_k
from litenet.gpu.launch import THREADS
from litenet.lowering.fast.common import packed_constant, unused_pointers
from litenet.lowering.program import Call, Program, Ref, Region

i32, f32 = np.int32, np.float32
LN_ROWS = 8        # LayerNorm kernels: one warp per row, 8 rows per 256-thread block
TOKEN_OUTS = 16    # token_linear_int8.cu: output patches per block (TL_OUTS)


class _Walk:
    """The launch list of one batch size, op by op."""

    def __init__(self, prog: Program, packed, batch: int, prefix: str, sm_count: int):
        m = packed.model
        self.prog, self.packed, self.m, self.B, self.prefix = prog, packed, m, batch, prefix
        self.sm_count = sm_count
        self.T, self.d, self.R, self.N = m.tokens, m.width, m.tokens * batch, batch * m.width
        self.ops = graph.ops_of(m)
        self.index = {op.name: i for i, op in enumerate(self.ops)}
        self.readers = graph.consumers(self.ops)
        self.words = packed_constant(prog, "infer.words", packed.words, "the packed int8 weights, four to a word")
        self.floats = packed_constant(prog, "infer.floats", packed.floats, "multipliers, biases, γ, β of the int8 plan")
        self.dummy_f, self.dummy_i = unused_pointers(prog)
        self.fused: set[str] = set()

    # -- the packed model ----------------------------------------------------------------------------

    def weight(self, op: graph.Op) -> Ref:
        """The packed (out, padded in / 4) words of a product."""
        _k, n = op.params[0].shape
        off = self.packed.at[f"{op.name}.weight"]
        return self.words[off:off + n * padded_k(op) // 4]

    def floats_of(self, name: str, size: int) -> Ref:
        """A float tensor of the packed arena ("<op>.mult", "<op>.bias", "<ln>.gamma", …)."""
        off = self.packed.at[name]
        return self.floats[off:off + size]

    def vector(self, op: graph.Op, kind: str) -> Ref:
        size = op.params[0].shape[-1] if kind == "bias" else op.params[0].shape[0]
        return self.floats_of(f"{op.name}.{kind}", size)

    def next_scale(self, op: graph.Op) -> np.float32:
        """The input scale of the product that reads op's output (what it is quantized with)."""
        return np.float32(self.packed.scales[self.reader(op.name).name])

    # -- tensors and their buffers ----------------------------------------------------------------

    def reader(self, name: str) -> graph.Op:
        """The one op that reads `name` besides a residual's identity path (every Mixer tensor has one)."""
        readers = [op for op in self.readers.get(name, []) if not (op.kind == "residual" and op.inputs[0] == name)]
        assert len(readers) == 1, f"{name} is read by {[op.name for op in readers]}"
        return readers[0]

    def role(self, op: graph.Op) -> str:
        """The buffer that holds op's output."""
        if op is self.ops[-1]:
            return op.name  # the logits, where the walk's forward program keeps them
        if op.kind == "residual" or any(r.kind == "residual" and r.inputs[0] == op.name
                                        for r in self.readers.get(op.name, [])):
            return "H"  # the residual stream
        if op.kind == "patches":
            return "QX"
        if op.kind == "gelu":
            producer = self.ops[self.index[op.inputs[0]]]
            return "QA1" if producer.kind == "token_linear" else "QA2"
        if op.kind == "mean_tokens":
            return "QPOOL"
        if op.kind == "layernorm" and self.reader(op.name).kind in graph.PRODUCTS:
            return "QT" if self.reader(op.name).kind == "token_linear" else "QC"
        return "Y"  # the final LayerNorm's float output, which the mean reads

    def buffer(self, role: str) -> Ref:
        if role == self.ops[-1].name:
            return self.prog.ref(self.prefix + role)
        shape, dtype = self.shapes()[role]
        return self.prog.add(self.prefix + role, shape, dtype, life="state", purpose="a role buffer, pads kept zero")

    def output(self, op: graph.Op) -> Ref:
        return self.buffer(self.role(op))

    def input(self, op: graph.Op) -> Ref:
        return self.output(self.ops[self.index[op.inputs[0]]])

    def shapes(self) -> dict:
        m, B, R, N, d = self.m, self.B, self.R, self.N, self.d
        pixels, th, ch = m.patch * m.patch * 3, m.token_hidden, m.channel_hidden
        words = lambda rows, k: ((rows, k // 4), np.int32)  # noqa: E731
        return {"H": ((R, d), np.float32), "Y": ((R, d), np.float32), "RSTD": ((R,), np.float32),
                "QX": words(R, pad64(pixels)), "QC": words(R, pad64(d)), "QA2": words(R, pad64(ch)),
                "QPOOL": words(B, pad64(d)),
                "QT": ((pad16(self.T) // 4, N), np.int32), "QA1": ((pad16(th) // 4, N), np.int32)}

    def out_of(self, op: graph.Op) -> graph.Op:
        """The op whose output a launch for `op` writes: a product's GELU or residual join, fused."""
        if op.kind in graph.PRODUCTS and op is not self.ops[-1]:
            nxt = self.reader(op.name)
            if nxt.kind in ("gelu", "residual"):
                return nxt
        return op

    def rows_of(self, op: graph.Op) -> int:
        return self.R if op.tokens else self.B

    def grid_stride(self, count: int) -> int:
        return max(1, min(math.ceil(count / THREADS), 8 * self.sm_count))

    # -- the walk -----------------------------------------------------------------------------------

    def regions(self) -> list[Region]:
        """A region per launch, in op-list order; a fused GELU or residual join has no launch of its own."""
        out = []
        for op in self.ops:
            if op.name in self.fused:
                continue
            if op.kind in graph.PRODUCTS:
                call = self.product(op)
            elif op.kind in STEPS:
                call = STEPS[op.kind](self, op)
            else:
                raise NotImplementedError(f"{op.kind} ({op.name}) runs only fused into the product before it")
            last = self.out_of(op)
            covered = (op.name,) if last is op else (op.name, last.name)
            out.append(Region(" + ".join(covered), "forward", covered, [call], rewrite="int8 plan"))
            self.prog.outputs[last.name] = self.prefix + self.role(last)
        return out

    def product(self, op: graph.Op) -> Call:
        last = self.out_of(op)
        if last is not op:
            self.fused.add(last.name)
        gelu, residual = last.kind == "gelu", last.kind == "residual"
        if residual:  # the join writes the stream in place: its identity input must be the stream, read by nobody after
            stream = last.inputs[0]
            assert self.role(self.ops[self.index[stream]]) == "H", stream
            assert all(self.index[r.name] <= self.index[last.name] for r in self.readers[stream]), stream
        x, out = self.input(op), self.output(last)
        k, n = op.params[0].shape
        fz = self.dummy_f
        quantized = dict(q=out, use_q=i32(1), q_scale=self.next_scale(last)) if gelu else \
            dict(q=self.dummy_i, use_q=i32(0), q_scale=f32(1))
        joined = dict(res=out, use_res=i32(1)) if residual else dict(res=fz, use_res=i32(0))
        epilogue = dict(mult=self.floats_of(f"{op.name}.mult", n), bias=self.vector(op, "bias"), gelu=i32(gelu),
                        **quantized, **joined)
        if op.kind == "token_linear":
            return Call("token_linear_int8", math.ceil(self.N / THREADS) * math.ceil(n / TOKEN_OUTS),
                        dict(x=x, W=self.weight(op), Kw=i32(pad16(k) // 4), T_out=i32(n), N=i32(self.N), **epilogue))
        M = self.rows_of(op)
        stride = pad64(n) if gelu else n  # infer_int8_tiles' stride is that of its float and int8 outputs alike
        return Call("infer_int8_tiles", splitk.tiles(M, n), dict(
            pixels=self.prog.ref(self.prefix + graph.IMAGES), embed=i32(0), shift=f32(0), in_scale=f32(1), x=x,
            M=i32(M), Kw=i32(pad64(k) // 4), W=self.weight(op), N=i32(n), use_bias=i32(1), out=fz if gelu else out,
            use_out=i32(not gelu), stride=i32(stride), **epilogue))


def _patches(w: _Walk, op: graph.Op) -> Call:
    m = w.m
    pixels = m.patch * m.patch * 3
    return Call("patches_infer", w.grid_stride(w.R * pixels), dict(
        images=w.prog.ref(w.prefix + graph.IMAGES), B=i32(w.B), patch=i32(m.patch), shift=f32(m.input_shift),
        scale=f32(m.input_scale), out=w.dummy_f, use_out=i32(0), q=w.output(op), use_q=i32(1),
        q_stride=i32(pad64(pixels)), q_scale=w.next_scale(op)))


def _layernorm(w: _Walk, op: graph.Op) -> Call:
    role = w.role(op)
    common = dict(x=w.input(op), gamma=w.vector(op, "gamma"), beta=w.vector(op, "beta"), eps=f32(op.attrs["eps"]),
                  d=i32(w.d))
    grid = math.ceil(w.R / LN_ROWS)
    if role in ("QT", "QC"):
        tokens = role == "QT"
        return Call("layernorm_quantize", grid, dict(common, R=i32(w.R), q=w.buffer(role), q_scale=w.next_scale(op),
                                                     tokens=i32(w.B if tokens else 0),
                                                     q_stride=i32(0 if tokens else pad64(w.d))))
    y = w.buffer(role)  # the normalised n (kept for a backward) goes to y too: y is stored after it
    return Call("layernorm_forward", grid, dict(common, y=y, nrm=y, rstd=w.buffer("RSTD"), B=i32(w.R)))


def _mean_tokens(w: _Walk, op: graph.Op) -> Call:
    return Call("mean_tokens_quantize", w.grid_stride(w.N), dict(
        x=w.input(op), T=i32(w.T), B=i32(w.B), d=i32(w.d), q=w.output(op), q_stride=i32(pad64(w.d)),
        q_scale=w.next_scale(op)))


# kind → its launch (products: _Walk.product; GELU and residual joins: fused into the product before them)
STEPS = {"patches": _patches, "layernorm": _layernorm, "mean_tokens": _mean_tokens}


def mixer_int8_inference(prog: Program, packed, batch: int, prefix: str, sm_count: int) -> Program:
    """The forward program `prog` of packed.model with all its regions replaced by the int8 plan's launches;
    `packed`: the runtime's litenet.runtime.cuda_mixer_net.MixerWeights."""
    prog.regions = _Walk(prog, packed, batch, prefix, sm_count).regions()
    prog.labels.update(batch=batch, tier="fast", precision="int8", plan="inference, a launch per op")
    return prog
