"""Experiment: why the seed recipe does not learn — one change at a time, with diagnostics.

Each variant starts from `litenet-seed` and changes one setting (or a few, named), trains on the
first N training images for E epochs with the NumPy backend, then measures on the test set:
accuracy, the spread of the logits across classes, how much the head's input varies between
images, and the share of samples whose hinge is still active. The table goes to docs.

    python bench/seed_recipe.py --images 10000 --epochs 5 --out docs/seed-recipe-table.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litenet.data import open_cifar10  # noqa: E402
from litenet.model import init_params, load_preset, override  # noqa: E402
from litenet.train import network, schedule  # noqa: E402
from litenet import ops  # noqa: E402
from litenet.train.numpy_backend import NumpyBackend  # noqa: E402

VARIANTS = [
    ("seed, as specified", {}),
    ("clip rule off", {"clip_threshold": 1e9}),
    ("lr ÷ 4 (lr_base 0.012)", {"lr_base": 0.012}),
    ("lr × 4 (lr_base 0.192)", {"lr_base": 0.192}),
    ("margin 1.0", {"margin": 1.0}),
    ("cosine schedule", {"schedule": "cosine"}),
    ("full 3072 embedding", {"embed": "full"}),
    ("centred pixels (input_shift 0.5)", {"input_shift": 0.5}),
    ("cross-entropy loss", {"loss": "cross-entropy"}),
    ("centred + cross-entropy", {"input_shift": 0.5, "loss": "cross-entropy"}),
    ("centred + full + cross-entropy", {"input_shift": 0.5, "embed": "full", "loss": "cross-entropy"}),
]


def diagnose(params, model, images, labels, margin) -> dict:
    """What the trained network does on held-out images."""
    tape = network.forward(params, images, model)
    z, h0 = tape.z, tape.values["embed"]
    y = tape.values[tape.ops[-1].inputs[0]]  # the head's input
    _, per_sample = ops.margin_loss_forward(z, labels, margin)
    return {
        "accuracy": float(np.mean(z.argmax(1) == labels)),
        "logit_spread": float(np.mean(z.max(1) - z.min(1))),  # max − min logit of an image
        "head_input_std": float(np.mean(y.std(axis=0))),  # how much y varies between images
        "embed_common": float(np.mean(np.abs(h0.mean(axis=0))) / np.mean(h0.std(axis=0))),  # |mean| / std of h0
        "active_hinges": float(np.mean(per_sample > 0)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--data")
    ap.add_argument("--out")
    args = ap.parse_args()
    ds = open_cifar10(data=args.data, progress=False)
    images, labels = ds.train.images[:args.images], ds.train.labels[:args.images]
    test_x, test_y = ds.test.images, ds.test.labels.astype(np.int64)
    seed = load_preset("litenet-seed")
    rows = []
    for name, change in VARIANTS:
        model, train = override(seed.model, change), override(seed.train, {**change, "epochs": args.epochs})
        backend = NumpyBackend(model, train, init_params(model, train.seed))
        backend.load_dataset(images, labels)
        total = schedule.steps_per_epoch(len(images), train) * train.epochs
        started, clipped, losses = time.perf_counter(), 0, []
        for epoch in range(train.epochs):
            batches = schedule.epoch_batches(len(images), train, epoch)
            first = epoch * len(batches)
            backend.train_steps(batches, schedule.learning_rates(first, len(batches), total, train))
            stats = backend.fetch_stats()
            clipped += int(stats["clipped"].sum())
            losses.append(float(stats["loss"].mean()))
        d = diagnose(backend.params, model, test_x, test_y, train.margin)
        rows.append((name, change, losses, clipped, total, d))
        print(f"{name:36s} test {100 * d['accuracy']:5.1f}%  last-epoch loss {losses[-1]:.3f}  "
              f"spread {d['logit_spread']:.3f}  y-std {d['head_input_std']:.3f}  active {d['active_hinges']:.2f}  "
              f"clipped {clipped}/{total}  ({time.perf_counter() - started:.0f} s)", flush=True)
    table = render(rows, args)
    print(table)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")


def render(rows, args) -> str:
    lines = [f"Seed-recipe ablation ({time.strftime('%Y-%m-%d')}, 2-core AMD EPYC CPU, NumPy backend): "
             f"`python bench/seed_recipe.py --images {args.images} --epochs {args.epochs}` — the first "
             f"{args.images:,} training images, {args.epochs} epochs, evaluated on the 10,000 test images.",
             "",
             "| variant (one change from litenet-seed) | test acc. | train loss, last epoch | logit spread | "
             "head-input std across images | embedding \\|mean\\|/std | active hinges | steps clipped |",
             "|---|---|---|---|---|---|---|---|"]
    for name, _, losses, clipped, total, d in rows:
        lines.append(f"| {name} | {100 * d['accuracy']:.1f}% | {losses[-1]:.3f} | {d['logit_spread']:.3f} | "
                     f"{d['head_input_std']:.3f} | {d['embed_common']:.1f} | {100 * d['active_hinges']:.0f}% | "
                     f"{clipped}/{total} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
