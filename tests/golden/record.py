"""Record the golden figures the suite holds every later version to (`python -m tests.golden.record`).

For litenet-base and litenet-seed: the losses of 200 NumPy training steps from the preset's seed on
learnable synthetic images (in float32, and in float64 as the yardstick of float32's rounding), then, from the weights those steps reach, the sha256 of the fp32 ONNX
file, of the int8 QDQ ONNX file and of the int8 plan (percentile calibration, GPTQ rounding, bias
correction on 256 synthetic images). Re-record only for a change that is meant to alter them, and
say so in the commit: the file is the proof that a refactoring changed no number.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from litenet.model import init_params, load_preset
from litenet.train import schedule
from litenet.train.backends import backend_class

GOLDEN_FILE = Path(__file__).with_name("golden.json")
PRESETS = ("litenet-base", "litenet-seed")
STEPS = 200
CALIB_IMAGES = 256
METADATA = {"litenet_format": "litenet-onnx/1", "preset": "golden", "class_names": [f"c{i}" for i in range(10)],
            "input": "golden", "opset": 13, "weights_sha256": "0" * 64}


def learnable_images(n: int, classes: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A faint random pattern per class under noise, a fifth of the labels random: training neither
    explodes nor reaches zero loss, so 200 steps exercise every branch of the arithmetic."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    patterns = rng.uniform(-1, 1, (classes, 32, 32, 3))
    images = np.clip(128 + 25 * patterns[labels] + rng.normal(0, 50, (n, 32, 32, 3)), 0, 255)
    relabel = rng.random(n) < 0.2
    labels[relabel] = rng.integers(0, classes, int(relabel.sum()))
    return images.astype(np.uint8), labels.astype(np.uint8)


def blas_fingerprint() -> str:
    """sha256 of a float32 and a float64 product of fixed matrices: equal fingerprints mean the same
    BLAS kernels (summation order), the condition under which bit-identity is a fair demand."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 3072)), rng.standard_normal((3072, 256))
    products = (a.astype(np.float32) @ b.astype(np.float32)).tobytes() + (a @ b).tobytes()
    return hashlib.sha256(products).hexdigest()


def golden_run(preset_name: str, steps: int = STEPS):
    """The golden run's inputs: (model, train, images, labels, batches, flips, lrs) of `steps` steps
    (the schedule as if they were the first of a 5·STEPS-step run)."""
    preset = load_preset(preset_name)
    model, train = preset.model, preset.train
    images, labels = learnable_images(STEPS * train.batch_size)
    batches = schedule.epoch_batches(len(images), train, 0)[:steps]
    return (model, train, images, labels, batches, schedule.epoch_flips(batches, train, 0),
            schedule.learning_rates(0, steps, STEPS * 5, train))


def train_losses(preset_name: str, steps: int = STEPS, backend: str = "numpy", **options) -> tuple[np.ndarray, np.ndarray]:
    """(losses of `steps` steps of a backend, the weights after them) for a preset."""
    model, train, images, labels, batches, flips, lrs = golden_run(preset_name, steps)
    runner = backend_class(backend)(model, train, init_params(model, train.seed), **options)
    runner.load_dataset(images, labels)
    runner.train_steps(batches, lrs, flips)
    return runner.fetch_stats()["loss"], runner.state()["params"]


def export_hashes(preset_name: str, params: np.ndarray) -> dict[str, str]:
    """sha256 of the fp32 ONNX, the QDQ ONNX and the int8 plan built from `params`."""
    from litenet.export import int8_plan, qdq, refine, scales
    from litenet.export.onnx_fp32 import build_fp32

    model = load_preset(preset_name).model
    images = learnable_images(CALIB_IMAGES, seed=1)[0]
    calibration = scales.calibrate(params, model, images, "percentile", source={"split": "golden"})
    weights = refine.int8_weights(params, model, calibration, images, qdq.WEIGHT_MAX, "gptq", True)
    fp32 = build_fp32(params, model, METADATA).SerializeToString()
    int8 = qdq.build_qdq(params, model, calibration, METADATA, weights).SerializeToString()
    tensors = int8_plan.plan_tensors(params, model, calibration, weights)
    plan = plan_digest(tensors, int8_plan.plan_metadata(model, calibration, "golden", [], weights))
    return {"onnx_fp32": hashlib.sha256(fp32).hexdigest(), "onnx_int8": hashlib.sha256(int8).hexdigest(),
            "int8_plan": plan}


def plan_digest(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> str:
    """sha256 of a plan's content: every tensor (name, dtype, shape, bytes) and the metadata, sorted.

    NOTE: not of the file's bytes: safetensors writes its metadata map in a different order from one
    process to the next, so two files with the same content need not be byte-equal.
    """
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        digest.update(f"{name}|{t.dtype.str}|{t.shape}|".encode() + t.tobytes())
    digest.update(json.dumps(metadata, sort_keys=True).encode())
    return digest.hexdigest()


def record() -> dict:
    doc = {"blas_fingerprint": blas_fingerprint(), "steps": STEPS, "presets": {}}
    for name in PRESETS:
        losses, params = train_losses(name)
        exact = train_losses(name, dtype=np.float64)[0]  # the scale of float32's own rounding (test_golden)
        doc["presets"][name] = {"losses": [float(v) for v in losses], "losses_float64": [float(v) for v in exact],
                                **export_hashes(name, params)}
    return doc


if __name__ == "__main__":
    GOLDEN_FILE.write_text(json.dumps(record(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN_FILE}", file=sys.stderr)
