"""bench/mixer_phase_times.py's bookkeeping, without a GPU: the marks of one forward (each block's start
and end of each phase) turned into each kind of phase's work and the grid barrier after it."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from mixer_phase_times import kind_of, phase_table  # noqa: E402


def test_phases_are_named_as_the_kernel_runs_them():
    phases = 3 * 2 + 2  # two blocks
    assert [kind_of(p, phases) for p in range(phases)] == [
        "embed", "token", "channel fc1", "channel fc2", "token", "channel fc1", "channel fc2", "head"]


def test_work_and_barriers_come_from_the_slowest_and_the_median_block():
    # 2 blocks, 1 Mixer block: 5 phases; ns since an arbitrary origin (globaltimer's)
    start = np.array([[0, 100], [5000, 5200], [9000, 9100], [14000, 14300], [20000, 20100]])
    work = np.array([[3000, 1000], [2000, 1800], [4000, 3000], [5000, 1000], [6000, 100]])
    marks = np.stack([start + 10**9, start + work + 10**9], axis=-1)  # (phase, block, start | end)
    table = phase_table(marks.reshape(-1), phases=5, grid=2)
    assert table["embed"]["work_max"] == pytest.approx(3.0)
    assert table["embed"]["work_median"] == pytest.approx(2.0)
    # the last block's arrival (3.0 µs, block 0) to the first start of the token phase (5.0), then to the last (5.2)
    assert table["embed"]["release"] == pytest.approx(2.0)
    assert table["embed"]["departure"] == pytest.approx(0.2)
    assert table["channel fc2"]["work_max"] == pytest.approx(5.0) and table["channel fc2"]["count"] == 1
    assert table["channel fc2"]["release"] == pytest.approx(20.0 - 19.0)
    assert table["head"]["release"] == 0.0 and table["head"]["count"] == 1  # nothing after the head
    assert table["total_us"] == pytest.approx(26.0)
