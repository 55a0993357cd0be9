"""The PyTorch peer of the Mixer benchmarks (bench/torch_mixer.py) trains the recipe LiteNet trains:
its first steps' losses, from the same weights, batches and augmentation draws (crop, flip, cutout,
CutMix), are the NumPy backend's. Needs PyTorch (CPU is enough); skipped without it."""

import sys
from pathlib import Path

import numpy as np
import pytest

from litenet.model import MixerConfig, TrainConfig, init_params
from litenet.train import schedule
from litenet.train.numpy_backend import NumpyBackend

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_mixer_gpu import run_steps  # noqa: E402
from torch_mixer import TorchTrainer  # noqa: E402

MODEL = MixerConfig(patch=8, width=8, token_hidden=6, channel_hidden=12, blocks=1, input_shift=0.47, input_scale=4.0)


@pytest.mark.parametrize("augment", ["crop+flip+cutout", "crop+flip+cutmix"])
def test_the_peer_takes_the_same_steps_as_litenet(augment):
    train = TrainConfig(batch_size=8, optimizer="adamw", loss="cross-entropy", label_smoothing=0.1, augment=augment,
                        cutout_size=12, lr_base=0.05, weight_decay=0.05, decay="weights", clip_threshold=float("inf"))
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (24, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 24).astype(np.uint8)
    batches = schedule.epoch_batches(len(images), train, 0)[:3]
    draws = schedule.epoch_augments(batches, train, 0)
    lrs = np.full(len(batches), 0.01)
    ours = NumpyBackend(MODEL, train, init_params(MODEL, 0), dtype=np.float64)
    ours.load_dataset(images, labels)
    ours.train_steps(batches, lrs, **draws)
    peer = TorchTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu")

    got, step = [], peer.step
    peer.step = lambda *args: got.append(float(step(*args)))
    # the benchmark's own way of feeding the peer: each epoch's draws uploaded once, the steps sliced
    run_steps(peer, batches, draws["flips"], draws["crops"], lrs, draws.get("cutouts"), draws.get("mixes"))
    np.testing.assert_allclose(got, ours.fetch_stats()["loss"], rtol=2e-5)
