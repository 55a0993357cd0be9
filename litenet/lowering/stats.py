"""The per-step statistics row the kernels fill (kernels/common.cuh LN_STAT_*): the loss, ‖g‖, the clip
decision, ‖g‖² of every parameter tensor and three path sums at every residual join."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet.graph import residuals
from litenet.model import param_layout


@dataclass(frozen=True)
class StatsLayout:
    """One float32 row per step: loss, ‖g‖, clipped, ‖g_t‖² per tensor, 3 path sums per residual."""

    tensors: int
    blocks: int  # residual joins (the MLP's blocks; two per Mixer block)
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
    def of(cls, model) -> "StatsLayout":
        return cls(tensors=len(param_layout(model)), blocks=len(residuals(model)))

    def unpack(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """(steps, width) rows → the STAT_FIELDS dict of litenet.train.backends, in float64."""
        rows = rows.astype(np.float64)
        return {"loss": rows[:, self.loss], "grad_norm": rows[:, self.grad_norm],
                "clipped": rows[:, self.clipped] > 0.5,
                "grad_sq": rows[:, self.grad_sq:self.path],
                "path": rows[:, self.path:self.width].reshape(len(rows), self.blocks, 3)}


def param_offsets(model) -> np.ndarray:
    """Offsets of every parameter tensor in the flat buffer, then the total (T + 1 int32)."""
    specs = param_layout(model)
    return np.array([p.offset for p in specs] + [specs[-1].offset + specs[-1].size], dtype=np.int32)
