"""The Mixer's CUDA backend (mixer_plans.py, mixer_backend.py) on the CPU emulator: whole training
steps — augmentation on the device, forward, loss, backward, AdamW — against the NumPy backend, graph
replay against eager launches, resume, and the tensor-core precisions."""

import numpy as np
import pytest
from emulator.device import EmuDevice
from mixer_schedule import random_schedule

from litenet.errors import LiteNetError
from litenet.model import MixerConfig, TrainConfig, init_params, param_views
from litenet.train.cuda.mixer_backend import MixerCudaBackend
from litenet.train.numpy_backend import NumpyBackend
from litenet.train.schedule import epoch_mixes

MODEL = MixerConfig(patch=8, width=8, token_hidden=6, channel_hidden=12, blocks=2)
STEPS, BATCH, IMAGES = 3, 4, 16
# The bias of the second product across the patches has no effect on the loss (the LayerNorm after
# it removes it): its gradient is rounding noise, which AdamW scales up to lr-sized steps in a
# direction that differs between any two implementations. Every other tensor is held.
NOISE_ONLY = ("token_fc2.bias",)


def recipe(**changes) -> TrainConfig:
    values = dict(epochs=1, batch_size=BATCH, optimizer="adamw", lr_base=0.02, loss="cross-entropy",
                  label_smoothing=0.1, augment="crop+flip+cutout", cutout_size=12, weight_decay=0.05, decay="weights", warmup_steps=1,
                  clip_threshold=float("inf"))
    return TrainConfig(**{**values, **changes})


def schedule(seed=0):
    return random_schedule(STEPS, BATCH, IMAGES, 0.02, seed=seed)


def run(backend, images, labels, batches, lrs, flips, crops, cutouts):
    backend.load_dataset(images, labels)
    backend.train_steps(batches, lrs, flips=flips, crops=crops, cutouts=cutouts)
    return backend.fetch_stats()


def cuda(train, **options):
    return MixerCudaBackend(MODEL, train, init_params(MODEL, 0), device=EmuDevice(sm_count=4), **options)


@pytest.fixture(scope="module")
def fp32_pair():
    data = schedule()
    ours = cuda(recipe(), steps_per_graph=2)
    numpy = NumpyBackend(MODEL, recipe(), init_params(MODEL, 0), dtype=np.float64)
    return ours, run(ours, *data), numpy, run(numpy, *data), data


def test_steps_match_the_numpy_backend(fp32_pair):
    ours, got, numpy, want, _ = fp32_pair
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    np.testing.assert_allclose(got["grad_norm"], want["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(got["grad_sq"], want["grad_sq"], rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(got["path"], want["path"], rtol=1e-4)  # both joins of both blocks
    a, b = param_views(ours.state()["params"], MODEL), param_views(numpy.state()["params"], MODEL)
    for name in a:
        if not name.endswith(NOISE_ONLY):
            np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-4, err_msg=name)


def test_evaluation_logits_match(fp32_pair):
    ours, _, numpy, _, (images, *_) = fp32_pair
    np.testing.assert_allclose(ours.logits(images[:7]), numpy.logits(images[:7]), rtol=0, atol=1e-5)


def test_graph_replay_is_the_eager_step():
    data = schedule(1)
    eager, graphed = cuda(recipe(), graph=False), cuda(recipe(), steps_per_graph=2)
    assert np.array_equal(run(eager, *data)["loss"], run(graphed, *data)["loss"])
    assert np.array_equal(eager.state()["params"], graphed.state()["params"])


def test_resume_continues_exactly():
    images, labels, batches, lrs, *draws = schedule(2)
    whole = cuda(recipe())
    run(whole, images, labels, batches, lrs, *draws)
    first = cuda(recipe())
    run(first, images, labels, batches[:1], lrs[:1], *(d[:1] for d in draws))
    second = cuda(recipe())
    second.load_state(first.state())
    run(second, images, labels, batches[1:], lrs[1:], *(d[1:] for d in draws))
    assert np.array_equal(second.state()["params"], whole.state()["params"])


def test_cutmix_steps_match_the_numpy_backend():
    """CutMix on the device (the box pasted in patches_gather, the mixed target in the loss kernel)
    against augment.apply and ops' mixed cross-entropy, over whole steps; cutout stays on, so each
    box brings its partner's own crop, flip and cutout."""
    train = recipe(augment="crop+flip+cutout+cutmix", cutmix_prob=0.75)
    images, labels, batches, lrs, flips, crops, cutouts = schedule(3)
    mixes = epoch_mixes(batches, train, epoch=0)
    assert (mixes[..., 0] >= 0).any() and (mixes[..., 0] < 0).any()
    got, want = cuda(train), NumpyBackend(MODEL, train, init_params(MODEL, 0), dtype=np.float64)
    for backend in (got, want):
        backend.load_dataset(images, labels)
        backend.train_steps(batches, lrs, flips=flips, crops=crops, cutouts=cutouts, mixes=mixes)
    got_stats, want_stats = got.fetch_stats(), want.fetch_stats()
    np.testing.assert_allclose(got_stats["loss"], want_stats["loss"], rtol=1e-5)
    np.testing.assert_allclose(got_stats["grad_norm"], want_stats["grad_norm"], rtol=1e-5)
    without = run(cuda(recipe()), images, labels, batches, lrs, flips, crops, cutouts)
    assert not np.allclose(without["loss"], got_stats["loss"], rtol=1e-3)  # the mix did change the steps


@pytest.mark.parametrize("precision,rtol", [("tf32", 2e-3), ("bf16", 1e-2)])
def test_tensor_core_precisions_train_the_same_network(precision, rtol):
    """The first step's loss (before any update) within the products' precision; then finite steps."""
    data = schedule()
    ours = cuda(recipe(precision=precision))
    want = run(NumpyBackend(MODEL, recipe(), init_params(MODEL, 0), dtype=np.float64), *data)
    got = run(ours, *data)
    np.testing.assert_allclose(got["loss"][0], want["loss"][0], rtol=rtol)
    assert np.all(np.isfinite(ours.state()["params"]))


def test_refusals_are_one_line():
    with pytest.raises(LiteNetError, match="adamw"):
        cuda(recipe(optimizer="sgd"))
    with pytest.raises(LiteNetError, match="load_dataset"):
        cuda(recipe()).train_steps(np.zeros((1, BATCH), int), np.ones(1))
