"""LiteNet Studio's cost while training litenet-mixer-cpu: what inspection adds to a step, and how often the page
updates (`make bench-studio`).

1. Step time, interleaved A/B/C/D over the same batches (the machine's load drifts; interleaving spreads it):
   A the training backend's step (NumpyBackend.train_steps, one step: what `litenet train` runs),
   B the Studio's step without inspection (plus its undo snapshot and finiteness check),
   C the Studio's step inspected every step (every edge's norms, the residual shares, one op's tensors),
   D the Studio's step as it runs (inspected at most every controller.SUMMARY_EVERY seconds of D's own steps).
   Medians; the ratios to A are what the issue bounds (≤ 1.10).
2. The page: `litenet studio`'s server and Chromium (Playwright) on this machine, Run pressed, the widget's
   drawn updates counted over a window (litenetStudio.updates), and the bytes of each message.

Writes a Markdown page and the raw JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from litenet.studio.controller import BLAS_THREADS, SUMMARY_EVERY, Controller  # noqa: E402
from litenet.studio.server import StudioServer  # noqa: E402
from litenet.studio.session import LiveNetwork, StudioData  # noqa: E402
from litenet.train.numpy_backend import NumpyBackend  # noqa: E402

PRESET = "litenet-mixer-cpu"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def step_times(data: StudioData, rounds: int, warmup: int) -> dict:
    """Interleaved medians of A, B, C, D (module docstring), in ms, on the same batches and schedule."""
    live = LiveNetwork(data, PRESET)
    live.inspector.selected = "blocks.1.channel_fc1"
    backend = NumpyBackend(live.model, live.train, live.backend.params.copy())
    backend.load_dataset(data.train_images, data.train_labels)
    times = {"backend": [], "studio": [], "inspected": [], "as_run": []}
    clock = last_summary = 0.0  # D's own clock: the time D's steps alone have taken, as if they ran back to back
    for i in range(warmup + rounds):
        _, _, _, draws, indices = live._next_batch()  # the batch the Studio's next step takes
        t0 = time.perf_counter()
        backend.train_steps(indices[None], np.array([1e-3]), **{k: v[None] for k, v in draws.items()})
        backend.fetch_stats()
        t1 = time.perf_counter()
        live.step(inspect=False)
        t2 = time.perf_counter()
        live.step(inspect=True)
        t3 = time.perf_counter()
        due = clock - last_summary >= SUMMARY_EVERY
        live.step(inspect=due)
        t4 = time.perf_counter()
        clock += t4 - t3
        if due:
            last_summary = clock
        if i >= warmup:
            for key, seconds in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                times[key].append(1000 * seconds)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"ms": medians, "raw_ms": times, "batch": live.train.batch_size,
            "ratios": {k: medians[k] / medians["backend"] for k in ("studio", "inspected", "as_run")},
            "inspection": medians["inspected"] / medians["studio"]}


def blas_threads(data: StudioData, rounds: int) -> dict:
    """The backend's step with one BLAS thread and with the process's default, interleaved (medians, ms)."""
    live = LiveNetwork(data, PRESET)
    images, labels, mix, _, _ = live._next_batch()
    default = next((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), None)
    times = {1: [], default: []}
    for i in range(rounds + 2):
        for threads in times:
            with threadpool_limits(limits=threads, user_api="blas"):
                t0 = time.perf_counter()
                live.backend.step(images, labels, 1e-3, mix)
                seconds = time.perf_counter() - t0
            if i >= 2:
                times[threads].append(1000 * seconds)
    live.backend.fetch_stats()
    return {"default_threads": default, "ms": {str(k): statistics.median(v) for k, v in times.items()}}


def page_rate(data: StudioData, seconds: float, chromium: str) -> dict:
    """Updates the page drew per second while the Studio trained, and the messages' sizes."""
    from playwright.sync_api import sync_playwright

    live = LiveNetwork(data, PRESET)
    sizes: list[tuple[int, bool]] = []
    server = None

    def send(message):
        if message.get("type") == "progress":
            sizes.append((len(json.dumps(message)), "inspection" in message))
        server.hub.send(message)

    controller = Controller(live, send, "runs/bench-studio")  # its worker runs with BLAS_THREADS
    server = StudioServer(controller, 0).start()
    controller.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.goto(server.url)
            page.wait_for_function("globalThis.litenetStudio && globalThis.litenetStudio.state", timeout=120_000)
            page.click("[data-tab=train]")
            page.click("[data-testid=run]")
            page.wait_for_function("globalThis.litenetStudio.updates >= 5", timeout=120_000)  # warm
            u0, s0, t0 = page.evaluate("globalThis.litenetStudio.updates"), live.steps, time.perf_counter()
            time.sleep(seconds)
            u1, s1, t1 = page.evaluate("globalThis.litenetStudio.updates"), live.steps, time.perf_counter()
            page.click("[data-testid=pause]")
            browser.close()
    finally:
        controller.stop()
        server.stop()
    inspected = [n for n, yes in sizes if yes]
    plain = [n for n, yes in sizes if not yes]
    return {"window_s": t1 - t0, "page_updates_per_s": (u1 - u0) / (t1 - t0), "steps_per_s": (s1 - s0) / (t1 - t0),
            "message_bytes": {"inspected_median": statistics.median(inspected) if inspected else None,
                              "plain_median": statistics.median(plain) if plain else None}}


def machine() -> dict:
    return {"cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__, "load_average": os.getloadavg(),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"), "blas": threadpool_info()}


def report(result: dict) -> str:
    s, p, m, b = result["steps"], result["page"], result["machine"], result["blas"]
    ms, r = s["ms"], s["ratios"]
    lines = [
        "# LiteNet Studio: the cost of watching (litenet-mixer-cpu)", "",
        f"`make bench-studio` (bench/bench_studio.py) on {m['cpus']} CPU cores ({m['cpu']}), NumPy {m['numpy']}, "
        f"load average before the run {', '.join(f'{x:.2f}' for x in m['load_average'])} (the machine is shared). "
        f"The Studio's matrix products run on {BLAS_THREADS} BLAS thread (controller.BLAS_THREADS); every step "
        "below too. Raw numbers: `raw/studio.tar.xz`, `studio.json`.", "",
        f"## A training step, batch {s['batch']} (median of {len(s['raw_ms']['backend'])} interleaved rounds)", "",
        "| step | ms | × the backend's step |", "|---|---|---|",
        f"| the training backend's step (NumpyBackend.train_steps: augmentation, forward, backward, update; what "
        f"`litenet train` runs) | {ms['backend']:.1f} | 1.00 |",
        f"| the Studio's step, not inspected (the same, plus its undo snapshot and finiteness check) | {ms['studio']:.1f} "
        f"| {r['studio']:.3f} |",
        f"| the Studio's step, inspected every step (every edge's norms, residual shares, one op's tensors, "
        f"histograms and weight picture) | {ms['inspected']:.1f} | {r['inspected']:.3f} |",
        f"| the Studio's step as it runs (inspected at most every {SUMMARY_EVERY} s) | {ms['as_run']:.1f} | "
        f"{r['as_run']:.3f} |", "",
        f"Inspection itself (inspected against not inspected): **× {s['inspection']:.3f}**. The bound: inspection "
        "adds ≤ 10 % to a training step.", "",
        "## The page while training", "",
        f"`litenet studio`'s server and a headless Chromium on the same machine, Run pressed, counted over "
        f"{p['window_s']:.1f} s: **{p['page_updates_per_s']:.1f} page updates per second** ({p['steps_per_s']:.1f} "
        f"steps per second; the page draws every step). A message with the inspection (every edge's two norms, the "
        f"selected op's histograms and weight picture) is {p['message_bytes']['inspected_median'] or 0:,.0f} bytes, "
        f"one without {p['message_bytes']['plain_median'] or 0:,.0f}: summaries, never whole tensors (a value under the "
        "cursor, or a whole tensor as .npy, is fetched on request).", "",
        "The bound: ≥ 5 updates a second.", "",
        "## Why one BLAS thread", "",
        f"The backend's step alone, with 1 BLAS thread and with OpenBLAS's default of {b['default_threads']}, "
        f"interleaved: {b['ms']['1']:.1f} ms against {b['ms'][str(b['default_threads'])]:.1f} ms. OpenBLAS's threads "
        "spin while they wait, so whenever another process holds a core (the browser, the server, anyone else's "
        "job) the second thread costs more than it gives.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/new/studio.md")
    parser.add_argument("--data")
    parser.add_argument("--maps")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15.0, help="the page's counting window")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    data = StudioData.open(args.data, args.maps)
    result = {"machine": machine(), "blas": blas_threads(data, 10)}
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        result["steps"] = step_times(data, args.rounds, args.warmup)
    result["page"] = page_rate(data, args.seconds, args.chromium)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    out.write_text(report(result), encoding="utf-8")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
