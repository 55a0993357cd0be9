"""The Mixer's kernels on a real GPU (`make test-gpu`; skipped without one): every kernel against its twin
at the test shapes and at litenet-mixer's real sizes (batch 256: 16,384 patch rows, N = 32,768 columns
for the products across the patches), in fp32 and on the tensor cores. Whole steps on the GPU are
tests/lowering/test_backend_gpu.py."""

import pytest
from harness import compare_kernel
from mixer_cases import MIXER_KERNEL_SHAPES
from shapes import ids

pytestmark = pytest.mark.gpu

REAL = [(f"{name}{suffix}", shape) for suffix in ("", "_tf32", "_bf16") for name, shape in [
    ("linear_gelu_forward", dict(B=16384, n_in=128, n_out=512)),
    ("linear_residual_forward", dict(B=16384, n_in=512, n_out=128)),
    ("linear_backward_input_gelu", dict(B=16384, n_in=512, n_out=128)),
    ("linear_backward_weight", dict(B=16384, n_in=512, n_out=128, splits=33)),
    ("token_linear_gelu_forward", dict(T=64, T_out=64, N=32768)),
    ("token_linear_backward_input_gelu", dict(T=64, T_out=64, N=32768)),
    ("token_linear_backward_weight", dict(T=64, T_out=64, N=32768, splits=264)),
]] + [("patches_gather", dict(B=256, patch=4, grid=528)), ("patches_gather", dict(B=256, patch=4, cut=8, grid=528)),
      ("patches_gather", dict(B=256, patch=4, cut=8, mix=1, grid=528)),
      ("layernorm_forward", dict(B=16384, d=128)),
      ("mean_tokens_forward", dict(T=64, N=32768, grid=128)), ("cross_entropy_smoothed", dict(B=256, C=10)),
      ("cross_entropy_smoothed", dict(B=256, C=10, mix=1))]


@pytest.mark.parametrize("name,shape", MIXER_KERNEL_SHAPES + REAL, ids=ids(MIXER_KERNEL_SHAPES + REAL))
def test_mixer_kernel_matches_twin_on_gpu(gpu, name, shape):
    compare_kernel(gpu, name, **shape)
