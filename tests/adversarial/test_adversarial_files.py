"""Crafted weights and checkpoint files: wrong dtypes, damaged metadata, missing tensors (Hypothesis for the header)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_fixtures import TINY_MODEL, TINY_TRAIN  # noqa: E402
from litenet.errors import LiteNetError  # noqa: E402
from litenet.model import configs_to_json, init_params, param_layout  # noqa: E402
from litenet.runtime.onnx_external import external_locations  # noqa: E402
from litenet.train.checkpoint import Position, load_checkpoint, save_checkpoint  # noqa: E402
from litenet.weights import load_weights, save_weights  # noqa: E402


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.int8, np.float16, np.float64])
def test_weights_of_another_dtype_are_refused(tmp_path, dtype):
    from safetensors.numpy import save_file

    params = init_params(TINY_MODEL, 0)
    tensors = {p.name: params[p.offset:p.offset + p.size].reshape(p.shape).astype(dtype)
               for p in param_layout(TINY_MODEL)}
    save_file(tensors, str(tmp_path / "w.safetensors"))
    with pytest.raises(LiteNetError, match="float32"):
        load_weights(tmp_path / "w.safetensors", TINY_MODEL)


def test_float32_weights_still_load(tmp_path):
    params = init_params(TINY_MODEL, 0)
    save_weights(tmp_path / "w.safetensors", params, TINY_MODEL)
    assert np.array_equal(load_weights(tmp_path / "w.safetensors", TINY_MODEL), params)


def checkpoint_with(tmp_path, **metadata):
    from safetensors.numpy import save_file

    save_checkpoint(tmp_path, {"params": init_params(TINY_MODEL, 0)}, Position(1, 0, 10),
                    configs_to_json(TINY_MODEL, TINY_TRAIN, "tiny"))
    from safetensors import safe_open

    with safe_open(str(tmp_path / "checkpoint.safetensors"), framework="numpy") as f:
        meta, state = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    meta = {k: v for k, v in {**meta, **metadata}.items() if v is not None}
    save_file(state, str(tmp_path / "checkpoint.safetensors"), metadata=meta)


@pytest.mark.parametrize("metadata", [{"epoch": "two"}, {"config": None}, {"config": "{not json"},
                                      {"global_step": None}, {"config": "[1, 2]"}, {"epoch": "-1"}])
def test_damaged_checkpoint_metadata_is_one_line(tmp_path, metadata):
    checkpoint_with(tmp_path, **metadata)
    with pytest.raises(LiteNetError, match="damaged checkpoint metadata"):
        load_checkpoint(tmp_path)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_the_onnx_walker_never_raises_anything_but_value_error(data):
    try:
        external_locations(data)
    except ValueError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12))
def test_any_json_as_a_config_is_a_one_line_error_or_a_config(value):
    from litenet.model import configs_from_json

    doc = {"format": "litenet-config/1", "model": value} if not isinstance(value, dict) else \
        {"format": "litenet-config/1", **value}
    try:
        configs_from_json(json.dumps(doc))
    except LiteNetError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.builds(lambda n, body: n.to_bytes(8, "little") + body,
                                          st.integers(0, 2**64 - 1), st.binary(max_size=64)))
def test_any_bytes_as_a_safetensors_header_is_a_one_line_error_or_a_header(tmp_path_factory, data):
    from litenet.runtime.model_files import safetensors_metadata

    path = tmp_path_factory.mktemp("st") / "x.safetensors"
    path.write_bytes(data)
    try:
        assert isinstance(safetensors_metadata(path), dict)
    except LiteNetError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["binary", "python"]), st.binary(max_size=7000))
def test_any_bytes_as_a_cifar_batch_is_a_one_line_error_or_a_batch(layout, data):
    from litenet.data.readers import parse_batch

    try:
        images, labels = parse_batch(layout, data, "batch", records=None)
        assert images.shape[1:] == (32, 32, 3) and len(labels) == len(images)
    except LiteNetError:
        pass


def test_a_checkpoint_missing_a_tensor_is_one_line(tmp_path):
    import dataclasses

    from litenet.train.trainer import LoopOptions, TrainData, Trainer
    from train_fixtures import synthetic_split

    data = TrainData(synthetic_split(32, 0), synthetic_split(16, 1), tuple(f"c{i}" for i in range(10)))
    one = dataclasses.replace(TINY_TRAIN, epochs=1)
    Trainer("tiny", TINY_MODEL, one, tmp_path, data, LoopOptions(progress=False)).run()
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(tmp_path / "checkpoint.safetensors"), framework="numpy") as f:
        meta, state = f.metadata(), {k: f.get_tensor(k) for k in f.keys() if k == "params"}
    save_file(state, str(tmp_path / "checkpoint.safetensors"), metadata=meta)  # the momentum is gone
    with pytest.raises(LiteNetError, match="damaged checkpoint"):
        Trainer("tiny", TINY_MODEL, one, tmp_path, data, LoopOptions(progress=False, resume=True)).run()


def test_a_changed_weights_file_is_not_called_retraining(tmp_path):
    from litenet.runtime.model_files import ModelFiles

    from adversarial_helpers import SHIPPED

    for name in ("weights.safetensors", "model.onnx", "config.json"):
        (tmp_path / name).write_bytes((SHIPPED / name).read_bytes())
    data = bytearray((tmp_path / "weights.safetensors").read_bytes())
    data[-1] ^= 0xFF  # a damaged tensor byte: the header still reads
    (tmp_path / "weights.safetensors").write_bytes(bytes(data))
    files = ModelFiles.locate(tmp_path)
    with pytest.raises(LiteNetError, match="retrained, replaced or damaged") as caught:
        files.check_same_weights({"weights_sha256": "0" * 64}, tmp_path / "model.onnx")
    assert "trained again" not in str(caught.value)
