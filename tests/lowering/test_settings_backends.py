"""Every setting honoured by every backend, or refused in one line: each field of ModelConfig,
MixerConfig and TrainConfig at a value other than its default trains a few steps on the NumPy backend
and on the CUDA lowering (the CPU emulator; reference and fast tiers), driven as the trainer drives
them (its schedule, learning rates and augmentation draws), and must give the same losses on all —
or be refused with a one-line error where a backend does not run it. A value that changes nothing
is a failure too: the setting would be silently ignored."""

import dataclasses

import numpy as np
import pytest

from litenet.errors import LiteNetError
from litenet.model import MixerConfig, ModelConfig, TrainConfig, init_params
from litenet.train import schedule
from litenet.train.gpu_backend import GpuBackend
from litenet.train.numpy_backend import NumpyBackend
from tests.golden.record import learnable_images

MLP = ModelConfig(width=12, hidden=16, blocks=2)
MIXER = MixerConfig(patch=16, width=8, token_hidden=4, channel_hidden=12, blocks=2)
TRAIN = TrainConfig(batch_size=8, lr_base=0.2, warmup_steps=2, clip_threshold=float("inf"))  # the clip rule: its cases
N, STEPS = 40, 3
# Settings that choose how, not what, the GPU computes: honoured where they run, the same training
# within the precision's rounding; refused where they do not (NumPy has no tensor cores, nothing to
# recompute; the reference tier computes in fp32 and keeps every activation).
HOW = {"precision": 2e-2, "activations": 1e-5}
# Settings that change training beyond the first steps only: how long it runs.
LENGTH = {"epochs"}

# field → (value, the other settings it needs to mean something)
MODEL_CASES = {
    "embed": ("full", {}), "input_shift": (0.3, {}), "width": (10, {}), "hidden": (20, {}), "blocks": (1, {}),
    "classes": (7, {}), "ln_eps": (0.5, {}), "embed_init": ("normal", {}),
}
MIXER_CASES = {
    "patch": (8, {}), "input_shift": (0.2, {}), "input_scale": (3.0, {}), "width": (6, {}), "token_hidden": (3, {}),
    "channel_hidden": (10, {}), "blocks": (1, {}), "classes": (7, {}), "ln_eps": (0.5, {}),
}
TRAIN_CASES = {
    "epochs": (3, {}), "batch_size": (6, {}), "lr_base": (0.5, {}), "optimizer": ("adamw", {"lr_base": 0.01}),
    "momentum": (0.5, {}), "beta1": (0.5, {"optimizer": "adamw"}), "beta2": (0.9, {"optimizer": "adamw"}),
    "adam_eps": (0.1, {"optimizer": "adamw"}), "weight_decay": (0.5, {}), "decay": ("weights", {"weight_decay": 0.5}),
    "warmup_steps": (0, {}), "schedule": ("cosine", {"epochs": 1, "warmup_steps": 0}),
    "clip_threshold": (0.01, {}), "clip_norm": (0.1, {"clip_threshold": 0.01}), "loss": ("cross-entropy", {}),
    "margin": (0.9, {}), "label_smoothing": (0.2, {"loss": "cross-entropy"}), "seed": (3, {}),
    "precision": ("bf16", {}), "activations": ("recompute", {}),
    "augment": ("crop+flip+cutout", {}), "crop_padding": (2, {"augment": "crop"}),
    "cutout_size": (4, {"augment": "cutout"}),
    "cutmix_prob": (0.5, {"augment": "cutmix", "loss": "cross-entropy"}),
}
assert set(MODEL_CASES) == {f.name for f in dataclasses.fields(ModelConfig)}, "a ModelConfig field has no case"
assert set(MIXER_CASES) == {f.name for f in dataclasses.fields(MixerConfig)}, "a MixerConfig field has no case"
assert set(TRAIN_CASES) == {f.name for f in dataclasses.fields(TrainConfig)}, "a TrainConfig field has no case"


def losses(backend: str, model, train, device=None, **options):
    """Per-step losses of STEPS steps, or the one-line refusal (a str)."""
    images, labels = learnable_images(N, model.classes, 0)
    try:
        params = init_params(model, train.seed)
        if backend == "numpy":
            b = NumpyBackend(model, train, params, dtype=np.float64)
        else:
            b = GpuBackend(model, train, params, device=device(), kernels=backend, **options)
        b.load_dataset(images, labels.astype(np.int64))
    except LiteNetError as exc:
        assert "\n" not in str(exc), f"{backend}: a refusal of more than one line: {exc}"
        return str(exc)
    per_epoch = schedule.steps_per_epoch(N, train)
    batches = schedule.epoch_batches(N, train, 0)[:STEPS]
    lrs = schedule.learning_rates(0, len(batches), train.epochs * per_epoch, train)
    b.train_steps(batches, lrs, **schedule.epoch_augments(batches, train, 0))
    return b.fetch_stats()["loss"]


def cases():
    for family, base, table in (("mlp", MLP, MODEL_CASES), ("mixer", MIXER, MIXER_CASES)):
        for field, (value, _) in table.items():
            yield pytest.param(family, "model", field, value, {}, id=f"{family}-{field}")
    for family in ("mlp", "mixer"):
        for field, (value, needs) in TRAIN_CASES.items():
            yield pytest.param(family, "train", field, value, needs, id=f"{family}-train-{field}")


@pytest.mark.parametrize("family, where, field, value, needs", list(cases()))
def test_a_setting_is_honoured_alike_or_refused(emu, family, where, field, value, needs):
    model, train = (MLP if family == "mlp" else MIXER), dataclasses.replace(TRAIN, **needs)
    default = {k: losses(k, model, train, emu) for k in ("numpy",)}["numpy"]
    try:
        if where == "model":
            model = dataclasses.replace(model, **{field: value})
        else:
            train = dataclasses.replace(train, **{field: value})
    except LiteNetError as exc:  # refused by the settings themselves, for every backend alike
        assert "\n" not in str(exc)
        return
    got = {k: losses(k, model, train, emu) for k in ("numpy", "reference", "fast")}
    trained = {k: v for k, v in got.items() if not isinstance(v, str)}
    if not trained:  # refused everywhere, each backend in one line (an MLP has nothing to recompute)
        return
    want = got["numpy"] if "numpy" in trained else default
    for backend, value_losses in trained.items():
        np.testing.assert_allclose(value_losses, want, rtol=HOW.get(field, 1e-4), atol=1e-6,
                                   err_msg=f"{backend} trains {field} = {value!r} differently")
    if field not in HOW and field not in LENGTH:
        assert not np.array_equal(trained["numpy"], default), f"{field} = {value!r} changed nothing"
