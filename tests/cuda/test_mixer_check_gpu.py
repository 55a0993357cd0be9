"""check_kernels for the Mixer on a real GPU (`make test-gpu`; skipped without one), at litenet-mixer's
real size (batch 256: 16,384 patch rows, 8 blocks): every launch of a checked step within its twin's
tolerance in fp32 and BF16, and the run afterwards the same as an unchecked one."""

import numpy as np
import pytest

from litenet.model import init_params, load_preset, override

pytestmark = pytest.mark.gpu

STEPS, BATCH, IMAGES = 3, 256, 1024


def schedule(train, seed=0):
    """Random images and the draws of STEPS steps, with crop, flip and cutout all on."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (IMAGES, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, IMAGES).astype(np.uint8)
    batches = np.stack([rng.permutation(IMAGES)[:BATCH] for _ in range(STEPS)])
    return images, labels, batches, np.full(STEPS, train.lr), rng.random(batches.shape) < 0.5, \
        rng.integers(0, 2 * train.crop_padding + 1, (*batches.shape, 2)), rng.integers(0, 32, (*batches.shape, 2))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_check_kernels_at_litenet_mixers_size(precision):
    from litenet.train.cuda.mixer_backend import MixerCudaBackend

    preset = load_preset("litenet-mixer")
    model = preset.model
    train = override(preset.train, {"batch_size": BATCH, "precision": precision, "augment": "crop+flip+cutout"})
    images, labels, batches, lrs, flips, crops, cutouts = schedule(train)

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
