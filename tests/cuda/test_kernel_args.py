"""A call's arguments by parameter name come out in the kernel's declared order, a parameter missed or
unknown is refused before anything runs, and the constants Python shares with the kernels are the
kernels' own (read from the .cu/.cuh files, never mirrored by hand)."""

import re
from pathlib import Path

import numpy as np
import pytest

from litenet.gpu import splitk
from litenet.gpu.sources import Param, parse_signatures
from litenet.lowering.fast import geometry
from litenet.lowering.program import Call

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def defines(*files: str) -> dict[str, int]:
    text = "".join((KERNELS / f).read_text(encoding="utf-8") for f in files)
    return {name: int(v) for name, v in re.findall(r"#define (\w+) (\d+)\b", text)}


def test_named_arguments_come_out_in_the_kernels_order():
    grads, offsets, T = np.zeros(10, np.float32), np.zeros(3, np.int32), np.int32(2)
    ctr, stats, width = np.zeros(2, np.int32), np.zeros((4, 8), np.float32), np.int32(8)
    call = Call("grad_norm_sq", 1, dict(stat_width=width, T=T, offsets=offsets, grads=grads, stats=stats, ctr=ctr))
    assert [id(a) for a in call.ordered_args()] == [id(grads), id(offsets), id(T), id(ctr), id(stats), id(width)]


@pytest.mark.parametrize("named, message", [
    ({"grads": 0, "offsets": 0, "ctr": 0, "stats": 0, "stat_width": 0}, r"missing \['T'\]"),
    ({"grads": 0, "offsets": 0, "T": 0, "ctr": 0, "stats": 0, "stat_width": 0, "n": 0}, r"not its parameters \['n'\]"),
])
def test_a_wrong_name_is_refused(named, message):
    with pytest.raises(TypeError, match=message):
        Call("grad_norm_sq", 1, named).ordered_args()


def test_split_k_constants_match_the_kernels():
    """The tiles, counters and splits the lowering sizes scratch for are the ones gemm.cuh / splitk.cuh index."""
    value = defines("gemm.cuh", "splitk.cuh")
    assert splitk.TILE == value["LN_TILE"] and geometry.TILE is splitk.TILE
    assert splitk.SLAB == value["LN_TILE"] * value["LN_TILE"] + value["LN_TILE"]
    assert splitk.TILE_COUNTERS == 1 + value["LN_MAX_GROUPS"]
    assert splitk.SPLITS_LIMIT == value["LN_GROUP"] * value["LN_MAX_GROUPS"]
    assert geometry.SPLITS_MAX <= value["LN_GROUP"]  # gemm_wide sums a tile's partials in one level
    assert geometry.ROWS_MAX == value["LN_ROWS_MAX"]


def test_row_and_statistics_constants_match_the_kernels():
    from litenet.lowering.stats import StatsLayout

    value = defines("fused_rows.cu", "embed.cu", "common.cuh", "reference/optimizers.cu")
    assert geometry.LAYOUT_MAX == value["LN_LAYOUT_MAX"] and geometry.EMBED_ROWS_MAX == value["LN_EMBED_ROWS_MAX"]
    layout = StatsLayout(tensors=3, blocks=1)
    assert (layout.loss, layout.grad_norm, layout.clipped, layout.grad_sq) == (
        value["LN_STAT_LOSS"], value["LN_STAT_NORM"], value["LN_STAT_CLIPPED"], value["LN_STAT_GRAD_SQ"])
    assert (value["STAT_NORM"], value["STAT_CLIPPED"]) == (layout.grad_norm, layout.clipped)  # the reference tier's


def test_declarations_are_read_with_or_without_launch_bounds():
    text = """extern "C" __global__ void plain(const float* x, int n) {}
extern "C" __global__ void __launch_bounds__(256, 4) bounded(float* y,
                                                             float s) {}"""
    got = parse_signatures(text)
    assert [p.name for p in got["plain"]] == ["x", "n"] and got["plain"][1] == Param("n", "int")
    assert got["plain"][0].const and not got["bounded"][0].const
    assert [(p.name, p.kind) for p in got["bounded"]] == [("y", "pointer"), ("s", "float")]


def test_the_inference_runtimes_constants_match_the_kernels():
    """The inference rewrites size grids and layouts with the kernels' own numbers."""
    from litenet.lowering.fast import int8_tokens, rows
    from litenet.runtime import cuda_net

    value = defines("infer_words.cuh", "infer_core.cuh", "token_linear_int8.cu")
    assert (rows.ROWS, rows.TILE) == (value["IR_ROWS"], value["IT_TILE"])
    assert cuda_net.LAYOUT_WIDTH == value["IL_WIDTH"]
    assert int8_tokens.TOKEN_OUTS == value["TL_OUTS"]
