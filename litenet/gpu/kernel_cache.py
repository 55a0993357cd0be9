"""LiteNet's compiled kernels: one cubin per kernel for one NVRTC target (sm_86, sm_90a, …), kept in a
folder per target, and compiled on many threads at once before the first step.

Where: $LITENET_KERNEL_CACHE, else CuPy's kernel cache ($CUPY_CACHE_DIR, else ~/.cupy/kernel_cache), in
litenet-<target>/. A kernel's cubin is named by the kernel and the SHA-256 of its program (its file with the
headers inlined and the file's other kernels left without code: sources.kernel_program), the NVRTC options,
the target and the NVRTC version, so an edited header, a new option or another NVRTC compiles afresh;
deleting the folder only costs one compilation. Written atomically: ranks or runs that compile the same
kernel at once each leave a whole cubin, never a torn one.

NVRTC needs no GPU, only the target name, and CuPy's binding releases the GIL for the whole of
nvrtcCompileProgram (cupy_backends/cuda/libs/nvrtc.pyx: `with nogil`), so threads compile in parallel.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from litenet.errors import EnvironmentProblem
from litenet.gpu import sources

CACHE_ENV = "LITENET_KERNEL_CACHE"


class NvrtcFailure(Exception):
    """A compile function's refusal; `log` is NVRTC's program log."""

    def __init__(self, log: str):
        super().__init__(log)
        self.log = log


class KernelCompileError(EnvironmentProblem):
    """A kernel NVRTC would not compile for this GPU (one line; the full log is in a file beside the cache)."""


# (source, program name, options) → cubin bytes, or NvrtcFailure. The tests pass their own.
Compile = Callable[[str, str, tuple], bytes]


def cache_root() -> Path:
    """The folder that holds litenet-<target>/ folders."""
    root = os.environ.get(CACHE_ENV) or os.environ.get("CUPY_CACHE_DIR") or "~/.cupy/kernel_cache"
    return Path(root).expanduser()


def cache_key(source: str, options: tuple[str, ...], target: str, nvrtc_version: tuple[int, int]) -> str:
    return hashlib.sha256(repr((source, tuple(options), target, tuple(nvrtc_version))).encode()).hexdigest()[:32]


def nvrtc_cubin(source: str, name: str, options: tuple) -> bytes:
    """NVRTC through CuPy: `source` compiled to a cubin (`options` name the real target, -arch=sm_XX)."""
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram(source, name, (), ())
    try:
        try:
            nvrtc.compileProgram(program, list(options))
        except nvrtc.NVRTCError:
            raise NvrtcFailure(nvrtc.getProgramLog(program)) from None
        return nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)


def first_error(log: str) -> str:
    """The line of an NVRTC log worth reading first: its first error, else its first line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\berror\b", line)]
    return (errors or lines or ["no log"])[0]


def kernel_label(kernel: str) -> str:
    return f"{kernel} (kernels/{sources.kernel_file(kernel)}.cu)"


@dataclass(frozen=True)
class Preparation:
    """What making a run's kernels ready cost: `kernels` kernels, `compiled` of them by NVRTC on `workers`
    threads (None: by CuPy's own compiler, a file at a time), `seconds` of wall time in all (compiling and
    loading), `compile_seconds` the CPU time of the compiles summed: over `seconds`, how many ran at once."""

    kernels: int
    compiled: int | None
    workers: int
    seconds: float
    compile_seconds: float = 0.0
    target: str = ""

    def describe(self) -> str:
        if self.compiled is None:
            return f"{self.kernels} ready in {self.seconds:.1f} s (CuPy's compiler, a file at a time)"
        if self.compiled == 0:
            return f"all {self.kernels} cached, loaded in {self.seconds:.1f} s"
        return (f"{self.compiled} compiled in {self.seconds:.1f} s ({self.workers} worker"
                f"{'s' * (self.workers != 1)}), {self.kernels - self.compiled} cached")

    def record(self) -> dict:
        return {"kernels": self.kernels, "compiled": self.compiled, "workers": self.workers,
                "seconds": round(self.seconds, 3), "compile_seconds": round(self.compile_seconds, 3),
                "target": self.target}


def worker_count(jobs: int) -> int:
    """One thread per kernel to compile, at most one per CPU this process may run on."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(jobs, cpus))


class KernelCache:
    """The cubins of the kernels for one target, under cache_root()/litenet-<target>/. `read` gives a
    kernel's program, `label` names it in an error (the tests pass their own)."""

    def __init__(self, target: str, nvrtc_version: tuple[int, int], options: tuple[str, ...],
                 compile: Compile = nvrtc_cubin, root: Path | None = None,
                 read: Callable[[str], str] = sources.kernel_program, label: Callable[[str], str] = kernel_label):
        self.target, self.nvrtc_version, self.compile = target, tuple(nvrtc_version), compile
        self.read, self.label = read, label
        self.options = tuple(options) + (f"-arch={target}",)
        self.folder = (root or cache_root()) / f"litenet-{target}"

    def path(self, kernel: str) -> Path:
        """Where the cubin of `kernel` for this target, options and NVRTC lies (or will)."""
        key = cache_key(self.read(kernel), self.options, self.target, self.nvrtc_version)
        return self.folder / f"{kernel}-{key}.cubin"

    def cubin(self, kernel: str) -> Path:
        """The cubin of `kernel`, compiled now if the cache lacks it."""
        path = self.path(kernel)
        if not path.exists():
            self._compile(kernel, path)
        return path

    def compile_missing(self, kernels) -> tuple[int, int, float]:
        """Compile every kernel of `kernels` the cache lacks, each once, on parallel threads.
        Returns (kernels compiled, threads used, the CPU seconds of their compiles summed)."""
        missing = {}
        for kernel in kernels:
            path = self.path(kernel)
            if not path.exists():
                missing.setdefault(kernel, path)
        if not missing:
            return 0, 0, 0.0
        workers = worker_count(len(missing))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvrtc") as pool:
            futures = [pool.submit(self._compile, kernel, path) for kernel, path in missing.items()]
            try:
                seconds = sum(f.result() for f in futures)  # the first failure in launch order, as a serial run meets it
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        return len(missing), workers, seconds

    def _compile(self, kernel: str, path: Path) -> float:
        """Compile one kernel into `path` (atomically); returns the CPU seconds the compile took on this thread
        (CPU, not wall time: a compile waiting on a lock inside NVRTC would count as parallel otherwise)."""
        started = time.thread_time()
        try:
            cubin = self.compile(self.read(kernel), f"{kernel}.cu", self.options)
        except NvrtcFailure as failure:
            raise KernelCompileError(self._refusal(kernel, path, failure.log)) from None
        seconds = time.thread_time() - started
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, partial = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".partial", dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(cubin)
                    os.fsync(f.fileno())  # a crash after the rename must not leave an empty cubin behind
                os.replace(partial, path)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise EnvironmentProblem(f"cannot write the kernel cache {self.folder} ({exc.strerror or exc}); point "
                                     f"{CACHE_ENV} at a writable folder") from None
        return seconds

    def _refusal(self, kernel: str, path: Path, log: str) -> str:
        """The one line a compile error becomes; the whole log is kept beside the cache where it can be."""
        where = ""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            log_path = path.with_suffix(".log")
            log_path.write_text(log, encoding="utf-8")
            where = f" (NVRTC's log: {log_path})"
        except OSError:
            pass
        version = ".".join(map(str, self.nvrtc_version))
        return f"NVRTC {version} could not compile {self.label(kernel)} for {self.target}: {first_error(log)}{where}"
