"""Where everything lives on the device: one arena for every buffer of a step, and the layout
of the per-step statistics row that the kernels fill (kernels/common.cuh LN_STAT_*).

Every buffer is carved out of a single allocation made before the first step, so a step never
allocates and a captured CUDA graph can hold raw pointers. Buffers whose lifetimes never
overlap are declared as aliases of one another and share bytes; docs/cuda.md lists the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet.model import ModelConfig, param_layout

ALIGN = 256  # bytes; keeps every buffer aligned for float4 loads and coalesced access


@dataclass(frozen=True)
class StatsLayout:
    """One float32 row per step: loss, ‖g‖, clipped, ‖g_t‖² per tensor, 3 path sums per block."""

    tensors: int
    blocks: int
    loss: int = 0
    grad_norm: int = 1
    clipped: int = 2
    grad_sq: int = 3  # must match LN_STAT_GRAD_SQ

    @property
    def path(self) -> int:
        return self.grad_sq + self.tensors

    @property
    def width(self) -> int:
        return self.path + 3 * self.blocks

    @classmethod
    def of(cls, model: ModelConfig) -> "StatsLayout":
        return cls(tensors=len(param_layout(model)), blocks=model.blocks)

    def unpack(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """(steps, width) rows → the STAT_FIELDS dict of backends.py, in float64."""
        rows = rows.astype(np.float64)
        return {"loss": rows[:, self.loss], "grad_norm": rows[:, self.grad_norm],
                "clipped": rows[:, self.clipped] > 0.5,
                "grad_sq": rows[:, self.grad_sq:self.path],
                "path": rows[:, self.path:self.width].reshape(len(rows), self.blocks, 3)}


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    alias: str | None  # shares the bytes of this earlier buffer (lifetimes do not overlap)
    purpose: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


class ArenaPlan:
    """The list of buffers, in order, with their offsets; `allocate` turns it into device views."""

    def __init__(self):
        self.buffers: list[Buffer] = []
        self.offsets: dict[str, int] = {}
        self.size = 0

    def add(self, name: str, shape, dtype, purpose: str, alias: str | None = None) -> None:
        buf = Buffer(name, tuple(int(s) for s in shape), np.dtype(dtype), alias, purpose)
        if alias is not None:
            host = next(b for b in self.buffers if b.name == alias)
            if buf.nbytes > host.nbytes:
                raise ValueError(f"alias {name} ({buf.nbytes} B) does not fit in {alias} ({host.nbytes} B)")
            self.offsets[name] = self.offsets[alias]
        else:
            self.offsets[name] = self.size
            self.size += -(-buf.nbytes // ALIGN) * ALIGN
        self.buffers.append(buf)

    def allocate(self, xp) -> dict:
        """One zeroed allocation of `size` bytes; returns name → typed view."""
        raw = xp.zeros(max(self.size, ALIGN), dtype=np.uint8)
        views = {}
        for b in self.buffers:
            off = self.offsets[b.name]
            views[b.name] = raw[off:off + b.nbytes].view(b.dtype).reshape(b.shape)
        views["_raw"] = raw
        return views

    def table(self) -> str:
        """The buffer plan as a Markdown table (docs/cuda.md, memory_report)."""
        lines = ["| buffer | shape | dtype | bytes | shares with | holds |", "|---|---|---|---|---|---|"]
        for b in self.buffers:
            lines.append(f"| {b.name} | {b.shape} | {b.dtype.name} | {b.nbytes:,} | {b.alias or ''} | {b.purpose} |")
        lines.append(f"| **arena** | | | **{self.size:,}** | | one allocation |")
        return "\n".join(lines)


def param_offsets(model: ModelConfig) -> np.ndarray:
    """Offsets of every parameter tensor in the flat buffer, then the total (T + 1 int32)."""
    specs = param_layout(model)
    return np.array([p.offset for p in specs] + [specs[-1].offset + specs[-1].size], dtype=np.int32)
