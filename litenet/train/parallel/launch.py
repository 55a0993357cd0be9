"""`litenet train --gpus N` / `--processes N`: one process per rank, started, supervised and stopped together.

The launcher checks once what every rank would otherwise report N times (the batch splits over
the ranks, enough GPUs, the run folder, the data — converted here, once), makes the rendezvous
(an NCCL unique id, or a shared-memory segment and a barrier), then starts the ranks as fresh
interpreters (multiprocessing "spawn": no CUDA or NCCL state is ever forked). Rank r uses GPU r
(of those CUDA_VISIBLE_DEVICES shows). Every rank's environment has NVLink multicast off
(CHILD_ENV). The ranks run in their own process group, so a Ctrl-C in the terminal reaches only
the launcher, which passes it on to each rank exactly once (a second Ctrl-C, a second time: the
ranks' own rule then aborts). When a rank fails, the others are stopped: the shared-memory barrier
is broken at once; ranks blocked in NCCL are terminated after GRACE_S. The run's exit code is 0,
130 (interrupted, checkpoint saved) or 3 (diverged) when every rank agrees, 1 when any failed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from multiprocessing.connection import wait

from litenet.errors import EXIT_DIVERGED, EXIT_INTERRUPTED, EXIT_OK, EnvironmentProblem, LiteNetError, report
from litenet.train.parallel.comm import PeerFailed, SharedMemoryComm, per_rank_batch
from litenet.train.run import RunOptions, backend_options, run_folder, settings, train_rank

# Set in every rank's environment (and the launcher's own while it makes the NCCL id): the GPU
# machines LiteNet runs on must not use NVLink multicast (NVLS), in NCCL or anything else loaded.
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
FINISHED = (EXIT_OK, EXIT_DIVERGED, EXIT_INTERRUPTED)  # a rank that ends with one of these did not fail
GRACE_S = 10.0  # after a rank fails, how long the others get to stop by themselves


def launch(opts: RunOptions, backend: str, world: int) -> int:
    """Check, start `world` ranks of the run `opts` asks for, wait; the run's exit code."""
    from litenet.data import open_cifar10
    from litenet.train.trainer import check_run_folder, config_json

    name, model, train = settings(opts)
    per_rank_batch(train.batch_size, world)
    backend_options(opts, backend)
    if backend == "cuda":
        _check_gpus(world)
    open_cifar10(data=opts.data, maps=opts.maps, allow_partial=opts.allow_partial)  # converts once, here
    check_run_folder(run_folder(opts, name), opts.resume, opts.force, config_json(model, train))
    env = dict(CHILD_ENV)
    if backend == "numpy":  # share the cores instead of every rank starting a thread per core
        threads = str(max(1, (os.cpu_count() or 1) // world))
        env.update({k: os.environ.get(k, threads) for k in THREAD_VARS})
    ctx = multiprocessing.get_context("spawn")
    segment = None
    with _environment(env):
        if backend == "cuda":
            from litenet.train.parallel.nccl import unique_id
            rendezvous, abort = ("nccl", unique_id()), None
        else:
            segment, barrier = SharedMemoryComm.create_segment(world), ctx.Barrier(world)
            rendezvous, abort = ("shm", segment.name, barrier), barrier.abort
        try:
            codes = run_ranks(ctx, _worker, [(rank, world, backend, rendezvous, opts) for rank in range(world)],
                              on_failure=abort)
        finally:
            if segment is not None:
                segment.close()
                segment.unlink()
    return exit_code(codes)


def _check_gpus(world: int) -> None:
    from litenet.train.backends import cuda_unavailable_reason
    reason = cuda_unavailable_reason()
    if reason:
        raise EnvironmentProblem(f"--gpus {world} needs CUDA GPUs: {reason}; use --processes {world} for NumPy ranks")
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
    if count < world:
        raise EnvironmentProblem(f"--gpus {world} asks for {world} GPUs but only {count} are visible "
                           "(CUDA_VISIBLE_DEVICES); ask for fewer")


@contextmanager
def _environment(values: dict):
    """os.environ with `values` set (spawned children inherit it), restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_ranks(ctx, target, rank_args: list[tuple], on_failure=None, grace: float = GRACE_S) -> list[int]:
    """Start target(*args) for each rank's args, each in its own process and process group; forward
    SIGINT and SIGTERM to them; when one fails, call on_failure() and terminate the rest after
    `grace` s. Returns the exit codes (negative: killed by that signal)."""
    procs: list = []

    def forward(signum, frame):
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                try:
                    os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass

    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        # Children start with SIGINT blocked (the mask survives fork and exec) until they have left
        # the terminal's process group; one arriving meanwhile waits here and is forwarded.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for rank, args in enumerate(rank_args):
                p = ctx.Process(target=_rank_main, args=(target, args), name=f"litenet-rank{rank}")
                p.start()
                procs.append(p)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        failed_at = None
        while any(p.exitcode is None for p in procs):
            wait([p.sentinel for p in procs if p.exitcode is None], timeout=0.5)
            if failed_at is None and any(p.exitcode is not None and p.exitcode not in FINISHED for p in procs):
                failed_at = time.monotonic()
                bad = next(i for i, p in enumerate(procs) if p.exitcode is not None and p.exitcode not in FINISHED)
                print(f"litenet train: rank {bad} failed (exit code {procs[bad].exitcode}); stopping the other ranks",
                      file=sys.stderr)
                if on_failure is not None:
                    on_failure()
            if failed_at is not None and time.monotonic() - failed_at > grace:
                for p in procs:
                    if p.exitcode is None:
                        p.terminate()
                failed_at = float("inf")  # terminated once; wait for them
        return [p.exitcode for p in procs]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for p in procs:  # only if the launcher itself is being torn down mid-run
            if p.exitcode is None:
                p.kill()


def exit_code(codes: list[int]) -> int:
    """0, EXIT_DIVERGED or 130 when no rank failed (the highest, should the ranks differ); else 1."""
    if all(c in FINISHED for c in codes):
        return max(codes)
    return 1


def _rank_main(target, args: tuple) -> None:
    """A rank process: leave the terminal's process group (Ctrl-C comes from the launcher alone),
    take SIGINT again, stop should the launcher vanish, run target(*args)."""
    os.setpgid(0, 0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with_parent()
    target(*args)


def _worker(rank: int, world: int, backend: str, rendezvous: tuple, opts: RunOptions) -> None:
    """One rank of `litenet train`: join the others, train, exit with the trainer's code."""
    comm, code = None, 1
    try:
        comm = _join(rank, world, rendezvous)
        code = train_rank(opts, backend, comm)
    except (LiteNetError, OSError) as exc:
        code = report(f"litenet train (rank {rank})", exc)
    except PeerFailed as exc:
        print(f"litenet train: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    finally:
        if comm is not None:
            comm.close()
    sys.exit(code)


def _join(rank: int, world: int, rendezvous: tuple):
    if rendezvous[0] == "shm":
        return SharedMemoryComm(rank, world, rendezvous[1], rendezvous[2])
    from litenet.train.parallel.nccl import NcclComm
    return NcclComm(rank, world, rendezvous[1], device=rank)


def _exit_with_parent() -> None:
    """Leave no rank behind (holding a GPU, or waiting in NCCL for ever) if the launcher is killed."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="litenet-parent-watch", daemon=True).start()
