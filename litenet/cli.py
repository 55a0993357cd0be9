"""`litenet` command line: a plain table of subcommands, each a module with add_arguments/run."""

from __future__ import annotations

import argparse
import importlib
import sys

from litenet.errors import LiteNetError, UsageError

# name → (module, one-line help). A module is imported only when its command runs, so
# `litenet --help` stays fast and the NumPy-only install never touches CuPy or ONNX.
COMMANDS = {
    "data": ("litenet.data.cli", "convert CIFAR-10 into memory maps (locates or downloads it first)"),
    "train": ("litenet.train.cli", "train a preset with the NumPy or CUDA backend"),
    "gradcheck": ("litenet.train.gradcheck", "check every hand-written gradient against finite differences"),
    "export": ("litenet.export.cli", "write ONNX fp32, and with --int8 a QDQ int8 ONNX, its scales and the int8 plan"),
    "explain": ("litenet.insight.explain", "saliency maps (gradient × input) for image files or a sheet of test images"),
    "eval": ("litenet.insight.evaluate", "test accuracy, per-class accuracy and the confusion matrix of a trained model"),
    "trace": ("litenet.insight.trace", "print every forward and backward step of one tiny batch, formulas and values"),
    "lr-scan": ("litenet.insight.lr_scan", "short runs at several learning rates: warm-up gradient norm vs loss (seed 4.3)"),
    "init-compare": ("litenet.insight.init_compare", "N(0, 1) vs kaiming-uniform embedding: early gradient norms (seed 5.2)"),
}


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litenet", description="LiteNet: train, export and inspect.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(importlib.import_module(COMMANDS[args.command][0]).run(args) or 0)
    except UsageError as exc:  # a setting or flag out of range: argparse's status for a bad command line
        print(f"litenet {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except LiteNetError as exc:
        print(f"litenet {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"litenet {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
