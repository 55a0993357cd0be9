"""Communicators: how the ranks of a data-parallel run sum their buffers, and the few rules built on them.

Every communicator has the same small interface:
  rank, world_size
  allreduce_sum_(buffer, stream=None)  sum `buffer` over the ranks, in place; every rank ends with the
                                       same bits. A contiguous NumPy array for any communicator; for
                                       NcclComm also a CuPy array on its GPU, enqueued on `stream`
  barrier()                            returns once every rank has called it
  close()

SingleRank is one process alone (nothing to do); SharedMemoryComm joins processes (or threads) of
one machine through a shared-memory segment — the NumPy backend's communicator, and what makes the
multi-rank logic testable on a CPU; NcclComm (nccl.py) joins GPUs through NCCL.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from litenet.errors import LiteNetError

# Each rank's share of the segment. A larger buffer is summed in pieces of this size, so the
# segment stays small (/dev/shm is 64 MiB in many containers) whatever the model.
SLOT_BYTES = 4 << 20


class PeerFailed(RuntimeError):
    """Another rank stopped (its launcher broke the barrier): this rank cannot go on alone."""


class ReplicaMismatch(AssertionError):
    """The ranks' weights differ after a chunk of steps: an internal bug, never a user mistake."""


class SingleRank:
    """One process alone: the sums are the buffers themselves."""

    rank, world_size = 0, 1

    def allreduce_sum_(self, buffer, stream=None) -> None:
        pass

    def barrier(self) -> None:
        pass

    def close(self) -> None:
        pass


class SharedMemoryComm:
    """Ranks on one machine. Each rank copies its buffer into its own slot of a shared segment;
    after a barrier every rank adds the slots up in rank order (s = b₀ + b₁ + … + b_{N−1}, one
    NumPy addition at a time), so every rank computes bit-identical sums; a second barrier keeps
    a slot from being refilled while another rank still reads it.

    `barrier` is a multiprocessing (or threading) Barrier of world_size parties; the launcher
    aborts it when a rank dies, which turns the others' wait into PeerFailed instead of a hang.
    """

    def __init__(self, rank: int, world_size: int, segment: str, barrier, slot_bytes: int = SLOT_BYTES):
        from multiprocessing import shared_memory

        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside a world of {world_size}")
        self.rank, self.world_size = rank, world_size
        self._shm = shared_memory.SharedMemory(name=segment)
        if self._shm.size < world_size * slot_bytes:
            raise ValueError(f"segment {segment} holds {self._shm.size} bytes, not {world_size} × {slot_bytes}")
        self._barrier, self._slot_bytes = barrier, slot_bytes

    @staticmethod
    def create_segment(world_size: int, slot_bytes: int = SLOT_BYTES):
        """The segment a group shares (the launcher creates it, and unlinks it when the ranks end)."""
        from multiprocessing import shared_memory
        return shared_memory.SharedMemory(create=True, size=world_size * slot_bytes)

    def _slot(self, rank: int, dtype, count: int) -> np.ndarray:
        return np.ndarray((count,), dtype, self._shm.buf, offset=rank * self._slot_bytes)

    def _wait(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise PeerFailed(f"rank {self.rank}: another rank stopped; stopping too") from None

    def allreduce_sum_(self, buffer: np.ndarray, stream=None) -> None:
        if not (isinstance(buffer, np.ndarray) and buffer.flags.c_contiguous):
            raise TypeError("SharedMemoryComm sums contiguous NumPy arrays")
        flat = buffer.reshape(-1)
        step = self._slot_bytes // flat.itemsize
        for lo in range(0, flat.size, step):
            part = flat[lo:lo + step]
            self._slot(self.rank, part.dtype, part.size)[...] = part
            self._wait()
            total = self._slot(0, part.dtype, part.size).copy()
            for r in range(1, self.world_size):
                total += self._slot(r, part.dtype, part.size)
            self._wait()
            part[...] = total

    def barrier(self) -> None:
        self._wait()

    def close(self) -> None:
        self._shm.close()


# -- the rules every backend and the trainer share --------------------------------------------------


def reduces(comm) -> bool:
    """Whether a backend must sum its gradients: for any communicator but SingleRank (a world of
    one through NCCL or shared memory still takes the all-reduce path, which is how it is tested)."""
    return comm is not None and not isinstance(comm, SingleRank)


def per_rank_batch(batch: int, world_size: int) -> int:
    """B/N, the images each rank trains on per step; B must be a multiple of N."""
    if world_size > batch:  # no multiple to suggest that a user would want: fewer ranks is the fix
        raise LiteNetError(f"{world_size} ranks for a batch of {batch}: each rank needs at least one image; "
                           f"use at most {batch} ranks")
    if batch % world_size:
        multiple = -(-batch // world_size) * world_size
        raise LiteNetError(f"batch_size {batch} does not split evenly over {world_size} ranks; choose a multiple "
                           f"of {world_size} (e.g. --batch-size {multiple})")
    return batch // world_size


def local_columns(batch: int, comm) -> slice:
    """The columns of every step's index row that this rank trains on: [r·B/N, (r+1)·B/N)."""
    per = per_rank_batch(batch, 1 if comm is None else comm.world_size)
    rank = 0 if comm is None else comm.rank
    return slice(rank * per, (rank + 1) * per)


def reduce_stats(stats: dict[str, np.ndarray], comm) -> dict[str, np.ndarray]:
    """The statistics of the global batch from every rank's own (backends.STAT_FIELDS).

    loss: the mean of the ranks' losses (each is the mean over B/N images, so this is the mean
    over B). path sums (‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩): Σ over ranks / N², because a rank's
    ∂ of a mean over B/N images is N times the global ∂ of the same image (no operation mixes
    images), so its squared sums are N² times its images' share of the global sums.
    grad_norm, clipped, grad_sq already describe the summed gradient, the same on every rank.
    """
    if not reduces(comm):
        return stats
    n, steps = comm.world_size, len(stats["loss"])
    both = np.concatenate([stats["loss"], stats["path"].ravel()]).astype(np.float64)
    comm.allreduce_sum_(both)
    return {**stats, "loss": both[:steps] / n, "path": (both[steps:] / n ** 2).reshape(stats["path"].shape)}


def fingerprint(params: np.ndarray) -> float:
    """A 48-bit hash of the weights' bytes as a float64 (exact: below 2⁵³, and a sum with zeros)."""
    digest = hashlib.blake2b(np.ascontiguousarray(params).tobytes(), digest_size=6).digest()
    return float(int.from_bytes(digest, "little"))


def agree(comm, stop: bool, params: np.ndarray) -> bool:
    """One collective per chunk of steps: whether any rank was asked to stop (Ctrl-C reaches the
    ranks at slightly different times; all must stop after the same step), and a check that every
    rank holds bit-identical weights (ReplicaMismatch otherwise)."""
    if not reduces(comm):
        return stop
    votes = np.zeros(1 + comm.world_size)
    votes[0] = float(stop)
    votes[1 + comm.rank] = fingerprint(params)
    comm.allreduce_sum_(votes)
    prints = votes[1:]
    if not np.all(prints == prints[0]):
        differ = [r for r in range(comm.world_size) if prints[r] != prints[0]]
        raise ReplicaMismatch(f"the weights of rank(s) {differ} differ from rank 0's after the same steps")
    return bool(votes[0] > 0)
