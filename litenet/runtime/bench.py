"""`litenet bench-infer`'s measurements: each backend × precision × threads × batch this machine can
run, timed as a user's call to the backend (`predict` on uint8 images, the x / 255 scaling and, on a
GPU, the copies to and from the device included).

The timing loop is the plainest there is — perf_counter around each call, nothing else inside —
so that the figure is the call's and not the tool's (bench/results/infer-tool.md compares it
with a hand-timed loop over the same ONNX Runtime session).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from litenet.errors import LiteNetError
from litenet.runtime.backends import BACKENDS, availability
from litenet.runtime.model_files import ModelFiles

SCHEMA = "litenet-bench-infer/1"
# Backends whose speed depends on the CPU threads they are given; the others get one row per batch.
THREADED = ("onnxruntime",)


@dataclass(frozen=True)
class Settings:
    """What to measure; every field is a command-line flag of `litenet bench-infer`."""

    backends: tuple[str, ...] = tuple(BACKENDS)
    precisions: tuple[str, ...] = ("fp32", "int8")
    batches: tuple[int, ...] = (1, 16, 256)
    threads: tuple[int, ...] = ()  # () = 1 and the physical cores
    warmup: int = 10
    loops: int = 100
    cooldown: float = 1.0  # seconds of rest before each row, as benchncnn's: a hot board slows down
    seed: int = 0

    def check(self) -> None:
        """Raise LiteNetError naming the first setting out of range."""
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown:
            raise LiteNetError(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}")
        from litenet.limits import MAX_BENCH_CALLS, MAX_BENCH_COOLDOWN_S, MAX_INFER_BATCH, MAX_THREADS

        if not all(1 <= b <= MAX_INFER_BATCH for b in self.batches):
            raise LiteNetError(f"--batch must be 1 … {MAX_INFER_BATCH}")
        if not all(1 <= t <= MAX_THREADS for t in self.threads):
            raise LiteNetError(f"--threads must be 1 … {MAX_THREADS}")
        if not (1 <= self.loops <= MAX_BENCH_CALLS and 0 <= self.warmup <= MAX_BENCH_CALLS):
            raise LiteNetError(f"--loops must be 1 … {MAX_BENCH_CALLS:,}, --warmup 0 … {MAX_BENCH_CALLS:,}")
        if not 0 <= self.cooldown <= MAX_BENCH_COOLDOWN_S:  # NaN fails this too
            raise LiteNetError(f"--cooldown must be 0 … {MAX_BENCH_COOLDOWN_S:g} seconds")


def time_calls(predict, images, warmup: int, loops: int) -> tuple[list[float], float, float]:
    """(seconds of each of `loops` calls of predict(images), process CPU seconds, wall seconds) after `warmup` calls."""
    for _ in range(warmup):
        predict(images)
    clock = time.perf_counter
    samples = [0.0] * loops
    cpu0, wall0 = time.process_time(), clock()
    for i in range(loops):
        start = clock()
        predict(images)
        samples[i] = clock() - start
    return samples, time.process_time() - cpu0, clock() - wall0


def latency_stats(samples: list[float], batch: int) -> dict:
    """min / median / mean / p99 / max of per-call seconds, in ms, and images per second at the mean."""
    import numpy as np

    ms = np.asarray(samples, dtype=np.float64) * 1e3
    mean = float(ms.mean())
    return {"min_ms": float(ms.min()), "median_ms": float(np.median(ms)), "mean_ms": mean,
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
            "images_per_s": batch * 1e3 / mean if mean > 0 else float("inf")}


def thread_counts(name: str, settings: Settings) -> list[int | None]:
    """The intra-op thread counts to measure `name` with: --threads, else 1 and the physical cores."""
    if name not in THREADED:
        return [None]
    if settings.threads:
        return list(dict.fromkeys(settings.threads))
    from litenet.runtime.onnxruntime_backend import physical_cores

    return list(dict.fromkeys([1, physical_cores()]))


def random_images(count: int, seed: int):
    """`count` random uint8 (32, 32, 3) images: latency does not depend on what the pixels show."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)


def run(model: ModelFiles, settings: Settings, log=lambda line: None, probe=availability) -> dict:
    """Measure every runnable combination; returns the report (schema litenet-bench-infer/1, docs/runtime.md)."""
    from litenet.runtime import machine

    settings.check()
    images = random_images(max(settings.batches), settings.seed)
    rows, skipped = [], []
    first = True
    for name in settings.backends:
        for precision in settings.precisions:
            if precision not in model.precisions():
                skipped.append({"backend": name, "precision": precision, "reason": f"the model has no {precision} files"})
                continue
            cls, reason = probe(name, model, precision)
            if cls is None:
                skipped.append({"backend": name, "precision": precision, "reason": reason})
                continue
            for threads in thread_counts(name, settings):
                try:
                    backend = cls(model, precision, threads=threads, max_batch=max(settings.batches))
                except LiteNetError as exc:
                    skipped.append({"backend": name, "precision": precision, "reason": str(exc)})
                    break
                for batch in settings.batches:
                    if not first and settings.cooldown:
                        time.sleep(settings.cooldown)
                    first = False
                    x = images[:batch].copy()
                    samples, cpu, wall = time_calls(backend.predict, x, settings.warmup, settings.loops)
                    row = {"backend": name, "precision": precision, "threads": threads, "batch": batch,
                           **latency_stats(samples, batch), "cpu_cores": cpu / wall if wall > 0 else 0.0,
                           "runs": backend.describe()}
                    rows.append(row)
                    log(format_row(row))
                del backend
    return {"schema": SCHEMA, "model": model.describe(), "preset": model.preset(), "family": model.family(),
            "settings": asdict(settings), "machine": machine.describe(), "rows": rows, "skipped": skipped}


COLUMNS = ("backend", "precision", "threads", "batch", "min", "median", "mean", "p99", "max", "images/s", "CPU cores")


def format_row(row: dict) -> str:
    """One table line for a row of the report."""
    cells = [row["backend"], row["precision"], "-" if row["threads"] is None else str(row["threads"]), str(row["batch"])]
    cells += [f"{row[k]:.3f}" for k in ("min_ms", "median_ms", "mean_ms", "p99_ms", "max_ms")]
    cells += [f"{row['images_per_s']:,.0f}", f"{row['cpu_cores']:.2f}"]
    return "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, _WIDTHS)))


_WIDTHS = (11, 9, 7, 5, 8, 8, 8, 8, 8, 11, 9)


def render(report: dict) -> str:
    """The report as the table `litenet bench-infer` prints: machine, settings, one line per row, what was not run."""
    from litenet.runtime.machine import summary_lines

    s = report["settings"]
    lines = [f"litenet bench-infer: {report['model']} ({report['preset']}, {report['family']})",
             *summary_lines(report["machine"]),
             f"{s['warmup']} warm-up and {s['loops']} timed calls a row, {s['cooldown']:g} s cooldown before each; "
             "latency of one call (one batch) in ms; CPU cores: process CPU time / wall time while timing",
             "",
             "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(COLUMNS, _WIDTHS)))]
    lines += [format_row(row) for row in report["rows"]]
    if not report["rows"]:
        lines.append("(nothing could run)")
    if report["skipped"]:
        lines += ["", "not run:"] + [f"  {k['backend']} {k['precision']}: {k['reason']}" for k in report["skipped"]]
    return "\n".join(lines) + "\n"
