"""The Mixer's kernels against their NumPy twins on the CPU emulator, in fp32 and, for every product,
on the (emulated) tensor cores in TF32 and BF16, each within the tolerance of its precision."""

import pytest
from harness import compare_kernel
from mixer_cases import MIXER_KERNEL_SHAPES
from shapes import ids


@pytest.mark.parametrize("name,shape", MIXER_KERNEL_SHAPES, ids=ids(MIXER_KERNEL_SHAPES))
def test_mixer_kernel_matches_twin(emu, name, shape):
    compare_kernel(emu, name, **shape)
