"""activations = "recompute" on a real GPU (`make test-gpu`; skipped without one), at litenet-mixer's
real size (batch 256, 8 blocks): bit for bit the training of activations = "keep", in fp32 and BF16,
in less than half the arena."""

import pytest
from mixer_schedule import random_schedule
from test_mixer_recompute_emulated import assert_recompute_is_keep

from litenet.model import init_params, load_preset, override

pytestmark = pytest.mark.gpu

STEPS, BATCH, IMAGES = 3, 256, 1024


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_recompute_is_keep_at_litenet_mixers_size(precision):
    from litenet.train.cuda.mixer_backend import MixerCudaBackend

    preset = load_preset("litenet-mixer")
    changes = {"batch_size": BATCH, "precision": precision, "augment": "crop+flip+cutout"}
    model, train = preset.model, override(preset.train, changes)

    def make(activations):
        return MixerCudaBackend(model, override(train, {"activations": activations}), init_params(model, 0),
                                steps_per_graph=2)

    keep, recompute = assert_recompute_is_keep(make, random_schedule(STEPS, BATCH, IMAGES, train.lr, train.crop_padding))
    keep_bytes, recompute_bytes = keep.memory_report()["arena_bytes"], recompute.memory_report()["arena_bytes"]
    assert recompute_bytes < keep_bytes / 2, (keep_bytes, recompute_bytes)
