"""Where a LiteNet step's time goes: each launch of the step timed alone with CUDA events (median
of many), for a preset, batch and plan. A helper of bench_gpu.py for docs/cuda.md's notes.

    python3 bench/gpu_kernel_times.py litenet-seed 64 fused
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import PRESETS  # noqa: E402
from litenet.model import TrainConfig, init_params  # noqa: E402


def kernel_times(preset: str, batch: int, plan: str, repeats: int = 50) -> list[tuple[str, float]]:
    import cupy
    from litenet.train.cuda.backend import CudaBackend

    model = PRESETS[preset]
    backend = CudaBackend(model, TrainConfig(batch_size=batch), init_params(model, 0), plan=plan)
    rng = np.random.default_rng(0)
    backend.load_dataset(rng.integers(0, 256, (4096, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 4096))
    backend.train_steps(rng.integers(0, 4096, (1, batch)), np.full(1, 1e-3))  # loads every module
    out = []
    for launch in backend._steps:  # the step's launches in order; each reruns on the same buffers
        times = []
        for _ in range(repeats):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(backend.dev.stream)
            backend.dev.launch(launch)
            end.record(backend.dev.stream)
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) * 1e3)
        out.append((f"{launch.kernel} (grid {launch.grid})", statistics.median(times)))
    backend.fetch_stats()
    return out


if __name__ == "__main__":
    preset, batch, plan = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rows = kernel_times(preset, batch, plan)
    print(f"{preset} batch {batch} plan {plan}: {sum(t for _, t in rows):.1f} µs in {len(rows)} launches")
    for name, t in rows:
        print(f"  {t:8.1f} µs  {name}")
