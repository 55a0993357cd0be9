"""`litenet bench-infer [MODEL]`: how fast a model classifies on this machine, per backend, precision,
thread count and batch size — one table (or --json), like benchncnn or LiteRT's benchmark_model.

Part of the runtime: it runs on the runtime-only install (a Raspberry Pi's), never importing the
trainer. docs/runtime.md, "Benchmark", describes the table and the JSON schema.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from litenet.errors import LiteNetError, UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `litenet bench-infer`."""
    from litenet.runtime.backends import BACKENDS
    from litenet.runtime.bench import Settings

    d = Settings()
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="model folder (litenet train + export) or one model file (default: your newest finished and "
                        "exported run under runs/, else the best shipped model; named on stderr)")
    p.add_argument("--backend", nargs="+", choices=list(BACKENDS), default=list(d.backends), metavar="NAME",
                   help=f"backends to measure (default: all of {', '.join(BACKENDS)} that can run here)")
    p.add_argument("--precision", nargs="+", choices=["fp32", "int8"], default=list(d.precisions),
                   help="precisions to measure (default: both)")
    p.add_argument("--batch", nargs="+", type=int, default=list(d.batches), metavar="N",
                   help=f"batch sizes (default: {' '.join(map(str, d.batches))})")
    p.add_argument("--threads", nargs="+", type=int, default=[], metavar="N",
                   help="ONNX Runtime intra-op thread counts (default: 1 and the physical cores)")
    p.add_argument("--warmup", type=int, default=d.warmup, metavar="N", help=f"untimed calls first (default {d.warmup})")
    p.add_argument("--loops", type=int, default=d.loops, metavar="N", help=f"timed calls a row (default {d.loops})")
    p.add_argument("--cooldown", type=float, default=d.cooldown, metavar="SECONDS",
                   help=f"rest before each row, so a hot board cools (default {d.cooldown:g})")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object (schema litenet-bench-infer/1)")
    p.add_argument("--emulated", metavar="TEXT",
                   help="label the machine as emulated (found by itself under qemu-user with QEMU_CPU set)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    """Measure, then print the table or the JSON report; returns the exit status (3: nothing could run)."""
    from litenet.runtime import bench
    from litenet.runtime.model_choice import choose_model
    from litenet.runtime.model_files import ModelFiles

    # ONNX Runtime or the GPU does the work; an idle OpenBLAS pool would only add threads to the
    # process's CPU time (cli.py of litenet-infer says the same).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    settings = bench.Settings(backends=tuple(dict.fromkeys(args.backend)), precisions=tuple(dict.fromkeys(args.precision)),
                              batches=tuple(dict.fromkeys(args.batch)), threads=tuple(args.threads),
                              warmup=args.warmup, loops=args.loops, cooldown=args.cooldown)
    try:
        settings.check()
    except LiteNetError as exc:
        raise UsageError(str(exc)) from None
    choice = choose_model(args.model, needs="onnx")
    model = ModelFiles.locate(choice.path)
    if args.model is None:  # a model the user named is not repeated back
        print(choice.line("litenet bench-infer"), file=sys.stderr, flush=True)
    log = (lambda line: None) if args.quiet else (lambda line: print(f"bench-infer: {line}", file=sys.stderr, flush=True))
    report = bench.run(model, settings, log)
    if args.emulated:
        report["machine"]["emulated"] = args.emulated
    print(json.dumps(report, indent=1) if args.json else bench.render(report), end="\n" if args.json else "")
    if not report["rows"]:
        reasons = "; ".join(f"{k['backend']} {k['precision']}: {k['reason']}" for k in report["skipped"])
        raise LiteNetError(f"no backend could run {model.describe()} here ({reasons})")
    return 0
