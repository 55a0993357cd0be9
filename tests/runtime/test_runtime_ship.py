"""`make ship-model`'s copy step (scripts/ship_model.py): only inference files, a metrics summary, refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ship_model.py"
spec = importlib.util.spec_from_file_location("ship_model", SCRIPT)
ship = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ship)


@pytest.fixture
def run_dir(model_dir, tmp_path) -> Path:
    """A finished training run with its export: the tiny model plus what litenet train writes besides."""
    src = tmp_path / "run"
    shutil.copytree(model_dir, src)
    doc = json.loads((src / "config.json").read_text())
    doc.update(epochs_done=doc["train"]["epochs"], test_accuracy=0.5, backend="numpy")
    (src / "config.json").write_text(json.dumps(doc))
    epochs = [{"type": "epoch", "epoch": 0, "test_accuracy": 0.5}]
    (src / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in [{"type": "run"}, {"type": "step"}, *epochs]))
    (src / "checkpoint.safetensors").write_bytes(b"x")
    (src / "curves.png").write_bytes(b"x")
    for name in ("model.onnx", "model.int8.onnx", "model.int8.plan.safetensors"):
        os.utime(src / name, None)  # the export comes after the weights
    return src


def ship_into(monkeypatch, src: Path, dst: Path) -> None:
    monkeypatch.setattr(sys, "argv", ["ship_model.py", str(src), str(dst)])
    ship.main()


def test_ships_only_what_inference_needs(monkeypatch, run_dir, tmp_path, capsys):
    dst = tmp_path / "models" / "litenet-base"
    ship_into(monkeypatch, run_dir, dst)
    assert sorted(p.name for p in dst.iterdir()) == sorted(
        ["README.md", "config.json", "metrics.json", "model.int8.onnx", "model.int8.plan.safetensors",
         "model.onnx", "weights.safetensors"])
    summary = json.loads((dst / "metrics.json").read_text())
    assert summary["epochs"] == [{"type": "epoch", "epoch": 0, "test_accuracy": 0.5}]
    assert set(summary["test_accuracy"]) == {"training", "model.onnx", "model.int8.onnx", "model.int8.plan.safetensors"}
    assert "| model.onnx |" in (dst / "README.md").read_text()
    assert "ship-model:" in capsys.readouterr().out


def test_refuses_an_unfinished_run(monkeypatch, run_dir, tmp_path, capsys):
    doc = json.loads((run_dir / "config.json").read_text())
    doc["epochs_done"] = 0
    (run_dir / "config.json").write_text(json.dumps(doc))
    with pytest.raises(SystemExit):
        ship_into(monkeypatch, run_dir, tmp_path / "out")
    assert "stopped at epoch 0 of 1; resume it with `litenet train --resume" in capsys.readouterr().err


def test_refuses_a_stale_export(monkeypatch, run_dir, tmp_path, capsys):
    os.utime(run_dir / "model.onnx", (0, 0))
    with pytest.raises(SystemExit):
        ship_into(monkeypatch, run_dir, tmp_path / "out")
    assert "model.onnx in" in capsys.readouterr().err


def test_in_place(monkeypatch, run_dir, capsys):
    ship_into(monkeypatch, run_dir, run_dir)
    assert (run_dir / "metrics.json").is_file()
    assert "not to be committed: checkpoint.safetensors, curves.png, metrics.jsonl" in capsys.readouterr().out


def test_a_shipped_mixer_becomes_the_default_with_its_measured_accuracy_on_the_card(monkeypatch, run_dir, tmp_path):
    from litenet.runtime.model_choice import choose_model

    root = tmp_path / "models"
    ship_into(monkeypatch, run_dir, root / "litenet-base")
    doc = json.loads((run_dir / "config.json").read_text())
    doc["model"]["family"] = "mixer"  # as a Mixer's config.json records it; the chooser reads no more
    doc["test_accuracy"] = 0.25  # less accurate than the MLP shipped above, and still preferred
    (run_dir / "config.json").write_text(json.dumps(doc))
    ship_into(monkeypatch, run_dir, root / "litenet-mixer")
    card = (root / "litenet-mixer" / "README.md").read_text()
    measured = ship.mf.onnx_metadata(run_dir / "model.onnx")["test_accuracy"]
    assert f"| model.onnx | " in card and f"{100 * float(measured):.2f} %" in card
    monkeypatch.setattr("litenet.resources.models_dir", lambda: root)
    assert choose_model(None, "onnx", tmp_path / "no-runs").path == root / "litenet-mixer"
