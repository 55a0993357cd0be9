"""One export against the real CIFAR-10 maps, where this machine already has them (skipped elsewhere)."""

from __future__ import annotations

import json

import onnx
import pytest

import export_fixtures as fx
from litenet.data.maps import maps_folder, read_manifest
from litenet.export import onnx_graph
from litenet.export.pipeline import ExportOptions, export_model

HAVE_MAPS = read_manifest(maps_folder()) is not None


@pytest.mark.skipif(not HAVE_MAPS, reason="needs CIFAR-10 maps (run `litenet data` first)")
def test_tiny_model_exports_against_the_real_data(tmp_path):
    fx.write_model(tmp_path, fx.SHAPES["seed-like"])
    report = export_model(tmp_path, options=ExportOptions(int8=True, calib=256, engine=False), log=lambda line: None)
    assert report.fp32_check["max_abs_diff"] <= report.fp32_check["tolerance"]
    assert report.kernels["float_matmuls_after_dq"] == []
    assert report.plan_check["argmax_agreement"] >= 0.999
    meta = onnx_graph.read_metadata(onnx.load(str(tmp_path / "model.int8.onnx")))
    assert json.loads(meta["class_names"])[:3] == ["airplane", "automobile", "bird"]
    assert 0.0 <= float(meta["test_accuracy"]) <= 1.0
