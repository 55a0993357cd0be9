"""The CUDA inference backend's logits, saved for a bit-for-bit comparison between two versions of LiteNet
(the tree on PYTHONPATH is the one measured: this script adds no path of its own).

    PYTHONPATH=. python3 bench/infer_logits.py --models models/litenet-base models/litenet-mixer --out new.npz
    PYTHONPATH=old python3 bench/infer_logits.py --models ... --out old.npz
    python3 bench/infer_logits.py --compare old.npz new.npz

Every model in fp32 and int8, at batch sizes that take each of the backend's paths (the MLP's one launch,
its tiles, a split input), from seeded random images.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

BATCHES = (1, 16, 17, 64, 65, 1000)


def logits(models: list[str], seed: int) -> dict:
    from litenet.runtime.cuda_backend import CudaInference
    from litenet.runtime.model_files import ModelFiles

    images = np.random.default_rng(seed).integers(0, 256, (max(BATCHES), 32, 32, 3), dtype=np.uint8)
    out = {}
    for folder in models:
        for precision in ("fp32", "int8"):
            be = CudaInference(ModelFiles.locate(folder), precision)
            for batch in BATCHES:
                be.predict(images[:batch])  # the second call replays the graph: the path of record
                out[f"{folder.rstrip('/').split('/')[-1]}/{precision}/{batch}"] = be.predict(images[:batch])
    return out


def compare(old_path: str, new_path: str) -> int:
    old, new = np.load(old_path), np.load(new_path)
    worst = 0
    for key in sorted(set(old.files) | set(new.files)):
        if key not in old.files or key not in new.files:
            print(f"{key}: only in {'new' if key in new.files else 'old'}")
            worst = max(worst, 1)
            continue
        same = np.array_equal(old[key], new[key])
        diff = float(np.abs(old[key] - new[key]).max())
        print(f"{key}: {'identical' if same else f'max |Δ| {diff:.3g}'}")
        worst = max(worst, 0 if same else 1)
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=[])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    np.savez(args.out, **logits(args.models, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
