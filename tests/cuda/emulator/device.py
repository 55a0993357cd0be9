"""EmuDevice: the GPU backends' device interface (litenet/gpu/device.py's CupyDevice) on the CPU.

NumPy arrays stand in for device memory and the emulated kernels run on them; a "captured
graph" is the recorded launch list, replayed in order, which is what a CUDA graph does for a
single stream — so the device-side step counter and schedule are exercised as on a GPU. Where some
launches go on the second stream (litenet/gpu/streams.py), the graph replays them in an order the
GPU could run them in: that stream's launches as late as their waits allow (or, with
`second_stream="early"`, as early), so a wait missing from the schedule changes the results.
"""

from __future__ import annotations

import numpy as np

from litenet.gpu import streams

from . import kernel


class EmuDevice:
    name = "CPU emulator"
    capability = "emulated"

    def __init__(self, sm_count: int = 4, defines: tuple[str, ...] = (), second_stream: str = "late"):
        self.xp = np
        self.second_late = {"late": True, "early": False}[second_stream]
        self.sm_count = sm_count  # small, so split-K and several row blocks happen at test sizes
        self.defines = defines  # e.g. emulator.WGMMA: compile as for a Hopper GPU
        self.launches = 0

    def kernel(self, name: str):
        return kernel(name, self.defines)

    def prepare(self, kernels) -> None:
        """Nothing ahead: the emulator builds each kernel file with g++ on first use (cached by content)."""
        return None

    def launch(self, launch) -> None:
        self.launches += 1
        self.kernel(launch.kernel)((launch.grid,), (256,), launch.args, shared_mem=launch.shared)

    def capture(self, launches):
        lanes, after = streams.schedule(launches)
        return [launches[j] for j in streams.run_order(lanes, after, self.second_late)]

    def replay(self, graph) -> None:
        for launch in graph:
            self.launch(launch)

    def allocate(self, plan):
        return plan.allocate(np)

    def to_device(self, host):
        return np.array(host, copy=True, order="C")

    def upload(self, view, host) -> None:
        view[...] = np.asarray(host, dtype=view.dtype).reshape(view.shape)

    def download(self, view) -> np.ndarray:
        return np.array(view)

    def fill(self, view, value) -> None:
        view[...] = value

    def synchronize(self) -> None:
        pass

    def memory(self) -> dict:
        return {"device": self.name}
