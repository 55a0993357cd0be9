"""Helpers of the data-parallel tests: ranks as threads of the test process, joined by the real
SharedMemoryComm (a threading.Barrier stands in for the launcher's multiprocessing one), so a
two-rank run costs no process start-up; and the weight comparison with its computed tolerance."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train.numpy_backend import NumpyBackend
from litenet.train.parallel.agreement import compare_runs, stats_bounds, weights_bound
from litenet.train.parallel.comm import PeerFailed, SharedMemoryComm
from litenet.train.trainer import Split


def run_ranks(world: int, fn, slot_bytes: int = 1 << 16):
    """fn(comm) on `world` threads, one rank each; their results in rank order. A rank that raises
    breaks the barrier (as the launcher does), so the others stop instead of waiting for ever."""
    segment = SharedMemoryComm.create_segment(world, slot_bytes)
    barrier = threading.Barrier(world)
    results, errors = [None] * world, [None] * world

    def rank(r):
        comm = SharedMemoryComm(r, world, segment.name, barrier, slot_bytes)
        try:
            results[r] = fn(comm)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
            errors[r] = exc
            barrier.abort()
        finally:
            comm.close()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        segment.close()
        segment.unlink()
    raised = [e for e in errors if e is not None]
    if raised:  # the cause, not the other ranks' PeerFailed
        raise next((e for e in raised if not isinstance(e, PeerFailed)), raised[0])
    return results


# -- small models and data -------------------------------------------------------------------------

# Cross-entropy (smooth): the margin loss's hinge and rival arg-max turn a last-bit difference into
# a whole image's worth of gradient now and then, in float32 against float64 as much as here.
MODEL = ModelConfig(width=16, hidden=40, blocks=2)
TRAIN = TrainConfig(batch_size=24, lr_base=0.05, clip_threshold=1.0, loss="cross-entropy")  # clips ~15 of 100


def images(n: int = 96, classes: int = 10, seed: int = 0):
    """Learnable images (tests/golden/record.learnable_images), labels uint8 as the data set stores them."""
    from tests.golden.record import learnable_images

    pixels, labels = learnable_images(n, classes, seed)
    return pixels, labels.astype(np.uint8)


def steps(count: int, n: int, batch: int, seed: int = 1):
    """(batches, lrs, flips) for `count` steps over n images."""
    rng = np.random.default_rng(seed)
    batches = np.stack([rng.permutation(n)[:batch] for _ in range(count)])
    return batches, np.full(count, 0.05), rng.random((count, batch)) < 0.5


def numpy_run(schedule, data, comm=None, model=MODEL, train=TRAIN, dtype=np.float32):
    """(final weights, statistics) of a NumpyBackend trained on `schedule`, as one rank of `comm`."""
    backend = NumpyBackend(model, train, init_params(model, train.seed), dtype=dtype, comm=comm)
    backend.load_dataset(*data)
    backend.train_steps(*schedule)
    return backend.params.copy(), backend.fetch_stats()


def weights_agree(got, want, count=100, model=MODEL, train=TRAIN) -> dict:
    """got against the reference weights `want` after `count` steps from the initialisation."""
    start = init_params(model, train.seed)
    return compare_runs(got, want, weights_bound(model, train.batch_size, count, start, want))


def stats_agree(got, want, count=100, model=MODEL, train=TRAIN) -> dict:
    return compare_runs(got, want, *stats_bounds(model, train.batch_size, count, want))


def split(n: int, seed: int) -> Split:
    pixels, labels = images(n, seed=seed)
    return Split(pixels, labels)


class SpyBackend(NumpyBackend):
    """The NumPy backend, keeping its weights after every chunk, one list per rank."""

    runs: dict[int, list] = {}

    def __init__(self, *args, comm=None, **kw):
        super().__init__(*args, comm=comm, **kw)
        self.trace = SpyBackend.runs.setdefault(0 if comm is None else comm.rank, [])

    def fetch_stats(self):
        stats = super().fetch_stats()
        self.trace.append(self.params.copy())
        return stats


class DriftingBackend(SpyBackend):
    """Rank 1 drifts by one ulp of one weight after its first chunk: the trainer must notice."""

    def fetch_stats(self):
        stats = super().fetch_stats()
        if self.comm is not None and self.comm.rank == 1 and len(self.trace) == 1:
            self.params[0] = np.nextafter(self.params[0], np.float32(np.inf))
        return stats


# -- rank processes for the launcher's tests (spawned children import these by name) -------------


def exit_after(code: int, delay: float) -> None:
    time.sleep(delay)
    sys.exit(code)


def count_interrupts(ready: str) -> None:
    """Say it is ready, wait for SIGINT, then a little longer (a second, stray one would arrive);
    exit 100 + how many came, or 99 if still in the launcher's process group."""
    got = []
    signal.signal(signal.SIGINT, lambda *_: got.append(1))
    Path(ready, f"{os.getpid()}").touch()
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    sys.exit(99 if os.getpgid(0) != os.getpid() else 100 + len(got))
