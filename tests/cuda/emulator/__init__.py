"""A CPU stand-in for CuPy's RawModule: compiles a kernel file with g++ and emu.h, launches by ctypes.

`EmuModule("embed").get_function("embed_forward")(grid, block, args, shared_mem=…)` behaves like
CuPy's RawKernel with NumPy arrays in place of CuPy arrays: arrays are passed as pointers, and
scalars must be numpy.int32 / numpy.float32, as the GPU path requires (a Python int or a scalar of
the wrong width is refused here rather than silently misread on a GPU).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from litenet.gpu import sources

HERE = Path(__file__).resolve().parent
BUILD = Path(tempfile.gettempdir()) / f"litenet-emu-{os.getuid()}"


def available() -> bool:
    return shutil.which("g++") is not None


@lru_cache(maxsize=None)
def build(name: str, defines: tuple[str, ...] = ()) -> Path:
    """Compile kernels/<name>.cu for the CPU (cached by content) and return the shared library.
    `defines`: macros set before the kernels, e.g. LITENET_EMULATE_WGMMA (the Hopper path of
    gemm_wide.cuh, which a real compilation takes only for sm_90a)."""
    kernels = sources.signatures(name)
    header = (HERE / "emu.h").read_text()
    source = sources.source_path(name)
    launchers = "\n".join(
        f'extern "C" void emu_launch_{k}(const unsigned* dims, size_t smem, void** args) '
        f"{{ emu::launch({k}, dims, smem, args); }}" for k in kernels)
    macros = "".join(f"#define {d} 1\n" for d in defines)
    text = f'#include "emu.h"\n{macros}#include "{source}"\n{launchers}\n'
    digest = hashlib.sha256((text + header + sources.read_source(name)).encode()).hexdigest()[:16]
    BUILD.mkdir(parents=True, exist_ok=True)
    stem = name.replace("/", "-")  # reference/linear → reference-linear
    lib = BUILD / f"{stem}-{digest}.so"
    if not lib.exists():  # files of this process's own until the rename: test workers may build it at once
        cpp, part = BUILD / f"{stem}-{digest}.{os.getpid()}.cpp", f"{lib}.{os.getpid()}.tmp"
        cpp.write_text(text)
        cmd = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-w", f"-I{HERE}", f"-I{source.parent}",
               "-o", part, str(cpp)]
        subprocess.run(cmd, check=True)
        os.replace(part, lib)
        cpp.unlink()
    return lib


class EmuKernel:
    """One kernel: call it like a CuPy RawKernel."""

    def __init__(self, lib, name: str, params):
        self.name, self.params = name, params
        self._fn = getattr(lib, f"emu_launch_{name}")
        self._fn.restype = None
        self._fn.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]

    def __call__(self, grid, block, args, shared_mem: int = 0):
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(args)} arguments for {len(self.params)} parameters")
        keep = []
        for param, arg in zip(self.params, args):
            if param.kind == "pointer":
                if not isinstance(arg, np.ndarray):
                    raise TypeError(f"{self.name}.{param.name}: expected an array, got {type(arg).__name__}")
                if arg.dtype != np.dtype(param.dtype) or not arg.flags.c_contiguous:
                    raise TypeError(f"{self.name}.{param.name}: expected a contiguous {param.dtype} array, "
                                    f"got {arg.dtype}{'' if arg.flags.c_contiguous else ' (not contiguous)'}")
                value = ctypes.c_void_p(arg.ctypes.data)
            elif param.kind == "int":
                if not isinstance(arg, np.int32):
                    raise TypeError(f"{self.name}.{param.name}: expected numpy.int32, got {type(arg).__name__}")
                value = ctypes.c_int32(int(arg))
            else:
                if not isinstance(arg, np.float32):
                    raise TypeError(f"{self.name}.{param.name}: expected numpy.float32, got {type(arg).__name__}")
                value = ctypes.c_float(float(arg))
            keep.append(value)
        pointers = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(v) for v in keep])
        dims = [int(v) for v in (tuple(grid) + (1, 1, 1))[:3]] + [int(v) for v in (tuple(block) + (1, 1, 1))[:3]]
        self._fn((ctypes.c_uint * 6)(*dims), int(shared_mem), pointers)


class EmuModule:
    """Every kernel of one `kernels/<name>.cu`, compiled for the CPU."""

    def __init__(self, name: str, defines: tuple[str, ...] = ()):
        self._lib = ctypes.CDLL(str(build(name, defines)))
        self._kernels = {k: EmuKernel(self._lib, k, p) for k, p in sources.signatures(name).items()}

    def get_function(self, kernel: str) -> EmuKernel:
        return self._kernels[kernel]


@lru_cache(maxsize=None)
def module(name: str, defines: tuple[str, ...] = ()) -> EmuModule:
    return EmuModule(name, defines)


def kernel(name: str, defines: tuple[str, ...] = ()) -> EmuKernel:
    """The kernel `name`, from whichever file defines it."""
    return module(sources.kernel_file(name), defines).get_function(name)


WGMMA = ("LITENET_EMULATE_WGMMA",)  # the defines of a Hopper (sm_90a) compilation's wide BF16 tile
