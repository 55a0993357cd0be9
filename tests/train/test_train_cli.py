"""`litenet train` and `litenet gradcheck` as a user runs them: subprocesses, exit codes, Ctrl-C."""

import json
from pathlib import Path

import pytest

from cli_runs import fake_maps, interrupt_then_resume, litenet


@pytest.fixture(scope="module")
def maps(tmp_path_factory) -> Path:
    """Memory maps of a fake CIFAR-10 with 64 records per batch (320 training, 64 test images)."""
    return fake_maps(tmp_path_factory.mktemp("cifar"))


def test_train_writes_the_interface_files(maps, tmp_path):
    out = tmp_path / "run"
    r = litenet("train", "--preset", "litenet-seed", "--epochs", "2", "--batch-size", "16", "--maps", str(maps),
                "--out", str(out), "--backend", "numpy", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "epoch 2/2" in r.stdout
    for name in ("weights.safetensors", "config.json", "metrics.jsonl", "curves.png"):
        assert (out / name).is_file()
    doc = json.loads((out / "config.json").read_text())
    assert doc["train"]["batch_size"] == 16 and doc["epochs_done"] == 2


def test_ctrl_c_saves_and_resume_finishes(maps, tmp_path):
    out = tmp_path / "run"
    args = ["train", "--preset", "litenet-seed", "--epochs", "12", "--batch-size", "16", "--maps", str(maps),
            "--out", str(out), "--backend", "numpy", "--no-progress"]
    interrupt_then_resume(args, out, steps=12 * 20)


def test_user_errors_are_one_line(maps, tmp_path):
    r = litenet("train", "--preset", "no-such", "--maps", str(maps), "--out", str(tmp_path))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "litenet-seed" in r.stderr
    r = litenet("train", "--preset", "litenet-seed", "--hidden", "lots")
    assert r.returncode == 2 and "--hidden" in r.stderr  # argparse checks the type


def test_gradcheck_command_passes():
    r = litenet("gradcheck", "--preset", "litenet-seed")
    assert r.returncode == 0 and "worst relative error" in r.stdout


def test_training_over_an_export_says_it_is_stale(maps, tmp_path):
    out = tmp_path / "exported"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"an export of earlier weights")
    r = litenet("train", "--preset", "litenet-seed", "--epochs", "1", "--batch-size", "16", "--maps", str(maps),
                "--out", str(out), "--backend", "numpy", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert f"model.onnx in {out} were exported from the earlier weights" in r.stderr
    assert f"litenet export --weights {out} --int8" in r.stderr
    assert (out / "model.onnx").read_bytes() == b"an export of earlier weights"  # left for the user to refresh


def test_flags_out_of_range_exit_2_naming_the_value(maps, tmp_path):
    for extra, message in ((["--limit", "0"], "--limit 0: must be ≥ 1"),
                           (["--gpus", "-1"], "--gpus -1: give a number of GPUs ≥ 1"),
                           (["--dtype", "float64", "--backend", "cuda"], "--dtype float64 is for the NumPy backend")):
        r = litenet("train", "--preset", "litenet-seed", "--maps", str(maps), "--out", str(tmp_path / "run"), *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (extra, r.stderr)
        assert r.stderr.count("\n") == 1 and message in r.stderr, (extra, r.stderr)
    assert not (tmp_path / "run").exists()


def test_usage_error_exits_2_and_other_user_errors_3(monkeypatch, capsys):
    """litenet.cli's mapping itself (docs/errors.md): UsageError → 2, any other LiteNetError → 3,
    EnvironmentProblem → 4, one line each."""
    from litenet import cli
    from litenet.errors import EnvironmentProblem, LiteNetError, UsageError

    for exc, code in ((UsageError("--epochs -1: must be ≥ 1"), 2), (LiteNetError("no such file"), 3),
                      (EnvironmentProblem("disk full"), 4)):
        def fail(args, exc=exc):
            raise exc
        monkeypatch.setattr("litenet.data.cli.run", fail)
        assert cli.main(["data"]) == code
        err = capsys.readouterr().err
        assert err == f"litenet data: error: {exc}\n"


def test_a_run_writes_into_runs_unless_told_otherwise():
    from litenet.train.run import RunOptions, run_folder

    assert run_folder(RunOptions(), "litenet-base") == Path("runs") / "litenet-base"  # untracked, not models/
    assert run_folder(RunOptions(out="models/litenet-base"), "litenet-base") == Path("models/litenet-base")


def test_cuda_without_cupy_is_one_line_naming_the_extra_and_leaves_no_folder(maps, tmp_path):
    import importlib.util
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    out = tmp_path / "run"
    r = litenet("train", "--preset", "litenet-seed", "--epochs", "1", "--maps", str(maps), "--out", str(out),
                "--backend", "cuda")
    assert r.returncode == 4 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert "pip install 'litenet-nn[cuda12]'" in r.stderr and "--backend numpy" in r.stderr
    assert not out.exists()


def test_sigterm_saves_a_checkpoint_and_the_short_resume_uses_the_runs_settings(maps, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from cli_runs import REPO
    out = tmp_path / "run"
    common = ["--maps", str(maps), "--backend", "numpy", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "litenet", "train", "--preset", "litenet-seed", "--epochs", "30",
                             "--batch-size", "16", "--limit", "160", "--out", str(out), *common],
                            env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not (out / "checkpoint.safetensors").exists() and proc.poll() is None:
        pass
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "saved a checkpoint" in err and "Traceback" not in err, err
    done = json.loads((out / "config.json").read_text())["epochs_done"]
    assert done < 30
    refused = litenet("train", "--out", str(out), "--resume", "--epochs", "31", "--lr-base", "0.5", *common)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--epochs: recorded 30, given 31" in refused.stderr and "--lr-base: recorded 0.048, given 0.5" in refused.stderr
    r = litenet("train", "--out", str(out), "--resume", "--limit", "320", *common)
    assert r.returncode == 2 and "--limit: recorded 160 training images, given 320" in r.stderr
    r = litenet("train", "--out", str(out), "--resume", *common)  # no --limit: the recorded 160, not all 320
    assert r.returncode == 0, r.stderr
    assert "litenet train: resuming" in r.stderr and "of 30, step" in r.stderr
    doc = json.loads((out / "config.json").read_text())
    assert doc["epochs_done"] == 30 and doc["train"]["batch_size"] == 16 and doc["data"]["train_images"] == 160
    again = litenet("train", "--out", str(out), "--resume", *common)  # a finished run: nothing to do, said so
    assert again.returncode == 0 and f"{out}: all 30 epochs are done already; nothing left to train" in again.stderr


def test_gradcheck_shows_progress_per_tensor_and_is_quick_by_default():
    r = litenet("gradcheck", "--preset", "litenet-seed")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 30 and lines[0].startswith("  litenet-seed: 1/30 ") and lines[-1].startswith("  litenet-seed: 30/30 input")
    assert "(quick; --full for the check of record)" in r.stdout
    full = litenet("gradcheck", "--preset", "litenet-seed", "--full", "--no-progress")
    assert full.returncode == 0 and full.stderr == "" and "checks (full)" in full.stdout
    quick_checks, full_checks = (int(x.stdout.split(": ")[1].split(" ")[0]) for x in (r, full))
    assert full_checks > quick_checks  # more directions in the check of record


def test_a_batch_larger_than_the_data_is_a_setting_error_before_any_line(maps, tmp_path):
    out = tmp_path / "run"
    r = litenet("train", "--preset", "litenet-seed", "--batch-size", "512", "--maps", str(maps), "--out", str(out),
                "--backend", "numpy", "--no-progress")
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
    assert "--batch-size 512 is larger than the 320 training images" in r.stderr and "0 steps" not in r.stderr
    assert not out.exists()


def test_one_epoch_is_singular_and_the_end_says_what_to_run_next(maps, tmp_path):
    out = tmp_path / "run"
    r = litenet("train", "--preset", "litenet-seed", "--epochs", "1", "--batch-size", "16", "--maps", str(maps),
                "--out", str(out), "--backend", "numpy", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "1 epoch of 20 steps" in r.stdout and "1 epochs" not in r.stdout
    assert f"next: litenet export --weights {out} --int8" in r.stderr


def test_a_closed_pipe_ends_quietly(monkeypatch, capfd):
    """`litenet eval | head -1`: the command's next print meets a closed pipe; no traceback, exit 1."""
    from litenet import cli

    def reader_gone(args):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr("litenet.data.cli.run", reader_gone)
    assert cli.main(["data"]) == 1
    assert capfd.readouterr().err == ""


def test_errors_name_the_flag_typed_and_bf16_on_numpy_is_one_line_before_any_folder(maps, tmp_path):
    out = tmp_path / "run"
    common = ["--preset", "litenet-seed", "--maps", str(maps), "--out", str(out), "--backend", "numpy"]
    r = litenet("train", *common, "--lr-base", "-1")
    assert r.returncode == 2 and r.stderr == "litenet train: error: --lr-base must be > 0.0; got -1.0\n", r.stderr
    r = litenet("train", *common, "--precision", "bf16")
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
    assert "--precision bf16" in r.stderr and "--backend numpy" in r.stderr
    assert not out.exists()
