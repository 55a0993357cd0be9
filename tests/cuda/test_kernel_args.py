"""kernel_args: arguments given by parameter name come out in the kernel's declared order, and a
parameter missed, unknown or given twice is refused before anything runs."""

import numpy as np
import pytest

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
