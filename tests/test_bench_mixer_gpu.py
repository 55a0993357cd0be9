"""bench_mixer_gpu.py's accounting of one-time costs: a contender's first epoch beyond its usual one
(compilation) is reported, and the times to the targets are given without it as well."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_mixer_gpu import one_time_costs  # noqa: E402


def history(*epoch_seconds):
    total, out = 0.0, []
    for s in epoch_seconds:
        total += s
        out.append({"train_seconds": total})
    return out


def test_the_first_epochs_compilation_is_counted_once_and_taken_off_the_targets():
    costs = one_time_costs(history(20.0, 1.0, 1.2, 0.9, 1.0), {0.82: 24.1})
    assert costs["usual_epoch_seconds"] == pytest.approx(1.0)  # the median of the epochs after the first
    assert costs["first_epoch_extra_seconds"] == pytest.approx(19.0)
    assert costs["seconds_to_targets_without_first_extra"] == {"0.82": pytest.approx(5.1)}


def test_a_first_epoch_faster_than_usual_costs_nothing_and_one_epoch_tells_nothing():
    assert one_time_costs(history(0.9, 1.0, 1.0), {0.5: 0.9})["first_epoch_extra_seconds"] == 0.0
    assert one_time_costs(history(3.0), {0.5: 3.0}) == {}
