"""The GPU seen through CuPy: kernels compiled by NVRTC from kernels/*.cu for the GPU in hand,
one non-blocking stream for everything, graph capture, copies and memory figures.

The backend talks only to this small interface, so the tests can swap in a CPU emulator
(tests/cuda/emulator) and run the whole backend — graph replay included — without a GPU.
Works with cupy-cuda11x, -12x and -13x: only RawModule, Stream capture and memGetInfo are used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from litenet.gpu import sources
from litenet.gpu.launch import THREADS

# -std=c++14 is the newest standard every NVRTC LiteNet supports (CUDA 11.0 onwards) accepts.
# LITENET_NVRTC_LINEINFO=1 adds -lineinfo: source lines for a profiler (Nsight Compute's stall
# sampling by line); it does not change optimisation (ptxas sm_90: the same registers for every kernel).
NVRTC_OPTIONS = ("-std=c++14",) + (("-lineinfo",) if os.environ.get("LITENET_NVRTC_LINEINFO") == "1" else ())

# GPUs whose fastest instructions exist only in an arch-specific target: Hopper's wgmma (kernels/wgmma.cuh,
# the wide BF16 tile's product) is compiled for sm_90a alone, which runs on compute capability 9.0 and
# nothing else. CuPy's RawModule always names the plain target (sm_90), so for these LiteNet asks NVRTC
# (12.0 or newer) for the cubin itself. LITENET_ARCH_SPECIFIC=0 keeps the plain target (the kernels
# then take their sm_80 paths: for comparisons on the same GPU).
ARCH_SPECIFIC = {(9, 0): "sm_90a"}


def arch_specific_target(major: int, minor: int, nvrtc_version: tuple[int, int]) -> str | None:
    if os.environ.get("LITENET_ARCH_SPECIFIC") == "0" or nvrtc_version < (12, 0):
        return None
    return ARCH_SPECIFIC.get((major, minor))


def compile_for_target(source: str, target: str) -> Path:
    """The cubin of `source` for `target` (e.g. sm_90a), compiled by NVRTC once and kept beside CuPy's
    kernel cache (CUPY_CACHE_DIR, else ~/.cupy/kernel_cache) under a name from the source, the options,
    the target and the NVRTC version. Written atomically: a concurrent or interrupted run leaves no torn
    file. The options are CuPy's for its own builds (-ftz=true and device code by default), so both
    routes compile alike."""
    from cupy_backends.cuda.libs import nvrtc

    options = NVRTC_OPTIONS + ("-ftz=true", "--device-as-default-execution-space", f"-arch={target}")
    version = tuple(nvrtc.getVersion())
    key = hashlib.sha256(repr((source, options, version)).encode()).hexdigest()[:32]
    cache = Path(os.environ.get("CUPY_CACHE_DIR", "~/.cupy/kernel_cache")).expanduser() / f"litenet-{target}"
    path = cache / f"{key}.cubin"
    if path.exists():
        return path
    program = nvrtc.createProgram(source, "litenet.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, options)
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC could not compile for {target}:\n{nvrtc.getProgramLog(program)}") from exc
        cubin = nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"{key}.{os.getpid()}.partial"
    partial.write_bytes(cubin)
    os.replace(partial, path)
    return path


class CupyDevice:
    """The current CUDA device, through CuPy."""

    def __init__(self):
        import cupy

        self.cp = self.xp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._modules: dict[str, object] = {}
        self._kernels: dict[str, object] = {}
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.sm_count = int(props["multiProcessorCount"])
        self.capability = f"sm_{props['major']}{props['minor']}"
        from cupy_backends.cuda.libs import nvrtc
        self.target = arch_specific_target(props["major"], props["minor"], tuple(nvrtc.getVersion()))

    def kernel(self, name: str):
        """The compiled kernel `name` (its file is compiled on first use, then cached by CuPy)."""
        if name not in self._kernels:
            file = sources.kernel_file(name)
            if file not in self._modules:
                source = sources.read_source(file)
                if self.target:
                    self._modules[file] = self.cp.RawModule(path=str(compile_for_target(source, self.target)))
                else:
                    self._modules[file] = self.cp.RawModule(code=source, options=NVRTC_OPTIONS)
            self._kernels[name] = self._modules[file].get_function(name)
        return self._kernels[name]

    def launch(self, launch) -> None:
        with self.stream:
            self.kernel(launch.kernel)((launch.grid,), (THREADS,), launch.args, shared_mem=launch.shared)

    def capture(self, launches):
        """One CUDA graph of the launches; replay it with `replay`."""
        for launch in launches:  # compile and load every module outside the capture
            self.kernel(launch.kernel)
        with self.stream:
            self.stream.begin_capture()
            try:
                for launch in launches:
                    self.kernel(launch.kernel)((launch.grid,), (THREADS,), launch.args, shared_mem=launch.shared)
            finally:
                graph = self.stream.end_capture()
        return graph

    def replay(self, graph) -> None:
        graph.launch(stream=self.stream)

    def allocate(self, plan):
        with self.stream:
            views = plan.allocate(self.cp)
        self.stream.synchronize()
        return views

    def to_device(self, host: np.ndarray):
        with self.stream:
            out = self.cp.asarray(np.ascontiguousarray(host))
        self.stream.synchronize()
        return out

    def upload(self, view, host: np.ndarray) -> None:
        """Copy into an existing buffer, ordered on the stream after the work already queued."""
        view.set(np.ascontiguousarray(host, dtype=view.dtype).reshape(view.shape), stream=self.stream)

    def download(self, view) -> np.ndarray:
        out = view.get(stream=self.stream)
        self.stream.synchronize()
        return out

    def fill(self, view, value) -> None:
        with self.stream:
            view.fill(value)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def memory(self) -> dict:
        free, total = self.cp.cuda.runtime.memGetInfo()
        pool = self.cp.get_default_memory_pool()
        return {"device": self.name, "pool_used_bytes": int(pool.used_bytes()),
                "pool_held_bytes": int(pool.total_bytes()), "device_used_bytes": int(total - free),
                "device_total_bytes": int(total)}
