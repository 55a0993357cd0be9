"""`litenet export` end to end on a tiny model and synthetic data: the files, the table, the errors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import export_fixtures as fx
from litenet.cli import main
from litenet.errors import EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_USAGE, LiteNetError
from litenet.export import checks, evaluate, onnx_graph
from litenet.export.pipeline import ExportOptions, export_model
from litenet.model import ModelConfig
from litenet.runtime import int8_plan as plan_rt
from litenet.train import network
from litenet.weights import WEIGHTS_FILE, load_model

INT8_FILES = {"model.onnx", "model.int8.onnx", "model.int8.scales.json", plan_rt.PLAN_FILE}


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_cli_writes_every_file_and_prints_the_table(model_dir, dataset, capsys):
    before = set(listing(model_dir))
    assert main(["export", "--weights", str(model_dir), "--int8", "--calib", "200", "--method", "entropy"]) == 0
    assert set(listing(model_dir)) == before | INT8_FILES  # no temporaries left over
    out = capsys.readouterr().out
    for name in INT8_FILES:
        assert name in out
    assert "fp32 ONNX vs NumPy forward" in out and "MatMulIntegerToFloat 6" in out
    assert "TensorRT engine: skipped" in out
    scales = json.loads((model_dir / "model.int8.scales.json").read_text())
    assert scales["method"] == "entropy" and scales["calibration"]["images"] == 200


def test_rounding_and_bias_correction_can_be_switched_off(model_dir, dataset, capsys):
    argv = ["export", "--weights", str(model_dir), "--int8", "--calib", "64", "--no-engine"]
    assert main(argv + ["--rounding", "nearest", "--no-bias-correction"]) == 0
    assert "weights: nearest rounding, bias correction none" in capsys.readouterr().out
    meta = onnx_graph.read_metadata(onnx.load(str(model_dir / "model.int8.onnx")))
    plan_meta = plan_rt.load_plan(model_dir / plan_rt.PLAN_FILE).metadata
    for m in (meta, plan_meta):
        assert (m["weight_rounding"], m["bias_correction"]) == ("nearest", "none")
    assert main(argv) == 0  # the default: GPTQ and corrected biases
    plan_meta = plan_rt.load_plan(model_dir / plan_rt.PLAN_FILE).metadata
    assert plan_meta["weight_rounding"] == "gptq" and plan_meta["bias_correction"] == "empirical, 64 calibration images"


def test_exported_models_agree_in_a_fresh_session(model_dir, dataset):
    export_model(model_dir, options=ExportOptions(int8=True, calib=128, engine=False), log=lambda line: None)
    params, model, _, _ = load_model(model_dir)
    x, labels = dataset.test.images, dataset.test.labels
    fp32 = evaluate.session(model_dir / "model.onnx", level="all")  # a second, independent session
    int8 = evaluate.session(model_dir / "model.int8.onnx", level="all")
    z32, z8 = evaluate.logits(fp32, x), evaluate.logits(int8, x)
    ref = checks.fp32_agreement(z32, params, model, x)
    assert ref["max_abs_diff"] <= ref["tolerance"]
    plan = checks.plan_agreement(plan_rt.run_plan(plan_rt.load_plan(model_dir / plan_rt.PLAN_FILE), x), z8)
    assert plan["argmax_agreement"] >= 0.99
    assert (z32.argmax(1) == z8.argmax(1)).mean() >= 0.9  # int8 is an approximation of the same model
    meta = onnx_graph.read_metadata(onnx.load(str(model_dir / "model.int8.onnx")))
    assert float(meta["test_accuracy"]) == pytest.approx(evaluate.accuracy(z8, labels), abs=1e-6)
    assert json.loads(meta["class_names"]) == list(fx.CLASSES) and meta["preset"] == "tiny-test"
    plan_file = plan_rt.load_plan(model_dir / plan_rt.PLAN_FILE)
    z_plan = plan_rt.run_plan(plan_file, x)
    assert float(plan_file.metadata["test_accuracy"]) == pytest.approx(evaluate.accuracy(z_plan, labels), abs=1e-6)
    assert plan_file.classes == fx.CLASSES


def test_fp32_only_export_writes_one_file(model_dir, dataset):
    report = export_model(model_dir, options=ExportOptions(), log=lambda line: None)
    assert [a.name for a in report.artifacts] == ["model.onnx"]
    assert "model.int8.onnx" not in listing(model_dir)


def test_reusing_a_scales_file_reproduces_the_int8_model(model_dir, dataset, tmp_path):
    export_model(model_dir, options=ExportOptions(int8=True, calib=64, engine=False), log=lambda line: None)
    first = (model_dir / "model.int8.onnx").read_bytes()
    scales = tmp_path / "scales.json"
    scales.write_bytes((model_dir / "model.int8.scales.json").read_bytes())
    export_model(model_dir, options=ExportOptions(int8=True, scales_file=scales, engine=False), log=lambda line: None)
    assert (model_dir / "model.int8.onnx").read_bytes() == first


def assert_refused(argv, folder, match, capsys, code=EXIT_INPUT):
    before = listing(folder) if folder.exists() else None
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("litenet export: error:") and "\n" not in err and "Traceback" not in err
    assert match in err
    if before is not None:
        assert listing(folder) == before  # nothing half-written


def test_missing_weights(tmp_path, dataset, capsys):
    assert_refused(["export", "--weights", str(tmp_path / "nowhere")], tmp_path, "no config.json", capsys)


def test_corrupt_weights(model_dir, dataset, capsys):
    (model_dir / WEIGHTS_FILE).write_bytes(b"\x00garbage" * 10)
    assert_refused(["export", "--weights", str(model_dir), "--int8"], model_dir, "not a readable safetensors", capsys)


def test_config_that_does_not_match_the_weights(model_dir, dataset, capsys):
    doc = json.loads((model_dir / "config.json").read_text())
    doc["model"]["width"] = 13
    (model_dir / "config.json").write_text(json.dumps(doc))
    assert_refused(["export", "--weights", str(model_dir), "--int8"], model_dir, "come from different models", capsys)


def test_unwritable_output_folder(model_dir, dataset, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert_refused(["export", "--weights", str(model_dir), "--out", str(blocker / "sub")], model_dir,
                   "cannot write to", capsys, code=EXIT_ENVIRONMENT)


def test_failure_after_the_fp32_model_leaves_nothing(model_dir, dataset, monkeypatch):
    def broken(*args, **kwargs):
        raise LiteNetError("simulated failure while building the int8 model")

    monkeypatch.setattr("litenet.export.qdq.build_qdq", broken)
    before = listing(model_dir)
    with pytest.raises(LiteNetError, match="simulated"):
        # nearest rounding: the failure is in build_qdq; GPTQ before it would only cost time
        export_model(model_dir, options=ExportOptions(int8=True, calib=32, rounding="nearest"), log=lambda line: None)
    assert listing(model_dir) == before


def test_a_failed_export_removes_the_folder_it_created(model_dir, dataset, monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise LiteNetError("simulated failure")

    monkeypatch.setattr("litenet.export.qdq.build_qdq", broken)
    with pytest.raises(LiteNetError):
        export_model(model_dir, tmp_path / "new-out", ExportOptions(int8=True, calib=32, rounding="nearest"),
                     log=lambda line: None)
    assert not (tmp_path / "new-out").exists()


def test_bad_flags_are_refused_before_any_work(model_dir, dataset, capsys):
    assert_refused(["export", "--weights", str(model_dir), "--int8", "--calib", "0"], model_dir, "--calib", capsys,
                   code=EXIT_USAGE)
    assert_refused(["export", "--weights", str(model_dir), "--int8", "--percentile", "120"], model_dir,
                   "--percentile", capsys, code=EXIT_USAGE)


def test_numpy_forward_is_what_the_model_folder_holds(model_dir):
    # Guards the fixture: the folder really is a full-embedding, shifted, two-block model.
    params, model, _, _ = load_model(model_dir)
    assert model == ModelConfig(embed="full", input_shift=0.5, width=12, hidden=20, blocks=2)
    assert network.forward(params, fx.images(2), model).z.shape == (2, 10)
    assert np.isfinite(params).all()


def test_every_exported_model_records_the_weights_it_came_from(model_dir, dataset):
    from litenet.runtime.model_files import file_sha256

    export_model(model_dir, options=ExportOptions(int8=True, calib=32, engine=False, rounding="nearest"),
                 log=lambda line: None)
    expected = file_sha256(model_dir / "weights.safetensors")
    for name in ("model.onnx", "model.int8.onnx"):
        assert onnx_graph.read_metadata(onnx.load(str(model_dir / name)))["weights_sha256"] == expected
    assert plan_rt.load_plan(model_dir / plan_rt.PLAN_FILE).metadata["weights_sha256"] == expected
