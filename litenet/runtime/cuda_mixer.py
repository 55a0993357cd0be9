"""The CUDA inference backend's Mixer: for one batch size, its buffers and the kernel launches of one
forward pass, built by walking the Mixer's op list (litenet.graph.ops_of) — nothing written again.

Activations are tokens-major, as in litenet.ops: a patch tensor (T, B, n) is at once the matrix
(T·B, n) a channel product (linear) multiplies and the matrix (T, B·n) a product across the patches
(token_linear) multiplies, so no op needs a transposed copy. Each product takes the GELU or the
residual join that follows it into its epilogue; the residual stream H is updated in place.

  fp32  the training kernels' forward products (linear.cu linear_forward, linear_gelu_forward,
        linear_residual_forward; token_linear.cu token_linear_gelu_forward, _residual_forward; one
        split, fp32 on the SIMT cores), layernorm_forward (residual_layernorm.cu), mean_tokens_forward,
        and patches_infer.cu for the images. Their twin is the NumPy forward (litenet.forward).
  int8  the int8 plan (docs/int8-plan.md): each product's input is written already quantized by the
        op before it — patches_infer, layernorm_quantize (layernorm_int8.cu), the GELU epilogue of
        the previous product, mean_tokens_quantize — as rows for a channel product (infer_int8_tiles,
        infer_int8.cu) or as token words for a product across the patches (token_linear_int8.cu).
        Their twin is the plan's executor (litenet.runtime.int8_plan.run_plan).

Every launch's arguments are given by parameter name (litenet.gpu.launch.named_launch) and checked
against the kernel's declaration (check_launch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from litenet import graph
from litenet.gpu.launch import THREADS, check_launch, named_launch
from litenet.gpu import splitk
from litenet.runtime.cuda_mixer_net import MixerDeviceNet, pad16
from litenet.runtime.cuda_net import pad64
from litenet.runtime.cuda_plan import BatchRun

i32, f32 = np.int32, np.float32
LN_ROWS = 8        # LayerNorm kernels: one warp per row, 8 rows per 256-thread block
TOKEN_OUTS = 16    # token_linear_int8.cu: output patches per block (TL_OUTS)
MODE = "layers"    # the Mixer's one way of running a batch: a launch per op (with its epilogue)


# fp32 products are split (litenet.gpu.splitk) for two blocks per multiprocessor: at batch 1 a channel
# product has 2 tiles and a 512-long sum, and its two blocks would be the whole forward's critical
# path. Large batches have tiles enough and get no split.
BLOCKS_PER_SM = 2


def splits_for(m: int, n: int, k: int, sm_count: int) -> int:
    return splitk.splits_for(m, n, k, sm_count, BLOCKS_PER_SM)


class _Walk:
    """The launch list of one batch size, op by op."""

    def __init__(self, dn: MixerDeviceNet, batch: int):
        m = dn.shape
        self.dn, self.m, self.B, self.int8 = dn, m, batch, dn.precision == "int8"
        self.T, self.d, self.R, self.N = m.tokens, m.width, m.tokens * batch, batch * m.width
        self.ops = graph.ops_of(m)
        self.index = {op.name: i for i, op in enumerate(self.ops)}
        self.readers = graph.consumers(self.ops)
        self.buffers: dict = {}
        self.fused: set[str] = set()

    # -- tensors and their buffers ----------------------------------------------------------------

    def reader(self, name: str) -> graph.Op:
        """The one op that reads `name` besides a residual's identity path (every Mixer tensor has one)."""
        readers = [op for op in self.readers.get(name, []) if not (op.kind == "residual" and op.inputs[0] == name)]
        assert len(readers) == 1, f"{name} is read by {[op.name for op in readers]}"
        return readers[0]

    def role(self, op: graph.Op) -> str:
        """The buffer that holds op's output."""
        if op is self.ops[-1]:
            return "logits"
        if op.kind == "residual" or any(r.kind == "residual" and r.inputs[0] == op.name
                                        for r in self.readers.get(op.name, [])):
            return "H"  # the residual stream
        q = "Q" if self.int8 else ""
        if op.kind == "patches":
            return q + "X"
        if op.kind == "gelu":
            producer = self.ops[self.index[op.inputs[0]]]
            return q + ("A1" if producer.kind == "token_linear" else "A2")
        if op.kind == "mean_tokens":
            return q + "POOL"
        if op.kind == "layernorm" and self.int8 and self.reader(op.name).kind in graph.PRODUCTS:
            return "QT" if self.reader(op.name).kind == "token_linear" else "QC"
        return "Y"  # a LayerNorm's float output (fp32; int8: the final one, which the mean reads)

    def buffer(self, role: str):
        if role not in self.buffers:
            shape, dtype = self.shapes()[role]
            self.buffers[role] = self.dn.dev.to_device(np.zeros(shape, dtype))  # pads stay zero: never written
        return self.buffers[role]

    def shapes(self) -> dict:
        m, B, R, N, d = self.m, self.B, self.R, self.N, self.d
        pixels, th, ch = m.patch * m.patch * 3, m.token_hidden, m.channel_hidden
        words = lambda rows, k: ((rows, k // 4), np.int32)
        return {"pixels": ((B, 3072), np.uint8), "logits": ((B, m.classes), np.float32),
                "H": ((R, d), np.float32), "Y": ((R, d), np.float32), "RSTD": ((R,), np.float32),
                "X": ((R, pixels), np.float32), "A1": ((th, N), np.float32), "A2": ((R, ch), np.float32),
                "POOL": ((B, d), np.float32),
                "QX": words(R, pad64(pixels)), "QC": words(R, pad64(d)), "QA2": words(R, pad64(ch)),
                "QPOOL": words(B, pad64(d)),
                "QT": ((pad16(self.T) // 4, N), np.int32), "QA1": ((pad16(th) // 4, N), np.int32),
                "SCRATCH": ((self.split_k_sizes()[0],), np.float32), "COUNTERS": ((self.split_k_sizes()[1],), np.uint32)}

    def split_k_sizes(self) -> tuple[int, int]:
        """fp32: floats of split-K scratch (the partial tiles of the largest split product) and counters
        (TILE_COUNTERS per tile of the product with the most tiles; each launch leaves them at zero)."""
        return splitk.split_k_sizes((self.sizes(op) for op in graph.products(self.m)), self.dn.dev.sm_count,
                                    BLOCKS_PER_SM)

    def sizes(self, op: graph.Op) -> tuple[int, int, int]:
        """(M, N, K) of a product's output rows × columns and its sum."""
        k, n = op.params[0].shape
        return (n, self.N, k) if op.kind == "token_linear" else (self.rows_of(op), n, k)

    def out_of(self, op: graph.Op) -> graph.Op:
        """The op whose output a launch for `op` writes: a product's GELU or residual join, when fused."""
        if op.kind in graph.PRODUCTS and op is not self.ops[-1]:
            nxt = self.reader(op.name)
            if nxt.kind in ("gelu", "residual"):
                return nxt
        return op

    def rows_of(self, op: graph.Op) -> int:
        return self.R if op.tokens else self.B

    def next_scale(self, op: graph.Op) -> np.float32:
        """int8: the input scale of the product that reads op's output (what it is quantized with)."""
        return self.dn.scale(self.reader(op.name))

    def grid_stride(self, count: int) -> int:
        return max(1, min(math.ceil(count / THREADS), 8 * self.dn.dev.sm_count))

    # -- the walk -----------------------------------------------------------------------------------

    def launches(self) -> list[tuple[graph.Op, object]]:
        """(op, its launch) in op-list order; a fused GELU or residual join has no launch of its own."""
        self.buffer("pixels")
        out = []
        for op in self.ops:
            if op.name in self.fused:
                continue
            if op.kind in graph.PRODUCTS:
                out.append((op, self.product(op)))
            elif op.kind in STEPS:
                out.append((op, STEPS[op.kind](self, op)))
            else:
                raise NotImplementedError(f"{op.kind} ({op.name}) runs only fused into the product before it")
        self.buffer("logits")
        return out

    def product(self, op: graph.Op):
        last = self.out_of(op)
        if last is not op:
            self.fused.add(last.name)
        gelu, residual = last.kind == "gelu", last.kind == "residual"
        if residual:  # the join writes the stream in place: its identity input must be the stream, read by nobody after
            stream = last.inputs[0]
            assert self.role(self.ops[self.index[stream]]) == "H", stream
            assert all(self.index[r.name] <= self.index[last.name] for r in self.readers[stream]), stream
        x = self.buffer(self.role(self.ops[self.index[op.inputs[0]]]))
        out = self.buffer(self.role(last))
        k, n = op.params[0].shape
        bias = self.dn.vector(op, "bias")
        dn, fz = self.dn, self.dn.dummy_f
        if not self.int8:
            M, cols, _ = self.sizes(op)
            splits = splits_for(M, cols, k, dn.dev.sm_count)
            grid = splitk.tiles(M, cols) * splits
            common = {"x": x, "W": dn.weight(op), "bias": bias, "splits": i32(splits),
                      "scratch": self.buffer("SCRATCH"), "counters": self.buffer("COUNTERS")}
            if op.kind == "token_linear":  # (k, N) → (n, N): the sum over the patches
                size = {"T": i32(k), "T_out": i32(n), "N": i32(self.N)}
                if gelu:
                    return named_launch("token_linear_gelu_forward", grid, u=out, a=out, **common, **size)
                assert residual, f"{op.name}: a product across the patches is followed by a GELU or a residual"
                return named_launch("token_linear_residual_forward", grid, r=out, y=out, **common, **size)
            size = {"B": i32(M), "n_in": i32(k), "n_out": i32(n)}
            # NOTE: linear_gelu_forward writes u and then GELU(u) (training keeps both); inference needs
            # only GELU(u), so both go to one buffer: the same thread stores u, then a, at each element.
            if gelu:
                return named_launch("linear_gelu_forward", grid, u=out, a=out, **common, **size)
            if residual:
                return named_launch("linear_residual_forward", grid, r=out, y=out, **common, **size)
            return named_launch("linear_forward", grid, y=out, **common, **size)
        quantized = {"q": out, "use_q": i32(1), "q_scale": self.next_scale(last)} if gelu else \
            {"q": dn.dummy_i, "use_q": i32(0), "q_scale": f32(1)}
        joined = {"res": out, "use_res": i32(1)} if residual else {"res": fz, "use_res": i32(0)}
        epilogue = dict(mult=dn.floats_of(f"{op.name}.mult", n), bias=bias, gelu=i32(gelu), **quantized, **joined)
        if op.kind == "token_linear":
            return named_launch("token_linear_int8", math.ceil(self.N / THREADS) * math.ceil(n / TOKEN_OUTS),
                                x=x, W=dn.weight(op), Kw=i32(pad16(k) // 4), T_out=i32(n), N=i32(self.N), **epilogue)
        M = self.rows_of(op)
        # infer_int8_tiles' stride is that of its float output and of its int8 output alike
        stride = pad64(n) if gelu else n
        return named_launch("infer_int8_tiles", splitk.tiles(M, n), pixels=self.buffer("pixels"), embed=i32(0),
                            shift=f32(0), in_scale=f32(1), x=x, M=i32(M), Kw=i32(pad64(k) // 4), W=dn.weight(op),
                            N=i32(n), use_bias=i32(1), out=fz if gelu else out, use_out=i32(not gelu),
                            stride=i32(stride), **epilogue)


def _patches(w: _Walk, op: graph.Op):
    m, out = w.m, w.buffer(w.role(op))
    pixels = m.patch * m.patch * 3
    common = {"images": w.buffer("pixels"), "B": i32(w.B), "patch": i32(m.patch), "shift": f32(m.input_shift),
                  "scale": f32(m.input_scale)}
    grid = w.grid_stride(w.R * pixels)
    if w.int8:
        return named_launch("patches_infer", grid, out=w.dn.dummy_f, use_out=i32(0), q=out, use_q=i32(1),
                            q_stride=i32(pad64(pixels)), q_scale=w.next_scale(op), **common)
    return named_launch("patches_infer", grid, out=out, use_out=i32(1), q=w.dn.dummy_i, use_q=i32(0),
                        q_stride=i32(0), q_scale=f32(1), **common)


def _layernorm(w: _Walk, op: graph.Op):
    role = w.role(op)
    common = {"x": w.buffer(w.role(w.ops[w.index[op.inputs[0]]])), "gamma": w.dn.vector(op, "gamma"),
                  "beta": w.dn.vector(op, "beta"), "eps": f32(op.attrs["eps"]), "d": i32(w.d)}
    grid = math.ceil(w.R / LN_ROWS)
    if role in ("QT", "QC"):
        tokens = role == "QT"
        return named_launch("layernorm_quantize", grid, R=i32(w.R), q=w.buffer(role), q_scale=w.next_scale(op),
                            tokens=i32(w.B if tokens else 0), q_stride=i32(0 if tokens else pad64(w.d)), **common)
    y = w.buffer(role)  # NOTE: the normalised n (kept for a backward) goes to y too: y is stored after it
    return named_launch("layernorm_forward", grid, y=y, nrm=y, rstd=w.buffer("RSTD"), B=i32(w.R), **common)


def _mean_tokens(w: _Walk, op: graph.Op):
    x, out = w.buffer(w.role(w.ops[w.index[op.inputs[0]]])), w.buffer(w.role(op))
    if w.int8:
        return named_launch("mean_tokens_quantize", w.grid_stride(w.N), x=x, T=i32(w.T), B=i32(w.B), d=i32(w.d),
                            q=out, q_stride=i32(pad64(w.d)), q_scale=w.next_scale(op))
    return named_launch("mean_tokens_forward", w.grid_stride(w.N), x=x, y=out, T=i32(w.T), N=i32(w.N))


# kind → its launch (products: _Walk.product; GELU and residual joins: fused into the product before them)
STEPS = {"patches": _patches, "layernorm": _layernorm, "mean_tokens": _mean_tokens}


@dataclass
class MixerRun(BatchRun):
    """A BatchRun that also says, per launch, the op it starts from and the buffer of each op's output
    (what the tests read to hold every launch to the op's NumPy twin)."""

    ops: list = field(default_factory=list)        # per launch: the op it computes ...
    outputs: list = field(default_factory=list)    # ... and the op whose output it writes (its GELU or join, if fused)
    roles: dict = field(default_factory=dict)      # those outputs' buffers (keys of `buffers`), by op name


def plan_mixer_batch(dn: MixerDeviceNet, batch: int) -> MixerRun:
    """Buffers and launches of one forward pass of `batch` images."""
    walk = _Walk(dn, batch)
    steps = walk.launches()
    for _op, launch in steps:
        check_launch(launch)
    outputs = [walk.out_of(op) for op, _ in steps]
    return MixerRun(batch, MODE, walk.buffers, [launch for _op, launch in steps], ops=[op for op, _ in steps],
                    outputs=outputs, roles={op.name: walk.role(op) for op in outputs})
