"""geometry's choice of wide tiles (fp32 256 × 128, BF16 128 × 128), on the CPU: which products of
litenet-base's shape take them, how their K is split, and what their split-K needs (each 128 × 64
part is summed apart)."""

import dataclasses

import pytest

from litenet.errors import UsageError
from litenet.gpu.splitk import TILE_COUNTERS
from litenet.model import load_preset
from litenet.lowering.fast.geometry import Gemm, Geometry, choose_splits_by_waves, slab
from litenet.lowering.fast.products import VERSIONS

H200_SMS = 132
BASE = load_preset("litenet-base").model


def geometry(width, batch, precision, **options):
    model = dataclasses.replace(BASE, width=width, hidden=2 * width)
    return Geometry(model, batch, H200_SMS, precision=precision, **options)


@pytest.mark.parametrize("precision,suffix", [("fp32", "_wide"), ("bf16", "_wide_bf16")])
def test_large_products_take_wide_tiles_and_the_head_does_not(precision, suffix):
    g = geometry(1024, 1024, precision)
    wide = {name for name, gm in g.gemms.items() if gm.wide}
    assert wide == set(g.gemms) - {"head_forward", "head_backward_weight", "head_backward_input"}
    assert VERSIONS["linear_gelu_forward"][g.gemms["fc1_forward"].version] == "linear_gelu_forward" + suffix
    for gm in g.gemms.values():  # the arena's scratch and counters hold every product's split-K
        assert g.scratch >= gm.scratch and g.counters >= gm.fixup_tiles * TILE_COUNTERS


def test_small_shapes_tf32_and_explicit_tall_keep_their_tiles():
    assert not any(gm.wide for gm in geometry(256, 256, "bf16").gemms.values())
    # from 2^29 multiply-adds: at width 256 / batch 1024 only the embedding's (1024 · 256 · 3072)
    assert {n for n, gm in geometry(256, 1024, "bf16").gemms.items() if gm.wide} == {"embed_forward", "embed_backward"}
    assert not any(gm.wide for gm in geometry(1024, 1024, "tf32").gemms.values())
    tall = geometry(1024, 1024, "fp32", tall=True)
    assert all(gm.tall and not gm.wide for gm in tall.gemms.values())
    with pytest.raises(UsageError, match="fp32 or BF16"):
        geometry(256, 256, "tf32", wide=True)
    with pytest.raises(UsageError, match="tall or wide"):
        Gemm.plan(1024, 1024, 1024, H200_SMS, tall=True, wide=True)


def test_wide_tiles_count_parts_for_split_k():
    gm = Gemm.plan(200, 300, 4096, H200_SMS, precision="bf16", wide=True)
    assert (gm.tile_rows, gm.tile_cols, gm.tiles) == (128, 128, 2 * 3)
    assert gm.fixup_tiles == 12 and gm.grid == 6 * gm.splits
    # one BF16 block a multiprocessor: the split aims at one block each, 64 values of K at least
    assert gm.splits == 16 and gm.scratch == 12 * 16 * slab(128)
    assert Gemm.plan(2048, 2048, 1024, H200_SMS, precision="bf16").splits == 1  # 256 tiles: no split
    # fp32: 256 × 128 tiles of four 128 × 64 parts, each a tall tile's slab
    f = Gemm.plan(300, 300, 4096, H200_SMS, wide=True)
    assert (f.tile_rows, f.tile_cols, f.tiles) == (256, 128, 2 * 3)
    assert f.fixup_tiles == 24 and f.grid == 6 * f.splits
    assert f.splits == 16 and f.scratch == 24 * 16 * slab(128)  # capped at SPLITS_MAX


@pytest.mark.parametrize("M,N,K,splits", [
    (1024, 4096, 2048, 1),  # 128 tiles on 132 multiprocessors: one wave, no split (not 2: two waves)
    (1024, 2048, 4096, 2),  # 64 tiles: two splits fill one wave
    (1024, 1024, 2048, 4),  # 32 tiles: four
    (256, 2048, 4096, 8),   # 16 tiles: eight
    (3072, 2048, 1024, 2),  # 192 tiles: 2 (3 waves of half the work) is within 5 % of 11 (16 waves of an 11th)
    (4096, 2048, 1024, 1),  # 256 tiles: two waves whatever the split
])
def test_fp32_wide_splits_fill_whole_waves(M, N, K, splits):
    gm = Gemm.plan(M, N, K, H200_SMS)
    assert gm.wide and gm.splits == splits


def test_splits_by_waves_take_the_fewest_within_five_percent():
    assert choose_splits_by_waves(128, 2048, 132) == 1
    assert choose_splits_by_waves(32, 2048, 132) == 4  # not 5: 160 blocks would need two waves
    assert choose_splits_by_waves(32, 128, 132) == 2  # at least 64 of K a split
    assert choose_splits_by_waves(10, 1 << 20, 132) == 13  # 130 blocks; capped at SPLITS_MAX (16) otherwise
    assert choose_splits_by_waves(1, 1 << 20, 4) == 4
