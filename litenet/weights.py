"""Weights files: the flat parameter buffer as named float32 tensors in safetensors, plus config.json.

A trained model is a folder: `weights.safetensors` (one tensor per `param_layout` entry) and
`config.json` (the model and training settings, class names, measured accuracy). Export and the
trainer read and write models only through this module, so a mismatch is caught in one place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litenet.atomic import atomic_safetensors, atomic_write_text
from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig, configs_from_json, param_count, param_layout
from litenet.paths import check_reachable, make_folder

WEIGHTS_FILE = "weights.safetensors"
CONFIG_FILE = "config.json"
WEIGHTS_FORMAT = "litenet-weights/1"


def save_weights(path: str | Path, params: np.ndarray, model: ModelConfig, **metadata: str) -> None:
    """Write the flat buffer as named float32 tensors, atomically."""
    tensors = {p.name: np.ascontiguousarray(params[p.offset:p.offset + p.size].reshape(p.shape), np.float32)
               for p in param_layout(model)}
    atomic_safetensors(path, tensors, {"format": WEIGHTS_FORMAT, **metadata})


def load_weights(path: str | Path, model: ModelConfig) -> np.ndarray:
    """Read a weights file into a flat float32 buffer, checking every name and shape against `model`."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    if not path.is_file():
        raise LiteNetError(f"{path}: no such weights file; train a model first (litenet train) or fix the path")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise LiteNetError(f"{path}: not a readable safetensors file ({exc}); re-run training or restore it") from None
    flat = np.empty(param_count(model), np.float32)
    expected = param_layout(model)
    extra = sorted(set(tensors) - {p.name for p in expected})
    if extra:
        raise LiteNetError(f"{path}: tensors {', '.join(extra[:3])} are not in this model's config; "
                           "the weights and config.json come from different models")
    for p in expected:
        if p.name not in tensors:
            raise LiteNetError(f"{path}: tensor {p.name} is missing; the weights and config.json do not match")
        t = tensors[p.name]
        if t.dtype != np.float32:  # the format is float32 (docs/spec.md): a cast would serve other numbers
            raise LiteNetError(f"{path}: {p.name} is stored as {t.dtype}, LiteNet weights are float32 (F32); "
                               "the file was not written by litenet train: re-run training or restore it")
        if t.shape != p.shape:
            raise LiteNetError(f"{path}: {p.name} has shape {t.shape}, config.json says {p.shape}; "
                               "the weights and config.json come from different models")
        if not np.all(np.isfinite(t)):
            raise LiteNetError(f"{path}: {p.name} holds NaN or Inf values; use an earlier checkpoint")
        flat[p.offset:p.offset + p.size] = t.ravel()
    return flat


def save_model(folder: str | Path, params: np.ndarray, model: ModelConfig, train: TrainConfig,
               preset: str, **info) -> None:
    """Write weights.safetensors and config.json into `folder` (each file atomically)."""
    from litenet.model import configs_to_json

    folder = make_folder(folder)
    save_weights(folder / WEIGHTS_FILE, params, model, preset=preset)
    atomic_write_text(folder / CONFIG_FILE, configs_to_json(model, train, preset, **info))


def load_model(folder: str | Path) -> tuple[np.ndarray, ModelConfig, TrainConfig, dict]:
    """Read a model folder: (flat params, model config, train config, the whole config document)."""
    folder = Path(folder)
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        check_reachable(folder)  # a symlink loop or a folder it cannot enter says so, not "no config.json"
        raise LiteNetError(f"{folder}: no {CONFIG_FILE}; point --weights/--model at a folder written by litenet train")
    model, train, doc = configs_from_json(config_path.read_text(encoding="utf-8"), str(config_path))
    return load_weights(folder / WEIGHTS_FILE, model), model, train, doc
