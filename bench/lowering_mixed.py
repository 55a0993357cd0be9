"""A network of neither family — Mixer blocks, then MLP blocks on the pooled vector — trained on real
CIFAR-10 images with the NumPy backend and with the CUDA lowering in both tiers, from the same start on the
same batches and draws: the per-epoch losses and test accuracies side by side.

    python3 bench/lowering_mixed.py --images 5000 --epochs 3 --out mixed.json                 # on a GPU
    python3 bench/lowering_mixed.py --emulate --images 1000 --epochs 1 --out mixed.json       # on the CPU emulator

The network (4 Mixer blocks of width 64 over 4 × 4 patches, the final LayerNorm and the mean over the
patches, 2 MLP blocks of hidden 128, the head) is a layer list (litenet.layers), as LiteNet Studio saves one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litenet.layers import layer  # noqa: E402
from litenet.model import LayersConfig, TrainConfig, init_params  # noqa: E402
from litenet.train import schedule  # noqa: E402

MIXED = LayersConfig(layers=(
    layer("patches", patch=4, input_shift=0.47, input_scale=4.0), layer("embed", width=64),
    *[layer("mixer_block", token_hidden=32, channel_hidden=128) for _ in range(4)],
    layer("layernorm"), layer("mean_tokens"), *[layer("mlp_block", hidden=128) for _ in range(2)], layer("head")))
TRAIN = TrainConfig(batch_size=64, optimizer="adamw", lr_base=2e-3, weight_decay=0.05, decay="weights",
                    warmup_steps=50, schedule="cosine", clip_threshold=float("inf"), loss="cross-entropy",
                    label_smoothing=0.1, augment="crop+flip")


def backends(emulate: bool):
    from litenet.train.gpu_backend import GpuBackend
    from litenet.train.numpy_backend import NumpyBackend

    device = None
    if emulate:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cuda"))
        from emulator.device import EmuDevice
        device = EmuDevice()
    params = init_params(MIXED, TRAIN.seed)
    return {"numpy": NumpyBackend(MIXED, TRAIN, params),
            "cuda reference": GpuBackend(MIXED, TRAIN, params, device=device, kernels="reference"),
            "cuda fast": GpuBackend(MIXED, TRAIN, params, device=device, kernels="fast")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--test-images", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--data", help="CIFAR-10 folder (default: the usual search order)")
    ap.add_argument("--allow-partial", action="store_true", help="a source holding only some training batches")
    ap.add_argument("--emulate", action="store_true", help="the CUDA backends on the CPU emulator")
    ap.add_argument("--out")
    args = ap.parse_args()
    from litenet.data import open_cifar10

    ds = open_cifar10(data=args.data, progress=False, allow_partial=args.allow_partial)
    train_x, train_y = np.asarray(ds.train.images[:args.images]), np.asarray(ds.train.labels[:args.images])
    test_x, test_y = np.asarray(ds.test.images[:args.test_images]), np.asarray(ds.test.labels[:args.test_images])
    runs = backends(args.emulate)
    report = {"images": args.images, "test_images": args.test_images, "epochs": args.epochs, "rows": {}}
    per_epoch = schedule.steps_per_epoch(args.images, TRAIN)
    for name, b in runs.items():
        b.load_dataset(train_x, train_y.astype(np.int64))
        rows, started = [], time.perf_counter()
        for epoch in range(args.epochs):
            batches = schedule.epoch_batches(args.images, TRAIN, epoch)
            lrs = schedule.learning_rates(epoch * per_epoch, per_epoch, args.epochs * per_epoch, TRAIN)
            b.train_steps(batches, lrs, **schedule.epoch_augments(batches, TRAIN, epoch))
            loss = b.fetch_stats()["loss"]
            accuracy = float((b.logits(test_x).argmax(axis=1) == test_y).mean())
            rows.append({"epoch": epoch + 1, "mean_loss": float(loss.mean()), "last_loss": float(loss[-1]),
                         "test_accuracy": accuracy})
            print(f"{name:15s} epoch {epoch + 1}: loss {loss.mean():.6f} (last {loss[-1]:.6f}), "
                  f"test {100 * accuracy:.2f} %", flush=True)
        report["rows"][name] = {"epochs": rows, "seconds": time.perf_counter() - started}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
