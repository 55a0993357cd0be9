"""Every kernel against its NumPy twin on the CPU emulator (no GPU needed): forward values and every
gradient, at odd shapes, within computed float32 tolerances."""

import pytest
from harness import compare_kernel
from shapes import KERNEL_SHAPES, ids


@pytest.mark.parametrize("name,shape", KERNEL_SHAPES, ids=ids(KERNEL_SHAPES))
def test_kernel_matches_twin(emu, name, shape):
    compare_kernel(emu, name, **shape)


WIDE_BF16 = [(name, shape) for name, shape in KERNEL_SHAPES if name.endswith("_wide_bf16")]


@pytest.mark.parametrize("name,shape", WIDE_BF16, ids=ids(WIDE_BF16))
def test_hopper_wide_kernel_matches_twin(emu_wgmma, name, shape):
    """The wide BF16 products as an sm_90a compilation builds them (wgmma.cuh's warpgroup product,
    staged in its core matrices), emulated: the same twins, the same tolerance."""
    compare_kernel(emu_wgmma, name, **shape)
