"""The CUDA inference backend on a real GPU (skipped without CuPy and a GPU): the emulator's checks with
the one-launch kernel on every SM, at batch sizes up to 4096, and — when LITENET_RTCUDA_MODELS names
a folder of trained models (subfolders with weights, ONNX files and the plan) and a test_images.npy —
on real CIFAR-10 test images. LITENET_RTCUDA_REPORT=file.json collects the figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import rtcuda_checks as rc
from rtcuda_checks import MODEL_SHAPES

from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles

pytestmark = pytest.mark.gpu

CASES = [("fused", 1), ("fused", 7), ("fused", 33), ("phases", 9), ("tiles", 67), ("tiles", 1000)]
REAL = Path(os.environ.get("LITENET_RTCUDA_MODELS", "/nonexistent"))
REAL_MODELS = sorted(p.name for p in REAL.iterdir() if (p / "config.json").is_file()
                     and ModelFiles.locate(p).family() == "mlp") if REAL.is_dir() else []  # Mixers: test_rtcuda_mixer_gpu.py


@pytest.fixture(scope="session")
def device():
    from litenet.gpu.device import CupyDevice
    return CupyDevice()


@pytest.fixture(scope="session")
def report():
    figures: dict = {}
    yield figures
    path = os.environ.get("LITENET_RTCUDA_REPORT")
    if path:
        Path(path).write_text(json.dumps(figures, indent=1, default=float))


@pytest.fixture(scope="session")
def many_images():
    import export_fixtures as fx
    return fx.images(1000, seed=9)


def _backend(folder, precision, device, mode, **options):
    return CudaInference(ModelFiles.locate(folder), precision, device=device, mode=mode, **options)


@pytest.mark.parametrize("mode,batch", CASES, ids=[f"{m}-{b}" for m, b in CASES])
@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("shape", MODEL_SHAPES)
def test_matches_references_on_gpu(models, many_images, device, report, shape, precision, mode, batch):
    be = _backend(models[shape], precision, device, mode)
    check = rc.check_fp32 if precision == "fp32" else rc.check_int8
    report[f"random-{shape}-{precision}-{mode}-{batch}"] = check(be, models[shape], many_images[:batch])


@pytest.mark.parametrize("shape", MODEL_SHAPES)
def test_int8_layers_follow_the_plan_exactly_on_gpu(models, many_images, device, report, shape):
    be = _backend(models[shape], "int8", device, "tiles")
    report[f"layers-{shape}"] = rc.check_int8_layers(be, models[shape], many_images[:300])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_graph_replay_and_batch_invariance_on_gpu(models, many_images, device, precision):
    be = _backend(models["litenet-base"], precision, device, "fused")
    first = be.predict(many_images[:1])
    again = [be.predict(many_images[:1]) for _ in range(3)]
    assert be.prepare(1).graph is not None
    for z in again:
        np.testing.assert_array_equal(first, z)  # a race in the grid barrier would show up here
    together = be.predict(many_images[:20])
    np.testing.assert_array_equal(together[:1], first)
    eager = _backend(models["litenet-base"], precision, device, "phases").predict(many_images[:20])
    np.testing.assert_array_equal(together, eager)  # one launch = one launch per phase, bit for bit


@pytest.mark.skipif(not REAL_MODELS, reason="LITENET_RTCUDA_MODELS names no folder of trained models")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("name", REAL_MODELS)
def test_trained_models_on_test_images(device, report, name, precision):
    images = np.load(REAL / "test_images.npy")
    be = CudaInference(ModelFiles.locate(REAL / name), precision, device=device)  # auto: tiles for the big batch
    check = rc.check_fp32 if precision == "fp32" else rc.check_int8
    report[f"trained-{name}-{precision}-auto-{len(images)}"] = check(be, REAL / name, images)
    report[f"trained-{name}-{precision}-fused-1x64"] = check(_OneByOne(be), REAL / name, images[:64])


class _OneByOne:
    """predict() one image at a time: batch 1, the one-launch kernel replayed from its graph."""

    def __init__(self, backend):
        self.backend = backend

    def predict(self, images):
        return np.concatenate([self.backend.predict(images[i:i + 1]) for i in range(len(images))])
