"""`python bench/export_ablation.py --weights DIR`: how close each int8 variant comes to fp32, off the test set.

The choice of W_q rounding and bias correction (litenet.export.refine) was made with this, not on
the test images: calibration images are drawn from the first 45,000 training images, and every
variant is scored on the last 5,000 (never calibrated on) against the fp32 model, for several
calibration seeds. The scores: KL(fp32 ‖ int8) of the softmax averaged over images, the number of
images whose class differs from fp32's, and accuracy on that slice. The slice was part of
training, so its accuracy says less about test accuracy than the two agreement measures; the
agreement is what quantization can change. The Markdown goes to
bench/results/new/export-ablation-<preset>.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "bench"))  # export_report: publish

from export_report import publish  # noqa: E402

from litenet.errors import LiteNetError  # noqa: E402
from litenet.export import int8_plan, qdq, refine  # noqa: E402
from litenet.export import scales as sc  # noqa: E402
from litenet.export.calibrate import METHODS, calibration_images  # noqa: E402
from litenet.runtime import int8_plan as plan_rt  # noqa: E402
from litenet.train import network  # noqa: E402
from litenet.weights import load_model  # noqa: E402

HELD_OUT = 5000  # the last training images: never drawn for calibration here
VARIANTS = (("nearest", False), ("nearest", True), ("gptq", False), ("gptq", True))  # (rounding, bias correction)


def agreement(z: np.ndarray, z32: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """KL(softmax(z32) ‖ softmax(z)) averaged over images, images whose argmax differs, accuracy."""
    def log_softmax(v):
        v = v.astype(np.float64) - v.max(1, keepdims=True)
        return v - np.log(np.exp(v).sum(1, keepdims=True))

    l8, l32 = log_softmax(z), log_softmax(z32)
    return {"kl": float((np.exp(l32) * (l32 - l8)).sum(1).mean()),
            "differ": int((z.argmax(1) != z32.argmax(1)).sum()), "acc": float((z.argmax(1) == labels).mean())}


def study(weights: str | Path, seeds: tuple[int, ...] = (0, 1, 2), calib: int = 4096, data=None, maps=None,
          weight_max: int = qdq.WEIGHT_MAX, log=print) -> dict:
    """Every (method, rounding, bias correction) × seed score on the held-out slice."""
    from litenet.data import open_cifar10

    params, model, _, doc = load_model(weights)
    params = np.asarray(params, np.float32)
    ds = open_cifar10(data=data, maps=maps, progress=False)
    train, labels = np.asarray(ds.train.images), np.asarray(ds.train.labels)
    pool, held, held_labels = train[:-HELD_OUT], train[-HELD_OUT:], labels[-HELD_OUT:]
    z32 = np.concatenate([network.forward(params, held[i:i + 1000], model).z for i in range(0, len(held), 1000)])
    scores: dict = {}
    for seed in seeds:
        images = calibration_images(pool, calib, seed)
        log(f"seed {seed}: calibrating on {len(images)} images, GPTQ")
        base = sc.calibrate(params, model, images, "percentile")
        nearest = qdq.Int8Weights.nearest(params, model, weight_max)
        gptq = refine.gptq_weights(params, model, images, weight_max)  # once per seed: it does not depend on the method
        for method in METHODS:
            scales = sc.with_method(base, method)
            for rounding, corrected in VARIANTS:
                start = time.perf_counter()
                w = gptq if rounding == "gptq" else nearest
                if corrected:
                    w = qdq.Int8Weights(w.weights, refine.correct_biases(params, model, scales, w, images),
                                        weight_max, rounding, "empirical")
                plan = plan_rt.plan_from_tensors(int8_plan.plan_tensors(params, model, scales, w),
                                                 int8_plan.plan_metadata(model, scales, "ablation", [], w))
                scores[(method, rounding, corrected, seed)] = agreement(plan_rt.run_plan(plan, held), z32, held_labels)
                log(f"  {method}, {rounding}, bias correction {corrected}: {scores[(method, rounding, corrected, seed)]}"
                    f" ({time.perf_counter() - start:.0f} s)")
    return {"preset": str(doc.get("preset", "unknown")), "weights": str(weights), "seeds": seeds, "calib": calib,
            "fp32_acc": float((z32.argmax(1) == held_labels).mean()), "scores": scores, "weight_max": weight_max}


def to_markdown(fig: dict) -> str:
    """One row per variant: the mean over seeds of each score, and the per-seed KL."""
    seeds = fig["seeds"]
    out = [f"# Int8 variants against fp32 on held-out training images: {fig['preset']}", "",
           f"Made by `python bench/export_ablation.py --weights {fig['weights']} --calib {fig['calib']} "
           f"--seeds {','.join(map(str, seeds))}`. Calibration: {fig['calib']} images drawn from the first "
           f"45,000 training images (seeds {', '.join(map(str, seeds))}); scores on the last {HELD_OUT:,} "
           f"(never calibrated on; fp32 accuracy there {100 * fig['fp32_acc']:.2f} %, they were trained on). "
           f"Weights ±{fig['weight_max']}; the int8 plan executor (= ONNX Runtime on the QDQ model up to rounding).", "",
           "| method | W_q rounding | bias correction | KL(fp32 ‖ int8), mean | per seed | images ≠ fp32, mean | "
           "accuracy, mean |", "|---|---|---|---|---|---|---|"]
    for method in METHODS:
        for rounding, corrected in VARIANTS:
            rows = [fig["scores"][(method, rounding, corrected, s)] for s in seeds]
            per_seed = " / ".join(f"{r['kl']:.2e}" for r in rows)
            out.append(f"| {method} | {rounding} | {'yes' if corrected else 'no'} | "
                       f"{np.mean([r['kl'] for r in rows]):.2e} | {per_seed} | "
                       f"{np.mean([r['differ'] for r in rows]):.1f} | {100 * np.mean([r['acc'] for r in rows]):.2f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, print and write the table."""
    parser = argparse.ArgumentParser(prog="python bench/export_ablation.py", description=__doc__.splitlines()[0])
    parser.add_argument("--weights", required=True, metavar="DIR")
    parser.add_argument("--out", metavar="FILE", help="Markdown file (default bench/results/new/export-ablation-<preset>.md)")
    parser.add_argument("--calib", type=int, default=4096)
    parser.add_argument("--seeds", default="0,1,2", help="calibration seeds, comma-separated (default 0,1,2)")
    parser.add_argument("--data", metavar="PATH")
    parser.add_argument("--maps", metavar="DIR")
    args = parser.parse_args(argv)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    try:
        fig = study(args.weights, seeds, args.calib, args.data, args.maps, log=lambda line: print(line, file=sys.stderr))
    except LiteNetError as exc:
        print(f"export_ablation: error: {exc}", file=sys.stderr)
        return 1
    publish(to_markdown(fig), Path(args.out or f"bench/results/new/export-ablation-{fig['preset']}.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
