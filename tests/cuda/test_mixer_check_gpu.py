"""check_kernels for the Mixer on a real GPU (`make test-gpu`; skipped without one), at litenet-mixer's
real size (batch 256: 16,384 patch rows, 8 blocks): every launch of a checked step within its twin's
tolerance in fp32 and BF16, and the run afterwards the same as an unchecked one."""

import numpy as np
import pytest
from mixer_schedule import random_schedule

from litenet.model import init_params, load_preset, override

pytestmark = pytest.mark.gpu

STEPS, BATCH, IMAGES = 3, 256, 1024


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_check_kernels_at_litenet_mixers_size(precision):
    from litenet.train.cuda.mixer_backend import MixerCudaBackend

    preset = load_preset("litenet-mixer")
    model = preset.model
    train = override(preset.train, {"batch_size": BATCH, "precision": precision, "augment": "crop+flip+cutout"})
    images, labels, batches, lrs, flips, crops, cutouts = random_schedule(STEPS, BATCH, IMAGES, train.lr, train.crop_padding)

    def run(**options):
        cuda = MixerCudaBackend(model, train, init_params(model, 0), steps_per_graph=2, **options)
        cuda.load_dataset(images, labels)
        cuda.train_steps(batches, lrs, flips=flips, crops=crops, cutouts=cutouts)
        return cuda, cuda.fetch_stats()

    checked, got = run(check_kernels=1)
    plain, want = run()
    worst = max(max(v.values()) for v in checked.check_report.values())
    print(f"check_kernels litenet-mixer {precision}: worst error {worst:.3f} of its bound")
    assert set(checked.check_report) == {launch.kernel for launch in checked._steps}
    assert worst <= 1.0
    # the check only reads: the same weights; grad_sq sums blocks with atomicAdd, in any order
    np.testing.assert_array_equal(got["loss"], want["loss"])
    np.testing.assert_allclose(got["grad_sq"], want["grad_sq"], rtol=1e-5)
    assert np.array_equal(checked.state()["params"], plain.state()["params"])
