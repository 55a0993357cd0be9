"""Golden check: 200 NumPy training steps from a fixed seed reproduce the stored losses, and the
exports built from the weights they reach are the stored files (tests/golden/record.py says how
the figures were made). Under the BLAS the figures were recorded with, the demand is bit-identity;
under another BLAS (another summation order) the losses must still agree closely."""

import json

import numpy as np
import pytest

from tests.golden import record

GOLDEN = json.loads(record.GOLDEN_FILE.read_text(encoding="utf-8"))
SAME_BLAS = record.blas_fingerprint() == GOLDEN["blas_fingerprint"]
# Another BLAS sums in another order: float32 rounding (≈ 6e-8 relative per operation) compounds
# over the steps, so only the early losses are held, to a bound far above that rounding and far
# below any change of arithmetic (a wrong gradient moves the loss by percents within 20 steps).
EARLY_STEPS, EARLY_RTOL = 20, 1e-4


@pytest.fixture(scope="module", params=record.PRESETS)
def run(request):
    losses, params = record.train_losses(request.param)
    return request.param, losses, params


def test_training_losses_match_golden(run):
    name, losses, _ = run
    golden = np.array(GOLDEN["presets"][name]["losses"])
    assert len(losses) == GOLDEN["steps"]
    if SAME_BLAS:
        np.testing.assert_array_equal(losses, golden)
    else:
        np.testing.assert_allclose(losses[:EARLY_STEPS], golden[:EARLY_STEPS], rtol=EARLY_RTOL)


@pytest.mark.skipif(not SAME_BLAS, reason="another BLAS: the exported floats may differ in the last bit")
def test_exports_match_golden(run):
    name, _, params = run
    golden = GOLDEN["presets"][name]
    assert record.export_hashes(name, params) == {k: golden[k] for k in ("onnx_fp32", "onnx_int8", "int8_plan")}


# The CUDA backend against the same golden losses. Its float32 sums run in another order than
# NumPy's, so the demand is a computed tolerance, not bit-identity: at every step, 4× the distance
# between the NumPy float32 and float64 losses (how far float32's rounding alone moved that step's
# loss) plus 16 float32 ulps of the loss — the same rule as the ONNX check (export/checks.py).
# On the CPU emulator (every CI run) the first steps only (it runs a kernel thread by thread);
# on a GPU (`make test-gpu`) all 200.
EMULATED_STEPS = {"litenet-base": 10, "litenet-seed": 20}


def cuda_tolerance(name: str, steps: int) -> np.ndarray:
    golden = GOLDEN["presets"][name]
    g32, g64 = np.array(golden["losses"][:steps]), np.array(golden["losses_float64"][:steps])
    return 4 * np.abs(g32 - g64) + 16 * np.finfo(np.float32).eps * np.abs(g64)


def assert_cuda_golden(name: str, losses: np.ndarray) -> None:
    golden = np.array(GOLDEN["presets"][name]["losses"][:len(losses)])
    excess = np.abs(losses - golden) - cuda_tolerance(name, len(losses))
    assert np.all(excess <= 0), f"step {int(np.argmax(excess))}: {losses[np.argmax(excess)]} vs {golden[np.argmax(excess)]}"


@pytest.mark.parametrize("name", record.PRESETS)
def test_cuda_kernels_on_the_emulator_reproduce_golden_losses(name):
    pytest.importorskip("shutil").which("g++") or pytest.skip("the CPU emulator needs g++")
    from tests.cuda.emulator.device import EmuDevice

    losses, _ = record.train_losses(name, EMULATED_STEPS[name], backend="cuda", device=EmuDevice(sm_count=8))
    assert_cuda_golden(name, losses)


@pytest.mark.gpu
@pytest.mark.parametrize("name", record.PRESETS)
def test_cuda_kernels_on_the_gpu_reproduce_golden_losses(name):
    losses, _ = record.train_losses(name, GOLDEN["steps"], backend="cuda")
    assert_cuda_golden(name, losses)
