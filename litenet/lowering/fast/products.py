"""The tile choice: which version of a product kernel runs a product of M × N outputs summed over K,
cut into how many tiles and K splits — the first rewrite every fast product goes through.

Two policies, each measured on its own family and kept where it was measured best:
  SplitTiles     64 × 64 tiles, K split until about `blocks_per_sm` blocks a multiprocessor run
                 (kernels/splitk.cuh): networks with patch tensors (the Mixer), whose products are
                 many and mid-sized. Training aims at 3 blocks a multiprocessor, inference at 2.
  GeometryTiles  per product 64-row, tall (128 × 64) or wide (256/128 × 128) tiles and splits by
                 geometry.Gemm.plan: networks of vectors only (the MLP), whose products at widths of
                 1,024 and more want cuBLAS-sized tiles.
docs/decisions.md ("Tile choice") has the measurements behind both.

VERSIONS names every kernel version literally, so `grep linear_backward_weight_wide_bf16` finds the
one place that chooses it; tests/lowering holds the table to the kernels' declarations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from litenet.gpu import splitk
from litenet.gpu.splitk import TILE_COUNTERS
from litenet.lowering.fast.geometry import Gemm

# product kernel → its versions: "tile" (64 × 64, fp32 SIMT), "tall" (128 × 64), "wide" (256 × 128),
# "tf32" / "bf16" (64-row tiles on the tensor cores), "wide_bf16" (128 × 128 from BF16 copies)
VERSIONS = {
    "linear_forward": {"tile": "linear_forward", "tall": "linear_forward_tall", "wide": "linear_forward_wide",
                       "tf32": "linear_forward_tf32", "bf16": "linear_forward_bf16",
                       "wide_bf16": "linear_forward_wide_bf16"},
    "linear_gelu_forward": {"tile": "linear_gelu_forward", "tall": "linear_gelu_forward_tall",
                            "wide": "linear_gelu_forward_wide", "tf32": "linear_gelu_forward_tf32",
                            "bf16": "linear_gelu_forward_bf16", "wide_bf16": "linear_gelu_forward_wide_bf16"},
    "linear_residual_forward": {"tile": "linear_residual_forward", "tf32": "linear_residual_forward_tf32",
                                "bf16": "linear_residual_forward_bf16",
                                "wide_bf16": "linear_residual_forward_wide_bf16"},
    "linear_backward_input": {"tile": "linear_backward_input", "tall": "linear_backward_input_tall",
                              "wide": "linear_backward_input_wide", "tf32": "linear_backward_input_tf32",
                              "bf16": "linear_backward_input_bf16", "wide_bf16": "linear_backward_input_wide_bf16"},
    "linear_backward_input_gelu": {"tile": "linear_backward_input_gelu", "tf32": "linear_backward_input_gelu_tf32",
                                   "bf16": "linear_backward_input_gelu_bf16",
                                   "wide_bf16": "linear_backward_input_gelu_wide_bf16"},
    "linear_backward_weight": {"tile": "linear_backward_weight", "tall": "linear_backward_weight_tall",
                               "wide": "linear_backward_weight_wide", "tf32": "linear_backward_weight_tf32",
                               "bf16": "linear_backward_weight_bf16",
                               "wide_bf16": "linear_backward_weight_wide_bf16"},
    "embed_forward": {"tile": "embed_forward", "tall": "embed_forward_tall", "wide": "embed_forward_wide",
                      "tf32": "embed_forward_tf32", "bf16": "embed_forward_bf16", "wide_bf16": "embed_forward_wide_bf16"},
    "embed_backward": {"tile": "embed_backward", "tall": "embed_backward_tall", "wide": "embed_backward_wide",
                       "tf32": "embed_backward_tf32", "bf16": "embed_backward_bf16",
                       "wide_bf16": "embed_backward_wide_bf16"},
    "token_linear_gelu_forward": {"tile": "token_linear_gelu_forward", "tf32": "token_linear_gelu_forward_tf32",
                                  "bf16": "token_linear_gelu_forward_bf16"},
    "token_linear_residual_forward": {"tile": "token_linear_residual_forward",
                                      "tf32": "token_linear_residual_forward_tf32",
                                      "bf16": "token_linear_residual_forward_bf16"},
    "token_linear_backward_input": {"tile": "token_linear_backward_input", "tf32": "token_linear_backward_input_tf32",
                                    "bf16": "token_linear_backward_input_bf16"},
    "token_linear_backward_input_gelu": {"tile": "token_linear_backward_input_gelu",
                                         "tf32": "token_linear_backward_input_gelu_tf32",
                                         "bf16": "token_linear_backward_input_gelu_bf16"},
    "token_linear_backward_weight": {"tile": "token_linear_backward_weight",
                                     "tf32": "token_linear_backward_weight_tf32",
                                     "bf16": "token_linear_backward_weight_bf16"},
}


@dataclass(frozen=True)
class Tiling:
    """How one product runs: its kernel version, grid (tiles × splits), K splits, the split-K scratch
    floats and arrival counters it needs, and whether it reads BF16 copies of its operands."""

    version: str
    grid: int
    splits: int
    scratch: int
    counters: int
    reads_bf16: bool = False

    def kernel(self, product: str) -> str:
        versions = VERSIONS[product]
        if self.version not in versions:
            raise KeyError(f"{product} has no {self.version} version")
        return versions[self.version]


class SplitTiles:
    """64 × 64 tiles, K split for `blocks_per_sm` blocks a multiprocessor (splitk.splits_for)."""

    name = "split"

    def __init__(self, precision: str, sm_count: int, blocks_per_sm: int):
        self.precision, self.sm_count, self.blocks_per_sm = precision, sm_count, blocks_per_sm

    def splits(self, M: int, N: int, K: int) -> int:
        return splitk.splits_for(M, N, K, self.sm_count, self.blocks_per_sm)

    def product(self, M: int, N: int, K: int, weight_grad: bool = False) -> Tiling:
        n, tiles = self.splits(M, N, K), splitk.tiles(M, N)
        version = "tile" if self.precision == "fp32" else self.precision
        return Tiling(version, tiles * n, n, tiles * n * splitk.SLAB if n > 1 else 0, tiles * TILE_COUNTERS)

    def colsum_splits(self, N: int, K: int) -> int:
        """LayerNorm's ∂γ, ∂β (N = 2d column sums over K rows): one row of tiles, split like a product."""
        return self.splits(1, N, K)

    def elementwise_grid(self, n: int) -> int:
        return max(1, min(math.ceil(n / 256), 8 * self.sm_count))


class GeometryTiles:
    """Per product: 64-row, tall or wide tiles and splits as geometry.Gemm.plan chooses (`tall`, `wide`:
    None chooses per product; True / False force them everywhere or nowhere)."""

    name = "geometry"

    def __init__(self, precision: str, sm_count: int, tall: bool | None = None, wide: bool | None = None):
        self.precision, self.sm_count, self.tall, self.wide = precision, sm_count, tall, wide

    def gemm(self, M: int, N: int, K: int, weight_grad: bool = False) -> Gemm:
        return Gemm.plan(M, N, K, self.sm_count, self.tall, weight_grad, self.precision, self.wide)

    def product(self, M: int, N: int, K: int, weight_grad: bool = False) -> Tiling:
        g = self.gemm(M, N, K, weight_grad)
        return Tiling(g.version, g.grid, g.splits, g.scratch, g.fixup_tiles * TILE_COUNTERS, g.reads_bf16)

    def elementwise_grid(self, n: int) -> int:
        return max(1, min(math.ceil(n / 256), 4 * self.sm_count))

    def vector_grid(self, n: int) -> int:
        """Four elements a thread (sgd.cu, bf16_copy.cu): one pass for up to 4 blocks a multiprocessor."""
        return max(1, min(math.ceil(n / 1024), 4 * self.sm_count))
