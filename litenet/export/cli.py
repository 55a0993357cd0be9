"""`litenet export`: write ONNX fp32 (and with --int8 the QDQ model, scales, int8 plan, engine) next to the weights."""

from __future__ import annotations

import argparse
import sys

from litenet.export.calibrate import DEFAULT_PERCENTILE, METHODS
from litenet.export.pipeline import DEFAULT_CALIB, DEFAULT_METHOD, ExportOptions, ExportReport, export_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `litenet export` flags."""
    parser.add_argument("--weights", required=True, metavar="DIR",
                        help="model folder written by litenet train (weights.safetensors + config.json)")
    parser.add_argument("--out", metavar="DIR", help="where the files go (default: the --weights folder)")
    parser.add_argument("--int8", action="store_true",
                        help="also calibrate and write model.int8.onnx, its scales, the int8 plan (and a TensorRT engine)")
    parser.add_argument("--calib", type=int, default=DEFAULT_CALIB, metavar="N",
                        help=f"training images for calibration (default {DEFAULT_CALIB})")
    parser.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD,
                        help=f"how each activation range is chosen (default {DEFAULT_METHOD})")
    parser.add_argument("--percentile", type=float, default=DEFAULT_PERCENTILE, metavar="P",
                        help=f"for --method percentile (default {DEFAULT_PERCENTILE})")
    parser.add_argument("--scales", metavar="FILE", help="reuse the activation scales of an earlier run's JSON")
    parser.add_argument("--seed", type=int, default=0, help="which training images calibrate (default 0)")
    parser.add_argument("--weight-max", type=int, choices=(64, 127), default=64,
                        help="int8 weight range ±64 (default: exact in ONNX Runtime on every CPU) or ±127 "
                             "(finer, but ONNX Runtime on x86 CPUs without VNNI then saturates; docs/export.md)")
    parser.add_argument("--rounding", choices=("gptq", "nearest"), default="gptq",
                        help="how int8 weights are rounded: gptq (default: least error of each layer's output on "
                             "the calibration images) or nearest")
    parser.add_argument("--no-bias-correction", action="store_true",
                        help="keep the trained biases (default: add the int8 network's mean output error on the "
                             "calibration images to them)")
    parser.add_argument("--no-engine", action="store_true", help="do not build a TensorRT engine even where possible")
    parser.add_argument("--data", metavar="PATH", help="CIFAR-10 source (default: litenet data's search order)")
    parser.add_argument("--maps", metavar="DIR", help="where the CIFAR-10 memory maps live")


def run(args: argparse.Namespace) -> int:
    """Export, then print the table; user mistakes raise LiteNetError for the dispatcher to print."""
    options = ExportOptions(int8=args.int8, calib=args.calib, method=args.method, percentile=args.percentile,
                            scales_file=args.scales, seed=args.seed, engine=not args.no_engine,
                            weight_max=args.weight_max, rounding=args.rounding,
                            bias_correction=not args.no_bias_correction)
    report = export_model(args.weights, args.out, options, data=args.data, maps=args.maps,
                          log=lambda line: print(line, file=sys.stderr))
    print(format_report(report))
    folder = args.out or args.weights
    print(f"next: litenet-infer photo.jpg --model {folder}{' --precision int8' if args.int8 else ''}   "
          f"(or litenet eval --model {args.weights}; litenet bench-infer {folder})", file=sys.stderr)
    return 0


def format_report(report: ExportReport) -> str:
    """The table the user sees: file, size, test accuracy — then the checks in one line each."""
    lines = [f"wrote to {report.out}", f"  {'file':<30} {'size':>10}  test accuracy (10,000 images)"]
    for a in report.artifacts:
        acc = f"{100 * a.accuracy:.2f} %" if a.accuracy is not None else "-"
        lines.append(f"  {a.name:<30} {_size(len(a.data)):>10}  {acc}")
    f = report.fp32_check
    lines.append(f"fp32 ONNX vs NumPy forward: max |Δlogit| {f['max_abs_diff']:.2e} on {f['images']} images "
                 f"(tolerance {f['tolerance']:.1e}), argmax agreement {100 * f['argmax_agreement']:.2f} %")
    if report.plan_check:
        p = report.plan_check
        lines.append(f"int8 plan vs QDQ model in ONNX Runtime: argmax agreement {100 * p['argmax_agreement']:.2f} %, "
                     f"max |Δlogit| {p['max_abs_diff']:.2e}, {p['images_with_rounding_flips']} images with a rounding flip")
    if report.kernels:
        k = report.kernels
        lines.append(f"ONNX Runtime CPU int8 kernels: {k['int8_kernels']} "
                     f"({', '.join(f'{n} {c}' for n, c in sorted(k['ops'].items()) if 'Integer' in n or 'QLinear' in n)})")
    if report.scales:
        lines.append(f"calibration: {report.scales.method} on {report.scales.source.get('images', '?')} training images"
                     + (f"; weights: {report.weights.rounding} rounding, bias correction {report.weights.bias_correction}"
                        if report.weights else ""))
    lines += [report.engine_note] if report.engine_note else []
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f} MiB"


def main(argv: list[str] | None = None) -> int:
    """`python -m litenet.export`: the same command outside the `litenet` dispatcher."""
    from litenet.cli import main as litenet_main

    return litenet_main(["export", *(sys.argv[1:] if argv is None else argv)])
