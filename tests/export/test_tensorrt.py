"""The TensorRT parts that run without TensorRT: the builder's calls (against a stand-in), the engine JSON,
the compatibility check and the skip message."""

from __future__ import annotations

import json

import pytest
from trt_standin import FakeTensorRT, serialize

from litenet.errors import LiteNetError
from litenet.export import tensorrt as trt_export


def test_tensorrt_8_6_gets_the_int8_flag_and_a_dynamic_batch_profile():
    fake = FakeTensorRT("8.6.1.6")
    assert trt_export.build_engine(b"onnx", trt=fake) == serialize(b"onnx", fake.calls["shapes"])
    assert fake.calls["flags"] == ["INT8"]  # 8.x ignores Q/DQ nodes without it
    assert fake.calls["network_flags"] == 1  # explicit batch
    assert fake.calls["shapes"] == ("images", (1, 32, 32, 3), (64, 32, 32, 3), (256, 32, 32, 3))
    assert fake.calls["profiles"] == 1 and fake.calls["parsed"] == b"onnx"


def test_tensorrt_10_takes_precision_from_the_qdq_nodes():
    fake = FakeTensorRT("10.3.0")
    trt_export.build_engine(b"onnx", trt=fake)
    assert fake.calls["flags"] == [] and fake.calls["network_flags"] == 0


def test_parse_and_build_failures_are_reported():
    with pytest.raises(LiteNetError, match="Unsupported operator Foo"):
        trt_export.build_engine(b"onnx", trt=FakeTensorRT("8.6.1", parses=False))
    with pytest.raises(LiteNetError, match="failed to build"):
        trt_export.build_engine(b"onnx", trt=FakeTensorRT("8.6.1", builds=False))


def info():
    return trt_export.engine_info("8.6.1.6", "NVIDIA GeForce GTX 1060 6GB", "6.1", b"model bytes")


def test_engine_info_records_what_a_loader_needs():
    doc = info()
    assert doc["format"] == trt_export.ENGINE_FORMAT
    assert doc["batch_profile"] == {"min": 1, "opt": 64, "max": 256}
    assert doc["input"]["name"] == "images" and len(doc["onnx_sha256"]) == 64
    json.dumps(doc)  # it is written as JSON


def test_compatible_engine_passes(tmp_path):
    path = tmp_path / trt_export.ENGINE_INFO_FILE
    path.write_text(json.dumps(info()))
    trt_export.check_engine_compatible(path, trt_version="8.6.1.6", compute_capability="6.1")
    trt_export.check_engine_compatible(json.dumps(info()), trt_version="8.6.1.6", compute_capability="6.1")


@pytest.mark.parametrize("version, cc, message", [
    ("10.3.0", "6.1", "built with TensorRT 8.6.1.6, this machine has 10.3.0"),
    ("8.6.1.6", "9.0", "compute capability 6.1 .*this GPU is 9.0"),
])
def test_mismatched_engine_is_refused_with_the_fix(version, cc, message):
    with pytest.raises(LiteNetError, match=message) as err:
        trt_export.check_engine_compatible(info(), trt_version=version, compute_capability=cc)
    assert "rebuild it on this machine with `litenet export" in str(err.value)


def test_foreign_json_is_refused():
    with pytest.raises(LiteNetError, match="not a LiteNet engine"):
        trt_export.check_engine_compatible({"format": "other"}, "8.6.1", "6.1")
    with pytest.raises(LiteNetError, match="not valid JSON"):
        trt_export.check_engine_compatible("{oops", "8.6.1", "6.1")


def test_without_tensorrt_the_engine_is_skipped_in_one_line(monkeypatch):
    monkeypatch.setattr(trt_export, "import_tensorrt", lambda: None)
    reason = trt_export.unavailable_reason()
    assert reason == "the tensorrt Python package is not installed"
    line = trt_export.skip_message(reason)
    assert line.startswith("TensorRT engine: skipped (the tensorrt Python package is not installed)")
    assert "\n" not in line
    with pytest.raises(LiteNetError, match="needs TensorRT"):
        trt_export.check_engine_compatible(info())
