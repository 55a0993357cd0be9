"""litenet eval: the confusion matrix of a hand-made case, the report, the command's files."""

import json

import numpy as np
import pytest

from litenet.cli import main
from litenet.insight.confusion import confusion_matrix, per_class_accuracy, report_text


def test_confusion_matrix_by_hand():
    labels = np.array([0, 0, 0, 1, 1, 2])
    pred = np.array([0, 0, 1, 1, 2, 2])
    m = confusion_matrix(labels, pred, 4)
    assert m.tolist() == [[2, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    acc = per_class_accuracy(m)
    assert acc[:3] == pytest.approx([2 / 3, 1 / 2, 1]) and np.isnan(acc[3])
    text = report_text(m, ["a", "b", "c", "d"])
    assert "test accuracy 66.67% (4/6)" in text and "66.67%" in text.splitlines()[3]


def test_eval_command_writes_png_and_json(tmp_path, model_dir, dataset, capsys):
    assert main(["eval", "--model", str(model_dir), "--out", str(tmp_path / "ev")]) == 0
    out = capsys.readouterr().out
    assert "test accuracy" in out and "confusion matrix" in out and "airplane" in out
    doc = json.loads((tmp_path / "ev" / "eval.json").read_text())
    m = np.array(doc["confusion"])
    assert m.shape == (10, 10) and m.sum() == len(dataset.test.labels)
    assert doc["accuracy"] == pytest.approx(np.trace(m) / m.sum())
    assert (tmp_path / "ev" / "confusion.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_of_a_missing_model_is_one_line(tmp_path, capsys):
    assert main(["eval", "--model", str(tmp_path / "nothing")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing: no such folder; point --model at" in err
    (tmp_path / "empty").mkdir()
    assert main(["eval", "--model", str(tmp_path / "empty")]) == 3
    err = capsys.readouterr().err
    assert "empty: no config.json; point --model at" in err and "--weights" not in err


def test_eval_without_model_scores_the_newest_finished_run_and_says_so(tmp_path, dataset, capsys, monkeypatch):
    from litenet.model import ModelConfig, TrainConfig, init_params
    from litenet.weights import save_model

    TINY_MODEL = ModelConfig(embed="full", width=16, hidden=24, blocks=2)  # noqa: N806 (as the fixtures name it)
    TINY_TRAIN = TrainConfig(epochs=1, batch_size=16)  # noqa: N806

    run = tmp_path / "runs" / "mine"
    save_model(run, init_params(TINY_MODEL, 0), TINY_MODEL, TINY_TRAIN, "tiny", epochs_done=TINY_TRAIN.epochs,
               test_accuracy=0.25)
    save_model(tmp_path / "runs" / "half", init_params(TINY_MODEL, 0), TINY_MODEL, TINY_TRAIN, "half",
               epochs_done=0)  # unfinished: never the default
    monkeypatch.chdir(tmp_path)
    assert main(["eval"]) == 0
    err = capsys.readouterr().err
    assert err == (f"litenet eval: model {tmp_path.joinpath('runs', 'mine').relative_to(tmp_path)} "
                   "(your newest finished run: tiny, 25.00 % test accuracy; --model picks another)\n")
    assert (run / "eval.json").is_file()
