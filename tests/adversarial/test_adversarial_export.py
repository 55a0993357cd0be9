"""Exports into folders that hold another model's files, and calibration sizes that would not fit memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
import export_fixtures as fx  # noqa: E402
from litenet.cli import main  # noqa: E402
from litenet.errors import EXIT_INPUT, EXIT_USAGE, LiteNetError, UsageError  # noqa: E402
from litenet.export.pipeline import ExportOptions, check_calibration_memory, export_model  # noqa: E402
from litenet.model import MixerConfig  # noqa: E402

INT8 = ExportOptions(int8=True, calib=16, engine=False, rounding="nearest", bias_correction=False)
INT8_FILES = ("model.int8.onnx", "model.int8.scales.json", "model.int8.plan.safetensors")


@pytest.fixture
def dataset(monkeypatch):
    ds = fx.fake_dataset(train=64, test=64)
    monkeypatch.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
    return ds


def quiet(line):
    pass


def test_an_fp32_export_removes_another_models_int8_files(tmp_path, dataset):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    fx.write_model(a, fx.SHAPES["seed-like"], seed=1)
    fx.write_model(b, fx.SHAPES["seed-like"], seed=2)
    export_model(b, out, INT8, log=quiet)
    assert all((out / name).is_file() for name in INT8_FILES)
    report = export_model(a, out, ExportOptions(), log=quiet)
    assert not any((out / name).exists() for name in INT8_FILES)
    assert any("exported from other weights" in note for note in report.notes)


def test_an_fp32_export_keeps_the_int8_files_of_the_same_weights(tmp_path, dataset):
    a = tmp_path / "a"
    fx.write_model(a, fx.SHAPES["seed-like"], seed=1)
    export_model(a, None, INT8, log=quiet)
    report = export_model(a, None, ExportOptions(), log=quiet)
    assert all((a / name).is_file() for name in INT8_FILES) and not report.notes


def test_calib_beyond_the_limit_is_a_usage_error_before_any_work(tmp_path, capsys):
    code = main(["export", "--weights", str(tmp_path / "nowhere"), "--int8", "--calib", "50000"])
    assert code == EXIT_USAGE and "--calib must be 1 … 10,000" in capsys.readouterr().err


def test_calibration_memory_is_checked_from_the_model():
    big = MixerConfig(patch=1, width=512, channel_hidden=4096, token_hidden=64, blocks=1)
    with pytest.raises(UsageError, match="GiB of activations"):
        check_calibration_memory(fx.tiny_params(big), big, 10_000, "--calib")


def test_a_malformed_scales_file_is_blamed_on_itself(tmp_path, dataset):
    a = tmp_path / "a"
    fx.write_model(a, fx.SHAPES["seed-like"], seed=1)
    export_model(a, None, INT8, log=quiet)
    doc = json.loads((a / "model.int8.scales.json").read_text())
    doc["calibration"]["images"] = "many"
    scales = tmp_path / "bad.json"
    scales.write_text(json.dumps(doc))
    with pytest.raises(LiteNetError, match="bad.json") as caught:
        export_model(a, None, ExportOptions(int8=True, scales_file=scales, engine=False), log=quiet)
    assert "--calib" not in str(caught.value) and caught.value.exit_status == EXIT_INPUT
