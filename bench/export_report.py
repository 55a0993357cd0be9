"""`python bench/export_report.py --weights DIR`: the figures behind docs/export.md, measured on one model.

It re-derives everything from the weights (nothing is read from an earlier export): fp32 ONNX
against the NumPy forward, our int8 under each calibration method, ONNX Runtime's quantize_static
under the same methods and calibration images, which kernels ONNX Runtime picks for each, and
batch-1/256 latency on this machine. The Markdown goes to bench/results/new/export-<preset>.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from litenet.errors import LiteNetError  # noqa: E402
from litenet.export import checks, evaluate, onnx_graph, peer, qdq, refine  # noqa: E402
from litenet.export import scales as sc  # noqa: E402
from litenet.export.calibrate import METHODS, calibration_images  # noqa: E402
from litenet.export.int8_plan import plan_metadata, plan_tensors  # noqa: E402
from litenet.export.onnx_fp32 import build_fp32  # noqa: E402
from litenet.export.pipeline import COMPARE_IMAGES, DEFAULT_CALIB, DEFAULT_METHOD  # noqa: E402
from litenet.graph import products  # noqa: E402
from litenet.runtime import int8_plan as plan_rt  # noqa: E402
from litenet.weights import load_model  # noqa: E402
from machine import cpu_name  # noqa: E402

BATCHES = (1, 256)
# Many short rounds, every model in each, so background load (other people's jobs on a shared
# 2-core machine) falls on all models alike; the figure is the median of all timed calls.
REPEATS = {1: 50, 256: 4}
WARMUP = {1: 5, 256: 1}




def run_plan_tensors(tensors: dict, model, scales, weights: qdq.Int8Weights, images: np.ndarray) -> np.ndarray:
    """Execute plan tensors in memory (the same executor as a plan file, without writing one)."""
    meta = plan_metadata(model, scales, "report", [], weights)
    return plan_rt.run_plan(plan_rt.plan_from_tensors(tensors, meta), images)


def latencies(models: dict, images: np.ndarray, threads: tuple[int, ...], rounds: int, log) -> dict:
    """Median µs per call for each (model, threads, batch, "wall" | "cpu"), over `rounds` interleaved rounds.

    One thread count at a time: the idle workers of a multi-threaded session keep spinning for a
    while after each run and would slow whichever session runs next. "cpu" is the calling
    thread's CPU time. With one intra-op thread ONNX Runtime computes on the calling thread, so it
    is the latency minus the time other jobs held the core: on a shared machine the steadier
    figure. With more threads it misses the pool's share and is not shown.
    """
    samples: dict = {}
    for t in threads:
        sessions = {name: evaluate.session(proto, threads=t) for name, proto in models.items()}
        for r in range(rounds):
            if r % 5 == 0:
                log(f"latency, {t} thread(s): round {r + 1}/{rounds}")
            for batch in BATCHES:
                x = evaluate.to_input(images[:batch])
                for name, sess in sessions.items():
                    feed = {sess.get_inputs()[0].name: x}
                    for _ in range(WARMUP[batch]):
                        sess.run(None, feed)
                    wall = samples.setdefault((name, t, batch, "wall"), [])
                    cpu = samples.setdefault((name, t, batch, "cpu"), [])
                    for _ in range(REPEATS[batch]):
                        start, start_cpu = time.perf_counter(), time.thread_time()
                        sess.run(None, feed)
                        wall.append((time.perf_counter() - start) * 1e6)
                        cpu.append((time.thread_time() - start_cpu) * 1e6)
        del sessions
    return {key: float(np.median(v)) for key, v in samples.items()}


def measure(weights: str | Path, calib: int = DEFAULT_CALIB, seed: int = 0, data=None, maps=None,
            threads: tuple[int, ...] = (1, 2), rounds: int = 20, log=print) -> dict:
    """Every figure of the report, as a dict."""
    from litenet.data import open_cifar10

    params, model, _, doc = load_model(weights)
    ds = open_cifar10(data=data, maps=maps, progress=False)
    x, y = np.asarray(ds.test.images), np.asarray(ds.test.labels)
    fig: dict = {"preset": str(doc.get("preset", "unknown")), "model": model, "weights": str(weights),
                 "cpu": cpu_name(), "cores": os.cpu_count(), "calib": calib, "seed": seed, "threads": threads,
                 "rounds": rounds}
    import onnx
    import onnxruntime

    fig["versions"] = {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "numpy": np.__version__}

    log("fp32: build, check against the NumPy forward")
    fp32 = build_fp32(params, model, {"preset": fig["preset"]})
    onnx_graph.check(fp32)
    z32 = evaluate.logits(evaluate.session(fp32), x)
    fig["fp32_check"] = checks.fp32_agreement(z32[:COMPARE_IMAGES], params, model, x[:COMPARE_IMAGES])
    from litenet.train import network

    z_np = np.concatenate([network.forward(params, x[i:i + 1000], model).z for i in range(0, len(x), 1000)])
    fig["fp32_acc"], fig["numpy_acc"] = evaluate.accuracy(z32, y), evaluate.accuracy(z_np, y)

    images = calibration_images(ds.train.images, calib, seed)
    log(f"calibrating on {len(images)} training images")
    base = sc.calibrate(params, model, images, DEFAULT_METHOD)
    ours, rows, right = {}, [], {}
    # (method, weight range, W_q rounding, bias correction): ours as exported, then what the exporter
    # did before GPTQ and bias correction, then the ±127 weights ONNX Runtime saturates on AVX2.
    variants = [(m, qdq.WEIGHT_MAX, "gptq", True) for m in METHODS] + [
        (DEFAULT_METHOD, qdq.WEIGHT_MAX, "nearest", False), (DEFAULT_METHOD, 127, "gptq", True)]
    z32_argmax = z32.argmax(1)
    for method, wmax, rounding, corrected in variants:
        log(f"ours: {method}, ±{wmax}, {rounding} rounding, bias correction {corrected}")
        scales = sc.with_method(base, method)
        weights = refine.int8_weights(params, model, scales, images, wmax, rounding, corrected)
        proto = qdq.build_qdq(params, model, scales, {"preset": fig["preset"]}, weights)
        z8 = evaluate.logits(evaluate.session(proto), x)
        z_plan = run_plan_tensors(plan_tensors(params, model, scales, weights), model, scales, weights, x)
        kernels = evaluate.kernel_report(proto)
        rows.append({"method": method, "weight_max": wmax, "rounding": rounding, "bias_correction": corrected,
                     "acc": evaluate.accuracy(z8, y), "fp32_disagree": int((z8.argmax(1) != z32_argmax).sum()),
                     "plan_acc": evaluate.accuracy(z_plan, y), "plan": checks.plan_agreement(z_plan, z8),
                     "int8_kernels": kernels["int8_kernels"], "float_matmuls": kernels["float_matmuls_after_dq"]})
        if wmax == qdq.WEIGHT_MAX and rounding == "gptq" and corrected:
            ours[method] = proto
            right[method] = z8.argmax(1) == y
    fig["ours"] = rows
    fig["amax"] = base.amax

    log("ONNX Runtime quantize_static (this takes a while)")
    peers, peer_models = [], {}
    for preprocess in (False, True):
        for method in METHODS:
            with contextlib.redirect_stdout(io.StringIO()):  # its calibrators print progress
                proto = peer.quantize_static(fp32, images, method, preprocess)
            z = evaluate.logits(evaluate.session(proto), x)
            kernels = evaluate.kernel_report(proto)
            peers.append({"method": method, "preprocess": preprocess, "acc": evaluate.accuracy(z, y),
                          "fp32_disagree": int((z.argmax(1) != z32_argmax).sum()),
                          "vs_ours": paired_comparison(right[method], z.argmax(1) == y),
                          "vs_default": paired_comparison(right[DEFAULT_METHOD], z.argmax(1) == y),
                          "int8_kernels": kernels["int8_kernels"], "float_matmuls": kernels["float_matmuls_after_dq"],
                          "qdq_nodes": peer.qdq_node_count(proto),
                          "qdq_left": sum(kernels["ops"].get(k, 0) for k in ("QuantizeLinear", "DequantizeLinear"))})
            if method == "minmax":
                peer_models["quantize_static minmax" + (" + pre-process" if preprocess else "")] = proto
    fig["peers"] = peers

    log("latency")
    models = {"fp32": fp32, f"ours int8 ({DEFAULT_METHOD})": ours[DEFAULT_METHOD], **peer_models}
    fig["latency"] = latencies(models, x, threads, rounds, log)
    fig["latency_models"] = list(models)
    return fig


def paired_comparison(ours_right: np.ndarray, peer_right: np.ndarray) -> dict:
    """Images only ours gets right, only the peer gets right, and McNemar's exact two-sided p-value:
    how likely a split at least this uneven is if the two models were equally accurate."""
    a, b = int((ours_right & ~peer_right).sum()), int((~ours_right & peer_right).sum())
    n, k = a + b, min(a, b)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    return {"only_ours": a, "only_peer": b, "p": p}


def pct(v: float) -> str:
    """0.5663 → "56.63 %"."""
    return f"{100 * v:.2f} %"


def points(v: float, ref: float) -> str:
    """Difference in percentage points, signed."""
    return f"{100 * (v - ref):+.2f}"


def describe_model(m) -> str:
    """The model's settings in one line, for any family (its config's fields)."""
    return f"{m.family}, " + ", ".join(f"{f.name} {getattr(m, f.name)}" for f in dataclasses.fields(m))


def to_markdown(fig: dict) -> str:
    """The report as Markdown tables, with the command that made it."""
    m, f = fig["model"], fig["fp32_check"]
    out = [f"# Export figures: {fig['preset']}", "",
           f"Made by `python bench/export_report.py --weights {fig['weights']} --calib {fig['calib']}` on "
           f"{fig['cpu']} ({fig['cores']} cores), ONNX Runtime {fig['versions']['onnxruntime']}, "
           f"onnx {fig['versions']['onnx']}, NumPy {fig['versions']['numpy']}.", "",
           f"Model: {describe_model(m)}. Calibration: {fig['calib']} training images (seed {fig['seed']}), the same for "
           "every row. Accuracy: the full 10,000-image test set.", "",
           "## fp32 ONNX against the NumPy forward", "",
           f"- {f['images']} test images: max |Δlogit| = {f['max_abs_diff']:.2e} (computed tolerance "
           f"{f['tolerance']:.1e}; the float32 NumPy forward itself is {f['numpy_float64_error']:.1e} from float64), "
           f"argmax agreement {pct(f['argmax_agreement'])}.",
           f"- Test accuracy: ONNX Runtime {pct(fig['fp32_acc'])}, NumPy forward {pct(fig['numpy_acc'])}.", "",
           "## Our int8 (QDQ) by calibration method", "",
           "Weights: W_q rounded by GPTQ on the calibration images and biases corrected there "
           "(litenet.export.refine), except where the row says otherwise. “≠ fp32”: test images whose class "
           "differs from the fp32 model's.", "",
           "| method | weights | W_q rounding, bias correction | ORT int8 accuracy | Δ vs fp32 (points) | ≠ fp32 | "
           "plan accuracy | plan vs ORT: argmax agreement / max abs Δlogit / images with a rounding flip | "
           "ORT int8 MatMuls |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in fig["ours"]:
        p = r["plan"]
        how = f"{r['rounding']}, {'yes' if r['bias_correction'] else 'no'}"
        out.append(f"| {r['method']} | ±{r['weight_max']} | {how} | {pct(r['acc'])} | "
                   f"{points(r['acc'], fig['fp32_acc'])} | {r['fp32_disagree']} | "
                   f"{pct(r['plan_acc'])} | {pct(p['argmax_agreement'])} / {p['max_abs_diff']:.3f} / "
                   f"{p['images_with_rounding_flips']} | {r['int8_kernels']} of {len(products(m))} |")
    out += ["", "Activation ranges (amax) each method chose:", "", "| tensor | " + " | ".join(METHODS) + " |",
            "|---|" + "---|" * len(METHODS)]
    out += [f"| {n} | " + " | ".join(f"{a[k]:.4g}" for k in METHODS) + " |" for n, a in fig["amax"].items()]
    out += ["", "## ONNX Runtime's quantize_static on the same fp32 model and calibration images", "",
            "QDQ format, int8 activations and weights, per_channel=True (its defaults otherwise).", "",
            "“vs ours” compares with our model of the same method (and “vs our default” with our "
            f"{DEFAULT_METHOD} model), image by image: test images only ours classifies right / only theirs does, "
            "and McNemar's exact p-value for that split. “≠ fp32” as above.", "",
            "| method | quant_pre_process | accuracy | Δ vs fp32 (points) | ≠ fp32 | vs ours (only ours / only theirs, p) | "
            "vs our default | Q/DQ nodes in file | Q/DQ left after ORT optimisation | int8 MatMul kernels | "
            "MatMuls left in float (weights dequantized per call) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in fig["peers"]:
        v, vd = r["vs_ours"], r["vs_default"]
        out.append(f"| {r['method']} | {'yes' if r['preprocess'] else 'no'} | {pct(r['acc'])} | "
                   f"{points(r['acc'], fig['fp32_acc'])} | {r['fp32_disagree']} | "
                   f"{v['only_ours']} / {v['only_peer']}, p = {v['p']:.2f} | "
                   f"{vd['only_ours']} / {vd['only_peer']}, p = {vd['p']:.2f} | "
                   f"{r['qdq_nodes']} | {r['qdq_left']} | {r['int8_kernels']} | {', '.join(r['float_matmuls']) or '-'} |")
    out += ["", "## CPU latency (ONNX Runtime, CPU provider, ORT_ENABLE_ALL)", "",
            f"µs per call, median over {fig['rounds']} interleaved rounds of {REPEATS[1]} (batch 1) / {REPEATS[256]} "
            "(batch 256) calls per model; the ratio is to fp32 in the same column. ",
            "“CPU” is the calling thread's CPU time, which leaves out the time other jobs held the core "
            "(with 1 intra-op thread ONNX Runtime computes on the calling thread).", ""]
    columns = [(t, b, kind) for t in fig["threads"] for kind in (("cpu", "wall") if t == 1 else ("wall",))
               for b in BATCHES]
    out += ["| model | " + " | ".join(f"batch {b}, {t} thread{'s' if t > 1 else ''}, {'CPU' if k == 'cpu' else 'wall'}"
                                      for t, b, k in columns) + " |", "|---|" + "---|" * len(columns)]
    lat = fig["latency"]
    for name in fig["latency_models"]:
        cells = []
        for t, b, kind in columns:
            v, ref = lat[(name, t, b, kind)], lat[("fp32", t, b, kind)]
            cells.append(f"{v:,.0f}" + ("" if name == "fp32" else f" ({v / ref:.2f}×)"))
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, print and write the report."""
    parser = argparse.ArgumentParser(prog="python bench/export_report.py", description=__doc__.splitlines()[0])
    parser.add_argument("--weights", required=True, metavar="DIR")
    parser.add_argument("--out", metavar="FILE", help="Markdown file (default bench/results/new/export-<preset>.md)")
    parser.add_argument("--calib", type=int, default=DEFAULT_CALIB)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=20, help="interleaved latency rounds (default 20)")
    parser.add_argument("--data", metavar="PATH")
    parser.add_argument("--maps", metavar="DIR")
    args = parser.parse_args(argv)
    try:
        fig = measure(args.weights, args.calib, args.seed, args.data, args.maps, rounds=args.rounds,
                      log=lambda line: print(line, file=sys.stderr))
    except LiteNetError as exc:
        print(f"export_report: error: {exc}", file=sys.stderr)
        return 1
    publish(to_markdown(fig), Path(args.out or f"bench/results/new/export-{fig['preset']}.md"))
    return 0


def publish(text: str, out: Path) -> None:
    """Write the Markdown to `out` (creating its folder) and print it; say where on stderr."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
