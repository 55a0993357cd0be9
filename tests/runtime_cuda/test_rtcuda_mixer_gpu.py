"""The CUDA inference of Mixer models on a real GPU (skipped without CuPy and a GPU): litenet-mixer and
litenet-mixer-cpu at their real sizes (tiny_params' seeded weights, exported here with 128 synthetic
calibration images, weights rounded to nearest: about 30 s a preset), fp32 against the NumPy forward and ONNX Runtime, int8 against the plan's executor
and the QDQ model, int8 launch by launch, batches from 1 to 4096 and a chunked 5,000. When
LITENET_RTCUDA_MODELS names a folder of trained models (subfolders with weights, ONNX files and the plan)
and a test_images.npy, its Mixers are checked on those images too. LITENET_RTCUDA_MIXER_REPORT=file.json
collects the figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from mixer_checks import (
    check_mixer_fp32,
    check_mixer_int8,
    check_mixer_int8_layers,
    export_mixer,
)

from litenet.model import load_preset
from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles

pytestmark = pytest.mark.gpu

PRESETS = ("litenet-mixer", "litenet-mixer-cpu")
BATCHES = (1, 7, 256)  # (4096: test_batch_4096_…; the NumPy references of many more images take minutes)
REAL = Path(os.environ.get("LITENET_RTCUDA_MODELS", "/nonexistent"))
REAL_MIXERS = sorted(p.name for p in REAL.iterdir() if (p / "config.json").is_file()
                     and ModelFiles.locate(p).family() == "mixer") if REAL.is_dir() else []


@pytest.fixture(scope="session")
def device():
    from litenet.gpu.device import CupyDevice
    return CupyDevice()


@pytest.fixture(scope="session")
def mixer_report():
    figures: dict = {}
    yield figures
    path = os.environ.get("LITENET_RTCUDA_MIXER_REPORT")
    if path:
        Path(path).write_text(json.dumps(figures, indent=1, default=float))


@pytest.fixture(scope="session")
def presets(tmp_path_factory) -> dict:
    return {p: export_mixer(tmp_path_factory.mktemp(p), load_preset(p).model, calib=128, quick=True) for p in PRESETS}


@pytest.fixture(scope="session")
def many_images():
    import export_fixtures as fx
    return fx.images(5000, seed=9)


def _backend(folder, precision, device, **options):
    return CudaInference(ModelFiles.locate(folder), precision, device=device, **options)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("preset", PRESETS)
def test_matches_references_on_gpu(presets, many_images, device, mixer_report, preset, precision, batch):
    check = check_mixer_fp32 if precision == "fp32" else check_mixer_int8
    be = _backend(presets[preset], precision, device)
    mixer_report[f"mixer-{preset}-{precision}-{batch}"] = check(be, presets[preset], many_images[:batch])


@pytest.mark.parametrize("preset", PRESETS)
def test_int8_launches_follow_the_plan_on_gpu(presets, many_images, device, mixer_report, preset):
    be = _backend(presets[preset], "int8", device)
    mixer_report[f"mixer-layers-{preset}"] = check_mixer_int8_layers(be, presets[preset], many_images[:64])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_batch_4096_chunks_and_graph_replay_on_gpu(presets, many_images, device, mixer_report, precision):
    """5,000 images run as 4,096 + 904; each image's logits as in small batches (int8: bit for bit, its
    sums are exact and every other step is per image; fp32: a small batch may split its sums over more
    blocks, so within the fp32 tolerance); three graph replays of batch 1 bit for bit."""
    folder = presets["litenet-mixer"]
    be = _backend(folder, precision, device)
    big = be.predict(many_images)
    assert be.prepare(4096).size == 4096 and be.prepare(904).size == 904
    small = np.concatenate([be.predict(many_images[i:i + 250]) for i in (0, 4000, 4750)])
    rows = np.r_[0:250, 4000:4250, 4750:5000]
    if precision == "int8":
        np.testing.assert_array_equal(big[rows], small)
    else:
        mixer_report["mixer-4096-fp32"] = check_mixer_fp32(_Fixed(big[:300]), folder, many_images[:300])
        np.testing.assert_allclose(big[rows], small, rtol=0, atol=mixer_report["mixer-4096-fp32"]["tolerance"])
    first = be.predict(many_images[:1])
    for _ in range(3):
        np.testing.assert_array_equal(be.predict(many_images[:1]), first)
    assert be.prepare(1).graph is not None


@pytest.mark.parametrize("batch", (1, 2, 8))
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_one_launch_forward_on_gpu(presets, many_images, device, mixer_report, precision, batch):
    """infer_mixer.cu with every SM's block resident behind its grid barriers: the NumPy forward (fp32) or
    the plan's executor (int8) within their tolerances, its phases launched one by one bit for bit, 20
    graph replays bit for bit (the barrier's counters are left at zero for the next replay)."""
    folder = presets["litenet-mixer"]
    fused = _backend(folder, precision, device, mode="fused")
    assert len(fused.prepare(batch).launches) == 1
    check = check_mixer_fp32 if precision == "fp32" else check_mixer_int8
    mixer_report[f"mixer-rows-{precision}-{batch}"] = check(fused, folder, many_images[:batch])
    first = fused.predict(many_images[:batch])
    for _ in range(20):
        np.testing.assert_array_equal(fused.predict(many_images[:batch]), first)
    phases = _backend(folder, precision, device, mode="phases").predict(many_images[:batch])
    np.testing.assert_array_equal(phases, first)


@pytest.mark.skipif(not REAL_MIXERS, reason="LITENET_RTCUDA_MODELS names no folder of trained Mixers")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("name", REAL_MIXERS)
def test_trained_mixers_on_test_images(device, mixer_report, name, precision):
    images = np.load(REAL / "test_images.npy")
    be = _backend(REAL / name, precision, device)
    check = check_mixer_fp32 if precision == "fp32" else check_mixer_int8
    mixer_report[f"trained-{name}-{precision}-{len(images)}"] = check(be, REAL / name, images)


class _Fixed:
    """A backend stand-in that answers with logits already computed (the 4,096-image batch's)."""

    def __init__(self, logits):
        self.logits = logits

    def predict(self, images):
        return self.logits[:len(images)]
