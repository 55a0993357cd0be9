"""The MLP's CudaBackend in TF32 and BF16 on the CPU emulator (which runs mma.cuh's fragment code): every
tile product runs its `_tf32` / `_bf16` kernel and nothing else changes; a step's gradient and statistics
equal float64 NumPy's within the precision's computed tolerance (check.TOLERANCES); check_kernels holds
each product to its twin at that tolerance; the refusals name the fix. Small models keep the emulator quick."""

import numpy as np
import pytest
from backend_helpers import backend_pair, compare_one_step, data, schedule
from emulator import WGMMA
from emulator.device import EmuDevice

from litenet.errors import UsageError
from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train.cuda.backend import CudaBackend
from litenet.train.cuda.check import TOLERANCES
from litenet.train.reference import bf16_copy

SMALL = ModelConfig(width=16, hidden=40, blocks=2)
TRAIN = TrainConfig(batch_size=12, lr_base=0.2)
PRODUCTS = ("embed_forward", "embed_backward", "linear_forward", "linear_gelu_forward", "linear_backward_input",
            "linear_backward_weight", "linear_backward_input_gelu")


def backend(precision, plan="ops", embed="tiles", device=None, **options):
    return CudaBackend(SMALL, TRAIN, init_params(SMALL, 0), plan=plan, embed=embed, device=device or EmuDevice(),
                       precision=precision, **options)


def base_name(kernel: str) -> str:
    return kernel.removesuffix("_tf32").removesuffix("_bf16").removesuffix("_tall").removesuffix("_wide")


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
@pytest.mark.parametrize("plan", ["ops", "fused"])
def test_every_tile_product_and_only_they_change_kernel(precision, plan):
    cuda = backend(precision, plan)
    cuda.load_dataset(*data())
    suffix = {"fp32": "", "tf32": "_tf32", "bf16": "_bf16"}[precision]
    for launch in cuda._steps + cuda._eval:
        if base_name(launch.kernel) in PRODUCTS:
            assert launch.kernel == base_name(launch.kernel) + suffix, launch.kernel
        else:
            assert not launch.kernel.endswith(("_tf32", "_bf16")), launch.kernel
    assert cuda.memory_report()["precision"] == precision


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
@pytest.mark.parametrize("plan", ["ops", "fused"])
def test_one_step_equals_reference_within_precision(precision, plan):
    """The gradient of one step against float64 NumPy, allowed the precision's error for the chain
    of sums behind it (the fused plan: the embedding's tile product on the tensor cores)."""
    cuda, ref = backend_pair(SMALL, TRAIN, plan, EmuDevice(), dtype=np.float64, embed="tiles", precision=precision)
    compare_one_step(cuda, ref, SMALL, 12, tol=TOLERANCES[precision])


@pytest.mark.parametrize("defines", [(), WGMMA], ids=["mma", "wgmma"])
def test_wide_tiles_run_every_product_and_equal_reference(defines):
    """wide=True: every tile product of the step in wide (128 × 128) BF16 tiles (gemm_wide.cuh; `wgmma`: as a
    Hopper compilation builds them), each launch held to its twin by check_kernels, and the step's
    gradient equal to float64 NumPy's within BF16's tolerance (the choice in use, geometry.choose_wide,
    picks them only for large products)."""
    cuda = backend("bf16", wide=True, check_kernels=1, device=EmuDevice(defines=defines))
    cuda.load_dataset(*data())
    products = [x.kernel for x in cuda._steps if base_name(x.kernel) in PRODUCTS]
    assert products and all(k.endswith("_wide_bf16") for k in products), products
    cuda.train_steps(*schedule(1, 40, 12))
    assert max(max(v.values()) for v in cuda.check_report.values()) <= 1.0
    cuda, ref = backend_pair(SMALL, TRAIN, "ops", EmuDevice(defines=defines), dtype=np.float64, embed="tiles",
                             precision="bf16", wide=True)
    compare_one_step(cuda, ref, SMALL, 12, tol=TOLERANCES["bf16"])


def test_wide_bf16_products_read_the_parameters_loaded_not_those_before():
    """The wide BF16 products read the parameters' BF16 copy, which the update keeps: after load_state
    (a resumed run) it must be remade from the loaded parameters, or every product of the next step
    would multiply by the old weights — check_kernels holds each product to the twin of the fp32
    parameters, and the update's copy to the rounding of what it wrote (three steps in all)."""
    trained = backend("bf16", wide=True)
    trained.load_dataset(*data())
    trained.train_steps(*schedule(1, 40, 12))
    resumed = CudaBackend(SMALL, TRAIN, init_params(SMALL, 7), plan="ops", embed="tiles", device=EmuDevice(),
                          precision="bf16", wide=True, check_kernels=2)
    resumed.load_dataset(*data())
    resumed.load_state(trained.state())
    resumed.train_steps(*schedule(2, 40, 12))
    assert max(max(v.values()) for v in resumed.check_report.values()) <= 1.0
    copy = resumed.dev.download(resumed.v["P16"])
    assert copy.size == resumed.v["params"].size
    np.testing.assert_array_equal(copy, bf16_copy(resumed.state()["params"]))


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_check_kernels_holds_each_product_to_its_precision(precision):
    cuda = backend(precision, check_kernels=2)
    cuda.load_dataset(*data())
    cuda.train_steps(*schedule(2, 40, 12))
    products = {k: v for k, v in cuda.check_report.items() if k.endswith(precision)}
    assert {base_name(k) for k in products} >= {"embed_forward", "linear_gelu_forward", "linear_backward_weight"}
    assert max(max(v.values()) for v in cuda.check_report.values()) <= 1.0


def test_refusals_name_the_fix():
    class Pascal(EmuDevice):
        capability = "sm_61"

    with pytest.raises(UsageError, match="tensor cores"):
        CudaBackend(SMALL, TRAIN, init_params(SMALL, 0), device=Pascal(), precision="bf16")
    with pytest.raises(UsageError, match="fp32 only"):
        backend("tf32", tall=True)
    with pytest.raises(UsageError, match="fp32 or BF16"):
        backend("tf32", wide=True)
    with pytest.raises(UsageError, match="precision must be"):
        backend("fp16")
    assert backend("tf32", tall=False).precision == "tf32"
