"""The CPU emulator (tests/cuda/emulator) for the inference kernels: emu.h plus emu_infer.h (dp4a,
__fdiv_rn, __float2int_rn, int4), and an EmuDevice that runs them — so the whole CUDA inference
backend, graphs included, runs here without a GPU."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from functools import lru_cache
from pathlib import Path

import emulator
from emulator import EmuKernel
from emulator.device import EmuDevice

from litenet.gpu import sources

HERE = Path(__file__).resolve().parent
EMU = Path(emulator.__file__).resolve().parent


@lru_cache(maxsize=None)
def build(name: str) -> Path:
    """kernels/<name>.cu compiled for the CPU with both emulator headers (cached by content)."""
    source = sources.source_path(name)
    launchers = "\n".join(f'extern "C" void emu_launch_{k}(const unsigned* dims, size_t smem, void** args) '
                          f"{{ emu::launch({k}, dims, smem, args); }}" for k in sources.signatures(name))
    text = f'#include "emu.h"\n#include "emu_infer.h"\n#include "{source}"\n{launchers}\n'
    headers = (EMU / "emu.h").read_text() + (HERE / "emu_infer.h").read_text()
    digest = hashlib.sha256((text + headers + sources.read_source(name)).encode()).hexdigest()[:16]
    emulator.BUILD.mkdir(parents=True, exist_ok=True)
    lib = emulator.BUILD / f"{name}-infer-{digest}.so"
    if not lib.exists():
        cpp = emulator.BUILD / f"{name}-infer-{digest}.cpp"
        cpp.write_text(text)
        subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-w", f"-I{EMU}", f"-I{HERE}",
                        f"-I{source.parent}", "-o", f"{lib}.tmp", str(cpp)], check=True)
        os.replace(f"{lib}.tmp", lib)
    return lib


@lru_cache(maxsize=None)
def kernel(name: str) -> EmuKernel:
    file = sources.kernel_file(name)
    return EmuKernel(ctypes.CDLL(str(build(file))), name, sources.signatures(file)[name])


class EmuInferDevice(EmuDevice):
    """EmuDevice running the inference kernels; counts launches (a graph replay counts each)."""

    def kernel(self, name: str):
        return kernel(name)
