"""A kernel launch as data, and the check of its arguments against the kernel's declared parameters.

The lowering (litenet/lowering/arena.py) binds its calls into lists of Launch, which the device runs or
captures into a CUDA graph.
Every kernel runs with THREADS threads per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet.gpu import sources

THREADS = 256  # threads per block of every LiteNet kernel (the kernels' loops assume it)
SMEM_LIMIT = 48 * 1024  # static + dynamic shared memory every CUDA GPU grants without opting in


@dataclass
class Launch:
    """One kernel launch: `grid` blocks of THREADS threads, `args` as the kernel declares them,
    `shared` bytes of dynamic shared memory, `stream` 0 or 1 (in a captured graph: streams.py), and
    (training, --check-kernels) the Check that holds it to its NumPy twin."""

    kernel: str
    grid: int
    args: tuple
    shared: int = 0
    check: object = None
    stream: int = 0


def check_launch(launch: Launch) -> None:
    """Every argument against the kernel's signature: a wrong dtype on a GPU is silent memory corruption.

    Pointers must be C-contiguous arrays of the pointee's dtype, scalars np.int32 / np.float32.
    """
    params = sources.signatures(sources.kernel_file(launch.kernel))[launch.kernel]
    if len(params) != len(launch.args):
        raise TypeError(f"{launch.kernel}: {len(launch.args)} arguments for {len(params)} parameters")
    for p, arg in zip(params, launch.args):
        if p.kind == "pointer":
            ok = hasattr(arg, "shape") and not np.isscalar(arg) and arg.dtype == np.dtype(p.dtype) and arg.flags.c_contiguous
        else:
            ok = isinstance(arg, np.int32 if p.kind == "int" else np.float32)
        if not ok:
            raise TypeError(f"{launch.kernel}: argument {p.name} should be a {p.kind} {p.dtype}, got "
                            f"{type(arg).__name__} {getattr(arg, 'dtype', '')}")


def named_launch(kernel: str, grid: int, shared: int = 0, **named) -> Launch:
    """A Launch of `kernel` with its arguments given by parameter name, put in the order its
    `extern "C"` declaration lists them; a missing or unknown name is a TypeError. (The trainer's
    kernel_args does the same with its argument groups; the runtime cannot import the trainer.)"""
    params = [p.name for p in sources.signatures(sources.kernel_file(kernel))[kernel]]
    missing, unknown = [p for p in params if p not in named], [n for n in named if n not in params]
    if missing or unknown:
        raise TypeError(f"{kernel}: missing {missing}, not its parameters {unknown}")
    return Launch(kernel, grid, tuple(named[p] for p in params), shared)
