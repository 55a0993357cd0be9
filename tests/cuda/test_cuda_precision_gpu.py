"""The tensor-core tile products (64-row and wide) on a real GPU (sm_80+; `make test-gpu`, skipped without
one) against their float64 twins at litenet-base's shape (widths 256 and 1024, batch 1024), each within
its precision's computed tolerance (litenet.train.check_kernels.TOLERANCES). Whole steps in TF32 and BF16 are
tests/lowering/test_backend_gpu.py."""

import pytest
from harness import compare_kernel
from shapes import WIDE_REAL_SHAPES, ids

pytestmark = pytest.mark.gpu

REAL = [(f"{name}_{p}", shape) for p in ("tf32", "bf16") for name, shape in [
    ("embed_forward", dict(B=1024, d=256, embed="full", shift=0.5, splits=1)),
    ("embed_forward", dict(B=256, d=1024, embed="full", shift=0.5, splits=2)),
    ("embed_backward", dict(B=1024, d=256, embed="full", splits=4)),
    ("linear_gelu_forward", dict(B=1024, n_in=1024, n_out=2048)),
    ("linear_forward", dict(B=1024, n_in=2048, n_out=1024, splits=2)),
    ("linear_forward", dict(B=1024, n_in=256, n_out=10, splits=4)),
    ("linear_backward_input", dict(B=1024, n_in=2048, n_out=1024)),
    ("linear_backward_weight", dict(B=1024, n_in=1024, n_out=2048, splits=2)),
    ("linear_backward_weight", dict(B=1024, n_in=256, n_out=10, splits=8)),
]] + [(f"{name}_bf16", shape) for name, shape in WIDE_REAL_SHAPES] + [  # the wide BF16 tiles
    ("linear_backward_weight_wide_bf16", dict(B=1000, n_in=1030, n_out=250, splits=3)),  # ragged, split
]


def _device():
    from litenet.gpu.device import CupyDevice
    device = CupyDevice()
    if not device.capability.startswith("sm_") or int(device.capability[3:-1]) < 8:
        pytest.skip(f"tensor cores need sm_80+; this GPU is {device.capability}")
    return device


@pytest.mark.parametrize("name,shape", REAL, ids=ids(REAL))
def test_tensor_core_product_matches_twin_on_gpu(gpu, name, shape):
    _device()
    compare_kernel(gpu, name, **shape)
