"""The communicators and the rules on them: bit-identical sums in rank order, any size and dtype,
a failed peer breaks the wait, statistics reduced to the global batch's, agreement on stopping."""

import threading

import numpy as np
import pytest
from parallel_fixtures import run_ranks

from litenet.errors import LiteNetError
from litenet.train.parallel.comm import (PeerFailed, ReplicaMismatch, SharedMemoryComm, SingleRank, agree,
                                         local_columns, reduce_stats)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_allreduce_gives_every_rank_the_rank_order_sum(world, dtype):
    size = 40_000  # 160 or 320 kB: several slots of 64 kB, the last one ragged
    parts = [np.random.default_rng(r).standard_normal(size).astype(dtype) for r in range(world)]
    want = parts[0].copy()
    for p in parts[1:]:
        want += p

    def rank(comm):
        mine = parts[comm.rank].reshape(200, 200).copy()
        comm.allreduce_sum_(mine)
        return mine.ravel()

    for got in run_ranks(world, rank):
        assert got.dtype == dtype and np.array_equal(got, want)  # the same bits on every rank


def test_a_failed_rank_breaks_the_others_wait():
    def rank(comm):
        if comm.rank == 1:
            raise RuntimeError("rank 1 fails")
        comm.allreduce_sum_(np.ones(3))  # would wait for ever without the abort
    with pytest.raises(RuntimeError, match="rank 1 fails"):
        run_ranks(2, rank)
    barrier, segment = threading.Barrier(2), SharedMemoryComm.create_segment(2, 64)
    try:
        comm = SharedMemoryComm(0, 2, segment.name, barrier, 64)
        barrier.abort()  # what the launcher does when a rank process dies
        with pytest.raises(PeerFailed, match="another rank"):
            comm.allreduce_sum_(np.ones(3))
        comm.close()
    finally:
        segment.close()
        segment.unlink()


def test_batch_columns_and_a_batch_that_does_not_split():
    class Rank:
        def __init__(self, rank, world):
            self.rank, self.world_size = rank, world
    assert [local_columns(24, Rank(r, 3)) for r in range(3)] == [slice(0, 8), slice(8, 16), slice(16, 24)]
    assert local_columns(24, None) == slice(0, 24)
    with pytest.raises(LiteNetError, match=r"batch_size 30 does not split evenly over 4 ranks.*--batch-size 32") as e:
        local_columns(30, Rank(0, 4))
    assert "\n" not in str(e.value)


def test_statistics_become_the_global_batchs():
    """Each rank's loss is a mean over B/N images and its ∂ are N× the global ones: the reduction
    must give back the mean loss and the global path sums (here from per-image values)."""
    world, blocks = 2, 1
    per_image_loss = np.array([1.0, 3.0, 2.0, 6.0])
    per_image_ds = np.array([0.5, -1.0, 2.0, 0.25])  # the global ∂s of each image (mean over 4)

    def rank(comm):
        mine = slice(2 * comm.rank, 2 * comm.rank + 2)
        local_ds = per_image_ds[mine] * world  # ∂ of a mean over 2 images, not 4
        sums = [np.dot(local_ds, local_ds)] * 3
        stats = {"loss": np.array([per_image_loss[mine].mean()]), "grad_norm": np.array([5.0]),
                 "clipped": np.array([False]), "grad_sq": np.array([[25.0]]),
                 "path": np.array(sums).reshape(1, blocks, 3)}
        return reduce_stats(stats, comm)

    for got in run_ranks(world, rank):
        assert got["loss"][0] == per_image_loss.mean()
        np.testing.assert_allclose(got["path"][0, 0], [np.dot(per_image_ds, per_image_ds)] * 3)
        assert got["grad_norm"][0] == 5.0 and got["grad_sq"][0, 0] == 25.0  # already global
    alone = {"loss": np.array([2.0])}
    assert reduce_stats(alone, SingleRank()) is alone


def test_ranks_agree_to_stop_and_check_their_weights():
    weights = np.arange(10, dtype=np.float32)
    stops = run_ranks(3, lambda comm: agree(comm, comm.rank == 2, weights))  # only rank 2 saw Ctrl-C
    assert stops == [True, True, True]
    assert run_ranks(2, lambda comm: agree(comm, False, weights)) == [False, False]

    def drifted(comm):
        mine = weights.copy()
        mine[3] += comm.rank
        return agree(comm, False, mine)
    with pytest.raises(ReplicaMismatch, match=r"rank\(s\) \[1\]"):
        run_ranks(2, drifted)
    assert agree(SingleRank(), True, weights) is True
