"""The kernel checks on a real GPU through CuPy (`make test-gpu`; skipped without CuPy or a GPU): every
fast kernel against its twin, at the test shapes and at the presets' real sizes. Whole steps on the GPU
are tests/lowering/test_backend_gpu.py."""

import pytest
from harness import compare_kernel
from shapes import KERNEL_SHAPES, WIDE_REAL_SHAPES, ids

pytestmark = pytest.mark.gpu

# The presets' own sizes (B = 64 … 4096), where split-K, many tiles and full SMs really happen.
REAL_SHAPES = [
    ("embed_inputs", dict(B=4096, embed="full", shift=0.5)),
    ("embed_forward_rows", dict(B=64, d=64, rows=1, parts=2)),
    ("embed_forward_rows", dict(B=512, d=64, rows=3)),
    ("embed_forward", dict(B=64, d=64, splits=16)),
    ("embed_forward", dict(B=4096, d=256, embed="full", splits=1)),
    ("embed_backward", dict(B=4096, d=64, splits=32)),
    ("linear_backward_weight", dict(B=4096, n_in=64, n_out=256, splits=16)),
    ("linear_gelu_forward", dict(B=4096, n_in=256, n_out=512)),
    ("linear_backward_weight", dict(B=4096, n_in=512, n_out=256, splits=8)),
    ("linear_backward_input", dict(B=4096, n_in=256, n_out=512)),
    ("residual_layernorm_backward", dict(B=4096, d=256, splits=8)),
    ("fused_rows", dict(B=64, d=64, H=256, rows=1)),
    ("fused_rows", dict(B=512, d=64, H=256, rows=3)),
    ("fused_rows", dict(B=512, d=256, H=512, blocks=2, rows=7)),
    ("fused_weight_grads", dict(B=64, d=64, H=256, sm_count=132)),
    ("fused_weight_grads", dict(B=512, d=256, H=512, blocks=2, embed="full", sm_count=132)),
    ("sgd_momentum_update", dict(width=256, hidden=512, blocks=2, grid=528)),
]
REAL_SHAPES += WIDE_REAL_SHAPES  # wide fp32 tiles at width 1024, batch 1024


@pytest.mark.parametrize("name,shape", KERNEL_SHAPES + REAL_SHAPES, ids=ids(KERNEL_SHAPES + REAL_SHAPES))
def test_kernel_matches_twin_on_gpu(gpu, name, shape):
    compare_kernel(gpu, name, **shape)
