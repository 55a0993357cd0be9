"""How the tile products are cut and what their split-K needs (kernels/splitk.cuh), for the
lowering's products (litenet/lowering/fast/) in training and in inference alike: the same formula, each
with its own target of blocks per multiprocessor.
"""

from __future__ import annotations

import math

TILE = 64  # the products' output tiles: 64 × 64 (gemm.cuh, infer_core.cuh)
SLAB = TILE * TILE + TILE  # floats of one split's partial tile and its column sums (LN_SLAB_OF(4))
# The arrival counters of each output tile (LN_TILE_COUNTERS: the tile's, then one per group of 16
# splits) and the most splits the two-level sum takes (LN_GROUP · LN_MAX_GROUPS = 16 · 31).
TILE_COUNTERS = 32
SPLITS_LIMIT = 16 * 31


def tiles(M: int, N: int) -> int:
    return math.ceil(M / TILE) * math.ceil(N / TILE)


def splits_for(M: int, N: int, K: int, sm_count: int, blocks_per_sm: int) -> int:
    """How many ways to cut a product's sum over K: enough blocks for `blocks_per_sm` per
    multiprocessor, with at least 4 k steps of 16 per split (a ∂W over 16,384 rows gets tens of
    splits; a large batch's forward none), and no more than the two-level sum takes."""
    return int(max(1, min(math.ceil(blocks_per_sm * sm_count / tiles(M, N)), K // 64, SPLITS_LIMIT)))


def split_k_sizes(products, sm_count: int, blocks_per_sm: int) -> tuple[int, int]:
    """(floats of scratch, counters) for the products (M, N, K) run one after another: the partial
    tiles of the largest split product, TILE_COUNTERS for each tile of the one with the most tiles
    (every launch leaves them at zero)."""
    products = list(products)
    scratch = [tiles(M, N) * n * SLAB for M, N, K in products if (n := splits_for(M, N, K, sm_count, blocks_per_sm)) > 1]
    return max([1, *scratch]), max(tiles(M, N) for M, N, _ in products) * TILE_COUNTERS
