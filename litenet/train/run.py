"""One training run as the library sees it: its options, its settings, its folder, and one rank of it.

`litenet train` (train/cli.py) turns its flags into RunOptions and calls train_rank, or the
launcher (train/parallel/launch.py) for several ranks; the launcher's ranks call train_rank too.
Neither this module nor the launcher imports the CLI.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from litenet.errors import EXIT_DIVERGED, UsageError
from litenet.model import AnyModel, TrainConfig, load_preset, override_preset
from litenet.train.exported import exported_from_other_weights

# What `litenet train` (and `make train`) trains when no preset is named: the Mixer, at the size for
# the backend, since it beats litenet-base's MLP on both in the same time (bench/results/gpu-mixer.md,
# bench/results/cpu-training.md; README.md, docs/mixer.md).
DEFAULT_PRESET = {"cuda": "litenet-mixer", "numpy": "litenet-mixer-cpu"}
RUNS_DIR = Path("runs")  # a run's default parent: untracked in a checkout, never the shipped models/


@dataclass(frozen=True)
class RunOptions:
    """What a run asks for beyond the preset: overrides of its settings, where to read and write, how."""

    preset: str = DEFAULT_PRESET["numpy"]
    overrides: dict = field(default_factory=dict)  # model config (any family) / TrainConfig field name → value
    out: str | None = None  # None: runs/<preset name>
    data: str | None = None
    maps: str | None = None
    allow_partial: bool = False
    limit: int | None = None  # train on the first N training images only
    test_limit: int | None = None
    resume: bool = False
    force: bool = False
    progress: bool = True
    check_kernels: int = 0
    kernels: str = "fast"  # the CUDA backend's tier: "fast" rewrites, or the "reference" kernels alone
    print_launches: bool = False  # print the CUDA step's launch list (op → kernel) before training
    dtype: str = "float32"


def settings(opts: RunOptions) -> tuple[str, AnyModel, TrainConfig]:
    """The preset with the run's overrides applied: (name, model, train)."""
    preset = load_preset(opts.preset)
    return (preset.name, *override_preset(preset, opts.overrides))


def run_folder(opts: RunOptions, preset_name: str) -> Path:
    """Where the run writes: --out, else runs/<preset> (the shipped models/ folder only when asked for)."""
    return Path(opts.out) if opts.out else RUNS_DIR / preset_name


def backend_options(opts: RunOptions, backend: str) -> dict:
    """The backend's keyword options that the run asks for."""
    import numpy as np

    options = {}
    if opts.check_kernels:
        if backend != "cuda":
            raise UsageError("--check-kernels compares CUDA kernels with NumPy; it needs --backend cuda")
        options["check_kernels"] = opts.check_kernels
    if opts.kernels != "fast" or opts.print_launches:
        if backend != "cuda":
            raise UsageError("--kernels and --print-launches choose and show CUDA kernels; they need --backend cuda")
        options.update(kernels=opts.kernels, print_launches=opts.print_launches)
    if opts.dtype != "float32":
        if backend != "numpy":
            raise UsageError("--dtype float64 is for the NumPy backend; add --backend numpy")
        options["dtype"] = np.float64
    return options


def train_rank(opts: RunOptions, backend: str, comm=None) -> int:
    """Train as one rank of `comm` (the whole run when None): every rank of a launch runs this.
    Returns the exit code: 0 finished, EXIT_DIVERGED, 130 interrupted (checkpoint saved)."""
    from litenet.data import open_cifar10
    from litenet.train.trainer import LoopOptions, Split, TrainData, Trainer

    name, model, train = settings(opts)
    writer = comm is None or comm.rank == 0
    world = 1 if comm is None else comm.world_size
    options = backend_options(opts, backend)
    ds = open_cifar10(data=opts.data, maps=opts.maps, allow_partial=opts.allow_partial, progress=writer)
    train_split = Split(ds.train.images[:opts.limit], ds.train.labels[:opts.limit])
    test_split = Split(ds.test.images[:opts.test_limit], ds.test.labels[:opts.test_limit])
    out = run_folder(opts, name)
    steps = len(train_split.images) // train.batch_size
    if steps == 0:  # before any line that would announce epochs of 0 steps
        raise UsageError(f"--batch-size {train.batch_size} is larger than the {len(train_split.images)} training "
                         "images: give a smaller --batch-size or more images (--limit)")
    ranks = f" × {world} ranks ({train.batch_size // world} images each per step)" if world > 1 else ""
    announce = (f"litenet train: {name} on {len(train_split.images)} images, {backend} backend{ranks}, "
                f"{train.epochs} epoch{'s' * (train.epochs != 1)} of {steps} step{'s' * (steps != 1)} → {out}")
    started = time.perf_counter()
    data = TrainData(train_split, test_split, tuple(ds.classes),
                     info={"train_images": len(train_split.images), "test_images": len(test_split.images)})
    loop = LoopOptions(backend=backend, backend_options=options, resume=opts.resume, force=opts.force,
                       progress=opts.progress, announce=announce)
    result = Trainer(name, model, train, out, data, loop, comm=comm).run()
    if result.stopped == "diverged":
        return EXIT_DIVERGED
    if result.stopped == "interrupted":
        return 130
    if writer:
        acc = "n/a" if result.test_accuracy is None else f"{100 * result.test_accuracy:.2f}%"
        print(f"litenet train: done in {time.perf_counter() - started:.0f} s; test accuracy {acc}; "
              f"weights in {out / 'weights.safetensors'}", file=sys.stderr)
        print(f"next: litenet export --weights {out} --int8   (then litenet-infer photo.jpg uses this run; "
              f"litenet eval --model {out} scores it now)", file=sys.stderr)
        stale = exported_from_other_weights(out)
        if stale:  # litenet-infer refuses them now (their weights_sha256 no longer matches): say so here
            print(f"litenet train: {', '.join(stale)} in {out} were exported from the earlier weights; "
                  f"refresh them with `litenet export --weights {out} --int8`", file=sys.stderr)
    return 0
