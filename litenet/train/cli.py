"""`litenet train`: the command line around litenet.train.run (one rank) and train/parallel/launch.py (N ranks)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from litenet.errors import UsageError
from litenet.limits import MAX_RANKS
from litenet.model import FAMILIES, TrainConfig
from litenet.settings import help_text
from litenet.train.resume import apply_record
from litenet.train.run import DEFAULT_PRESET, RUNS_DIR, RunOptions, backend_options, settings, train_rank


def add_arguments(parser) -> None:
    parser.add_argument("--preset", help=f"preset name or .toml file (default: {DEFAULT_PRESET['cuda']} on a GPU, "
                                         f"{DEFAULT_PRESET['numpy']} on the CPU)")
    parser.add_argument("--out", help="output folder (default runs/<preset>)")
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "cuda"])
    parser.add_argument("--data", help="CIFAR-10 folder or archive (default: LITENET_DATA, ./data, ../shared/data, download)")
    parser.add_argument("--maps", help="folder of the converted memory maps (default ./data/cifar10-maps)")
    parser.add_argument("--allow-partial", action="store_true", help="train on the training batches present")
    parser.add_argument("--limit", type=int, help="train on the first N training images only")
    parser.add_argument("--test-limit", type=int, help="evaluate on the first N test images only")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--force", action="store_true", help="start over even if --out holds a run")
    parser.add_argument("--check-kernels", type=int, default=0, metavar="N",
                        help="CUDA: run the first N steps region by region, each fast region held to its "
                             "reference kernels and each reference kernel to its NumPy twin; then train on as usual")
    parser.add_argument("--kernels", default="fast", choices=["fast", "reference"],
                        help="CUDA: the fast kernels where they cover the network and settings (default), or the "
                             "reference kernels alone (one thread per output, the docs' first read)")
    parser.add_argument("--print-launches", action="store_true",
                        help="CUDA: print the step's launch list, op by op with its kernels, before training")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="NumPy backend precision")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar, one line per epoch")
    ranks = parser.add_mutually_exclusive_group()
    ranks.add_argument("--gpus", type=int, metavar="N",
                       help="data-parallel over N GPUs: one CUDA rank per GPU, gradients summed by NCCL "
                            "(docs/parallel.md); 1 trains as usual")
    ranks.add_argument("--processes", type=int, metavar="N",
                       help="data-parallel over N NumPy processes on this CPU (shared memory); 1 trains as usual")
    group = parser.add_argument_group("settings (override the preset; see models/*.toml)")
    seen = set()
    for cls in (*FAMILIES.values(), TrainConfig):  # a setting two families share gets one flag
        for field in dataclasses.fields(cls):
            if field.name in seen or field.name == "layers":  # a layer list is set in a preset, not by a flag
                continue
            seen.add(field.name)
            kind = type(field.default)
            group.add_argument(f"--{field.name.replace('_', '-')}", dest=f"set_{field.name}", metavar=kind.__name__.upper(),
                               type=_parse_bool if kind is bool else kind, help=help_text(field.name))


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def options_from_args(args) -> RunOptions:
    """The run the command line asks for (the settings flags become overrides of the preset)."""
    overrides = {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}
    return RunOptions(preset=args.preset, overrides=overrides, out=args.out, data=args.data, maps=args.maps,
                      allow_partial=args.allow_partial, limit=args.limit, test_limit=args.test_limit,
                      resume=args.resume, force=args.force, progress=not args.no_progress,
                      check_kernels=args.check_kernels, kernels=args.kernels, print_launches=args.print_launches,
                      dtype=args.dtype)


def run(args) -> int:
    """`litenet train`: one rank in this process, or N ranks through the launcher."""
    if args.resume and (args.out or args.preset):  # the short form reads the run's own settings
        apply_record(args, Path(args.out) if args.out else RUNS_DIR / args.preset)
    family = None
    if args.preset is not None:  # a wrong preset or setting is reported before anything else
        family = checked_settings(options_from_args(args))[1].family
    backend, world = _ranks(args, family)
    args.preset = args.preset or DEFAULT_PRESET[backend]  # the Mixer at the size for the backend
    opts = options_from_args(args)
    train = checked_settings(opts)[2]
    if backend == "numpy" and train.precision != "fp32":  # before the run's first line and its folder
        raise UsageError(f"--precision {train.precision} runs CUDA products on tensor cores; the NumPy backend "
                         "computes in --dtype (float32 or float64): use --precision fp32 with --backend numpy")
    if backend == "cuda" and world == 1:  # before any data or run folder: without CuPy the run could only crash
        backend_options(opts, backend)  # a flag the backend refuses is the first thing to say
        require_cupy()
    if world > 1:
        from litenet.train.parallel.launch import launch
        return launch(opts, backend, world)
    return train_rank(opts, backend)


def checked_settings(opts: RunOptions):
    """settings(opts), with an error about a setting given as a flag worded with that flag (`--lr-base`, not `lr_base`)."""
    import re

    from litenet.errors import LiteNetError
    try:
        return settings(opts)
    except LiteNetError as exc:
        text = str(exc)
        for name in opts.overrides:
            text = re.sub(rf"(?<![-\w']){name}(?![\w'])", "--" + name.replace("_", "-"), text)
        if text == str(exc):
            raise
        raise type(exc)(text) from None


def require_cupy() -> None:
    """Refuse --backend cuda / --gpus in one line, naming the extra, when CuPy cannot be imported."""
    import importlib.util

    from litenet.distribution import cupy_hint
    from litenet.errors import EnvironmentProblem

    if importlib.util.find_spec("cupy") is None:
        raise EnvironmentProblem(f"--backend cuda needs CuPy, which is not installed: {cupy_hint()}, "
                                 "or train with --backend numpy")


def _ranks(args, family: str | None = None) -> tuple[str, int]:
    """The backend and the number of ranks that --backend, --gpus and --processes ask for (after
    checking the flags that have a range; the settings' ranges are the model configs' and TrainConfig's)."""
    from litenet.train.backends import choose_backend

    for flag, value, least in (("--limit", args.limit, 1), ("--test-limit", args.test_limit, 1),
                               ("--check-kernels", args.check_kernels, 0)):
        if value is not None and value < least:
            raise UsageError(f"{flag} {value}: must be ≥ {least}")
    for flag, value in (("--gpus", args.gpus), ("--processes", args.processes)):
        if value is not None and value > MAX_RANKS:
            raise UsageError(f"{flag} {value}: at most {MAX_RANKS} ranks")
    if args.gpus is not None:
        if args.gpus < 1:
            raise UsageError(f"--gpus {args.gpus}: give a number of GPUs ≥ 1")
        if args.backend == "numpy":
            raise UsageError("--gpus trains one CUDA rank per GPU; for NumPy ranks on the CPU use --processes N")
        return "cuda", args.gpus
    if args.processes is not None:
        if args.processes < 1:
            raise UsageError(f"--processes {args.processes}: give a number of processes ≥ 1")
        if args.backend == "cuda":
            raise UsageError("--processes runs NumPy ranks on the CPU; for CUDA ranks use --gpus N")
        return "numpy", args.processes
    return choose_backend(args.backend, family), 1
