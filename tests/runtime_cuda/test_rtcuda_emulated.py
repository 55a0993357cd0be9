"""The CUDA inference backend on the CPU emulator (no GPU): every shape × precision × way of running
against ONNX Runtime and the NumPy twins, the int8 layers bit for bit, graphs, chunks, availability."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import rtcuda_checks as rc
from rtcuda_checks import MODEL_SHAPES

from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles

PRESETS = ("litenet-seed", "litenet-base")
# The one-launch kernel runs with one block here (the emulator runs blocks one after another, so a
# grid barrier could never be met by more); "phases" runs the same code per phase with 3 blocks.
MODES = (("fused", 1), ("phases", 3), ("tiles", 3))


def batch_for(shape: str, mode: str) -> int:
    """Sizes past a row group (8) and a tile (64); the emulated rows kernels are slow at preset sizes."""
    if mode == "tiles":
        return 67
    return 2 if shape in PRESETS else 9


def backend(models, shape, precision, device, mode, grid, **options):
    return CudaInference(ModelFiles.locate(models[shape]), precision, device=device, mode=mode, fused_grid=grid,
                         **options)


@pytest.mark.parametrize("mode,grid", MODES, ids=[m for m, _ in MODES])
@pytest.mark.parametrize("shape", MODEL_SHAPES)
def test_fp32_matches_onnxruntime(models, images, emu_device, shape, mode, grid):
    be = backend(models, shape, "fp32", emu_device, mode, grid)
    rc.check_fp32(be, models[shape], images[:batch_for(shape, mode)])


@pytest.mark.parametrize("mode,grid", MODES, ids=[m for m, _ in MODES])
@pytest.mark.parametrize("shape", MODEL_SHAPES)
def test_int8_matches_plan_and_onnxruntime(models, images, emu_device, shape, mode, grid):
    be = backend(models, shape, "int8", emu_device, mode, grid)
    out = rc.check_int8(be, models[shape], images[:batch_for(shape, mode)])
    assert out["exact_vs_plan"] > 0.5  # most images bit for bit: the same integers, the same rounding


@pytest.mark.parametrize("shape", MODEL_SHAPES)
def test_int8_layers_follow_the_plan_exactly(models, images, emu_device, shape):
    rc.check_int8_layers(backend(models, shape, "int8", emu_device, "tiles", 3), models[shape], images[:67])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_fused_rows_do_not_depend_on_the_batch(models, images, emu_device, precision):
    """Each image's sums run in the same order whatever else is in the batch (and whatever row group)."""
    be = backend(models, "full-shift", precision, emu_device, "fused", 1)
    together = be.predict(images[:10])
    alone = np.concatenate([be.predict(images[i:i + 1]) for i in (0, 9)])
    np.testing.assert_array_equal(together[[0, 9]], alone)


@pytest.mark.parametrize("mode", ["fused", "tiles"])
def test_repeated_batch_size_replays_a_graph(models, images, emu_device, mode):
    be = backend(models, "full-shift", "int8", emu_device, mode, 1)
    first = be.predict(images[:5])
    run = be.prepare(5)
    assert run.graph is None and run.runs == 1
    before = emu_device.launches
    second = be.predict(images[:5])
    assert run.graph is not None and emu_device.launches - before == len(run.launches)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(be.predict(images[5:10]), backend(
        models, "full-shift", "int8", emu_device, mode, 1, graphs=False).predict(images[5:10]))


def test_predict_splits_large_inputs(models, images, emu_device):
    whole = backend(models, "seed-like", "fp32", emu_device, "tiles", 3).predict(images[:11])
    parts = backend(models, "seed-like", "fp32", emu_device, "tiles", 3, chunk=4).predict(images[:11])
    np.testing.assert_array_equal(whole, parts)


def test_auto_mode_picks_one_launch_for_small_batches(models, emu_device):
    be = CudaInference(ModelFiles.locate(models["seed-like"]), "fp32", device=emu_device, fused_max_batch=16)
    assert [be.mode_for(b) for b in (1, 16, 17, 4096)] == ["fused", "fused", "tiles", "tiles"]
    assert be.classes == ModelFiles.locate(models["seed-like"]).classes


def test_one_launch_refuses_more_blocks_than_multiprocessors(models, images, emu_device):
    """Its grid barrier needs every block resident: a grid past the SM count would hang, so it is refused."""
    from litenet.errors import LiteNetError

    be = backend(models, "seed-like", "fp32", emu_device, "fused", emu_device.sm_count + 1)
    with pytest.raises(LiteNetError, match="every block resident"):
        be.predict(images[:1])


def test_predict_refuses_wrong_images(models, emu_device):
    be = backend(models, "seed-like", "fp32", emu_device, "tiles", 3)
    with pytest.raises(ValueError):
        be.predict(np.zeros((2, 32, 32, 3), np.float32))
    assert be.predict(np.zeros((0, 32, 32, 3), np.uint8)).shape == (0, 10)


def test_unavailable_reasons(models, tmp_path):
    folder = models["seed-like"]
    only_plan = ModelFiles.locate(folder / "model.int8.plan.safetensors")
    assert "weights.safetensors" in CudaInference.unavailable_reason(only_plan, "fp32")
    (tmp_path / "model.onnx").write_bytes((folder / "model.onnx").read_bytes())
    assert "model.int8.plan" in CudaInference.unavailable_reason(ModelFiles.locate(tmp_path), "int8")
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert "CuPy" in CudaInference.unavailable_reason(ModelFiles.locate(folder), "fp32")


def test_runtime_side_imports_no_trainer_or_exporter():
    code = ("import sys, litenet.runtime.cuda_backend, litenet.lowering.fast.rows, litenet.runtime.cuda_net; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('onnx', 'cupy') or m.startswith(('litenet.train', "
            "'litenet.export'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
