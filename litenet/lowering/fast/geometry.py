"""Launch shapes: how each product is cut into tiles (64 or 128 rows × 64, or wide: 256 or 128 rows ×
128) and K splits, in which precision it multiplies, the embedding's version and rows per block, the
fused kernel's rows per block, the weight-gradient job table, and the choice between the two step
plans.

Pure arithmetic on the model and batch size (no device needed), so the arena can be sized
before anything is allocated and the tests can check the plans on the CPU.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from litenet.errors import UsageError
from litenet.gpu.launch import SMEM_LIMIT, THREADS
from litenet.gpu.splitk import SLAB, TILE, TILE_COUNTERS
from litenet.model import ModelConfig


SPLITS_MAX = 16  # the last block of a tile reads every split's 16 KiB partial: keep that under 256 KiB
ROWS_MAX = 16  # kernels/gemm.cuh LN_ROWS_MAX
LAYOUT_MAX = 64  # kernels/fused_rows.cu LN_LAYOUT_MAX: parameter offsets held in shared memory
JOB_EMBED, JOB_FC1, JOB_FC2, JOB_HEAD, JOB_LAYERNORM = range(5)  # kernels/fused_weight_grads.cu


def choose_splits(tiles: int, K: int, sm_count: int, share: float = 1.0) -> int:
    """Split the reduction until the launch has about two blocks per multiprocessor (its `share`
    of them), keeping at least 64 values of K per split so each block still has work, and at most
    SPLITS_MAX splits: the last block of a tile sums every split's partial tile alone, so many
    splits turn into one long serial read (33 splits read one at a time were the likely largest cost
    of the seed's ∂W products at batch 4096; docs/decisions.md)."""
    want = math.ceil(2 * sm_count * share / max(tiles, 1))
    return max(1, min(want, max_splits(K)))


def max_splits(K: int) -> int:
    """At least 64 values of K per split, and at most SPLITS_MAX splits (choose_splits says why)."""
    return int(max(1, min(K // 64, SPLITS_MAX)))


def slab(tile_rows: int) -> int:
    """Floats per split-K partial of a tile of `tile_rows` × 64: the tile and its column sums."""
    return tile_rows * TILE + TILE


TALL = 128  # rows of a "tall" tile (kernels' _tall versions: 8 rows per thread)


def choose_tall(M: int, N: int, K: int, weight_grad: bool) -> bool:
    """Tall tiles (128 × 64, 8 rows per thread) for a layer's weight gradient over a large batch
    only: measured on the H200 (gpu-2026-12-02.md in bench/results/raw/gpu-training.tar.xz, per launch from graphs) they
    took 44 µs against 56.5 for litenet-base's 256×512 and 512×256 ∂W at batch 4096, and were
    slower everywhere else — forward and ∂input products (245 vs 217 µs for the 4096×256×3072
    embedding), the embedding's ∂We (248 vs 206 µs), every seed-sized ∂W (28 vs 20 µs)."""
    return weight_grad and M >= 256 and N >= 256 and K >= 2048


WIDE = 128  # columns of a "wide" tile (kernels' _wide and _wide_bf16 versions, gemm_wide.cuh)
# Its rows (gemm_wide.cuh LN_WIDE_ROWS_FP32, WideBf16 / WideWgmma): fp32's 256 × 128 tile gives each
# thread 16 × 8 outputs, against cuBLAS's SIMT kernels at 128 (gemm_wide.cuh says why).
WIDE_ROWS = {"fp32": 256, "bf16": 128}
# Multiply-adds (M·N·K) from which a product takes wide tiles. 2^29 since a split wide tile arrives once
# (gemm_wide.cuh): on an H200 litenet-base's shape at width 1024 / batch 256 (products of 2^29 to 2^29.6)
# then took 0.815–0.819 ms a fp32 step against 0.845–0.847 from 2^30, BF16 0.475–0.479 against
# 0.519–0.521, and width 256 / batch 1024's BF16 step 0.323 against 0.343; the other rows level
# (gpu-mixer-2026-12-04.md in bench/results/raw/gpu-steps.tar.xz).
WIDE_MIN_WORK = 1 << 29
# Blocks a multiprocessor holds (gemm_wide.cuh LN_WIDE_BLOCKS_*), as choose_splits counts them. On
# Hopper the BF16 tile (WideWgmma) holds 2, but the splits stay chosen for 1: at litenet-base's sizes
# that fills one wave of two a multiprocessor (128 tiles split 2 ways: 256 blocks on an H200's 264).
WIDE_BLOCKS = {"fp32": 1, "bf16": 1}


def choose_splits_by_waves(tiles: int, K: int, slots: int) -> int:
    """The fewest splits whose launch finishes within 5 % of the soonest when every block holds one of
    the GPU's `slots` for K / splits: time ∝ waves / splits. Fewest, because each split is a partial
    tile written and read again. choose_splits' "about two blocks per multiprocessor" misses by a wave
    at one block a multiprocessor: 128 tiles on 132 slots would split in 2 (two waves of half the work
    each: no gain, and the partials' traffic); 32 tiles would split in 5 (two waves; 4 fill one)."""
    candidates = range(1, max_splits(K) + 1)
    time = {s: math.ceil(tiles * s / slots) / s for s in candidates}
    return min(s for s in candidates if time[s] <= 1.05 * min(time.values()))


# At least this much of K for each split of a ∂W whose partials a second launch sums (choose_summed_splits).
SUMMED_K_MIN = 256


def choose_summed_splits(tiles: int, K: int, sm_count: int) -> int:
    """K splits of a wide BF16 ∂W whose partials a second launch sums across the GPU (kernels/linear.cu's
    linear_backward_weight_sum_wide): no block reads every partial of its tile, so nothing caps the splits
    at SPLITS_MAX; one block a multiprocessor, each split at least SUMMED_K_MIN of K (the Mixer's channel ∂W
    on 132 multiprocessors: 4 tiles, 32 splits at batch 128, 33 at 256; swept in docs/decisions.md, "Split-K")."""
    return max(1, min(math.ceil(sm_count / max(tiles, 1)), K // SUMMED_K_MIN))


def choose_wide(M: int, N: int, K: int, precision: str) -> bool:
    """Wide tiles (256 × 128 fp32 on the SIMT cores, or 128 × 128 BF16 from BF16 copies of the operands) for large
    products: litenet-base's shape at widths 1024 and 2048, where PyTorch's cuBLAS step was faster
    than the 64-row tiles' (kernels/gemm_wide.cuh says why). Not TF32 (no wide version), not the
    Mixer's products (its own plans), nor products narrower than a tile."""
    return precision in WIDE_BLOCKS and min(M, N) >= WIDE and M * N * K >= WIDE_MIN_WORK


@dataclass(frozen=True)
class Gemm:
    """C (M × N) = A (M × K) · B (K × N) cut into tiles of 64 or 128 (tall) rows × 64 columns, or
    wide (gemm_wide.cuh: fp32 256 × 128, BF16 128 × 128), and `splits` K ranges, multiplied in `precision`
    ("fp32" on the SIMT cores, "tf32" / "bf16" on the tensor cores: mma.cuh, 64-row or wide tiles;
    the kernels' versions are products.VERSIONS, one table for both policies). A wide tile's
    split-K stores each 128 × 64 part as a tall tile's partial and arrives once for the whole tile.
    Splits ≤ SPLITS_MAX (= splitk.cuh's LN_GROUP: the wide tiles sum their partials in one level)."""

    M: int
    N: int
    K: int
    splits: int
    tall: bool = False
    precision: str = "fp32"
    wide: bool = False

    @classmethod
    def plan(cls, M, N, K, sm_count, tall: bool | None = None, weight_grad: bool = False,
             precision: str = "fp32", wide: bool | None = None) -> "Gemm":
        if wide is None:  # tall tiles asked for everywhere keep every product tall
            wide = not tall and choose_wide(M, N, K, precision)
        if wide and precision not in WIDE_BLOCKS:
            raise UsageError(f"wide tiles are fp32 or BF16, not {precision}")
        if precision != "fp32":  # the tensor-core versions exist for 64-row and wide tiles only
            if tall:
                raise UsageError(f"tall (128-row) tiles are fp32 only; precision {precision} uses 64-row tiles")
            tall = False
        if wide and tall:
            raise UsageError("a product's tiles are tall or wide, not both")
        tall = False if wide else choose_tall(M, N, K, weight_grad) if tall is None else tall
        shape = cls(M, N, K, 1, tall, precision, wide)
        if wide and precision == "fp32":
            splits = choose_splits_by_waves(shape.tiles, K, sm_count * WIDE_BLOCKS[precision])
        else:
            share = WIDE_BLOCKS[precision] / 2 if wide else 1.0  # choose_splits aims at two blocks a multiprocessor
            splits = choose_splits(shape.tiles, K, sm_count, share)
        return dataclasses.replace(shape, splits=splits)

    @property
    def tile_rows(self) -> int:
        return WIDE_ROWS[self.precision] if self.wide else TALL if self.tall else TILE

    @property
    def reads_bf16(self) -> bool:
        """Wide BF16 products read BF16 copies of their operands (kernels/bf16_copy.cu says why)."""
        return self.wide and self.precision == "bf16"

    @property
    def tile_cols(self) -> int:
        return WIDE if self.wide else TILE

    @property
    def version(self) -> str:
        """Which version of a product kernel runs this shape (products.VERSIONS' keys)."""
        shape = "tall" if self.tall else "wide" if self.wide else "tile"
        return shape if self.precision == "fp32" else self.precision if shape == "tile" else f"{shape}_{self.precision}"

    @property
    def tiles(self) -> int:
        return math.ceil(self.M / self.tile_rows) * math.ceil(self.N / self.tile_cols)

    @property
    def fixup_tiles(self) -> int:
        """The tiles split-K sums apart (scratch slabs, and counters: more than a wide tile's one arrival
        needs): each 128 × 64 part of a wide tile."""
        return self.tiles * self.tile_rows * self.tile_cols // (TALL * TILE) if self.wide else self.tiles

    @property
    def grid(self) -> int:
        return self.tiles * self.splits

    @property
    def scratch(self) -> int:
        return self.fixup_tiles * self.splits * self.part_slab if self.splits > 1 else 0

    @property
    def part_slab(self) -> int:
        """Floats per split-K partial of one of the tiles split-K sums apart (a wide tile's parts are tall)."""
        return slab(TALL if self.wide else self.tile_rows)


@dataclass(frozen=True)
class ColSum:
    """out (N) = Σ_k f(k, n) in 64-column tiles and `splits` k ranges (LayerNorm's ∂γ, ∂β)."""

    N: int
    K: int
    splits: int

    @property
    def tiles(self) -> int:
        return math.ceil(self.N / TILE)

    @property
    def scratch(self) -> int:
        return self.tiles * self.splits * TILE if self.splits > 1 else 0


class Geometry:
    """Every launch shape of one model at one batch size on a GPU with `sm_count` multiprocessors.

    `precision` applies to the tile products (self.gemms: the embedding's, the layers', the head's);
    the row kernels (embed_forward_rows, fused_rows, fused_weight_grads, LayerNorm, loss, update)
    stay fp32 in every precision: they are small or bound by memory, and have no tensor-core version.
    `tall` and `wide` force those tile shapes on every product (True) or on none (False); None
    chooses per product (choose_tall, choose_wide)."""

    def __init__(self, model: ModelConfig, batch: int, sm_count: int, embed: str = "auto", tall: bool | None = None,
                 precision: str = "fp32", wide: bool | None = None):
        B, d, H, C, K = batch, model.width, model.hidden, model.classes, model.embed_inputs
        self.model, self.batch, self.sm_count, self.precision = model, batch, sm_count, precision
        g = lambda M, N, K_, dw=False: Gemm.plan(M, N, K_, sm_count, tall, dw, precision, wide)  # noqa: E731
        self.gemms = {  # ∂W products also give ∂b (the first tile row sums ∂y's columns)
            "embed_forward": g(B, d, K), "embed_backward": g(K, d, B),
            "fc1_forward": g(B, H, d), "fc2_forward": g(B, d, H), "head_forward": g(B, C, d),
            "head_backward_weight": g(d, C, B, True), "head_backward_input": g(B, d, C),
            "fc2_backward_weight": g(H, d, B, True), "fc2_backward_input": g(B, H, d),
            "fc1_backward_weight": g(d, H, B, True), "fc1_backward_input": g(B, d, H),
        }
        self.embed_rows, self.embed_parts, self.embed_smem = embed_rows_shape(model, batch, sm_count)
        self.embed_variant = choose_embed(model, batch, self.embed_rows) if embed == "auto" else embed
        ln = ColSum(2 * d, B, 1)
        self.layernorm_grads = ColSum(ln.N, B, choose_splits(ln.tiles, B, sm_count, 0.5))
        self.row_blocks = math.ceil(B / (THREADS // 32))  # one warp per row
        self.rows, self.fused_smem = fused_rows_shape(model, batch, sm_count)
        self.jobs, jobs_scratch, jobs_counters = weight_grad_jobs(model, batch, sm_count)
        self.scratch = max([x.scratch for x in self.gemms.values()] + [self.layernorm_grads.scratch, jobs_scratch, 1])
        self.counters = max([x.fixup_tiles * TILE_COUNTERS for x in self.gemms.values()]
                            + [self.layernorm_grads.tiles * TILE_COUNTERS, jobs_counters])

    @property
    def fused_ok(self) -> bool:
        return self.rows > 0


EMBED_ROWS_MAX = 8  # kernels/embed.cu LN_EMBED_ROWS_MAX
EMBED_ROWS_WEIGHT_BYTES = 512 * 1024
EMBED_ROWS_MAX_BATCH = 1024


def embed_rows_shape(model: ModelConfig, batch: int, sm_count: int) -> tuple[int, int, int]:
    """(images per block, column parts, dynamic shared-memory bytes) of embed_forward_rows.

    About one block per multiprocessor: a few images per block once the batch outgrows the
    multiprocessors (each block reads all of We, so fewer blocks read it fewer times), the columns
    split over 2 or 4 blocks while it does not (halving what each block reads and waits for)."""
    K, d = model.embed_inputs, model.width
    rows = max(1, min(EMBED_ROWS_MAX, batch // max(sm_count, 1), SMEM_LIMIT // (4 * K)))
    blocks = math.ceil(batch / rows)
    parts = max(math.ceil(d / 1024), 1)  # at most 256 column quads per block
    while parts < 4 and blocks * parts * 2 <= sm_count and math.ceil(d / (parts * 2)) >= 16:
        parts *= 2
    return rows, parts, rows * K * 4


def choose_embed(model: ModelConfig, batch: int, rows: int) -> str:
    """"rows" (embed_forward_rows: s in shared memory, We streamed per block, no split-K) for small
    batches and a small We; "tiles" (embed_inputs, then tile products over S) otherwise. Every
    block of the rows version reads all of We, which is cheap for the seed's 256 KiB and ruinous
    for litenet-base's 3 MiB. H200 (gpu-2026-12-02.md in bench/results/raw/gpu-training.tar.xz): seed at batch 64 7.8 µs;
    at 512 rows 18.2 µs against tiles 7.1 + 12.0 µs; at 4096 tiles 16.8 + 29.8 µs."""
    weight = 4 * model.embed_inputs * model.width
    return "rows" if weight <= EMBED_ROWS_WEIGHT_BYTES and batch <= EMBED_ROWS_MAX_BATCH and rows > 0 else "tiles"


def fused_rows_shape(model: ModelConfig, batch: int, sm_count: int) -> tuple[int, int]:
    """(images per block, dynamic shared-memory bytes) of fused_rows, or (0, 0) if one row does not fit.

    About one block per multiprocessor at most, no more than 16 rows (the kernel's register tile),
    fewer while the rows do not fit in shared memory."""
    r16 = lambda n: (n + 15) // 16 * 16  # noqa: E731  (rows padded for 16-wide k chunks)
    per_row = 4 * (4 * r16(model.width) + r16(model.hidden) + r16(model.classes))
    fixed = 4 * (32 + 256)  # block_sum scratch, rows_matmul's partial sums
    static = 4 * LAYOUT_MAX  # the parameter offsets (static shared memory)
    if 6 * model.blocks + 4 > LAYOUT_MAX:
        return 0, 0
    rows = max(1, min(ROWS_MAX, batch // max(sm_count, 1)))
    while rows > 0 and rows * per_row + fixed + static > SMEM_LIMIT:
        rows -= 1
    return rows, (rows * per_row + fixed if rows else 0)


def weight_grad_jobs(model: ModelConfig, batch: int, sm_count: int):
    """The job table of fused_weight_grads: (jobs int32 (n, 10), scratch floats, counters: TILE_COUNTERS
    per tile).

    One product per parameter group; each gets a share of the blocks in proportion to its work,
    the embedding (the largest) first so its blocks start earliest."""
    B, d, H, C, K, L = batch, model.width, model.hidden, model.classes, model.embed_inputs, model.blocks
    products = [(JOB_EMBED, 0, K, d, 0)]
    for i in range(L):
        products += [(JOB_FC1, i, d, H, 1 + 6 * i), (JOB_FC2, i, H, d, 3 + 6 * i),
                     (JOB_LAYERNORM, i, 1, 2 * d, 5 + 6 * i)]
    products.append((JOB_HEAD, L, d, C, 1 + 6 * L))
    work = [M * N * B for _, _, M, N, _ in products]
    rows, scratch, tile_id = [], 0, 0
    for (kind, layer, M, N, tensor), w in zip(products, work):
        tiles_m, tiles_n = math.ceil(M / TILE), math.ceil(N / TILE)
        splits = choose_splits(tiles_m * tiles_n, B, sm_count, w / sum(work))
        slab = TILE if kind == JOB_LAYERNORM else SLAB
        for tm in range(tiles_m):
            for tn in range(tiles_n):
                offset = scratch
                if splits > 1:
                    scratch += splits * slab
                for split in range(splits):
                    rows.append((kind, layer, tm, tn, split, splits, tile_id, offset, tensor, 0))
                tile_id += 1
    return np.array(rows, dtype=np.int32).reshape(-1, 10), max(scratch, 1), tile_id * TILE_COUNTERS


FUSED_WEIGHT_BYTES = 512 * 1024
FUSED_MAX_BATCH = 256


def choose_plan(geometry: Geometry) -> str:
    """"fused" (4 launches, rows in shared memory) while the batch is small and the blocks'
    weights are small: every block of fused_rows streams all of W1 and W2 (twice) through its one
    multiprocessor, which is cheap for the seed (128 KiB) and ruinous for 2 MiB. "ops" (one tiled
    kernel per operation) otherwise: tiles spread the work over all multiprocessors. Measured on
    the H200 (gpu-2026-12-02.md in bench/results/raw/gpu-training.tar.xz, run 5): seed at batch 64 fused 0.062 ms vs ops
    0.082; at 512 ops 0.117 vs fused 0.175; litenet-base's shape at 64 ops 0.176 vs fused 0.403.
    The batch cut sits between the measured 64 and 512."""
    m = geometry.model
    weights = 4 * 2 * m.blocks * m.width * m.hidden
    if not geometry.fused_ok or weights > FUSED_WEIGHT_BYTES:
        return "ops"
    return "fused" if geometry.batch <= FUSED_MAX_BATCH else "ops"
