"""LiteNet's CUDA inference, fp32 and int8, against the same model in PyTorch eager on the same GPU (`make bench-infer`).

For each model folder (weights + config + int8 plan): batch-1 latency and batch-4096 throughput of
LiteNet fp32, LiteNet int8 (the plan, dp4a) and PyTorch eager fp32 (bench/torch_twin.TorchLiteNet
with the same weights; TF32 off), all in one run:

- device latency: CUDA events around ONE forward with the input already on the GPU, synchronised
  after each; median of --repeats. LiteNet replays its CUDA graph; PyTorch launches eagerly.
- predict() latency: host wall time from a uint8 image in host memory to logits in host memory.
- throughput: events around --steps back-to-back forwards of 4096 images on the GPU; median.
- a scan of batch sizes, one launch ("fused") against tiles, for the crossover FUSED_MAX_BATCH.
- the floor of a batch-1 forward: the device latency of a graph holding one empty kernel, and
  where the one-launch forward's time goes: its latency stopped after phase 1, 2, … (a graph each).
With --images/--labels: the test accuracy of each contender on those images. Prints a Markdown
table; --out writes it with the raw numbers (JSON) beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from litenet.runtime.cuda_backend import CudaInference  # noqa: E402
from litenet.runtime.cuda_net import phases  # noqa: E402
from litenet.runtime.model_files import ModelFiles  # noqa: E402
from litenet.weights import load_model  # noqa: E402

SCAN = (1, 4, 8, 16, 32, 64, 128, 256)


def event_ms(lib, stream, run, count: int = 1) -> float:
    """ms per call of run() over `count` back-to-back calls, between two events on `stream`."""
    if lib == "torch":
        import torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / count
    import cupy
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for _ in range(count):
        run()
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / count


def median(f, repeats: int) -> float:
    return statistics.median(f() for _ in range(repeats))


def launch_graph_ms(dev, launch, count: int = 10, repeats: int = 5) -> float:
    """Device ms of one launch: a CUDA graph of `count` copies of it replayed, median of `repeats`.
    Replayed from a graph, the launches follow each other as in a step's graph, with no host launch
    time between them (which, at a batch of 1, is longer than most kernels)."""
    graph = dev.capture([launch] * count)
    dev.replay(graph)
    return median(lambda: event_ms("cupy", dev.stream, lambda: dev.replay(graph)), repeats) / count


def graph_floor_us(repeats: int) -> float:
    """Device latency of replaying a graph of one empty kernel: what any one-graph forward costs at least."""
    import cupy
    empty = cupy.RawKernel('extern "C" __global__ void empty_kernel() {}', "empty_kernel")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        empty((1,), (32,), ())
        stream.begin_capture()
        empty((1,), (32,), ())
        graph = stream.end_capture()
    for _ in range(20):
        graph.launch(stream)
    return 1e3 * median(lambda: event_ms("cupy", stream, lambda: graph.launch(stream)), repeats)


class LiteNet:
    """One precision of the CUDA backend, driven through its public prepare/execute/predict."""

    def __init__(self, folder, precision, **options):
        self.be = CudaInference(ModelFiles.locate(folder), precision, **options)
        self.stream = self.be.dev.stream

    def device_ms(self, images, count=1, repeats=50) -> float:
        run = self.be.prepare(len(images))
        self.be.dev.upload(run.pixels, images.reshape(len(images), 3072))
        for _ in range(3):  # the second use captures the graph
            self.be.execute(run)
        return median(lambda: event_ms("cupy", self.stream, lambda: self.be.execute(run), count), repeats)

    def predict(self, images):
        return self.be.predict(images)


class Torch:
    """PyTorch eager on the same weights (bench/torch_twin.TorchLiteNet), inference mode, TF32 off."""

    def __init__(self, folder):
        import torch
        from torch_twin import TorchLiteNet

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        params, model, _, _ = load_model(folder)
        self.torch, self.net = torch, TorchLiteNet(model, params).cuda().eval()

    def device_ms(self, images, count=1, repeats=50) -> float:
        with self.torch.inference_mode():
            x = self.torch.from_numpy(images).cuda()
            for _ in range(3):
                self.net(x)
            return median(lambda: event_ms("torch", None, lambda: self.net(x), count), repeats)

    def predict(self, images):
        with self.torch.inference_mode():
            return self.net(self.torch.from_numpy(images).cuda()).cpu().numpy()


def phase_latencies_us(folder, precision, image, repeats) -> list[float]:
    """Batch-1 device latency of the one-launch kernel run up to the end of phase 1, 2, …, P."""
    import dataclasses

    lite = LiteNet(folder, precision, mode="fused")
    be = lite.be
    run = be.prepare(1)
    be.dev.upload(run.pixels, image.reshape(1, 3072))
    full = run.launches[0]
    out = []
    for end in range(1, phases(be.model) + 1):
        launch = dataclasses.replace(full, args=full.args[:-2] + (np.int32(end), full.args[-1]))
        graph = be.dev.capture([launch])
        for _ in range(3):
            be.dev.replay(graph)
        out.append(1e3 * median(lambda: event_ms("cupy", lite.stream, lambda: be.dev.replay(graph)), repeats))
    return out


def wall_us(contender, image, repeats) -> float:
    for _ in range(5):
        contender.predict(image)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        contender.predict(image)
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def bench_model(folder: Path, args, rng) -> dict:
    one = rng.integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    big = rng.integers(0, 256, (args.batch, 32, 32, 3), dtype=np.uint8)
    contenders = {"LiteNet fp32": LiteNet(folder, "fp32"), "LiteNet int8": LiteNet(folder, "int8"),
                  "PyTorch eager fp32": Torch(folder)}
    rows = {}
    for name, c in contenders.items():
        rows[name] = {"latency_us": 1e3 * c.device_ms(one, repeats=args.repeats),
                      "predict_us": wall_us(c, one, args.repeats),
                      "batch_ms": c.device_ms(big, count=args.steps, repeats=args.throughput_repeats)}
        rows[name]["images_per_s"] = args.batch / rows[name]["batch_ms"] * 1e3
        print(f"  {folder.name} {name}: {rows[name]}", flush=True)
    ref = contenders["PyTorch eager fp32"].predict(big[:512])
    for name in ("LiteNet fp32", "LiteNet int8"):
        z = contenders[name].predict(big[:512])
        rows[name]["max_abs_vs_torch"] = float(np.abs(z - ref).max())
        rows[name]["argmax_vs_torch"] = float((z.argmax(1) == ref.argmax(1)).mean())
    if args.images:
        images, labels = np.load(args.images), np.load(args.labels)
        for name, c in contenders.items():
            rows[name]["accuracy"] = float((c.predict(images).argmax(1) == labels).mean())
    scan = {}
    for precision in ("fp32", "int8"):
        for mode in ("fused", "tiles"):
            c = LiteNet(folder, precision, mode=mode)
            scan[f"{precision} {mode}"] = {b: 1e3 * c.device_ms(big[:b], count=20, repeats=9) for b in SCAN}
    phases = {p: phase_latencies_us(folder, p, one, args.repeats) for p in ("fp32", "int8")}
    return {"rows": rows, "scan": scan, "phases": phases}


def table(results: dict, floor_us: float, device: str) -> str:
    lines = [f"Device: {device}. One-kernel graph replay (floor of a batch-1 forward): {floor_us:.2f} µs.", "",
             "| model | contender | batch-1 device latency µs | batch-1 predict() µs | batch-4096 ms | images/s "
             "| latency vs PyTorch | throughput vs PyTorch | test accuracy |", "|---|---|---|---|---|---|---|---|---|"]
    for model, res in results.items():
        torch_row = res["rows"]["PyTorch eager fp32"]
        for name, r in res["rows"].items():
            acc = f"{100 * r['accuracy']:.2f} %" if "accuracy" in r else "—"
            lines.append(f"| {model} | {name} | {r['latency_us']:.1f} | {r['predict_us']:.1f} | {r['batch_ms']:.3f} | "
                         f"{r['images_per_s']:,.0f} | {r['latency_us'] / torch_row['latency_us']:.3f}× | "
                         f"{r['images_per_s'] / torch_row['images_per_s']:.2f}× | {acc} |")
    lines += ["", "Targets: LiteNet batch-1 latency ≤ 0.2× PyTorch eager's (aim 0.1×); int8 throughput ≥ 1.5× LiteNet fp32's.", ""]
    for model, res in results.items():
        r = res["rows"]
        lines.append(f"- {model}: fp32 latency {r['LiteNet fp32']['latency_us'] / r['PyTorch eager fp32']['latency_us']:.3f}×"
                     f" PyTorch, int8 {r['LiteNet int8']['latency_us'] / r['PyTorch eager fp32']['latency_us']:.3f}×; "
                     f"int8 / fp32 throughput {r['LiteNet int8']['images_per_s'] / r['LiteNet fp32']['images_per_s']:.2f}×; "
                     f"max |Δlogit| vs PyTorch fp32 {r['LiteNet fp32']['max_abs_vs_torch']:.2e}, "
                     f"int8 argmax agreement with PyTorch fp32 {100 * r['LiteNet int8']['argmax_vs_torch']:.1f} %")
    lines += ["", "Batch-size scan, device µs per forward (20 back-to-back forwards, median of 9):", "",
              "| model | path | " + " | ".join(str(b) for b in SCAN) + " |", "|---|---|" + "---|" * len(SCAN)]
    for model, res in results.items():
        for path, times in res["scan"].items():
            lines.append(f"| {model} | {path} | " + " | ".join(f"{times[b]:.1f}" for b in SCAN) + " |")
    lines += ["", "Where a batch-1 forward's time goes: device latency (µs) of the one-launch kernel stopped after "
              "phase k (0 embed, then fc1, fc2 per block, last the head; a grid barrier before each phase after the first):",
              ""]
    for model, res in results.items():
        for precision, times in res["phases"].items():
            lines.append(f"- {model} {precision}: " + ", ".join(f"{t:.1f}" for t in times))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", required=True, help="model folders (weights, config, int8 plan)")
    parser.add_argument("--images", help="uint8 (N, 32, 32, 3) .npy for the accuracy column")
    parser.add_argument("--labels", help="the labels of --images (.npy)")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=20, help="forwards per throughput timing")
    parser.add_argument("--repeats", type=int, default=300, help="batch-1 timings (median)")
    parser.add_argument("--throughput-repeats", type=int, default=7)
    parser.add_argument("--out", help="write the table (Markdown) here and the numbers as .json beside it")
    args = parser.parse_args(argv)

    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    floor = graph_floor_us(args.repeats)
    rng = np.random.default_rng(0)
    results = {}
    for folder in map(Path, args.models):
        preset = json.loads((folder / "config.json").read_text()).get("preset", folder.name)
        results[preset] = bench_model(folder, args, rng)
    text = table(results, floor, device)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"device": device, "graph_floor_us": floor, "results": results}, indent=1))


if __name__ == "__main__":
    main()
