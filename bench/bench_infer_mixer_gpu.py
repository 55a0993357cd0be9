"""LiteNet's CUDA inference of a Mixer, fp32 and int8, against the same model in PyTorch eager on the same GPU.

    python bench/bench_infer_mixer_gpu.py --out bench/results/new/infer-mixer-gpu.md
    python bench/bench_infer_mixer_gpu.py --models models/litenet-mixer-cpu --out ...

Without --models it builds litenet-mixer (the preset's size) with seeded initial weights and an int8
plan calibrated on synthetic images, in a temporary folder: the timings do not depend on the weights'
values, and no data set or ONNX export is needed. With --models each folder needs weights.safetensors,
config.json and model.int8.plan.safetensors (litenet export --int8).

Contenders, all in one run: LiteNet fp32, LiteNet int8 (the plan, dp4a), PyTorch eager fp32
(bench/torch_mixer.TorchMixer with the same weights, TF32 off, inference mode; uint8 in, as LiteNet),
LiteNet's one-launch forward of each precision (mode "fused"; auto runs it up to MIXER_FUSED_MAX_BATCH
images), and the peer of record for latency, PyTorch compiled fp32: the same module and uint8 conversion under
torch.compile(mode="reduce-overhead") — inductor's fused kernels replayed from a CUDA graph, one graph
per batch size (dynamic=False).
- batch-1 device latency: CUDA events around ONE forward with the input on the GPU, median of
  --repeats; LiteNet replays its CUDA graph, PyTorch launches eagerly.
- batch-1 predict(): host wall time from uint8 image in host memory to logits in host memory.
- batch-4096 (--batch) throughput: events around --steps back-to-back forwards on the GPU; median of a few.
- a short batch-size scan of LiteNet fp32 and int8.
Targets: LiteNet batch-1 latency ≤ 0.5× PyTorch compiled's (and ≤ 0.2× eager's), int8 no slower than
fp32 at batch 1; int8 throughput ≥ 1.5× LiteNet fp32's.
With --test-data (trained --models only) it also scores every contender on the 10,000 test images:
LiteNet fp32 and int8, PyTorch fp32, the NumPy forward, and ONNX Runtime fp32 / int8 where the
folder has model.onnx / model.int8.onnx (litenet export --int8).
Prints a Markdown table; --out writes it, and the raw numbers as .json beside it. About 1–2 minutes on
an H200 (most of it NVRTC compiling the kernels on first use).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_infer_gpu import LiteNet, event_ms, graph_floor_us, launch_graph_ms, median, wall_us

from litenet.weights import load_model

SCAN = (1, 16, 256, 1024, 4096)
SMALL = (1, 2, 4, 8, 16, 32)  # where the one-launch forward and the launch per op cross (MIXER_FUSED_MAX_BATCH)


def synthetic_images(count: int, seed: int) -> np.ndarray:
    """Smooth random uint8 images with noise (CIFAR-like spread of pixel values), for calibration and timing."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(count, 4, 4, 3)).astype(np.float32).repeat(8, axis=1).repeat(8, axis=2)
    return np.clip(coarse + rng.normal(0, 20, coarse.shape), 0, 255).astype(np.uint8)


def build_model(folder: Path, preset: str) -> Path:
    """A model folder with seeded initial weights and an int8 plan (nearest rounding, percentile
    calibration on 128 synthetic images): what the exporter writes, without its slower refinements."""
    from litenet.export import int8_plan, refine
    from litenet.export import scales as sc
    from litenet.model import TrainConfig, init_params, load_preset
    from litenet.runtime.int8_plan import PLAN_FILE, WEIGHT_MAX
    from litenet.weights import save_model

    model = load_preset(preset).model
    params = init_params(model, seed=0)
    save_model(folder, params, model, TrainConfig(epochs=1), preset)
    calib = synthetic_images(128, seed=1)
    scales = sc.calibrate(params, model, calib, "percentile")
    weights = refine.int8_weights(params, model, scales, calib, WEIGHT_MAX, rounding="nearest", bias_correction=False)
    classes = [f"class {i}" for i in range(model.classes)]
    int8_plan.write_plan(folder / PLAN_FILE, int8_plan.plan_tensors(params, model, scales, weights),
                         int8_plan.plan_metadata(model, scales, preset, classes, weights))
    return folder


class Torch:
    """PyTorch eager fp32 on the same weights (bench/torch_mixer.TorchMixer), inference mode, TF32 off."""

    def __init__(self, folder):
        import torch
        from torch_mixer import TorchMixer

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        params, model, _, _ = load_model(folder)
        net = TorchMixer(model)
        net.load_litenet(params)
        self.torch, self.net = torch, net.cuda().eval()

    def forward(self, x_u8):
        return self.net(x_u8.float() / 255.0)

    def device_ms(self, images, count=1, repeats=50) -> float:
        with self.torch.inference_mode():
            x = self.torch.from_numpy(images).cuda()
            for _ in range(3):
                self.forward(x)
            return median(lambda: event_ms("torch", None, lambda: self.forward(x), count), repeats)

    def predict(self, images):
        with self.torch.inference_mode():
            return self.forward(self.torch.from_numpy(images).cuda()).cpu().numpy()


class TorchCompiled(Torch):
    """The same module under torch.compile(mode="reduce-overhead"): inductor's kernels replayed from a CUDA
    graph per input shape. Its output lives in the graph's memory until the next replay, so predict()
    copies it out at once."""

    def __init__(self, folder):
        super().__init__(folder)
        net = self.net
        self.compiled = self.torch.compile(lambda x: net(x.float() / 255.0), mode="reduce-overhead", dynamic=False)

    def forward(self, x_u8):
        return self.compiled(x_u8)

    def device_ms(self, images, count=1, repeats=50) -> float:
        with self.torch.inference_mode():  # more warm-up calls: the graph is recorded on the third
            x = self.torch.from_numpy(images).cuda()
            for _ in range(5):
                self.forward(x)
            return median(lambda: event_ms("torch", None, lambda: self.forward(x), count), repeats)


def load_contenders(folder: Path) -> dict:
    return {"LiteNet fp32": LiteNet(folder, "fp32"), "LiteNet fp32, one launch": LiteNet(folder, "fp32", mode="fused"),
            "LiteNet int8": LiteNet(folder, "int8"), "LiteNet int8, one launch": LiteNet(folder, "int8", mode="fused"),
            "PyTorch eager fp32": Torch(folder), "PyTorch compiled fp32": TorchCompiled(folder)}


def bench_model(folder: Path, contenders: dict, args) -> dict:
    one, big = synthetic_images(1, seed=2), synthetic_images(args.batch, seed=3)
    # LiteNet's few-image figures first (quick; PyTorch's compiles come after)
    small = {f"{p} {how}": {b: 1e3 * contenders[name].device_ms(big[:b], count=10, repeats=5) for b in SMALL}
             for p in ("fp32", "int8") for how, name in (("one launch", f"LiteNet {p}, one launch"),
                                                          ("auto", f"LiteNet {p}"))}
    print(f"  {folder.name} few images, µs: {small}", flush=True)
    phases = {p: phase_times_us(LiteNet(folder, p, mode="phases"), one) for p in ("fp32", "int8")}
    print(f"  {folder.name} phases at batch 1, µs: {phases}", flush=True)
    rows = {}
    for name, c in contenders.items():
        rows[name] = {"latency_us": 1e3 * c.device_ms(one, repeats=args.repeats),
                      "predict_us": wall_us(c, one, min(args.repeats, 100))}
        if "one launch" not in name:  # (one image's work a block: seconds at the large batch, never run there)
            rows[name]["batch_ms"] = c.device_ms(big, count=args.steps, repeats=args.throughput_repeats)
            rows[name]["images_per_s"] = args.batch / rows[name]["batch_ms"] * 1e3
        print(f"  {folder.name} {name}: {rows[name]}", flush=True)
    ref = contenders["PyTorch eager fp32"].predict(big[:512])
    for name in ("LiteNet fp32", "LiteNet fp32, one launch", "LiteNet int8"):
        z = contenders[name].predict(big[:512])
        rows[name]["max_abs_vs_torch"] = float(np.abs(z - ref).max())
        rows[name]["argmax_vs_torch"] = float((z.argmax(1) == ref.argmax(1)).mean())
    scan = {p: {b: 1e3 * contenders[f"LiteNet {p}"].device_ms(big[:b], count=10, repeats=5) for b in SCAN if b <= len(big)}
            for p in ("fp32", "int8")}
    kernels = {f"{p} batch {len(x)}": kernel_times_us(contenders[f"LiteNet {p}"], x)
               for p in ("fp32", "int8") for x in (one, big)}
    one_launch_vs_torch = float(np.abs(contenders["LiteNet fp32, one launch"].predict(big[:8]) - ref[:8]).max())
    print(f"  one-launch fp32 vs PyTorch on 8 images: max |Δlogit| {one_launch_vs_torch:.2e}", flush=True)
    return {"batch": len(big), "rows": rows, "scan": scan, "small": small, "phases": phases, "one_launch_vs_torch": one_launch_vs_torch,
            "kernels": kernels,
            "launches": len(contenders["LiteNet fp32"].be.prepare(1).launches)}


def test_accuracy(folder: Path, loaded: dict, data: str) -> dict:
    """Accuracy on the full test set of each way to run the folder's model, and how often each one's
    class differs from the NumPy forward's (the reference every exported form is checked against).
    `loaded`: load_contenders(folder), as bench_model timed them."""
    from litenet.data import open_cifar10
    from litenet.insight.confusion import predict
    from litenet.runtime.model_files import ModelFiles

    test = open_cifar10(data=data, progress=False).test
    images, labels = np.asarray(test.images), np.asarray(test.labels, np.int64)
    params, model, _, _ = load_model(folder)
    reference = np.asarray(predict(params, images, model))
    contenders = {name: c.predict for name, c in loaded.items()}
    for precision, file in (("fp32", "model.onnx"), ("int8", "model.int8.onnx")):
        if (folder / file).is_file():
            from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference
            contenders[f"ONNX Runtime {precision}"] = OnnxRuntimeInference(ModelFiles.locate(folder), precision).predict
    predictions = {"NumPy forward fp32": reference}
    for name, run in contenders.items():
        predictions[name] = np.concatenate([run(images[i:i + 1000]).argmax(1) for i in range(0, len(images), 1000)])
    out = {}
    for name, pred in predictions.items():
        out[name] = {"accuracy": float(np.mean(pred == labels)), "differs_from_numpy": int(np.sum(pred != reference))}
        print(f"  {folder.name} {name}: test accuracy {100 * out[name]['accuracy']:.2f} %, "
              f"{out[name]['differs_from_numpy']} classes differ from the NumPy forward", flush=True)
    return out


def accuracy_table(results: dict) -> str:
    lines = ["", "Accuracy on the 10,000 CIFAR-10 test images:", "",
             "| model | contender | test accuracy | classes ≠ NumPy forward |", "|---|---|---:|---:|"]
    for model, res in results.items():
        for name, r in res.get("test", {}).items():
            lines.append(f"| {model} | {name} | {100 * r['accuracy']:.2f} % | {r['differs_from_numpy']} |")
    return "\n".join(lines) + "\n"


def kernel_times_us(lite, images, count: int = 10) -> dict:
    """µs per forward spent in each kernel: every launch of the forward timed alone (a graph of `count`
    copies, launch_graph_ms), summed by kernel name. Alone, a launch has no neighbour to overlap with,
    so the sum is a little above the whole forward's time; it says where the time goes."""
    be = lite.be
    run = be.prepare(len(images))
    be.dev.upload(run.pixels, images.reshape(len(images), 3072))
    be.execute(run)
    out: dict[str, float] = {}
    for launch in run.launches:
        out[launch.kernel] = out.get(launch.kernel, 0.0) + 1e3 * launch_graph_ms(be.dev, launch, count, 3)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def phase_times_us(lite, images) -> list[float]:
    """µs of each phase of the one-launch forward (mode "phases": a launch a phase), each timed alone as
    kernel_times_us times a launch: embed, then token / channel fc1 / channel fc2 of each block, head."""
    be = lite.be
    run = be.prepare(len(images))
    be.dev.upload(run.pixels, images.reshape(len(images), 3072))
    be.execute(run)
    return [1e3 * launch_graph_ms(be.dev, launch, 10, 3) for launch in run.launches]


def table(results: dict, floor_us: float, device: str) -> str:
    lines = [f"Device: {device}. One-kernel graph replay (floor of a batch-1 forward): {floor_us:.2f} µs.", "",
             ("| model | contender | batch-1 device latency µs | batch-1 predict() µs | large batch ms | images/s "
             "| latency vs PyTorch eager | latency vs PyTorch compiled |"), "|---|---|---|---|---|---|---|---|"]
    for model, res in results.items():
        eager, compiled = res["rows"]["PyTorch eager fp32"], res["rows"]["PyTorch compiled fp32"]
        for name, r in res["rows"].items():
            large = f"{r['batch_ms']:.3f} | {r['images_per_s']:,.0f}" if "batch_ms" in r else "— | —"
            lines.append(f"| {model} | {name} | {r['latency_us']:.1f} | {r['predict_us']:.1f} | {large} | "
                         f"{r['latency_us'] / eager['latency_us']:.3f}× | "
                         f"{r['latency_us'] / compiled['latency_us']:.3f}× |")
    lines += ["", "Large batch: " + ", ".join(f"{model} {res['batch']} images" for model, res in results.items()) + ".",
              "", ("Targets: LiteNet batch-1 latency ≤ 0.5× PyTorch compiled's (≤ 0.2× eager's), int8 no slower than "
                   "fp32 at batch 1; int8 throughput ≥ 1.5× LiteNet fp32's."), ""]
    for model, res in results.items():
        r, t = res["rows"], res["rows"]["PyTorch compiled fp32"]
        lines.append(f"- {model} ({res['launches']} launches a forward): batch-1 latency fp32 "
                     f"{r['LiteNet fp32']['latency_us'] / t['latency_us']:.3f}×, int8 "
                     f"{r['LiteNet int8']['latency_us'] / t['latency_us']:.3f}× PyTorch compiled; int8 / fp32 throughput "
                     f"{r['LiteNet int8']['images_per_s'] / r['LiteNet fp32']['images_per_s']:.2f}×; "
                     f"max |Δlogit| fp32 vs PyTorch {r['LiteNet fp32']['max_abs_vs_torch']:.2e}, int8 argmax "
                     f"agreement with PyTorch fp32 {100 * r['LiteNet int8']['argmax_vs_torch']:.1f} %")
    lines += ["", "Batch-size scan, LiteNet device µs per forward (10 back-to-back, median of 5):", "",
              "| model | precision | " + " | ".join(str(b) for b in SCAN) + " |", "|---|---|" + "---|" * len(SCAN)]
    for model, res in results.items():
        for precision, times in res["scan"].items():
            lines.append(f"| {model} | {precision} | " + " | ".join(f"{times[b]:.1f}" if b in times else "—" for b in SCAN) + " |")
    lines += ["", "Few images, LiteNet device µs per forward (10 back-to-back, median of 5):", "",
              "| model | forward | " + " | ".join(str(b) for b in SMALL) + " |", "|---|---|" + "---|" * len(SMALL)]
    for model, res in results.items():
        for name, times in res["small"].items():
            lines.append(f"| {model} | {name} | " + " | ".join(f"{times[b]:.1f}" for b in SMALL) + " |")
        lines.append(f"\nThe one launch against PyTorch fp32 on 8 images: max |Δlogit| {res['one_launch_vs_torch']:.2e}.")
        for precision, times in res["phases"].items():
            blocks = times[1:-1]
            lines.append(f"\n{model} {precision}, batch 1, µs a phase launched alone: embed {times[0]:.1f}, token "
                         f"{sum(blocks[0::3]):.1f}, channel fc1 {sum(blocks[1::3]):.1f}, channel fc2 {sum(blocks[2::3]):.1f} "
                         f"(over the blocks), head {times[-1]:.1f}; sum {sum(times):.1f}")
    lines += ["", ("Where the time goes: µs per forward in each kernel, every launch timed alone (a CUDA graph of 10 copies, "
              "median of 3), summed by kernel:"), ""]
    for model, res in results.items():
        for case, times in res["kernels"].items():
            lines.append(f"- {model} {case}: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[], help="Mixer folders (weights, config, int8 plan); "
                        "default: litenet-mixer with seeded weights, built here")
    parser.add_argument("--preset", default="litenet-mixer", help="the preset built when no --models are given")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=10, help="forwards per throughput timing")
    parser.add_argument("--repeats", type=int, default=200, help="batch-1 timings (median)")
    parser.add_argument("--throughput-repeats", type=int, default=5)
    parser.add_argument("--test-data", metavar="DIR", help="also score each contender on the CIFAR-10 test set here")
    parser.add_argument("--out", help="write the table (Markdown) here and the numbers as .json beside it")
    args = parser.parse_args(argv)
    if args.test_data and not args.models:
        parser.error("--test-data scores trained models: give their folders with --models")

    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    floor = graph_floor_us(args.repeats)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = [Path(f) for f in args.models] or [build_model(Path(tmp), args.preset)]
        for folder in folders:
            preset = json.loads((folder / "config.json").read_text()).get("preset", folder.name)
            contenders = load_contenders(folder)
            results[preset] = bench_model(folder, contenders, args)
            if args.test_data:
                results[preset]["test"] = test_accuracy(folder, contenders, args.test_data)
    text = table(results, floor, device) + (accuracy_table(results) if args.test_data else "")
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"device": device, "graph_floor_us": floor, "results": results}, indent=1))


if __name__ == "__main__":
    main()
