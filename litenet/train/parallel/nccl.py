"""NcclComm: the ranks of a multi-GPU run, one GPU per process, joined by NCCL through CuPy.

The launcher makes the unique id (`unique_id()`) and hands it to every rank; NCCL's bootstrap
root then lives in the launcher, which outlives the ranks. Each rank selects its GPU before it
joins (`device`), because an NCCL communicator belongs to the device current at its creation.
NVLink multicast (NVLS) must stay off on the machines LiteNet runs on: the launcher sets
NCCL_NVLS_ENABLE=0 in every rank's environment (launch.CHILD_ENV), and `NcclComm` refuses to
start without it.
"""

from __future__ import annotations

import os

import numpy as np

from litenet.errors import LiteNetError


def _nccl():
    """cupy.cuda.nccl, or a LiteNetError saying how to get it. Without libnccl some CuPy versions
    fail the import and others import a module without the NCCL functions, so both are checked."""
    try:
        from cupy.cuda import nccl
        missing = None if hasattr(nccl, "NcclCommunicator") else "CuPy found no NCCL library"
    except Exception as exc:  # ImportError (libnccl.so.2 not found), or CuPy itself missing
        missing = f"{type(exc).__name__}: {exc}"
    if missing:
        raise LiteNetError(f"NCCL is unavailable through CuPy ({missing}); install the NCCL wheel for your CUDA "
                           "(e.g. pip install nvidia-nccl-cu12; docs/parallel.md) or train on one GPU")
    return nccl


def unique_id():
    """A fresh NCCL unique id (picklable: bytes or a tuple of ints, by CuPy version)."""
    return _nccl().get_unique_id()


def nccl_version() -> int | None:
    try:
        return int(_nccl().get_version())
    except LiteNetError:
        return None


class NcclComm:
    """One rank of an NCCL group; sums on the caller's stream, with no host synchronisation."""

    def __init__(self, rank: int, world_size: int, uid, device: int | None = None):
        if os.environ.get("NCCL_NVLS_ENABLE") != "0":
            raise LiteNetError("NCCL_NVLS_ENABLE must be 0 (NVLink multicast is not allowed here); start the "
                               "ranks with `litenet train --gpus N`, which sets it")
        import cupy

        nccl = _nccl()
        if device is not None:
            cupy.cuda.Device(device).use()
        self.cp, self.rank, self.world_size = cupy, rank, world_size
        self._ops = nccl
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32}
        self._comm = nccl.NcclCommunicator(world_size, uid, rank)  # returns once every rank has joined
        self._stream = cupy.cuda.Stream(non_blocking=True)  # for host buffers and barrier()

    def allreduce_sum_(self, buffer, stream=None) -> None:
        """A CuPy array: enqueued on `stream` (the backend's), returns at once. A NumPy array: staged
        through the GPU on this communicator's own stream, and waited for."""
        if isinstance(buffer, np.ndarray):
            with self._stream:
                staged = self.cp.asarray(buffer)
            self._allreduce(staged, self._stream)
            summed = staged.get(stream=self._stream)
            self._stream.synchronize()
            buffer[...] = summed
            return
        self._allreduce(buffer, stream or self._stream)

    def _allreduce(self, buf, stream) -> None:
        if buf.dtype not in self._types or not buf.flags.c_contiguous:
            raise TypeError(f"NcclComm sums contiguous float32/float64/int32 arrays, not {buf.dtype}")
        self._comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, self._types[buf.dtype], self._ops.NCCL_SUM,
                             stream.ptr)

    def barrier(self) -> None:
        self.allreduce_sum_(np.zeros(1, np.float32))

    def close(self) -> None:
        self._comm.destroy()
