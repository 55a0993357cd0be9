"""The NumPy backend as ranks of one data-parallel run (threads joined by SharedMemoryComm): after
100 steps N ranks hold the weights of one rank trained on the same global batch, within the
computed float32 tolerance, step by step statistics too; a world of one changes no bit."""

import dataclasses

import numpy as np
import pytest
from parallel_fixtures import MODEL, TRAIN, images, numpy_run, run_ranks, stats_agree, steps, weights_agree

from litenet.errors import LiteNetError
from litenet.model import init_params
from litenet.train.numpy_backend import NumpyBackend
from litenet.train.parallel.comm import SingleRank

DATA = images(96)
SCHEDULE = steps(100, 96, TRAIN.batch_size)


@pytest.fixture(scope="module")
def one_rank():
    return numpy_run(SCHEDULE, DATA)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_n_ranks_equal_one_rank_after_100_steps(one_rank, world):
    want, want_stats = one_rank
    ranks = run_ranks(world, lambda comm: numpy_run(SCHEDULE, DATA, comm))
    got, stats = ranks[0]
    for other, other_stats in ranks[1:]:  # every rank ends with the same bits, and reports the same
        assert np.array_equal(other, got)
        assert all(np.array_equal(other_stats[k], stats[k]) for k in stats)
    weights = weights_agree(got, want)
    assert weights["ok"], weights
    for key in ("loss", "grad_norm", "grad_sq", "path"):
        result = stats_agree(stats[key], want_stats[key])
        assert result["ok"], (key, result)
    assert np.array_equal(stats["clipped"], want_stats["clipped"]) and 5 < want_stats["clipped"].sum() < 95
    print(f"\n{world} ranks vs 1 after 100 steps: weights max |Δ| {weights['max_abs']:.3g} "
          f"({weights['max_rel']:.3g} of max |w|), {weights['bound_ratio']:.3g} of the bound")


def test_the_float32_noise_floor_is_of_the_same_size(one_rank):
    """For scale: how far float32 itself ends from float64 after the same 100 steps (one rank)."""
    exact, _ = numpy_run(SCHEDULE, DATA, dtype=np.float64)
    floor = weights_agree(one_rank[0], exact)
    two = weights_agree(run_ranks(2, lambda comm: numpy_run(SCHEDULE, DATA, comm))[0][0], exact)
    assert floor["ok"] and two["ok"]
    print(f"\nfloat32 vs float64 after 100 steps: 1 rank {floor['max_rel']:.3g}, 2 ranks {two['max_rel']:.3g} "
          "of max |w|")


def test_one_rank_is_bit_identical_to_the_plain_backend(one_rank):
    want, want_stats = one_rank
    for comm in (None, SingleRank()):
        got, stats = numpy_run(SCHEDULE, DATA, comm)
        assert np.array_equal(got, want) and all(np.array_equal(stats[k], want_stats[k]) for k in stats)
    # a world of one through the shared-memory path: the sum of one buffer, ×1
    got, stats = run_ranks(1, lambda comm: numpy_run(SCHEDULE, DATA, comm))[0]
    assert np.array_equal(got, want) and all(np.array_equal(stats[k], want_stats[k]) for k in stats)


def test_ranks_in_float64_too():
    short = steps(5, 96, TRAIN.batch_size)
    want, _ = numpy_run(short, DATA, dtype=np.float64)
    got, _ = run_ranks(2, lambda comm: numpy_run(short, DATA, comm, dtype=np.float64))[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_a_batch_that_does_not_split_is_refused():
    def build(comm):
        NumpyBackend(MODEL, TRAIN, init_params(MODEL, 0), comm=comm)  # batch 24 over 5 ranks
    with pytest.raises(LiteNetError, match="does not split evenly over 5 ranks"):
        run_ranks(5, build)


def test_cutmix_is_refused_before_any_step():
    """CutMix pairs images across the global batch, which no rank holds: refused when the backend is built."""
    cutmix = dataclasses.replace(TRAIN, augment="flip+cutmix", loss="cross-entropy")
    with pytest.raises(LiteNetError, match="CutMix pairs images across the whole batch"):
        run_ranks(2, lambda comm: NumpyBackend(MODEL, cutmix, init_params(MODEL, 0), comm=comm))
