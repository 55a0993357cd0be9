"""The presets' training bits on the GPU, for holding one tree's CUDA backend to another's: 200 steps of
litenet-seed, litenet-base and litenet-mixer (fp32, and the Mixer in BF16) from the same start on the
same learnable images, each step's loss and ‖g‖ and the sha256 of the final parameters, as JSON.

    PYTHONPATH=<tree> python3 bench/lowering_identity.py --out identity.json     (each tree in turn)
    python3 bench/lowering_identity.py --compare before.json after.json

It finds the tree's CUDA training backend through litenet.train.backends, so it runs as well on the
planners the op-list lowering replaced (commit 5e5bc88) as on the lowering.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

CASES = [("litenet-seed", {}), ("litenet-base", {}), ("litenet-mixer", {}), ("litenet-mixer", {"precision": "bf16"})]
STEPS = 200


def run(name: str, settings: dict) -> dict:
    from litenet.model import init_params, load_preset, override
    from litenet.train import schedule
    from litenet.train.backends import backend_class
    from tests.golden.record import learnable_images

    preset = load_preset(name)
    train = override(preset.train, settings) if settings else preset.train
    n = 4096
    images, labels = learnable_images(n, preset.model.classes, 0)
    backend = backend_class("cuda")(preset.model, train, init_params(preset.model, train.seed))
    backend.load_dataset(images, labels.astype(np.int64))
    per_epoch = schedule.steps_per_epoch(n, train)
    done, epoch = 0, 0
    while done < STEPS:
        batches = schedule.epoch_batches(n, train, epoch)[:STEPS - done]
        lrs = schedule.learning_rates(done, len(batches), 10 * per_epoch, train)
        backend.train_steps(batches, lrs, **schedule.epoch_augments(batches, train, epoch))
        done, epoch = done + len(batches), epoch + 1
    stats = backend.fetch_stats()
    params = backend.state()["params"]
    return {"loss": stats["loss"].tolist(), "grad_norm": stats["grad_norm"].tolist(),
            "params_sha256": hashlib.sha256(params.tobytes()).hexdigest(), "final_loss": float(stats["loss"][-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        print("| preset | steps | losses bit-identical | ‖g‖ bit-identical | parameters bit-identical | last loss |")
        print("|---|---|---|---|---|---|")
        for key in a:
            x, y = a[key], b[key]
            print(f"| {key} | {len(x['loss'])} | {x['loss'] == y['loss']} | {x['grad_norm'] == y['grad_norm']} | "
                  f"{x['params_sha256'] == y['params_sha256']} | {x['final_loss']:.6f} / {y['final_loss']:.6f} |")
        return
    out = {}
    for name, settings in CASES:
        key = name + "".join(f" {k}={v}" for k, v in settings.items())
        out[key] = run(name, settings)
        print(key, out[key]["final_loss"], out[key]["params_sha256"][:16], flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
