"""kernel_args: arguments given by parameter name come out in the kernel's declared order, and a
parameter missed, unknown or given twice is refused before anything runs."""

import re
from pathlib import Path

import numpy as np
import pytest

from litenet.gpu.sources import Param, parse_signatures
from litenet.gpu.splitk import SPLITS_LIMIT, TILE_COUNTERS
from litenet.train.cuda.geometry import SPLITS_MAX
from litenet.train.cuda.kernel_args import StatsRow, kernel_args

ROW = StatsRow(np.zeros(2, np.int32), np.zeros((4, 8), np.float32), np.int32(8))


def test_named_arguments_come_out_in_the_kernels_order():
    grads, offsets, T = np.zeros(10, np.float32), np.zeros(3, np.int32), np.int32(2)
    args = kernel_args("grad_norm_sq", ROW, T=T, offsets=offsets, grads=grads)  # grads offsets T ctr stats stat_width
    assert [id(a) for a in args] == [id(grads), id(offsets), id(T), id(ROW.ctr), id(ROW.stats), id(ROW.stat_width)]


@pytest.mark.parametrize("named, message", [
    ({"grads": 0, "offsets": 0}, r"missing \['T'\]"),
    ({"grads": 0, "offsets": 0, "T": 0, "n": 0}, r"not its parameters \['n'\]"),
    ({"grads": 0, "offsets": 0, "T": 0, "ctr": 0}, "parameter ctr given twice"),
])
def test_a_wrong_name_is_refused(named, message):
    with pytest.raises(TypeError, match=message):
        kernel_args("grad_norm_sq", ROW, **named)


def test_split_k_constants_match_the_kernels():
    """The counters and splits the plans allocate for are the ones kernels/splitk.cuh indexes."""
    text = (Path(__file__).resolve().parents[2] / "kernels" / "splitk.cuh").read_text(encoding="utf-8")
    value = {name: int(v) for name, v in re.findall(r"#define (LN_GROUP|LN_MAX_GROUPS) (\d+)", text)}
    assert TILE_COUNTERS == 1 + value["LN_MAX_GROUPS"]
    assert SPLITS_LIMIT == value["LN_GROUP"] * value["LN_MAX_GROUPS"]
    assert SPLITS_MAX <= value["LN_GROUP"]  # gemm_wide sums a tile's partials in one level


def test_declarations_are_read_with_or_without_launch_bounds():
    text = """extern "C" __global__ void plain(const float* x, int n) {}
extern "C" __global__ void __launch_bounds__(256, 4) bounded(float* y,
                                                             float s) {}"""
    got = parse_signatures(text)
    assert [p.name for p in got["plain"]] == ["x", "n"] and got["plain"][1] == Param("n", "int")
    assert [(p.name, p.kind) for p in got["bounded"]] == [("y", "pointer"), ("s", "float")]
