"""Keep freed memory in the process for reuse, so the NumPy backend's large temporaries do not page-fault every step.

A training step allocates the same large arrays every time (activations, gradients, the temporaries
of each elementwise expression). glibc's malloc serves each allocation over 128 KiB–32 MiB with a
fresh mmap and returns it to the kernel on free, so every step touches every page of them anew: one
page fault per 4 KiB, most of a Mixer step's time on a 2-core CPU (docs/decisions.md, "CPU
training"). Serving them from the heap and keeping what is freed (up to
2 GiB) makes a step reuse the pages of the last one. Nothing numerical changes. Elsewhere than glibc
(macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_MAX = -4
KEEP_BYTES = 2**31 - 1  # mallopt takes an int: free memory at the top of the heap up to this stays


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Ask glibc to serve large allocations from the heap and keep freed memory; True where it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_BYTES))
