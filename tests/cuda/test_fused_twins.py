"""The NumPy twins of the fast kernels (fused_twins.py) that are not plain compositions of litenet.ops."""

import fused_twins as ref
import numpy as np


def test_bf16_copy_rounds_to_nearest_with_ties_to_even():
    """The twin of bf16_copy.cu (and of every BF16 copy the wide products read), against values worked
    by hand and against the definition: the nearest BF16 value, within half its spacing."""
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, 0.0, -0.0, 3.4e38, 1e-45],
                 np.float32)
    bits = ref.bf16_copy(x)
    # 1; the tie 1 + 2⁻⁸ goes down to the even 1.0, 1 + 3·2⁻⁸ up to the even 1 + 2⁻⁶; just past a tie, up;
    # −2.5 exactly; ±0; past the largest BF16 (3.39e38), infinity; the smallest subnormal rounds to 0
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x0000, 0x8000, 0x7F80, 0x0000]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000)).astype(np.float32)
    got = ref.bf16_values(ref.bf16_copy(x)).astype(np.float64)
    spacing = 2.0 ** (np.floor(np.log2(np.abs(x.astype(np.float64)))) - 7)
    assert np.all(np.abs(got - x) <= spacing / 2)
    assert np.array_equal(ref.bf16_values(ref.bf16_copy(got.astype(np.float32))), got.astype(np.float32))
