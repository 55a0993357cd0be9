"""bench_eval_gpu.py's bookkeeping, without a GPU: how much of the evaluation running it beside training hid."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_eval_gpu import hidden_share  # noqa: E402


def test_the_share_hidden_runs_from_none_when_serial_to_all_when_the_epoch_alone():
    assert hidden_share(0.64, 0.085, 0.725) == pytest.approx(0.0)
    assert hidden_share(0.64, 0.085, 0.64) == pytest.approx(1.0)
    assert hidden_share(0.64, 0.080, 0.68) == pytest.approx(0.5)
    assert hidden_share(0.64, 0.085, 0.80) == 0.0  # slower together than one after the other: nothing hidden
    assert hidden_share(0.64, 0.0, 0.64) == 0.0
