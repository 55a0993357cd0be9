"""The CUDA inference backend's launches: the packed model on the device, and for one batch size its
buffers and the kernel launches of one forward pass (kernels/infer_fp32.cu, kernels/infer_int8.cu).

Three ways to run a batch:
  fused   one launch of infer_<p>_rows: every phase, separated by grid barriers (small batches;
          grid ≤ SM count so all blocks are resident).
  phases  the same kernel once per phase, no grid barrier (any grid; what the CPU emulator runs).
  tiles   per layer one infer_<p>_tiles launch (64×64 tiles), a LayerNorm launch per block, the last
          one with the head (large batches).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from litenet.errors import LiteNetError
from litenet.gpu.launch import SMEM_LIMIT, THREADS, Launch, check_launch
from litenet.runtime.cuda_net import PackedNet, layers, pad64, phases

i32, f32 = np.int32, np.float32
ROWS = 8                  # IR_ROWS in infer_words.cuh: images per rowdot pass
TILE = 64                 # IT_TILE in infer_words.cuh (tests/cuda/test_kernel_args.py holds them equal)
STATIC_SMEM = 2 * 1024    # the rows kernels' own shared arrays (LUTs, partial sums), rounded up
MODES = ("fused", "phases", "tiles")


class DeviceNet:
    """A PackedNet's arenas on the device (uploaded once), plus a grid-barrier counter and dummies."""

    def __init__(self, dev, net: PackedNet):
        self.dev, self.net, self.shape = dev, net, net.shape
        self.words = dev.to_device(net.words)
        self.floats = self.words if net.precision == "fp32" else dev.to_device(net.floats)
        self.layout = dev.to_device(net.layout.ravel())
        self.sync = dev.to_device(np.zeros(2, np.uint32))
        self.dummy_f = dev.to_device(np.zeros(4, np.float32))
        self.dummy_i = dev.to_device(np.zeros(4, np.int32))
        s = self.shape
        self.dp, self.hp = pad64(s.width), pad64(s.hidden)
        if ROWS * self.dp * 4 > SMEM_LIMIT:
            raise LiteNetError(f"width {s.width} is too wide for the CUDA backend (at most {SMEM_LIMIT // (ROWS * 4)}); "
                               "use --backend onnxruntime")

    def words_of(self, phase: int) -> object:
        name, n, k = layers(self.shape)[phase]
        kw = pad64(k) if self.net.precision == "fp32" else pad64(k) // 4
        off = int(self.net.layout[phase, 0])
        return self.words[off:off + n * kw]

    def floats_of(self, phase: int, column: int, size: int):
        off = int(self.net.layout[phase, column])
        return None if off < 0 else self.floats[off:off + size]

    def fused_fits(self) -> bool:
        """Whether the rows kernel's staging buffer fits in shared memory."""
        return self.rows_smem() + STATIC_SMEM <= SMEM_LIMIT

    def rows_smem(self) -> int:
        per = 4 if self.net.precision == "fp32" else 1
        return ROWS * max(self.dp, self.hp) * per


@dataclass
class BatchRun:
    """The buffers and launches of one batch size; a CUDA graph of them once the size repeats."""

    size: int
    mode: str
    buffers: dict
    launches: list[Launch]
    runs: int = 0
    graph: object = field(default=None, repr=False)

    @property
    def pixels(self):
        return self.buffers["pixels"]

    @property
    def logits(self):
        return self.buffers["logits"]


def buffers_for(dn: DeviceNet, B: int, mode: str) -> dict:
    """Zeroed device buffers (pad columns stay zero: no kernel writes them)."""
    s, dev = dn.shape, dn.dev
    z = lambda shape, dtype=np.float32: dev.to_device(np.zeros(shape, dtype))  # noqa: E731
    out = {"pixels": z((B, 3072), np.uint8), "h": z((B, dn.dp)), "s": z((B, dn.dp)), "logits": z((B, s.classes))}
    if mode == "tiles" and dn.net.precision == "int8":
        out["qh"] = z((B, dn.dp // 4), np.int32)
        out["qa"] = z((B, dn.hp // 4), np.int32)
    else:
        out["a"] = z((B, dn.hp))
    return out


def plan_batch(dn: DeviceNet, B: int, mode: str, grid: int) -> BatchRun:
    """Buffers and launches for batch size B; `grid` is the rows kernel's block count."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    buf = buffers_for(dn, B, mode)
    if mode == "tiles":
        launches = _tiles_launches(dn, B, buf)
    else:
        s = dn.shape
        kernel = f"infer_{dn.net.precision}_rows"
        arenas = (dn.words, dn.floats) if dn.net.precision == "int8" else (dn.words,)
        common = (buf["pixels"], i32(B), i32(s.embed == "full"), f32(s.input_shift), *arenas, dn.layout,
                  i32(s.width), i32(s.hidden), i32(s.classes), i32(s.blocks), f32(s.ln_eps),
                  buf["h"], buf["s"], buf["a"], buf["logits"])
        spans = [(0, phases(s))] if mode == "fused" else [(p, p + 1) for p in range(phases(s))]
        launches = [Launch(kernel, grid, common + (i32(a), i32(b), dn.sync), dn.rows_smem()) for a, b in spans]
    for launch in launches:
        check_launch(launch)
    return BatchRun(B, mode, buf, launches)


def _tile_grid(M: int, N: int) -> int:
    return -(-M // TILE) * -(-N // TILE)


def _tiles_launches(dn: DeviceNet, M: int, buf: dict) -> list[Launch]:
    s, net = dn.shape, dn.net
    d, H, C, dp, hp = s.width, s.hidden, s.classes, dn.dp, dn.hp
    embed = 2 if s.embed == "full" else 1
    K = s.embed_inputs
    ln_grid = -(-M // (THREADS // 32))
    out: list[Launch] = []
    fz, iz = dn.dummy_f, dn.dummy_i
    if net.precision == "fp32":
        out.append(Launch("infer_fp32_tiles", _tile_grid(M, d), (
            buf["pixels"], i32(embed), f32(s.input_shift), fz, i32(M), i32(K), dn.words_of(0), i32(d),
            fz, i32(0), i32(0), fz, i32(0), buf["h"], i32(dp))))
        for i in range(s.blocks):
            p1, p2 = 1 + 2 * i, 2 + 2 * i
            out.append(Launch("infer_fp32_tiles", _tile_grid(M, H), (
                buf["pixels"], i32(0), f32(0), buf["h"], i32(M), i32(dp), dn.words_of(p1), i32(H),
                dn.floats_of(p1, 1, H), i32(1), i32(1), fz, i32(0), buf["a"], i32(hp))))
            out.append(Launch("infer_fp32_tiles", _tile_grid(M, d), (
                buf["pixels"], i32(0), f32(0), buf["a"], i32(M), i32(hp), dn.words_of(p2), i32(d),
                dn.floats_of(p2, 1, d), i32(1), i32(0), buf["h"], i32(1), buf["s"], i32(dp))))
            last = i == s.blocks - 1
            head = phases(s) - 1
            out.append(Launch("infer_fp32_ln_rows", ln_grid, (
                buf["s"], i32(M), i32(d), i32(dp), dn.floats_of(p2, 4, d), dn.floats_of(p2, 5, d), f32(s.ln_eps),
                buf["h"], i32(last), dn.words_of(head) if last else fz, dn.floats_of(head, 1, C) if last else fz,
                i32(C), buf["logits"]), 8 * dp * 4 if last else 0))
        return out
    sc = net.scale
    out.append(Launch("infer_int8_tiles", _tile_grid(M, d), (
        buf["pixels"], i32(embed), f32(s.input_shift), f32(sc(0)), iz, i32(M), i32(K // 4), dn.words_of(0), i32(d),
        dn.floats_of(0, 2, d), fz, i32(0), i32(0), fz, i32(0), buf["h"], i32(1), buf["qh"], i32(1), i32(dp),
        f32(sc(1)))))
    for i in range(s.blocks):
        p1, p2 = 1 + 2 * i, 2 + 2 * i
        out.append(Launch("infer_int8_tiles", _tile_grid(M, H), (
            buf["pixels"], i32(0), f32(0), f32(1), buf["qh"], i32(M), i32(dp // 4), dn.words_of(p1), i32(H),
            dn.floats_of(p1, 2, H), dn.floats_of(p1, 1, H), i32(1), i32(1), fz, i32(0), fz, i32(0), buf["qa"],
            i32(1), i32(hp), f32(sc(p2)))))
        out.append(Launch("infer_int8_tiles", _tile_grid(M, d), (
            buf["pixels"], i32(0), f32(0), f32(1), buf["qa"], i32(M), i32(hp // 4), dn.words_of(p2), i32(d),
            dn.floats_of(p2, 2, d), dn.floats_of(p2, 1, d), i32(1), i32(0), buf["h"], i32(1), buf["s"], i32(1),
            iz, i32(0), i32(dp), f32(1))))
        last = i == s.blocks - 1
        nxt = p2 + 1  # the next fc1, or the head
        out.append(Launch("infer_int8_ln_rows", ln_grid, (
            buf["s"], i32(M), i32(d), i32(dp), dn.floats_of(p2, 4, d), dn.floats_of(p2, 5, d), f32(s.ln_eps),
            buf["h"], buf["qh"], f32(sc(nxt)), i32(last), dn.words_of(nxt) if last else iz,
            dn.floats_of(nxt, 2, C) if last else fz, dn.floats_of(nxt, 1, C) if last else fz, i32(C),
            buf["logits"]), 8 * dp if last else 0))
    return out
