"""`litenet` command line: a plain table of subcommands, each a module with add_arguments/run."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import NamedTuple

from litenet.distribution import install_hint
from litenet.errors import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_USAGE, LiteNetError, debugging, report


class Command(NamedTuple):
    module: str  # has add_arguments(parser) and run(args)
    help: str
    extra: str | None = None  # the pyproject.toml extra that provides `needs` (None: the runtime install has all)
    needs: tuple[str, ...] = ()  # modules the command cannot start without; matplotlib only where the PNG is the result


# A module is imported only when its command runs, so `litenet --help` stays fast and the runtime-only
# install never touches CuPy or ONNX; a command whose extra is missing says so before importing anything.
COMMANDS = {
    "data": Command("litenet.data.cli", "convert CIFAR-10 into memory maps (locates or downloads it first)",
                    "train", ("tqdm",)),
    "train": Command("litenet.train.cli", "train a preset with the NumPy or CUDA backend",
                     "train", ("tqdm", "safetensors")),
    "gradcheck": Command("litenet.train.gradcheck", "check every hand-written gradient against finite differences"),
    "export": Command("litenet.export.cli",
                      "write ONNX fp32, and with --int8 a QDQ int8 ONNX, its scales and the int8 plan",
                      "export", ("onnx", "safetensors", "tqdm")),
    "explain": Command("litenet.insight.explain",
                       "saliency maps (gradient × input) for image files or a sheet of test images",
                       "train", ("tqdm", "safetensors", "matplotlib")),
    "eval": Command("litenet.insight.evaluate",
                    "test accuracy, per-class accuracy and the confusion matrix of a trained model",
                    "train", ("tqdm", "safetensors")),
    "trace": Command("litenet.insight.trace",
                     "print every forward and backward step of one tiny batch, formulas and values",
                     "train", ("tqdm", "safetensors")),
    "lr-scan": Command("litenet.insight.lr_scan",
                       "short runs at several learning rates: warm-up gradient norm vs loss (seed 4.3)",
                       "train", ("tqdm",)),
    "studio": Command("litenet.studio.cli",
                      "LiteNet Studio: build a network from layers, train it live, watch every gradient (a page on 127.0.0.1)",
                      "studio", ("aiohttp",)),
    "init-compare": Command("litenet.insight.init_compare",
                            "N(0, 1) vs kaiming-uniform embedding: early gradient norms (seed 5.2)",
                            "train", ("tqdm",)),
    # The runtime's own: it runs on the runtime-only install (a Raspberry Pi's), like litenet-infer.
    "bench-infer": Command("litenet.runtime.bench_cli",
                           "time a model on every backend and precision this machine has (latency table, --json)"),
}


def missing_extra(name: str) -> str | None:
    """The one line to print when command `name` cannot start on this install, else None."""
    command = COMMANDS[name]
    missing = [m for m in command.needs if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"litenet {name}: needs the {command.extra} extra ({', '.join(missing)} not installed): "
            f"{install_hint(command.extra)}")


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litenet", description="LiteNet: train, export, inspect and benchmark.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, spec in COMMANDS.items():
        sp = sub.add_parser(name, help=spec.help, description=spec.help)
        if name == command:
            importlib.import_module(spec.module).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in COMMANDS:
        problem = missing_extra(command)
        if problem:  # before its module is imported: that import, or the run, would fail later on
            print(problem, file=sys.stderr)
            return EXIT_ENVIRONMENT
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    prog = f"litenet {args.command}"
    try:
        return int(importlib.import_module(COMMANDS[args.command].module).run(args) or 0)
    except BrokenPipeError:  # an OSError, so first; `litenet eval | head -1`: the reader is gone, nothing left to say
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (LiteNetError, OSError) as exc:  # a user mistake or the machine refusing: one line (docs/errors.md)
        if debugging():
            raise
        return report(prog, exc)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
