"""Every kernel against its NumPy twin on the CPU emulator (no GPU needed): forward values and every
gradient, at odd shapes, within computed float32 tolerances."""

import pytest
from harness import compare_kernel
from shapes import KERNEL_SHAPES, ids


@pytest.mark.parametrize("name,shape", KERNEL_SHAPES, ids=ids(KERNEL_SHAPES))
def test_kernel_matches_twin(emu, name, shape):
    compare_kernel(emu, name, **shape)
