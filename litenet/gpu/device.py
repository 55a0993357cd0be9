"""The GPU seen through CuPy: kernels compiled by NVRTC from kernels/*.cu for the GPU in hand,
one non-blocking stream for everything, graph capture, copies and memory figures.

The backend talks only to this small interface, so the tests can swap in a CPU emulator
(tests/cuda/emulator) and run the whole backend — graph replay included — without a GPU.
Works with cupy-cuda11x, -12x and -13x: only RawModule, Stream capture and memGetInfo are used.
"""

from __future__ import annotations

import os

import numpy as np

from litenet.gpu import sources
from litenet.gpu.launch import THREADS

# -std=c++14 is the newest standard every NVRTC LiteNet supports (CUDA 11.0 onwards) accepts.
# LITENET_NVRTC_LINEINFO=1 adds -lineinfo: source lines for a profiler (Nsight Compute's stall
# sampling by line); it does not change optimisation (ptxas sm_90: the same registers for every kernel).
NVRTC_OPTIONS = ("-std=c++14",) + (("-lineinfo",) if os.environ.get("LITENET_NVRTC_LINEINFO") == "1" else ())


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

    def kernel(self, name: str):
        """The compiled kernel `name` (its file is compiled on first use, then cached by CuPy)."""
        if name not in self._kernels:
            file = sources.kernel_file(name)
            if file not in self._modules:
                self._modules[file] = self.cp.RawModule(code=sources.read_source(file), options=NVRTC_OPTIONS)
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
