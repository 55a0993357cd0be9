"""`litenet train`: the command line around litenet.train.trainer."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig, load_preset, override

DEFAULT_PRESET = "litenet-base"


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default=DEFAULT_PRESET, help=f"preset name or .toml file (default {DEFAULT_PRESET})")
    parser.add_argument("--out", help="output folder (default models/<preset>)")
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "cuda"])
    parser.add_argument("--data", help="CIFAR-10 folder or archive (default: LITENET_DATA, ./data, ../shared/data, download)")
    parser.add_argument("--maps", help="folder of the converted memory maps (default ./data/cifar10-maps)")
    parser.add_argument("--allow-partial", action="store_true", help="train on the training batches present")
    parser.add_argument("--limit", type=int, help="train on the first N training images only")
    parser.add_argument("--test-limit", type=int, help="evaluate on the first N test images only")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--force", action="store_true", help="start over even if --out holds a run")
    parser.add_argument("--check-kernels", type=int, default=0, metavar="N",
                        help="CUDA: compare every kernel with its NumPy twin for the first N steps")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="NumPy backend precision")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar, one line per epoch")
    ranks = parser.add_mutually_exclusive_group()
    ranks.add_argument("--gpus", type=int, metavar="N",
                       help="data-parallel over N GPUs: one CUDA rank per GPU, gradients summed by NCCL "
                            "(docs/parallel.md); 1 trains as usual")
    ranks.add_argument("--processes", type=int, metavar="N",
                       help="data-parallel over N NumPy processes on this CPU (shared memory); 1 trains as usual")
    group = parser.add_argument_group("settings (override the preset; see models/*.toml)")
    for cls in (ModelConfig, TrainConfig):
        for field in dataclasses.fields(cls):
            kind = type(field.default)
            group.add_argument(f"--{field.name.replace('_', '-')}", dest=f"set_{field.name}", metavar=kind.__name__.upper(),
                               type=_parse_bool if kind is bool else kind, help=f"{cls.__name__}.{field.name}")


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def settings_from_args(args):
    """The preset with the command line's overrides applied: (name, model, train)."""
    preset = load_preset(args.preset)
    values = {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}
    return preset.name, override(preset.model, values), override(preset.train, values)


def run(args) -> int:
    """`litenet train`: one rank in this process, or N ranks through the launcher."""
    settings_from_args(args)  # a wrong preset or setting is reported before anything else
    backend, world = _ranks(args)
    if world > 1:
        from litenet.train.parallel.launch import launch
        return launch(args, backend, world)
    return train_rank(args, backend)


def _ranks(args) -> tuple[str, int]:
    """The backend and the number of ranks that --backend, --gpus and --processes ask for."""
    from litenet.train.backends import choose_backend

    if args.gpus is not None:
        if args.gpus < 1:
            raise LiteNetError("--gpus needs a number of GPUs ≥ 1")
        if args.backend == "numpy":
            raise LiteNetError("--gpus trains one CUDA rank per GPU; for NumPy ranks on the CPU use --processes N")
        return "cuda", args.gpus
    if args.processes is not None:
        if args.processes < 1:
            raise LiteNetError("--processes needs a number of processes ≥ 1")
        if args.backend == "cuda":
            raise LiteNetError("--processes runs NumPy ranks on the CPU; for CUDA ranks use --gpus N")
        return "numpy", args.processes
    return choose_backend(args.backend), 1


def run_folder(args, preset_name: str) -> Path:
    return Path(args.out or Path("models") / preset_name)


def backend_options(args, backend: str) -> dict:
    """The backend's keyword options that the command line asks for."""
    import numpy as np

    options = {}
    if args.check_kernels:
        if backend != "cuda":
            raise LiteNetError("--check-kernels compares CUDA kernels with NumPy; it needs --backend cuda")
        options["check_kernels"] = args.check_kernels
    if args.dtype != "float32":
        if backend != "numpy":
            raise LiteNetError("--dtype float64 is for the NumPy backend; add --backend numpy")
        options["dtype"] = np.float64
    return options


# What litenet export writes beside the weights (litenet/export/pipeline.py); the trainer does not import the exporter.
EXPORTED_FILES = ("model.onnx", "model.int8.onnx", "model.int8.plan.safetensors", "model.int8.engine")


def train_rank(args, backend: str, comm=None) -> int:
    """Train as one rank of `comm` (the whole run when None): every rank of a launch runs this."""
    from litenet.data import open_cifar10
    from litenet.train.trainer import Split, Trainer

    name, model, train = settings_from_args(args)
    writer = comm is None or comm.rank == 0
    world = 1 if comm is None else comm.world_size
    options = backend_options(args, backend)
    ds = open_cifar10(data=args.data, maps=args.maps, allow_partial=args.allow_partial, progress=writer)
    train_split = Split(ds.train.images[:args.limit], ds.train.labels[:args.limit])
    test_split = Split(ds.test.images[:args.test_limit], ds.test.labels[:args.test_limit])
    out = run_folder(args, name)
    if writer:
        ranks = f" × {world} ranks ({train.batch_size // world} images each per step)" if world > 1 else ""
        print(f"litenet train: {name} on {len(train_split.images)} images, {backend} backend{ranks}, "
              f"{train.epochs} epochs of {len(train_split.images) // train.batch_size} steps → {out}", flush=True)
    started = time.perf_counter()
    result = Trainer(name, model, train, out, train_split, test_split, tuple(ds.classes), backend=backend,
                     backend_options=options, resume=args.resume, force=args.force, progress=not args.no_progress,
                     data_info={"train_images": len(train_split.images), "test_images": len(test_split.images)},
                     comm=comm).run()
    if result.stopped == "diverged":
        return 3
    if result.stopped == "interrupted":
        return 130
    if writer:
        acc = "n/a" if result.test_accuracy is None else f"{100 * result.test_accuracy:.2f}%"
        print(f"litenet train: done in {time.perf_counter() - started:.0f} s; test accuracy {acc}; "
              f"weights in {out / 'weights.safetensors'}", file=sys.stderr)
        stale = [name for name in EXPORTED_FILES if (out / name).is_file()]
        if stale:  # litenet-infer refuses them now (their weights_sha256 no longer matches): say so here
            print(f"litenet train: {', '.join(stale)} in {out} were exported from the earlier weights; "
                  f"refresh them with `litenet export --weights {out} --int8`", file=sys.stderr)
    return 0
