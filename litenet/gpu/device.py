"""The GPU seen through CuPy: kernels compiled by NVRTC from kernels/*.cu for the GPU in hand,
one non-blocking stream for everything, graph capture, copies and memory figures.

The backend talks only to this small interface, so the tests can swap in a CPU emulator
(tests/cuda/emulator) and run the whole backend — graph replay included — without a GPU.
Works with cupy-cuda11x, -12x and -13x: only RawModule, CuPy's NVRTC binding, Stream capture and memGetInfo
are used. The compiled kernels are kept by kernel_cache.py.
"""

from __future__ import annotations

import os
import time

import numpy as np

from litenet.gpu import sources, streams
from litenet.gpu.kernel_cache import KernelCache, Preparation
from litenet.gpu.launch import THREADS

# -std=c++14 is the newest standard every NVRTC LiteNet supports (CUDA 11.0 onwards) accepts.
# LITENET_NVRTC_LINEINFO=1 adds -lineinfo: source lines for a profiler (Nsight Compute's stall
# sampling by line); it does not change optimisation (ptxas sm_90: the same registers for every kernel).
NVRTC_OPTIONS = ("-std=c++14",) + (("-lineinfo",) if os.environ.get("LITENET_NVRTC_LINEINFO") == "1" else ())
# What CuPy adds for its own builds (flush denormals to zero, device code by default): LiteNet's cubins
# compile as CuPy's RawModule(code=…) would.
CUPY_BUILD_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")

# GPUs whose fastest instructions exist only in an arch-specific target: Hopper's wgmma (kernels/wgmma.cuh,
# the wide BF16 tile's product) is compiled for sm_90a alone, which runs on compute capability 9.0 and
# nothing else (NVRTC 12.0 or newer). LITENET_ARCH_SPECIFIC=0 keeps the plain target (the kernels then
# take their sm_80 paths: for comparisons on the same GPU).
ARCH_SPECIFIC = {(9, 0): "sm_90a"}


def arch_specific_target(major: int, minor: int, nvrtc_version: tuple[int, int]) -> str | None:
    if os.environ.get("LITENET_ARCH_SPECIFIC") == "0" or nvrtc_version < (12, 0):
        return None
    return ARCH_SPECIFIC.get((major, minor))


def cubin_target(major: int, minor: int, nvrtc_version: tuple[int, int], supported: tuple[int, ...]) -> str | None:
    """The target LiteNet compiles its cubins for: the arch-specific one where there is one, else the newest
    sm_<major><m> this NVRTC knows with m ≤ minor (a cubin runs on later minor versions of its major: an
    sm_86 cubin on an sm_89 GPU). None where NVRTC knows none (or is older than 11.2, which cannot list its
    targets): CuPy then compiles the source itself (RawModule(code=…), its own cache)."""
    special = arch_specific_target(major, minor, nvrtc_version)
    if special:
        return special
    if nvrtc_version < (11, 2):
        return None
    fits = [arch for arch in supported if arch // 10 == major and arch % 10 <= minor]
    return f"sm_{max(fits)}" if fits else None


def _two_streams(cupy):
    """The main stream and a graph's second one (streams.py). The second runs off the step's critical path,
    so it gets the lowest priority and the main stream the highest, where this CuPy can set them: its
    blocks then fill what the main stream leaves idle. (A priority is a hint to the block scheduler; it
    changes no result.)"""
    try:
        least, greatest = cupy.cuda.runtime.deviceGetStreamPriorityRange()
        return (cupy.cuda.Stream(non_blocking=True, priority=greatest),
                cupy.cuda.Stream(non_blocking=True, priority=least))
    except (AttributeError, TypeError):
        return cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)


class CupyDevice:
    """The current CUDA device, through CuPy."""

    def __init__(self, defines: tuple[str, ...] = ()):
        """`defines`: macros every kernel is compiled with (bench/mixer_phase_times.py's LITENET_PHASE_TIMES),
        part of the compiled kernels' cache key."""
        import cupy
        from cupy_backends.cuda.libs import nvrtc

        self.cp = self.xp = cupy
        self.stream, self.side = _two_streams(cupy)
        self._modules: dict[str, object] = {}  # kernel → its cubin's module, or (CuPy's route) file → its module
        self._kernels: dict[str, object] = {}
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.sm_count = int(props["multiProcessorCount"])
        self.capability = f"sm_{props['major']}{props['minor']}"
        version = tuple(nvrtc.getVersion())
        try:
            supported = tuple(nvrtc.getSupportedArchs())
        except (AttributeError, RuntimeError):  # a CuPy or NVRTC without the query
            supported = ()
        self.target = cubin_target(props["major"], props["minor"], version, supported)
        self.options = NVRTC_OPTIONS + tuple(f"-D{name}" for name in defines)
        self.cache = KernelCache(self.target, version, self.options + CUPY_BUILD_OPTIONS) if self.target else None

    def kernel(self, name: str):
        """The compiled kernel `name`: LiteNet's cubin of it (compiled now if the cache lacks it and it was
        not prepared), or, where LiteNet has no target for this GPU, from CuPy's build of its file."""
        if name not in self._kernels:
            if self.cache is not None:
                self._modules[name] = self.cp.RawModule(path=str(self.cache.cubin(name)))
                self._kernels[name] = self._modules[name].get_function(name)
            else:
                file = sources.kernel_file(name)
                if file not in self._modules:
                    self._modules[file] = self.cp.RawModule(code=sources.read_source(file), options=self.options)
                self._kernels[name] = self._modules[file].get_function(name)
        return self._kernels[name]

    def module_global(self, kernel: str, name: str):
        """The device address of the global variable `name` in the module that holds `kernel`."""
        self.kernel(kernel)
        module = self._modules[kernel] if self.cache is not None else self._modules[sources.kernel_file(kernel)]
        return module.get_global(name)

    def prepare(self, kernels) -> Preparation:
        """Make `kernels` ready before the first launch: those the cache lacks compiled at once, one on each
        thread (kernel_cache.py), then every one loaded."""
        started = time.perf_counter()
        kernels = list(dict.fromkeys(kernels))
        compiled, workers, compile_seconds = None, 1, 0.0
        if self.cache is not None:
            compiled, workers, compile_seconds = self.cache.compile_missing([k for k in kernels if k not in self._kernels])
        for name in kernels:
            self.kernel(name)
        return Preparation(len(kernels), compiled, workers, time.perf_counter() - started, compile_seconds,
                           self.target or self.capability)

    def launch(self, launch) -> None:
        with self.stream:
            self.kernel(launch.kernel)((launch.grid,), (THREADS,), launch.args, shared_mem=launch.shared)

    def capture(self, launches):
        """One CUDA graph of the launches; replay it with `replay`. Launches on stream 1 run on the second
        stream, joined to the first by the waits streams.py finds and, at the end, by one more."""
        for launch in launches:  # compile and load every module outside the capture
            self.kernel(launch.kernel)
        _, after = streams.schedule(launches)
        # every event made before the capture starts: one after each launch another waits for, a fork, a join
        events = {i: self._event() for i in after if i is not None}
        fork, join, side_joined = self._event(), self._event(), False
        with self.stream:
            self.stream.begin_capture()
            try:
                for j, launch in enumerate(launches):
                    stream = self.side if launch.stream else self.stream
                    if launch.stream and not side_joined:  # the second stream enters the capture here
                        fork.record(self.stream)
                        stream.wait_event(fork)
                        side_joined = True
                    if after[j] is not None:
                        stream.wait_event(events[after[j]])
                    with stream:
                        self.kernel(launch.kernel)((launch.grid,), (THREADS,), launch.args, shared_mem=launch.shared)
                    if j in events:
                        events[j].record(stream)
                if side_joined:
                    join.record(self.side)
                    self.stream.wait_event(join)
            finally:
                graph = self.stream.end_capture()
        return graph

    def _event(self):
        return self.cp.cuda.Event(block=False, disable_timing=True)

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
