"""The MLP's CudaBackend in TF32 and BF16 on a real GPU (sm_80+; `make test-gpu`, skipped without one):
the tensor-core tile products (64-row and wide) against their float64 twins at litenet-base's shape
(widths 256 and 1024, batch 1024), whole steps against float64 NumPy and check_kernels over real steps, each within
its precision's computed tolerance (check.TOLERANCES)."""

import dataclasses

import numpy as np
import pytest
from backend_helpers import backend_pair, compare_one_step, schedule
from harness import compare_kernel
from shapes import WIDE_REAL_SHAPES, ids

from litenet.model import TrainConfig, load_preset
from litenet.train.cuda.check import TOLERANCES

pytestmark = pytest.mark.gpu

BASE = load_preset("litenet-base").model  # full 3072 → width embedding, blocks width → 2·width → width


def base_shape(width: int):
    """litenet-base's shape at another width (hidden = 2 × width, as the preset's 256 → 512)."""
    return dataclasses.replace(BASE, width=width, hidden=2 * width)


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


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
@pytest.mark.parametrize("width", [256, 1024])
def test_one_step_equals_reference_on_gpu(width, precision):
    model, train = base_shape(width), TrainConfig(batch_size=256, loss="cross-entropy")
    cuda, ref = backend_pair(model, train, "auto", _device(), dtype=np.float64, n=1024, precision=precision)
    worst = compare_one_step(cuda, ref, model, 256, n=1024, tol=TOLERANCES[precision])
    print(f"{precision} width {width}: worst error {max(worst.values()):.3f} of its bound")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_one_step_in_wide_tiles_equals_reference_on_gpu(precision):
    """Every product of a width-1024 step in wide tiles (forced: at batch 256 choose_wide keeps most
    in 64-row tiles), fp32 and BF16, against float64 NumPy."""
    model, train = base_shape(1024), TrainConfig(batch_size=256, loss="cross-entropy")
    cuda, ref = backend_pair(model, train, "ops", _device(), dtype=np.float64, n=1024, precision=precision,
                             wide=True)
    assert any("_wide" in x.kernel for x in cuda._steps)
    worst = compare_one_step(cuda, ref, model, 256, n=1024, tol=TOLERANCES[precision])
    print(f"{precision} wide width 1024: worst error {max(worst.values()):.3f} of its bound")


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
@pytest.mark.parametrize("plan", ["ops", "fused"])
def test_check_kernels_in_precision_on_gpu(plan, precision):
    """Three real steps (the later ones after updates), every launch against its twin: the tile
    products within their precision's tolerance, the fp32 kernels within float32's."""
    model = base_shape(256)
    cuda, _ = backend_pair(model, TrainConfig(batch_size=256, loss="cross-entropy"), plan, _device(), n=1024,
                           check_kernels=3, precision=precision)
    cuda.train_steps(*schedule(4, 1024, 256))
    assert any(k.endswith(precision) for k in cuda.check_report)
    worst = max(max(v.values()) for v in cuda.check_report.values())
    print(f"check_kernels {plan} {precision}: worst error {worst:.3f} of its bound")
    assert worst <= 1.0
