"""Tiny LiteNet models and synthetic images for the export tests (no real data, a few ms per forward)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from litenet.model import MixerConfig, ModelConfig, TrainConfig, init_params, param_views
from litenet.weights import save_model

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

# Every shape the presets can take: both embeddings, with and without the input shift, 1–3 blocks,
# widths that are not multiples of 4 (the dp4a word) or of each other; and Mixers with 4×4 and 8×8
# patches (token MLPs wider and narrower than the patch count).
SHAPES = {
    "seed-like": ModelConfig(embed="channel-sum", width=8, hidden=16, blocks=1),
    "full-shift": ModelConfig(embed="full", input_shift=0.5, width=12, hidden=20, blocks=2),
    "sum-shift-3": ModelConfig(embed="channel-sum", input_shift=0.25, width=6, hidden=10, blocks=3),
    "mixer-8": MixerConfig(patch=8, width=12, token_hidden=6, channel_hidden=20, blocks=2, input_scale=4.0),
    "mixer-4": MixerConfig(patch=4, width=8, token_hidden=70, channel_hidden=12, blocks=1, input_shift=0.0),
}
MLP_SHAPES = tuple(name for name, model in SHAPES.items() if model.family == "mlp")


def tiny_params(model: ModelConfig, seed: int = 0) -> np.ndarray:
    """Seeded initial weights with γ and β moved off 1 and 0, so LayerNorm's affine part is exercised."""
    params = init_params(model, seed)
    views = param_views(params, model)
    rng = np.random.default_rng(seed + 100)
    for name, view in views.items():
        if name.endswith("ln.gamma"):
            view[...] = 1 + 0.2 * rng.standard_normal(view.shape)
        elif name.endswith("ln.beta") or name.endswith(".bias"):
            view[...] = 0.2 * rng.standard_normal(view.shape)
    return params


def images(count: int, seed: int = 0) -> np.ndarray:
    """Synthetic uint8 NHWC images: smooth random blobs plus noise, so pixels have CIFAR-like spread."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(count, 4, 4, 3)).astype(np.float32)
    smooth = coarse.repeat(8, axis=1).repeat(8, axis=2)
    return np.clip(smooth + rng.normal(0, 20, smooth.shape), 0, 255).astype(np.uint8)


def fake_dataset(train: int = 600, test: int = 300) -> SimpleNamespace:
    """What open_cifar10 returns, with synthetic images and labels."""
    rng = np.random.default_rng(7)
    split = lambda n, seed: SimpleNamespace(images=images(n, seed), labels=rng.integers(0, 10, n).astype(np.uint8))  # noqa: E731
    return SimpleNamespace(train=split(train, 1), test=split(test, 2), classes=CLASSES)


def write_model(folder, model: ModelConfig, seed: int = 0, preset: str = "tiny-test"):
    """A model folder as litenet train writes it; returns its params."""
    params = tiny_params(model, seed)
    save_model(folder, params, model, TrainConfig(epochs=1), preset)
    return params
