"""`litenet-infer --video` and `litenet bench-infer` through LiteNet's CUDA backend, on the CPU emulator:
the commands reach the backend through the registry exactly as on a GPU (only the device differs), so
the GPU session (bench/infer_tool_session.sh) runs code these tests have run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from litenet.cli import main as litenet_main
from litenet.runtime import backends
from litenet.runtime import cli as infer_cli
from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
cv2 = pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """One tiny MLP, trained format + export --int8 (random weights, synthetic calibration images)."""
    import export_fixtures as fx

    from litenet.export.pipeline import ExportOptions, export_model

    folder = tmp_path_factory.mktemp("rtcuda-video")
    fx.write_model(folder, fx.SHAPES["full-shift"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("litenet.data.open_cifar10", lambda **kwargs: fx.fake_dataset())
        export_model(folder, options=ExportOptions(int8=True, calib=256, engine=False), log=lambda line: None)
    return folder


@pytest.fixture
def emulated_cuda(monkeypatch, emu_device):
    """The registry's "cuda" entry, on the emulator: what --backend cuda and bench-infer construct."""

    class EmulatedCuda(CudaInference):
        @classmethod
        def unavailable_reason(cls, model, precision):
            return None

        def __init__(self, model, precision, **options):
            options.pop("device", None)
            super().__init__(model, precision, device=emu_device, fused_grid=1, **options)

    real = backends.load_class
    monkeypatch.setattr(backends, "load_class", lambda name: (EmulatedCuda, None) if name == "cuda" else real(name))
    return EmulatedCuda


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, np.ndarray]:
    import export_fixtures as fx
    import video_clip

    images = fx.images(6, seed=3)
    path = tmp_path_factory.mktemp("clip") / "clip.avi"
    video_clip.write_clip(path, images, hold=1)
    return path, images


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_video_on_the_cuda_backend_predecoded(capsys, tiny_model, emulated_cuda, emu_device, clip, precision):
    path, images = clip
    code = infer_cli.main(["--video", str(path), "--model", str(tiny_model), "--backend", "cuda",
                           "--precision", precision, "--predecode", "--batch-size", "4", "--video-threads", "2",
                           "--json"])
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    *frames, summary = rows
    assert code == 0, err
    assert [r["frame"] for r in frames] == list(range(6)) and [r["batch"] for r in frames] == [4] * 4 + [2] * 2
    assert {r["backend"] for r in frames} == {"cuda"} and summary["predecoded"] and summary["backend"] == "cuda"
    # the frames are the images bit for bit (lossless clip), so the logits are the backend's on the stills
    stills = emulated_cuda(ModelFiles.locate(tiny_model), precision).predict(images)
    np.testing.assert_array_equal(np.float32([r["logits"] for r in frames]), stills)


def test_bench_infer_measures_the_cuda_backend(capsys, tiny_model, emulated_cuda):
    code = litenet_main(["bench-infer", str(tiny_model), "--backend", "cuda", "onnxruntime", "--precision", "int8",
                         "--batch", "1", "3", "--threads", "1", "--loops", "2", "--warmup", "1", "--cooldown", "0",
                         "--json", "--quiet"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert code == 0, err
    assert [(r["backend"], r["threads"], r["batch"]) for r in report["rows"]] == [
        ("cuda", None, 1), ("cuda", None, 3), ("onnxruntime", 1, 1), ("onnxruntime", 1, 3)]
    assert report["rows"][0]["runs"].startswith("LiteNet CUDA kernels, int8, on ")
