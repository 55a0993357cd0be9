"""Run folders shared by two trainings, and the leftovers of a training killed mid-write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_fixtures import TINY_MODEL, TINY_TRAIN, synthetic_split  # noqa: E402
from adversarial_helpers import REPO  # noqa: E402
from litenet.errors import EXIT_ENVIRONMENT, EnvironmentProblem  # noqa: E402
from litenet.train.run_lock import LOCK_FILE, hold_run_folder  # noqa: E402
from litenet.train.trainer import LoopOptions, TrainData, Trainer  # noqa: E402

DATA = TrainData(synthetic_split(32, 0), synthetic_split(16, 1), tuple(f"c{i}" for i in range(10)))


def tiny_trainer(out):
    import dataclasses

    return Trainer("tiny", TINY_MODEL, dataclasses.replace(TINY_TRAIN, epochs=1), out, DATA,
                   LoopOptions(progress=False, chunk_steps=2))


def test_a_second_training_into_a_held_folder_is_refused_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    with hold_run_folder(out):  # what a first `litenet train` holds while it runs
        with pytest.raises(EnvironmentProblem, match="in use by another `litenet train`") as caught:
            tiny_trainer(out).run()
        assert caught.value.exit_status == EXIT_ENVIRONMENT
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]
    assert tiny_trainer(out).run().stopped == "finished"  # once released, the folder trains
    assert not (out / LOCK_FILE).exists()


def test_a_killed_holder_leaves_no_lock_and_its_unfinished_writes_are_removed(tmp_path):
    out = tmp_path / "run"
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal
from litenet.train.run_lock import hold_run_folder
held = hold_run_folder({str(out)!r})
held.__enter__()
open({str(out / '.checkpoint.safetensors.ab12cd34.tmp')!r}, 'wb').write(bytes(4096))
os.kill(os.getpid(), signal.SIGKILL)
"""], env={"PYTHONPATH": str(REPO)}, capture_output=True)
    assert killed.returncode == -9 and (out / LOCK_FILE).exists()
    assert tiny_trainer(out).run().stopped == "finished"
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
