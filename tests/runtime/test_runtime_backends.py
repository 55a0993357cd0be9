"""Backends on real exported tiny models: ONNX Runtime fp32 ≡ NumPy forward, int8 ≡ plan; model files; auto selection."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from litenet.errors import LiteNetError
from litenet.runtime import backends, model_files
from litenet.runtime.model_files import ModelFiles
from litenet.runtime.onnxruntime_backend import SMALL_BATCH, OnnxRuntimeInference, physical_cores

from runtime_fixtures import EXPORTED, fx

# The bound for ONNX Runtime fp32 against the NumPy forward; the export's computed
# tolerance (4 × the float32 forward's own error, floored at 8 ulp) must hold as well.
FP32_ATOL = 1e-5


@pytest.mark.parametrize("shape", EXPORTED)
def test_onnxruntime_fp32_equals_numpy_forward(exported, test_images, shape):
    from litenet.export.checks import fp32_tolerance
    from litenet.train import network
    from litenet.weights import load_model

    params, model, _, _ = load_model(exported[shape])
    backend = OnnxRuntimeInference(ModelFiles.locate(exported[shape]), "fp32")
    z = backend.predict(test_images)
    z32 = network.forward(params, test_images, model).z
    z64 = network.forward(params.astype(np.float64), test_images, model).z
    assert z.dtype == np.float32 and z.shape == (len(test_images), 10)
    diff = np.abs(z - z32).max()
    assert diff <= FP32_ATOL and diff <= fp32_tolerance(z32, z64)
    np.testing.assert_array_equal(z.argmax(1), z32.argmax(1))


@pytest.mark.parametrize("shape", EXPORTED)
def test_onnxruntime_int8_agrees_with_the_plan_executor(exported, test_images, shape):
    from litenet.export.checks import plan_agreement
    from litenet.runtime.int8_plan import load_plan, run_plan

    folder = exported[shape]
    z8 = OnnxRuntimeInference(ModelFiles.locate(folder), "int8").predict(test_images)
    z_plan = run_plan(load_plan(folder / model_files.PLAN), test_images)
    agreement = plan_agreement(z_plan, z8)
    # docs/int8-plan.md: equal up to float rounding, except a rare activation that rounds to the
    # neighbouring integer; the argmax must agree (≥ 99.9 % there; all of 64 images here).
    assert agreement["argmax_agreement"] == 1.0
    assert agreement["images_with_rounding_flips"] <= 2


def test_batches_of_any_size_give_the_same_logits(model_dir, test_images):
    backend = OnnxRuntimeInference(ModelFiles.locate(model_dir), "fp32")
    whole = backend.predict(test_images[:10])
    one_by_one = np.concatenate([backend.predict(test_images[i:i + 1]) for i in range(10)])
    np.testing.assert_allclose(one_by_one, whole, atol=FP32_ATOL, rtol=0)


def test_thread_choice(model_dir):
    files = ModelFiles.locate(model_dir)
    assert OnnxRuntimeInference(files, "fp32", max_batch=1).threads == 1
    assert OnnxRuntimeInference(files, "fp32", max_batch=SMALL_BATCH + 1).threads == physical_cores()
    assert OnnxRuntimeInference(files, "fp32", threads=2, max_batch=1).threads == 2
    assert 1 <= physical_cores() <= (__import__("os").cpu_count() or 1)


def test_classes_come_from_the_model(model_dir):
    backend = OnnxRuntimeInference(ModelFiles.locate(model_dir), "fp32")
    assert backend.classes == fx.CLASSES


# --- ModelFiles ---------------------------------------------------------------------------------

def test_folder_lists_its_files(model_dir):
    m = ModelFiles.locate(model_dir)
    assert m.fp32_onnx.name == "model.onnx" and m.int8_onnx.name == "model.int8.onnx"
    assert m.plan.name == model_files.PLAN and m.weights.name == "weights.safetensors"
    assert m.engine is None and m.config.name == "config.json"
    assert m.precisions() == ["fp32", "int8"] and m.default_precision() == "fp32"
    assert m.classes == fx.CLASSES and m.preset() == "tiny-test"


@pytest.mark.parametrize("name,slot,precision", [("model.onnx", "fp32_onnx", "fp32"),
                                                 ("model.int8.onnx", "int8_onnx", "int8"),
                                                 (model_files.PLAN, "plan", "int8")])
def test_single_file_reads_its_own_class_names(model_dir, tmp_path, name, slot, precision):
    shutil.copy(model_dir / name, tmp_path / name)  # no config.json beside it
    m = ModelFiles.locate(tmp_path / name)
    assert getattr(m, slot) == tmp_path / name and m.single_file
    assert m.default_precision() == precision and m.precisions() == [precision]
    assert m.classes == fx.CLASSES


def test_renamed_onnx_file(model_dir, tmp_path):
    shutil.copy(model_dir / "model.int8.onnx", tmp_path / "mine-int8.onnx")
    assert ModelFiles.locate(tmp_path / "mine-int8.onnx").int8_onnx is not None
    shutil.copy(model_dir / "model.onnx", tmp_path / "mine.onnx")
    assert ModelFiles.locate(tmp_path / "mine.onnx").fp32_onnx is not None


def test_safetensors_metadata_without_the_package(model_dir):
    from safetensors import safe_open

    with safe_open(str(model_dir / model_files.PLAN), framework="numpy") as f:
        expected = f.metadata()
    assert model_files.safetensors_metadata(model_dir / model_files.PLAN) == expected


@pytest.mark.parametrize("make,match", [
    (lambda p: p / "absent", "no such model file or folder"),
    (lambda p: p, "no model.onnx or model.int8.onnx"),
    (lambda p: (p / "notes.txt").write_text("x") and p / "notes.txt", "not a LiteNet model file"),
])
def test_model_path_mistakes(tmp_path, make, match):
    with pytest.raises(LiteNetError, match=match):
        ModelFiles.locate(make(tmp_path))


def test_text_file_named_model_onnx(tmp_path):
    (tmp_path / "model.onnx").write_text("not a model\n")
    files = ModelFiles.locate(tmp_path)
    with pytest.raises(LiteNetError, match="not a loadable ONNX model.*re-run `litenet export`"):
        OnnxRuntimeInference(files, "fp32")


def test_foreign_onnx_model_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7),
              str(tmp_path / "model.onnx"))
    with pytest.raises(LiteNetError, match="not a LiteNet model"):
        OnnxRuntimeInference(ModelFiles.locate(tmp_path), "fp32")


def test_config_naming_other_classes_is_refused(model_dir, tmp_path):
    for name in ("model.onnx", "config.json"):
        shutil.copy(model_dir / name, tmp_path / name)
    doc = json.loads((tmp_path / "config.json").read_text())
    doc["classes"] = ["a", "b"]
    (tmp_path / "config.json").write_text(json.dumps(doc))
    with pytest.raises(LiteNetError, match="10 outputs but its config names 2 classes"):
        OnnxRuntimeInference(ModelFiles.locate(tmp_path), "fp32")


def test_shipped_model_is_the_default(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("litenet.resources.models_dir", lambda: tmp_path)
    with pytest.raises(LiteNetError, match="shipped model .* is missing.*make ship-model"):
        ModelFiles.locate(None)
    shutil.copytree(model_dir, tmp_path / model_files.DEFAULT_MODEL)
    assert ModelFiles.locate(None).folder == tmp_path / model_files.DEFAULT_MODEL


# --- registry and auto selection ------------------------------------------------------------------

def fake_probe(available: set[str]):
    """availability() as if exactly `available` backends could run here."""
    def probe(name, model, precision):
        return (type(name, (), {"name": name}), None) if name in available else (None, f"{name} is missing here")
    return probe


@pytest.mark.parametrize("available,expected", [
    ({"tensorrt", "cuda", "onnxruntime"}, "tensorrt"),
    ({"cuda", "onnxruntime"}, "cuda"),
    ({"onnxruntime"}, "onnxruntime"),
    ({"tensorrt", "onnxruntime"}, "tensorrt"),
])
def test_auto_takes_the_first_usable_in_order(model_dir, available, expected):
    choice = backends.choose("auto", ModelFiles.locate(model_dir), "int8", probe=fake_probe(available))
    assert choice.cls.name == expected
    names = [n for n, _ in choice.notes]
    assert names == list(backends.BACKENDS)[:names.index(expected) + 1]
    assert all(reason for _, reason in choice.notes[:-1]) and choice.notes[-1][1] is None


def test_auto_with_nothing_usable(model_dir):
    with pytest.raises(LiteNetError, match="no backend can run this model at int8.*tensorrt: tensorrt is missing"):
        backends.choose("auto", ModelFiles.locate(model_dir), "int8", probe=fake_probe(set()))


def test_requested_backend_that_cannot_run(model_dir):
    with pytest.raises(LiteNetError, match=r"backend cuda cannot run here: cuda is missing here; (pip install .*, or )?use --backend auto"):
        backends.choose("cuda", ModelFiles.locate(model_dir), "fp32", probe=fake_probe({"onnxruntime"}))
    with pytest.raises(LiteNetError, match="unknown backend"):
        backends.choose("opencl", ModelFiles.locate(model_dir), "fp32")


def test_real_availability_here(model_dir):
    """This machine: no TensorRT, no CUDA backend module yet or no CuPy; ONNX Runtime usable."""
    m = ModelFiles.locate(model_dir)
    choice = backends.choose("auto", m, "fp32")
    assert choice.cls is OnnxRuntimeInference
    reasons = dict(choice.notes)
    assert "has no model.int8.engine" in reasons["tensorrt"]  # no engine at all: not "int8 only"
    assert reasons["cuda"]
    assert "no model.int8.engine" in backends.availability("tensorrt", m, "int8")[1]


def test_an_engine_at_fp32_is_int8_only(model_dir, tmp_path):
    folder = tmp_path / "with-engine"
    shutil.copytree(model_dir, folder)
    (folder / "model.int8.engine").write_bytes(b"an engine")
    assert "int8 only" in backends.availability("tensorrt", ModelFiles.locate(folder), "fp32")[1]


def test_a_folder_without_onnx_says_to_export_not_to_install(model_dir, tmp_path):
    folder = tmp_path / "no-onnx"
    folder.mkdir()
    for name in ("config.json", "weights.safetensors", "model.int8.plan.safetensors"):
        shutil.copy(model_dir / name, folder / name)
    model = ModelFiles.locate(folder)
    with pytest.raises(LiteNetError) as err:
        backends.choose("auto", model, "fp32", probe=lambda name, m, p: (None, backends.availability(name, m, p)[1])
                        if name == "onnxruntime" else (None, f"{name} is missing here"))
    message = str(err.value)
    assert f"onnxruntime: {folder} has no model.onnx" in message
    assert message.endswith(f"export it: `litenet export --weights {folder}`") and "install" not in message
    with pytest.raises(LiteNetError, match=f"has no model.int8.onnx; export it: `litenet export --weights {folder} --int8`"):
        backends.choose("onnxruntime", model, "int8")


def test_without_onnxruntime_the_fix_is_to_install_it(model_dir, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "onnxruntime" else object())
    with pytest.raises(LiteNetError, match=r"install ONNX Runtime \(pip install onnxruntime\)"):
        backends.choose("auto", ModelFiles.locate(model_dir), "fp32", probe=fake_probe(set()))


def test_missing_module_and_missing_dependency(monkeypatch):
    import sys

    monkeypatch.setitem(backends.BACKENDS, "gone", "litenet.runtime.no_such_module:X")
    monkeypatch.setitem(backends.BACKENDS, "needs", "tests_runtime_needs_dep:X")
    monkeypatch.setattr(sys, "meta_path", [_Raiser("tests_runtime_needs_dep", "cupy"), *sys.meta_path])
    assert backends.load_class("gone") == (None, "module litenet.runtime.no_such_module is not part of this installation")
    assert backends.load_class("needs") == (None, "needs the cupy package, which is not installed")


class _Raiser:
    """A meta path finder under which importing `module` fails as if it imported a missing `dependency`."""

    def __init__(self, module: str, dependency: str):
        self.module, self.dependency = module, dependency

    def find_spec(self, name, path=None, target=None):
        if name == self.module:
            raise ModuleNotFoundError(f"No module named {self.dependency!r}", name=self.dependency)
        return None


# --- TensorRT: the rule and file names it shares with the exporter (the backend: test_runtime_tensorrt.py)

def test_tensorrt_engine_checks():
    from litenet.runtime.tensorrt_backend import ENGINE_FORMAT, engine_mismatch

    info = {"format": ENGINE_FORMAT, "tensorrt_version": "8.6.1", "compute_capability": "6.1", "gpu_name": "GTX 1060"}
    assert engine_mismatch(info, "8.6.1", "6.1") is None
    assert "TensorRT 8.6.1, this machine has 10.0.1" in engine_mismatch(info, "10.0.1", "6.1")
    assert "compute capability 6.1 (GTX 1060), this GPU is 9.0" in engine_mismatch(info, "8.6.1", "9.0")
    assert "not a LiteNet engine" in engine_mismatch({"format": "x"}, "8.6.1", "6.1")


def test_tensorrt_format_tag_matches_the_exporter():
    from litenet.export import tensorrt as export_trt
    from litenet.runtime import tensorrt_backend

    assert tensorrt_backend.ENGINE_FORMAT == export_trt.ENGINE_FORMAT
    assert (model_files.ENGINE, model_files.ENGINE_INFO) == (export_trt.ENGINE_FILE, export_trt.ENGINE_INFO_FILE)


def test_file_names_match_the_exporter():
    from litenet.export import pipeline
    from litenet.weights import CONFIG_FILE, WEIGHTS_FILE

    assert (model_files.FP32_ONNX, model_files.INT8_ONNX, model_files.PLAN) == (
        pipeline.FP32_FILE, pipeline.INT8_FILE, pipeline.PLAN_FILE)
    assert (model_files.WEIGHTS, model_files.CONFIG) == (WEIGHTS_FILE, CONFIG_FILE)


def test_cuda_backend_runs_a_mixer_and_auto_takes_onnxruntime_only_without_a_gpu(exported):
    from litenet.runtime.backends import choose
    from litenet.runtime.cuda_backend import CudaInference

    files = ModelFiles.locate(exported["mixer-8"])
    assert files.family() == "mixer"
    for precision in ("fp32", "int8"):
        reason = CudaInference.unavailable_reason(files, precision)
        assert reason is None or "family" not in reason  # declined only for want of CuPy or a GPU
        choice = choose("auto", files, precision)
        if reason is not None:
            assert choice.cls.name == "onnxruntime" and ("cuda", reason) in choice.notes


def test_without_a_gpu_the_cuda_backend_says_so_before_naming_a_missing_package(model_dir, monkeypatch):
    """The runtime-only install (a Pi's) lacks safetensors and CuPy: the reason to read is the missing CuPy/GPU."""
    from litenet.runtime import cuda_backend

    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    cls = next(v for k, v in vars(cuda_backend).items() if isinstance(v, type) and hasattr(v, "unavailable_reason")
               and v.__module__ == cuda_backend.__name__)
    reason = cls.unavailable_reason(ModelFiles.locate(model_dir), "fp32")
    assert "CuPy" in reason and "safetensors" not in reason
