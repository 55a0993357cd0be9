"""`litenet train --processes N` as a user runs it, and the launcher's supervision: ranks in their
own process group, Ctrl-C passed on once, a failed rank stops the others, one-line user errors."""

import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from cli_runs import fake_maps, interrupt_then_resume, litenet
from parallel_fixtures import count_interrupts, exit_after, weights_agree

from litenet.train.parallel.launch import exit_code, run_ranks
from litenet.weights import load_model

@pytest.fixture(scope="module")
def maps(tmp_path_factory) -> Path:
    return fake_maps(tmp_path_factory.mktemp("cifar"))


def train_args(maps, out, *extra):
    return ["train", "--preset", "litenet-seed", "--batch-size", "16", "--maps", str(maps), "--out", str(out),
            "--no-progress", *extra]


def test_two_processes_end_to_end(maps, tmp_path):
    two = litenet(*train_args(maps, tmp_path / "two", "--epochs", "2", "--processes", "2"))
    assert two.returncode == 0, two.stderr
    assert two.stdout.count("litenet train: litenet-seed") == 1 and "× 2 ranks (8 images each" in two.stdout
    assert two.stdout.count("epoch 1/2") == 1 and two.stdout.count("epoch 2/2") == 1  # rank 0 alone reports
    one = litenet(*train_args(maps, tmp_path / "one", "--epochs", "2", "--processes", "1"))
    assert one.returncode == 0, one.stderr
    got, model, train, doc = load_model(tmp_path / "two")
    want = load_model(tmp_path / "one")[0]
    assert doc["epochs_done"] == 2 and train.batch_size == 16
    weights = weights_agree(got, want, 40, model, train)  # 2 epochs of 320 / 16 steps
    assert weights["ok"], weights
    run = json.loads((tmp_path / "two" / "metrics.jsonl").read_text().splitlines()[0])
    assert run["world_size"] == 2


def test_ctrl_c_saves_and_resume_finishes(maps, tmp_path):
    out = tmp_path / "run"
    interrupt_then_resume(train_args(maps, out, "--epochs", "12", "--processes", "2"), out, steps=12 * 20)


def test_user_errors_are_one_line_before_any_rank_starts(maps, tmp_path):
    cases = [(["--processes", "3"], "batch_size 16 does not split evenly over 3 ranks", 3),
             (["--gpus", "2", "--backend", "numpy"], "--processes N", 2),
             (["--processes", "2", "--backend", "cuda"], "--gpus N", 2),
             (["--processes", "0"], "--processes 0: give a number of processes ≥ 1", 2),
             (["--processes", "2", "--resume"], "no checkpoint to resume from", 3),
             (["--processes", "2", "--check-kernels", "1"], "needs --backend cuda", 2)]
    try:
        import cupy  # noqa: F401
    except ImportError:
        cases.append((["--gpus", "2"], "--gpus 2 needs CUDA GPUs", 4))
    for extra, message, code in cases:  # 2: a flag out of range or against another (UsageError), 3: the rest, 4: no GPU
        r = litenet(*train_args(maps, tmp_path / "run", *extra))
        assert r.returncode == code and "Traceback" not in r.stderr, (extra, r.stderr)
        assert r.stderr.count("\n") == 1 and message in r.stderr, (extra, r.stderr)
    assert not (tmp_path / "run").exists()


def test_ranks_get_ctrl_c_once_in_their_own_process_group(tmp_path):
    def press_ctrl_c():
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # the launcher's own process, as a terminal's Ctrl-C

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    ctx = multiprocessing.get_context("spawn")
    codes = run_ranks(ctx, count_interrupts, [(str(tmp_path),), (str(tmp_path),)], grace=20)
    assert codes == [101, 101]


def test_a_failed_rank_stops_the_others(capfd):
    ctx = multiprocessing.get_context("spawn")
    aborted = []
    started = time.monotonic()
    codes = run_ranks(ctx, exit_after, [(0, 60.0), (2, 0.1)], on_failure=lambda: aborted.append(True), grace=0.5)
    assert codes == [-signal.SIGTERM, 2] and aborted == [True]
    assert time.monotonic() - started < 30
    assert "rank 1 failed (exit code 2)" in capfd.readouterr().err
    assert exit_code(codes) == 1
    assert exit_code([0, 0]) == 0 and exit_code([130, 130]) == 130 and exit_code([5, 5]) == 5
