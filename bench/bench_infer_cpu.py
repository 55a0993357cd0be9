"""Benchmark: CPU inference latency of ONNX Runtime fp32 / int8 (ours, and quantize_static's) against PyTorch eager,
plus the wall time of a whole `litenet-infer image.png` process.

Every model classifies the same uint8 images through the same call a user makes (the runtime's
backend `predict`, which includes the x / 255 scaling; PyTorch's twin does the same scaling), at
batch 1 and 256, with the same intra-op thread count. Rounds are interleaved so background load on
a shared machine falls on all models alike; the figure is the median of all timed calls.

    python bench/bench_infer_cpu.py --model models/litenet-base --out bench/results/new/infer-cpu.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import cpu_name  # noqa: E402

BATCHES = (1, 256)
CALLS = {1: 40, 256: 3}  # timed calls per model and round
WARMUP = {1: 5, 256: 1}




def load_models(folder: Path, threads: int, peer_calib: int):
    """name → callable(uint8 images) → logits, for one thread count."""
    import torch

    from litenet.runtime.model_files import ModelFiles
    from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference
    from litenet.weights import load_model
    from torch_twin import TorchLiteNet

    files = ModelFiles.locate(folder)
    models = {
        "ORT fp32": OnnxRuntimeInference(files, "fp32", threads=threads).predict,
        "ORT int8 (ours, QDQ)": OnnxRuntimeInference(files, "int8", threads=threads).predict,
    }
    if threads > 1:  # what the runtime's choice (no spinning) saves or costs
        models["ORT fp32, spinning workers"] = OnnxRuntimeInference(files, "fp32", threads=threads, spinning=True).predict
    if peer_calib:
        models["ORT int8 (quantize_static)"] = peer_model(folder, files, threads, peer_calib)
    params, model, _, _ = load_model(folder)
    torch.set_num_threads(threads)
    net = TorchLiteNet(model, params).eval()

    def torch_predict(images):
        with torch.inference_mode():
            return net(torch.from_numpy(images)).numpy()

    models["PyTorch eager"] = torch_predict
    return models


def peer_model(folder: Path, files, threads: int, calib: int):
    """ONNX Runtime's quantize_static on our fp32 model (MinMax, per channel), as docs/export.md's peer."""
    import contextlib
    import io
    import tempfile

    import numpy as np
    import onnx

    from litenet.data import open_cifar10
    from litenet.export.calibrate import calibration_images
    from litenet.export.peer import quantize_static
    from litenet.runtime.model_files import ModelFiles
    from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference

    images = calibration_images(np.asarray(open_cifar10(progress=False).train.images), calib, 0)
    with contextlib.redirect_stdout(io.StringIO()):
        proto = quantize_static(onnx.load(str(files.fp32_onnx)), images, "minmax")
    tmp = Path(tempfile.mkdtemp(prefix="litenet-bench-"))
    (tmp / "model.int8.onnx").write_bytes(proto.SerializeToString())
    (tmp / "config.json").write_bytes((folder / "config.json").read_bytes())
    return OnnxRuntimeInference(ModelFiles.locate(tmp), "int8", threads=threads).predict


def latencies(threads_list, folder, images, rounds, peer_calib, log) -> dict:
    """Median µs per image for (model, threads, batch), wall and the calling thread's CPU."""
    import numpy as np

    samples: dict = {}
    check: dict = {}
    for threads in threads_list:
        models = load_models(folder, threads, peer_calib)
        reference = models["ORT fp32"](images[:256])
        for name, predict in models.items():
            check[name] = float(np.abs(predict(images[:256]) - reference).max())
        for r in range(rounds):
            log(f"{threads} thread(s): round {r + 1}/{rounds}")
            for batch in BATCHES:
                x = np.ascontiguousarray(images[:batch])
                for name, predict in models.items():
                    for _ in range(WARMUP[batch]):
                        predict(x)
                    for _ in range(CALLS[batch]):
                        t, c = time.perf_counter(), time.thread_time()
                        predict(x)
                        samples.setdefault((name, threads, batch, "wall"), []).append((time.perf_counter() - t) / batch)
                        samples.setdefault((name, threads, batch, "cpu"), []).append((time.thread_time() - c) / batch)
        del models
    return {"lat": {k: 1e6 * statistics.median(v) for k, v in samples.items()}, "check": check}


def process_times(folder: Path, image: Path, runs: int) -> dict:
    """Wall and CPU seconds of whole processes: litenet-infer on one image, and the floors under it."""
    commands = {
        "litenet-infer image.png (fp32)": [sys.executable, "-m", "litenet.runtime", str(image), "--model", str(folder)],
        "litenet-infer image.png --precision int8": [sys.executable, "-m", "litenet.runtime", str(image), "--model",
                                                     str(folder), "--precision", "int8"],
        "python -c 'import onnxruntime' (floor)": [sys.executable, "-c", "import onnxruntime"],
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
    }
    import compileall

    # pip compiles a wheel's modules at install time; a checkout under PYTHONDONTWRITEBYTECODE
    # would otherwise recompile them in every process and overstate the start-up.
    compileall.compile_dir(str(REPO / "litenet"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = {}
    for name, cmd in commands.items():
        walls, cpus = [], []
        for _ in range(runs):
            t = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            walls.append(time.perf_counter() - t)
            cpus.append(usage.ru_utime + usage.ru_stime)
            if status != 0:
                raise RuntimeError(f"{cmd} failed: {proc.stderr.read().decode()}")
        out[name] = {"median": statistics.median(walls), "min": min(walls), "cpu": statistics.median(cpus)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / "models" / "litenet-base"), help="model folder (export --int8)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op thread counts (default 1 2)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--process-runs", type=int, default=20)
    ap.add_argument("--peer-calib", type=int, default=1024,
                    help="calibration images for the quantize_static peer (0: leave it out)")
    ap.add_argument("--out", help="write the Markdown report here")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # PyTorch's OpenMP workers otherwise spin between calls, which on a shared 2-core machine
    # collapses its 2-thread figures (measured: 13× slower at batch 256); ONNX Runtime's sessions
    # here do not spin either (the spinning row shows what that costs it).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import numpy as np

    from litenet.data import open_cifar10

    folder = Path(args.model)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    images = np.ascontiguousarray(open_cifar10(progress=False).test.images[:256])
    load_before = os.getloadavg()
    lat = latencies(args.threads, folder, images, args.rounds, args.peer_calib, log)
    image = Path(os.environ.get("TMPDIR", "/tmp")) / "litenet-bench-image.png"
    from PIL import Image

    Image.fromarray(images[0]).save(image)
    log("process wall time")
    procs = process_times(folder, image, args.process_runs)
    report = render(args, folder, lat, procs, load_before, os.getloadavg())
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
        log(f"written to {args.out}")


def render(args, folder, lat, procs, load_before, load_after) -> str:
    import onnxruntime
    import torch

    names = list(lat["check"])
    columns = [(t, b, k) for t in args.threads for b in BATCHES for k in ("wall", "cpu")]
    cmd = " ".join(["python bench/bench_infer_cpu.py", "--model", str(args.model), "--threads",
                    *map(str, args.threads), "--rounds", str(args.rounds)])
    lines = [
        f"# CPU inference: ONNX Runtime fp32 / int8 against PyTorch eager — {time.strftime('%Y-%m-%d')}",
        "",
        f"Machine: 2-core AMD EPYC CPU ({cpu_name()}, {os.cpu_count()} logical CPUs, AVX2, no VNNI), shared with "
        f"other engineers' jobs: load average {load_before[0]:.1f} before, {load_after[0]:.1f} after.",
        f"ONNX Runtime {onnxruntime.__version__}, PyTorch {torch.__version__} (OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY')}), Python {platform.python_version()}; niceness {os.nice(0)}.",
        f"Model: {folder} ({_describe(folder)}). Command: `{cmd}` (`make bench-infer-cpu`).",
        "",
        "## Latency per image (µs, median)",
        "",
        f"{args.rounds} interleaved rounds of {CALLS[1]} (batch 1) / {CALLS[256]} (batch 256) calls per model, after "
        "warm-up. Each call classifies uint8 images (the x / 255 scaling included). “CPU” is the calling thread's "
        "CPU time: with one intra-op thread it is the latency without the time other jobs held the core. "
        "Ratios are to ORT fp32 in the same column.",
        "",
        "| model | " + " | ".join(f"batch {b}, {t} thread{'s' * (t > 1)}, {k}" for t, b, k in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name in names:
        cells = []
        for t, b, k in columns:
            v = lat["lat"].get((name, t, b, k))
            ref = lat["lat"][("ORT fp32", t, b, k)]
            cells.append("-" if v is None else f"{v:,.1f}" + ("" if name == "ORT fp32" else f" ({v / ref:.2f}×)"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Max |Δlogit| against ORT fp32 on 256 test images: " +
              ", ".join(f"{n} {v:.2e}" for n, v in lat["check"].items() if n != "ORT fp32") + ".", "",
              "## Whole process: `litenet-infer image.png` (one CIFAR-10 test image)", "",
              f"{args.process_runs} runs each, `python -m litenet.runtime` (what the `litenet-infer` script runs), "
              "seconds. Target: ≤ 0.5 s wall.", "",
              "| command | wall, median | wall, min | CPU (user+sys), median |", "|---|---|---|---|"]
    for name, p in procs.items():
        lines.append(f"| {name} | {p['median']:.3f} | {p['min']:.3f} | {p['cpu']:.3f} |")
    return "\n".join(lines) + "\n"


def _describe(folder: Path) -> str:
    import json

    doc = json.loads((folder / "config.json").read_text())
    m = doc["model"]
    acc = doc.get("test_accuracy")
    return (f"{doc.get('preset')}: embed {m['embed']}, width {m['width']}, hidden {m['hidden']}, blocks {m['blocks']}"
            + (f", test accuracy {100 * acc:.2f} %" if acc is not None else ""))


if __name__ == "__main__":
    main()
