"""Messages that must say what happened: divergence without a checkpoint, huge rank counts, symlink loops,
settings that would be ignored, exported files that still match, file names holding a newline."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_fixtures import TINY_MODEL, TINY_TRAIN, synthetic_split  # noqa: E402
from adversarial_helpers import SHIPPED, one_error_line, run_module  # noqa: E402
from litenet.cli import main  # noqa: E402
from litenet.errors import EXIT_ENVIRONMENT, EXIT_USAGE, LiteNetError, UsageError  # noqa: E402
from litenet.model import ModelConfig, TrainConfig, load_preset, override_preset  # noqa: E402
from litenet.runtime.model_files import ModelFiles  # noqa: E402
from litenet.train.parallel.comm import per_rank_batch  # noqa: E402
from litenet.train.trainer import LoopOptions, TrainData, Trainer  # noqa: E402


def test_divergence_before_any_checkpoint_does_not_claim_one_is_kept(tmp_path, capsys):
    exploding = dataclasses.replace(TINY_TRAIN, epochs=1, lr_base=1e30, clip_threshold=1e38, warmup_steps=1)
    data = TrainData(synthetic_split(32, 0), synthetic_split(16, 1), tuple(f"c{i}" for i in range(10)))
    result = Trainer("tiny", TINY_MODEL, exploding, tmp_path / "boom", data, LoopOptions(progress=False)).run()
    err = capsys.readouterr().err
    assert result.stopped == "diverged" and "No checkpoint was saved" in err and "is kept" not in err


def test_a_huge_rank_count_is_refused_without_a_silly_suggestion(capsys):
    assert main(["train", "--preset", "litenet-seed", "--gpus", "1000000000000"]) == EXIT_USAGE
    assert "at most 1024 ranks" in capsys.readouterr().err
    with pytest.raises(LiteNetError, match="use at most 64 ranks"):
        per_rank_batch(64, 100)


def test_a_model_path_that_is_a_symlink_loop_is_named_as_one(tmp_path, capsys):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(OSError):
        ModelFiles.locate(tmp_path / "loop")
    image = tmp_path / "a.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    r = run_module("litenet.runtime", "--model", tmp_path / "loop", image)
    assert r.returncode == EXIT_ENVIRONMENT and "symlink loop" in one_error_line(r.stderr, "litenet-infer")


@pytest.mark.parametrize("given, words", [({"adam_eps": 1e-6}, "--adam-eps (optimizer 'adamw' reads it"),
                                          ({"momentum": 0.5, "optimizer": "adamw"}, "--momentum"),
                                          ({"margin": 0.5, "loss": "cross-entropy"}, "--margin (loss 'margin'"),
                                          ({"cutout_size": 4}, "--cutout-size (augment 'cutout'")])
def test_a_setting_that_would_be_ignored_is_refused(given, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        override_preset(load_preset("litenet-seed"), given)


@pytest.mark.parametrize("build", [lambda: ModelConfig(ln_eps=1e30), lambda: TrainConfig(warmup_steps=10**12),
                                   lambda: TrainConfig(epochs=10**12), lambda: TrainConfig(batch_size=10**12)])
def test_meaningless_sizes_are_refused(build):
    with pytest.raises(UsageError):
        build()


def test_exported_files_of_the_same_weights_are_not_called_stale(tmp_path):
    from litenet.train.exported import exported_from_other_weights

    for name in ("weights.safetensors", "model.onnx", "config.json"):
        (tmp_path / name).write_bytes((SHIPPED / name).read_bytes())
    assert exported_from_other_weights(tmp_path) == []
    with open(tmp_path / "weights.safetensors", "ab") as f:
        f.write(b" ")  # other bytes: the model.onnx beside them no longer matches
    assert exported_from_other_weights(tmp_path) == ["model.onnx"]


def test_a_newline_in_a_file_name_stays_on_one_line(tmp_path):
    image = tmp_path / "new\nline.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    r = run_module("litenet.runtime", image, tmp_path / "gone\n.png")
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 1 and "new\\nline.png: " in r.stdout
    assert "gone\\n.png" in one_error_line(r.stderr, "litenet-infer")


def test_an_ignored_setting_is_refused_in_the_flags_words(capsys):
    assert main(["train", "--preset", "litenet-seed", "--loss", "cross-entropy", "--margin", "0.5"]) == 2
    line = one_error_line(capsys.readouterr().err, "litenet train")
    assert "--margin (--loss 'margin' reads it; --loss is 'cross-entropy')" in line, line
