"""The TensorRT backend against stand-ins for TensorRT and CuPy (tests/export/trt_standin.py): why it is
unavailable, case by case; an engine built by the exporter's build_engine, loaded and run through
TensorRTInference; the I/O bindings it makes; and the errors a damaged or mismatched engine gives."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
from trt_standin import FakeCupy, FakeTensorRT, serialize

from litenet.errors import LiteNetError
from litenet.export import tensorrt as trt_export
from litenet.runtime.model_files import ModelFiles
from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference
from litenet.runtime.tensorrt_backend import REBUILD, TensorRTInference

VERSION, CC = "10.3.0", "6.1"  # what the stand-ins say this machine has
PROFILE = {"min": 1, "opt": 4, "max": 8}  # small, so a few images take several engine runs


def install(monkeypatch, trt=None, cupy=None) -> tuple[FakeTensorRT | None, FakeCupy | None]:
    """Put the stand-ins where `import tensorrt` / `import cupy` find them (None: the module is missing)."""
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return trt, cupy


def write_engine(folder, trt: FakeTensorRT, version: str = VERSION, cc: str = CC, engine: bytes | None = None):
    """Build an engine of the folder's int8 model with `trt`, and write it and its JSON as the exporter does."""
    onnx_bytes = (folder / "model.int8.onnx").read_bytes()
    if engine is None:
        engine = trt_export.build_engine(onnx_bytes, trt=trt, profile=PROFILE)
    (folder / trt_export.ENGINE_FILE).write_bytes(engine)
    info = trt_export.engine_info(version, "Fake GPU", cc, onnx_bytes, profile=PROFILE)
    (folder / trt_export.ENGINE_INFO_FILE).write_text(json.dumps(info))
    return ModelFiles.locate(folder)


@pytest.fixture
def folder(model_dir, tmp_path):
    """A copy of the tiny exported model, to add an engine to."""
    return shutil.copytree(model_dir, tmp_path / "m")


@pytest.fixture
def fakes(monkeypatch):
    """A working TensorRT and GPU, as stand-ins."""
    gpu = FakeCupy(compute_capability=CC.replace(".", ""))
    return install(monkeypatch, FakeTensorRT(VERSION, gpu=gpu), gpu)


# --- why it is unavailable -------------------------------------------------------------------------

def test_it_says_why_without_an_engine_or_for_fp32(model_dir, folder, fakes):
    m = ModelFiles.locate(model_dir)
    no_engine = f"{m.describe()} has no model.int8.engine (litenet export builds one where TensorRT runs)"
    assert TensorRTInference.unavailable_reason(m, "int8") == no_engine
    assert TensorRTInference.unavailable_reason(m, "fp32") == no_engine  # not "int8 only": there is no engine
    with_engine = write_engine(folder, fakes[0])
    assert TensorRTInference.unavailable_reason(with_engine, "fp32") == "the TensorRT engine is int8 only; add --precision int8"


@pytest.mark.parametrize("case, reason", [
    ("no tensorrt", "the tensorrt Python package is not installed"),
    ("no cupy", "CuPy (for device buffers) is not installed"),
    ("no GPU", "no usable GPU (CUDARuntimeError)"),
    ("other TensorRT", f"engine built with TensorRT 8.6.1.6, this machine has {VERSION}; {REBUILD}"),
    ("other GPU", f"engine built for compute capability 9.0 (Fake GPU), this GPU is {CC}; {REBUILD}"),
    ("usable", None),
])
def test_each_missing_piece_gives_its_own_reason(folder, monkeypatch, case, reason):
    gpu = FakeCupy(compute_capability=CC.replace(".", ""), gpu=case != "no GPU")
    trt = FakeTensorRT(VERSION, gpu=gpu)
    m = write_engine(folder, trt, version="8.6.1.6" if case == "other TensorRT" else VERSION,
                     cc="9.0" if case == "other GPU" else CC)
    install(monkeypatch, None if case == "no tensorrt" else trt, None if case == "no cupy" else gpu)
    assert TensorRTInference.unavailable_reason(m, "int8") == reason


def test_an_engine_without_its_json_is_unavailable(folder, fakes):
    m = write_engine(folder, fakes[0])
    (folder / trt_export.ENGINE_INFO_FILE).unlink()
    m = ModelFiles.locate(folder)
    expected = f"{m.engine} has no model.int8.engine.json beside it; {REBUILD}"
    assert TensorRTInference.unavailable_reason(m, "int8") == expected
    with pytest.raises(LiteNetError) as err:
        TensorRTInference(m, "int8")
    assert str(err.value) == expected


# --- loading and running an engine -----------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 8, 20])  # one run, exactly the profile's maximum, and three runs (8, 8, 4)
def test_an_engine_computes_what_its_qdq_model_computes(folder, fakes, test_images, n):
    trt, gpu = fakes
    m = write_engine(folder, trt)
    backend = TensorRTInference(m, "int8")
    z = backend.predict(test_images[:n])
    assert z.dtype == np.float32 and z.shape == (n, len(backend.classes)) and len(backend.classes) == 10
    expected = OnnxRuntimeInference(ModelFiles.locate(folder), "int8", threads=1).predict(test_images[:n])
    np.testing.assert_array_equal(z, expected)  # the same ONNX Runtime arithmetic behind the stand-in engine
    assert gpu.synchronized == len(range(0, n, PROFILE["max"]))  # one wait per engine run


def test_each_run_binds_its_own_buffers_on_the_backend_stream(folder, fakes, test_images):
    trt, gpu = fakes
    backend = TensorRTInference(write_engine(folder, trt), "int8")
    backend.predict(test_images[:12])
    calls = trt.calls["bindings"]
    assert [c[0] for c in calls] == ["set_input_shape", "set_tensor_address", "set_tensor_address",
                                     "execute_async_v3"] * 2
    assert [c[1:] for c in calls if c[0] == "set_input_shape"] == [("images", (8, 32, 32, 3)), ("images", (4, 32, 32, 3))]
    assert {c[1] for c in calls if c[0] == "set_tensor_address"} == {"images", "logits"}
    assert [c[1] for c in calls if c[0] == "execute_async_v3"] == [backend.stream.ptr] * 2
    inputs = [c[2] for c in calls if c[0] == "set_tensor_address" and c[1] == "images"]
    outputs = [c[2] for c in calls if c[0] == "set_tensor_address" and c[1] == "logits"]
    assert len(set(inputs + outputs)) == 4  # fresh buffers for each run: no run reads another's input
    assert gpu.memory[inputs[0]].dtype == np.float32 and gpu.memory[inputs[0]].max() <= 1  # x / 255 on the device
    assert "Fake GPU" in backend.describe() and VERSION in backend.describe()


def test_no_images_give_no_logits_without_running_the_engine(folder, fakes):
    backend = TensorRTInference(write_engine(folder, fakes[0]), "int8")
    z = backend.predict(np.zeros((0, 32, 32, 3), np.uint8))
    assert z.shape == (0, 10) and z.dtype == np.float32 and fakes[0].calls["bindings"] == []


@pytest.mark.parametrize("images", [np.zeros((2, 28, 28, 3), np.uint8), np.zeros((2, 32, 32, 3), np.float32),
                                    np.zeros((32, 32, 3), np.uint8)])
def test_images_of_the_wrong_shape_or_type_are_refused_before_the_gpu(folder, fakes, images):
    backend = TensorRTInference(write_engine(folder, fakes[0]), "int8")
    with pytest.raises(ValueError, match=r"expected uint8 images of shape \(N, 32, 32, 3\), got"):
        backend.predict(images)
    assert fakes[0].calls["bindings"] == []


# --- what goes wrong with the files -----------------------------------------------------------------

def test_a_damaged_engine_is_refused_with_the_fix(folder, fakes):
    m = write_engine(folder, fakes[0], engine=b"\x00garbage")
    with pytest.raises(LiteNetError) as err:
        TensorRTInference(m, "int8")
    assert str(err.value) == f"{m.engine}: TensorRT could not deserialize it; {REBUILD}"


def test_a_mismatched_engine_is_refused_before_it_is_deserialized(folder, fakes):
    m = write_engine(folder, fakes[0], version="8.6.1.6")
    with pytest.raises(LiteNetError) as err:
        TensorRTInference(m, "int8")
    assert str(err.value) == f"{m.engine}: engine built with TensorRT 8.6.1.6, this machine has {VERSION}; {REBUILD}"
    assert "deserialized" not in fakes[0].calls


def test_an_engine_from_another_export_is_refused(folder, fakes):
    m = write_engine(folder, fakes[0])
    info = json.loads(m.engine_info.read_text())
    info["output"]["name"] = "probabilities"
    m.engine_info.write_text(json.dumps(info))
    with pytest.raises(LiteNetError) as err:
        TensorRTInference(ModelFiles.locate(folder), "int8")
    assert str(err.value) == (f"{m.engine} has no tensor 'probabilities' (it has images, logits), which its JSON "
                              f"names: the two files come from different exports; {REBUILD}")


def test_an_engine_with_another_class_count_is_refused(folder, fakes, monkeypatch):
    m = write_engine(folder, fakes[0])
    monkeypatch.setattr(ModelFiles, "classes", tuple(f"c{i}" for i in range(7)))
    with pytest.raises(LiteNetError) as err:
        TensorRTInference(m, "int8")
    assert str(err.value) == (f"{m.engine} has 10 outputs but the model's config names 7 classes; "
                              f"the engine comes from another model; {REBUILD}")


def test_a_profile_smaller_than_its_json_says_is_refused_with_the_fix(folder, fakes, test_images):
    onnx_bytes = (folder / "model.int8.onnx").read_bytes()
    small = serialize(onnx_bytes, ("images", (1, 32, 32, 3), (2, 32, 32, 3), (4, 32, 32, 3)))  # JSON: up to 8
    backend = TensorRTInference(write_engine(folder, fakes[0], engine=small), "int8")
    with pytest.raises(LiteNetError) as err:
        backend.predict(test_images[:6])
    assert str(err.value) == (f"{backend.path}: TensorRT refused input shape (6, 32, 32, 3), within the batch "
                              f"profile its JSON gives (1 to 8); {REBUILD}")


def test_a_failed_run_raises(folder, monkeypatch, test_images):
    gpu = FakeCupy(compute_capability=CC.replace(".", ""))
    trt, _ = install(monkeypatch, FakeTensorRT(VERSION, gpu=gpu, executes=False), gpu)
    backend = TensorRTInference(write_engine(folder, trt), "int8")
    with pytest.raises(RuntimeError, match="TensorRT execute_async_v3 failed"):
        backend.predict(test_images[:3])
