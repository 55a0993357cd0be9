"""ONNX models whose tensors keep their data in other files: LiteNet checks every location itself."""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from PIL import Image

from adversarial_helpers import SHIPPED, one_error_line, run_module
from litenet.errors import LiteNetError
from litenet.runtime.onnx_external import check_external_data, external_locations


def with_external_data(folder, location: str, target=None):
    """The shipped fp32 model in `folder`, its first initializer's bytes moved to `location` (relative
    to the folder); `target`, when given, is where those bytes are really written."""
    folder.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(SHIPPED / "model.onnx"))
    tensor = model.graph.initializer[0]
    data = numpy_helper.to_array(tensor).tobytes()
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(len(data)))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    (target or folder / location).write_bytes(data)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    shutil.copy(SHIPPED / "config.json", folder / "config.json")
    return path


def test_the_walker_finds_what_onnx_writes(tmp_path):
    path = with_external_data(tmp_path / "m", "w.bin")
    name = onnx.load(str(path), load_external_data=False).graph.initializer[0].name
    assert external_locations(path.read_bytes()) == [(name, "w.bin")]
    assert external_locations((SHIPPED / "model.onnx").read_bytes()) == []
    check_external_data(path)  # a regular file inside the folder is fine


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_a_location_outside_the_folder_is_refused(tmp_path, location):
    (tmp_path / "m").mkdir()
    path = with_external_data(tmp_path / "m", location, target=tmp_path / "secret.bin")
    with pytest.raises(LiteNetError, match="external data"):
        check_external_data(path)


def test_a_symlink_inside_the_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    folder = tmp_path / "m"
    folder.mkdir()
    path = with_external_data(folder, "w.bin", target=secret)
    os.symlink(secret, folder / "w.bin")
    with pytest.raises(LiteNetError, match="symlink"):
        check_external_data(path)


def test_litenet_infer_refuses_it_in_one_line_whatever_onnxruntime_is_installed(tmp_path):
    folder = tmp_path / "m"
    (tmp_path / "secret.bin").write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 4096)
    with_external_data(folder, "../secret.bin", target=tmp_path / "unused.bin")
    image = tmp_path / "a.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    r = run_module("litenet.runtime", "--model", folder, "--backend", "onnxruntime", "--json", image)
    assert r.returncode == 3 and r.stdout == ""
    assert "../secret.bin" in one_error_line(r.stderr, "litenet-infer")


def test_a_model_that_fails_inside_onnxruntime_is_one_line(tmp_path):
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 7])  # 3072 values do not split by 7
    graph = helper.make_graph([helper.make_node("Reshape", ["images", "shape"], ["logits"])], "g",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 32, 32, 3])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], [shape])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    image = tmp_path / "a.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    r = run_module("litenet.runtime", "--model", path, image)
    assert r.returncode == 3 and "ONNX Runtime failed to run" in one_error_line(r.stderr, "litenet-infer")
