"""Training-time augmentation (litenet.train.augment) and its seeded draws (litenet.train.schedule):
each map against an independent construction, and the draws reproducible per (seed, epoch)."""

import dataclasses

import numpy as np
import pytest

from litenet.model import TrainConfig
from litenet.train import augment, schedule

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)


def test_crop_and_flip_match_numpys_reflect_padding():
    index, pad = np.array([3, 0, 5]), 4
    crops, flips = np.array([[0, 8], [4, 4], [7, 1]]), np.array([True, False, True])
    got = augment.apply(IMAGES, index, flips, crops, pad)
    for b, i in enumerate(index):
        padded = np.pad(IMAGES[i], ((pad, pad), (pad, pad), (0, 0)), mode="reflect")
        want = padded[crops[b, 0]:crops[b, 0] + 32, crops[b, 1]:crops[b, 1] + 32]
        np.testing.assert_array_equal(got[b], want[:, ::-1] if flips[b] else want)


@pytest.mark.parametrize("centre,size,rows,cols", [((10, 20), 8, (6, 14), (16, 24)),
                                                   ((0, 31), 8, (0, 4), (27, 32)),   # over two edges
                                                   ((5, 5), 5, (3, 8), (3, 8))])     # odd side
def test_cutout_fills_exactly_its_square_after_crop_and_flip(centre, size, rows, cols):
    index, crops, flips = np.array([2]), np.array([[3, 6]]), np.array([True])
    before = augment.apply(IMAGES, index, flips, crops, 4)
    got = augment.apply(IMAGES, index, flips, crops, 4, np.array([centre]), size)[0]
    square = np.zeros((32, 32), bool)
    square[rows[0]:rows[1], cols[0]:cols[1]] = True
    assert np.all(got[square] == augment.CUTOUT_FILL)
    np.testing.assert_array_equal(got[~square], before[0][~square])


def test_draws_follow_the_augment_setting_and_repeat_per_seed_and_epoch():
    train = TrainConfig(batch_size=8, augment="crop+flip+cutout", crop_padding=2, seed=3)
    batches = schedule.epoch_batches(64, train, 1)
    draws = schedule.epoch_augments(batches, train, 1)
    assert set(draws) == {"flips", "crops", "cutouts"}
    assert draws["crops"].shape == draws["cutouts"].shape == (*batches.shape, 2)
    assert draws["crops"].min() >= 0 and draws["crops"].max() <= 4
    assert draws["cutouts"].min() >= 0 and draws["cutouts"].max() <= 31
    again = schedule.epoch_augments(batches, train, 1)  # what a resumed run draws
    for name in draws:
        np.testing.assert_array_equal(draws[name], again[name])
    other_epoch = schedule.epoch_augments(batches, train, 2)
    assert not np.array_equal(draws["cutouts"], other_epoch["cutouts"])
    # switching cutout on leaves a seed's flips and crops as they were
    without = schedule.epoch_augments(batches, dataclasses.replace(train, augment="crop+flip"), 1)
    assert set(without) == {"flips", "crops"}
    np.testing.assert_array_equal(without["crops"], draws["crops"])
    np.testing.assert_array_equal(without["flips"], draws["flips"])
    assert schedule.epoch_augments(batches, dataclasses.replace(train, augment="none"), 1) == {}


def test_cutmix_pastes_the_box_of_its_partners_augmented_image():
    index, crops, flips = np.array([2, 4, 1]), np.array([[3, 6], [0, 8], [4, 4]]), np.array([True, False, True])
    cutouts = np.array([[5, 5], [20, 30], [0, 0]])
    before = augment.apply(IMAGES, index, flips, crops, 4, cutouts, 6)
    mixes = np.array([[2, 3, 20, 11, 32],   # rows 3 … 10, columns 20 … 31 of image 2's augmented copy
                      [-1, 0, 0, 32, 32],   # no partner: the box is ignored
                      [0, 0, 0, 32, 32]])   # the whole image: its partner's
    got = augment.apply(IMAGES, index, flips, crops, 4, cutouts, 6, mixes)
    box = np.zeros((32, 32), bool)
    box[3:11, 20:32] = True
    np.testing.assert_array_equal(got[0][box], before[2][box])
    np.testing.assert_array_equal(got[0][~box], before[0][~box])
    np.testing.assert_array_equal(got[1], before[1])
    np.testing.assert_array_equal(got[2], before[0])
    np.testing.assert_array_equal(augment.mix_shares(mixes), [8 * 12 / 1024, 0.0, 1.0])
    partner_labels, shares = augment.mixed_targets(np.array([7, 8, 9]), mixes)
    np.testing.assert_array_equal(partner_labels, [9, 8, 7])
    np.testing.assert_array_equal(shares, augment.mix_shares(mixes))


def test_cutmix_draws_pair_each_step_by_a_permutation_with_boxes_inside_the_image():
    train = TrainConfig(batch_size=64, augment="crop+flip+cutmix", loss="cross-entropy", cutmix_prob=0.5, seed=1)
    batches = schedule.epoch_batches(64 * 20, train, 0)
    draws = schedule.epoch_augments(batches, train, 0)
    mixes = draws["mixes"]
    assert mixes.shape == (20, 64, 5) and mixes.dtype == np.int32
    mixed = mixes[..., 0] >= 0
    assert 0.4 < mixed.mean() < 0.6  # cutmix_prob
    assert np.all(mixes[~mixed] == [-1, 0, 0, 0, 0])
    for step in range(20):  # the partners that are drawn come from one permutation of the batch
        partners = mixes[step, mixed[step], 0]
        assert len(set(partners)) == len(partners) and partners.max() < 64
    top, left, bottom, right = (mixes[mixed][:, i] for i in range(1, 5))
    assert np.all((0 <= top) & (top <= bottom) & (bottom <= 32) & (0 <= left) & (left <= right) & (right <= 32))
    shares = augment.mix_shares(mixes.reshape(-1, 5))[mixed.ravel()]
    assert 0.2 < shares.mean() < 0.45  # λ uniform, then the boxes clipped at the edges: E ≈ 0.3
    np.testing.assert_array_equal(schedule.epoch_augments(batches, train, 0)["mixes"], mixes)  # a resumed run's
    assert not np.array_equal(schedule.epoch_augments(batches, train, 1)["mixes"], mixes)
    without = schedule.epoch_augments(batches, dataclasses.replace(train, augment="crop+flip"), 0)
    np.testing.assert_array_equal(without["crops"], draws["crops"])  # a stream of its own


def test_cutmix_needs_the_cross_entropy_loss():
    from litenet.errors import UsageError

    with pytest.raises(UsageError, match="cutmix mixes the targets"):
        TrainConfig(augment="cutmix", loss="margin")


def _no_partners(shape=(2, 3, 5)):
    mixes = np.zeros(shape, np.int64)
    mixes[..., 0] = -1
    return mixes


def _partner_past_the_batch():
    mixes = _no_partners()
    mixes[1, 2, 0] = 3  # a kernel would read another step's image and label
    return mixes


def _box_upside_down():
    mixes = _no_partners()
    mixes[0, 0] = (1, 10, 0, 8, 4)  # top below bottom
    return mixes


@pytest.mark.parametrize("mixes,message", [(_no_partners((2, 4, 5)), "shape"), (_partner_past_the_batch(), "partners"),
                                           (_box_upside_down(), "inside the 32×32")])
def test_bad_cutmix_draws_are_refused_in_one_line(mixes, message):
    from litenet.errors import LiteNetError

    with pytest.raises(LiteNetError, match=message):
        augment.check_mixes(mixes, 2, 3)
    assert augment.check_mixes(_no_partners(), 2, 3).dtype == np.int32
