"""The kernel sources: where they are, their `#include`s resolved, and each kernel's signature.

NVRTC (through CuPy) compiles one `.cu` file into one module for the GPU in hand; the local
`.cuh` headers are inlined here so no include path has to reach NVRTC. The signatures let the
backend check every launch's arguments against the kernel before anything runs (a wrong argument
is silent memory corruption on a GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from litenet.resources import kernels_dir

# Every kernel file, training and inference alike (one operation per file, CONVENTIONS.md; the
# fused kernels have their own files). A plain list: kernels are never found by globbing.
KERNEL_FILES = ("embed", "linear", "gelu", "residual_layernorm", "loss", "grad_norm", "grad_average", "sgd",
                "bf16_copy", "fused_rows", "fused_weight_grads", "infer_fp32", "infer_int8",
                "token_linear", "patches", "mean_tokens", "adamw",
                "patches_infer", "layernorm_int8", "token_linear_int8", "mean_tokens_int8", "eval_batches",
                "infer_mixer")
# The reference tier (kernels/reference/): one plain kernel per op kind, loss and optimiser.
REFERENCE_FILES = tuple(f"reference/{name}" for name in (
    "images", "pixel_rows", "patches", "linear", "token_linear", "gelu", "residual", "layernorm", "mean_tokens",
    "losses", "optimizers"))
KERNEL_FILES += REFERENCE_FILES

# The head of a kernel's declaration or definition, up to its opening parenthesis.
_KERNEL_HEAD = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(')
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
# `extern "C" __global__ void [__launch_bounds__(…)] NAME(params)`
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)',
                     re.S)


# The element type behind each pointer parameter, as a NumPy dtype.
POINTEE = {"float": "float32", "int": "int32", "unsigned char": "uint8", "unsigned int": "uint32",
           "signed char": "int8", "unsigned short": "uint16"}  # unsigned short: BF16 bits


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "pointer", "int" or "float"
    dtype: str = ""  # what a pointer points to (POINTEE), "" for scalars
    const: bool = False  # a `const` pointer: the kernel only reads through it


def source_path(name: str) -> Path:
    return kernels_dir() / f"{name}.cu"


@lru_cache(maxsize=None)
def read_source(name: str) -> str:
    """The `.cu` file with its local headers inlined (each header once, `#pragma once` style)."""
    return inline_headers(source_path(name))


@lru_cache(maxsize=None)
def kernel_program(kernel: str) -> str:
    """What NVRTC compiles for `kernel` alone: its file (headers inlined) with every other kernel of the file
    made an unreferenced `static __device__` function, for which no code is generated. A file holds up to
    a few dozen kernels (fp32, TF32, BF16, tall, wide) of which a run launches a few, and the time goes to
    generating code, so one program per kernel compiles only what runs, each on its own thread."""
    def demote(match):
        return match.group(0) if match.group(1) == kernel else f"static __device__ void {match.group(1)}("
    return _KERNEL_HEAD.sub(demote, read_source(kernel_file(kernel)))


def inline_headers(path: Path) -> str:
    """The file at `path` with every local `#include "…"` replaced by the header's text (each header once),
    so what NVRTC compiles — and what the kernel cache's key hashes — carries every header's content."""
    seen: set[str] = set()

    def expand(path: Path) -> str:
        def include(match):
            header = match.group(1)
            if header in seen:
                return ""
            seen.add(header)
            return expand(path.parent / header)
        return _INCLUDE.sub(include, path.read_text(encoding="utf-8").replace("#pragma once", ""))

    return expand(path)


@lru_cache(maxsize=None)
def signatures(name: str) -> dict[str, tuple[Param, ...]]:
    """Kernel name → its parameters, read from the `extern "C" __global__` declarations of a file."""
    return parse_signatures(source_path(name).read_text(encoding="utf-8"))


def parse_signatures(text: str) -> dict[str, tuple[Param, ...]]:
    """Kernel name → its parameters, from the `extern "C" __global__` declarations in `text`."""
    out = {}
    for kernel, params in _KERNEL.findall(text):
        parsed = []
        for param in (p.strip() for p in params.split(",")):
            words = param.replace("*", " * ").split()
            if "*" in words:
                base = " ".join(w for w in words[:words.index("*")] if w != "const")
                parsed.append(Param(words[-1], "pointer", POINTEE[base], "const" in words))
            else:
                parsed.append(Param(words[-1], "float" if "float" in words else "int"))
        out[kernel] = tuple(parsed)
    return out


def kernel_file(kernel: str) -> str:
    """The file that defines `kernel`."""
    for name in KERNEL_FILES:
        if kernel in signatures(name):
            return name
    raise KeyError(f"no kernel named {kernel} in kernels/")
