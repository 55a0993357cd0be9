"""`litenet-infer --backend cuda` on a network that is a layer list (neither the MLP nor the Mixer family):
the op-list lowering's forward program on the CPU emulator, against the NumPy forward, in both kernel
tiers, over batch sizes that repeat (graph capture) and a batch split into chunks."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lowering"))  # the lowering tests' networks

from litenet import forward
from litenet.errors import LiteNetError
from litenet.graph import ops_of
from litenet.lowering.forward import ForwardRun
from litenet.model import param_views
from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles


@pytest.fixture(scope="module")
def emu():
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    from emulator.device import EmuDevice
    return EmuDevice(sm_count=3)


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    import export_fixtures as fx
    from networks import MIXED

    from litenet.export.pipeline import ExportOptions, export_model

    folder = tmp_path_factory.mktemp("rtcuda-layers")
    params = fx.write_model(folder, MIXED, seed=3)
    with pytest.MonkeyPatch.context() as mp:  # the export's check images: synthetic, no CIFAR-10 needed
        ds = fx.fake_dataset()
        mp.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
        export_model(folder, options=ExportOptions(int8=False, engine=False), log=lambda line: None)  # as a user's folder
    return folder, MIXED, params


def numpy_logits(model, params, images):
    return forward.logits(ops_of(model), param_views(params.astype(np.float64), model), images)


def test_a_layer_list_runs_in_cuda_inference_as_in_numpy(emu, mixed_folder, images):
    folder, model, params = mixed_folder
    backend = CudaInference(ModelFiles.locate(folder), "fp32", device=emu, chunk=5)
    assert backend.family == "layers" and "lowering" in backend.describe()
    x = images[:7]
    want = numpy_logits(model, params, x)
    for _ in range(2):  # the second pass of each size replays a captured graph
        got = backend.predict(x)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
    assert sorted(backend._runs) == [2, 5]  # 7 images in chunks of 5: sizes 5 and 2


@pytest.mark.parametrize("kernels", ["reference", "fast"])
def test_the_forward_run_of_either_tier_is_the_numpy_forward(emu, mixed_folder, images, kernels):
    _folder, model, params = mixed_folder
    run = ForwardRun.lowered(model, params, emu, 3, kernels=kernels)
    emu.upload(run.pixels, images[:3].reshape(3, 3072))
    for launch in run.launches:
        emu.launch(launch)
    want = numpy_logits(model, params, images[:3])
    np.testing.assert_allclose(emu.download(run.logits), want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_a_layer_list_int8_on_cuda_is_refused_in_one_line(emu, mixed_folder):
    folder, _model, _params = mixed_folder
    files = ModelFiles.locate(folder)
    reason = CudaInference.unavailable_reason(files, "int8")
    assert reason and "onnxruntime" in reason and "\n" not in reason
    with pytest.raises(LiteNetError, match="onnxruntime"):
        CudaInference(files, "int8", device=emu)
