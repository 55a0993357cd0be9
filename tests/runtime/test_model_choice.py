"""The default model: the user's newest finished run, else the best shipped model (a Mixer first), always named."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from litenet.errors import LiteNetError
from litenet.runtime import cli
from litenet.runtime.model_choice import choose_model


def fake_model(folder: Path, *, preset="p", family=None, accuracy=0.5, done=3, epochs=3, onnx=True, when=1000.0):
    """A model folder as the chooser sees it: config.json, weights (mtime `when`), and an export just after."""
    folder.mkdir(parents=True)
    model = {"width": 8} if family is None else {"family": family, "width": 8}
    doc = {"preset": preset, "model": model, "train": {"epochs": epochs}, "epochs_done": done,
           "test_accuracy": accuracy}
    (folder / "config.json").write_text(json.dumps(doc))
    (folder / "weights.safetensors").write_bytes(b"w")
    os.utime(folder / "weights.safetensors", (when, when))
    if onnx:
        (folder / "model.onnx").write_bytes(b"o")
        os.utime(folder / "model.onnx", (when + 1, when + 1))
    return folder


@pytest.fixture
def shipped(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    monkeypatch.setattr("litenet.resources.models_dir", lambda: root)
    return root


def test_given_model_wins(tmp_path, shipped):
    fake_model(tmp_path / "runs" / "a")
    choice = choose_model("elsewhere", "onnx", tmp_path / "runs")
    assert choice.path == Path("elsewhere") and "--model" in choice.why


def test_newest_finished_run_first(tmp_path, shipped):
    fake_model(shipped / "litenet-base", accuracy=0.59)
    fake_model(tmp_path / "runs" / "old", preset="old", when=1000)
    fake_model(tmp_path / "runs" / "new", preset="new", accuracy=0.6688, when=2000)
    fake_model(tmp_path / "runs" / "half", preset="half", done=1, when=3000)  # unfinished: never chosen
    choice = choose_model(None, "onnx", tmp_path / "runs")
    assert choice.path == tmp_path / "runs" / "new"
    assert choice.line("litenet-infer") == (f"litenet-infer: model {tmp_path / 'runs' / 'new'} (your newest finished "
                                            "run: new, 66.88 % test accuracy; --model picks another)")


def test_an_unexported_run_serves_eval_but_not_inference(tmp_path, shipped):
    fake_model(shipped / "litenet-base", preset="litenet-base", accuracy=0.5904)
    run = fake_model(tmp_path / "runs" / "mine", onnx=False, when=2000)
    assert choose_model(None, "weights", tmp_path / "runs").path == run
    choice = choose_model(None, "onnx", tmp_path / "runs")
    assert choice.path == shipped / "litenet-base"
    assert "best shipped model: litenet-base, 59.04 %" in choice.why
    assert f"{run} is not exported yet: `litenet export --weights {run} --int8`" in choice.why


def test_a_stale_export_is_not_used(tmp_path, shipped):
    fake_model(shipped / "litenet-base")
    run = fake_model(tmp_path / "runs" / "mine", when=2000)
    os.utime(run / "model.onnx", (1500, 1500))  # exported from weights since retrained
    assert choose_model(None, "onnx", tmp_path / "runs").path == shipped / "litenet-base"


def test_a_shipped_mixer_goes_before_a_more_accurate_mlp(tmp_path, shipped):
    fake_model(shipped / "litenet-base", accuracy=0.59)
    assert choose_model(None, "onnx", tmp_path / "none").path == shipped / "litenet-base"
    fake_model(shipped / "litenet-mlp-big", accuracy=0.95)
    assert choose_model(None, "onnx", tmp_path / "none").path == shipped / "litenet-mlp-big"
    fake_model(shipped / "litenet-mixer", family="mixer", accuracy=0.887)
    assert choose_model(None, "onnx", tmp_path / "none").path == shipped / "litenet-mixer"


def test_nothing_to_use_is_one_clear_error(tmp_path, shipped):
    with pytest.raises(LiteNetError, match="no model to use.*make train.*--model"):
        choose_model(None, "weights", tmp_path / "runs")


def test_litenet_infer_names_the_run_it_used(capsys, model_dir, png_folder, tmp_path, monkeypatch):
    run = tmp_path / "runs" / "mine"
    shutil.copytree(model_dir, run)
    doc = json.loads((run / "config.json").read_text())
    doc["epochs_done"] = doc["train"]["epochs"]
    (run / "config.json").write_text(json.dumps(doc))
    for name in ("model.onnx", "model.int8.onnx"):  # exported after the weights, as litenet export does
        os.utime(run / name, (os.stat(run / "weights.safetensors").st_mtime + 1,) * 2)
    monkeypatch.chdir(tmp_path)
    code = cli.main([str(png_folder / "good_0.png")])
    out, err = capsys.readouterr()
    assert code == 0 and out.count("\n") == 1
    assert err.count("\n") == 1
    assert err.startswith(f"litenet-infer: model {Path('runs') / 'mine'} (your newest finished run: {doc['preset']}")
    assert err.endswith("; --model picks another)\n")


def test_litenet_infer_does_not_repeat_a_given_model(capsys, model_dir, png_folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = cli.main([str(png_folder / "good_0.png"), "--model", str(model_dir)])
    assert code == 0 and capsys.readouterr().err == ""


def test_litenet_infer_names_the_shipped_model_it_used(capsys, model_dir, png_folder, tmp_path, monkeypatch):
    root = tmp_path / "models"
    shutil.copytree(model_dir, root / "litenet-tiny")
    monkeypatch.setattr("litenet.resources.models_dir", lambda: root)
    monkeypatch.chdir(tmp_path)  # no runs/ here
    code = cli.main([str(png_folder / "good_0.png")])
    err = capsys.readouterr().err
    assert code == 0 and err.count("\n") == 1
    assert err.startswith(f"litenet-infer: model {root / 'litenet-tiny'} (the best shipped model: ")
