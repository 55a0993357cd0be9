"""Fixtures for the insight tests: tiny model folders (an MLP and a Mixer) and synthetic data (the hand-set
network is insight_fixtures.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

# NOTE: lets `.venv/bin/pytest tests/insight` import litenet from a checkout that is not pip-installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from litenet.data import CLASS_NAMES, Cifar10, Split  # noqa: E402
from litenet.model import MixerConfig, ModelConfig, TrainConfig, init_params  # noqa: E402
from litenet.weights import save_model  # noqa: E402

TINY_MODEL = ModelConfig(embed="full", input_shift=0.5, width=16, hidden=24, blocks=2)
TINY_MIXER = MixerConfig(patch=8, width=8, token_hidden=6, channel_hidden=12, blocks=2)
TINY_TRAIN = TrainConfig(epochs=1, batch_size=16, lr_base=0.2, warmup_steps=5, loss="cross-entropy")


def synthetic_split(n: int, seed: int) -> Split:
    """Images whose class shows in their red channel, so a tiny model can learn them."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    base = rng.integers(0, 120, (n, 32, 32, 3))
    base[..., 0] += labels[:, None, None] * 12
    return Split(base.clip(0, 255).astype(np.uint8), labels)


@pytest.fixture
def dataset(monkeypatch):
    """Replace open_cifar10 with a small synthetic data set."""
    ds = Cifar10(train=synthetic_split(256, 0), test=synthetic_split(64, 1), classes=CLASS_NAMES,
                 manifest={}, path=Path("."), converted=False)
    monkeypatch.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
    return ds


@pytest.fixture
def model_dir(tmp_path):
    """A model folder with the tiny network's seeded initial weights."""
    folder = tmp_path / "model"
    save_model(folder, init_params(TINY_MODEL, 0), TINY_MODEL, TINY_TRAIN, "tiny", classes=list(CLASS_NAMES))
    return folder


@pytest.fixture
def mixer_dir(tmp_path):
    """A model folder with a tiny Mixer's seeded initial weights."""
    folder = tmp_path / "mixer"
    save_model(folder, init_params(TINY_MIXER, 0), TINY_MIXER, TINY_TRAIN, "tiny-mixer", classes=list(CLASS_NAMES))
    return folder


@pytest.fixture
def tiny_preset(tmp_path):
    """A preset file for a network small enough to scan in a second."""
    path = tmp_path / "tiny.toml"
    path.write_text('name = "tiny"\n[model]\nembed = "full"\ninput_shift = 0.5\nwidth = 8\nhidden = 8\n'
                    '[train]\nepochs = 1\nbatch_size = 16\nwarmup_steps = 5\nloss = "cross-entropy"\n')
    return str(path)
