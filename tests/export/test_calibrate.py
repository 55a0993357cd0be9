"""Calibration methods give the ranges one can work out by hand, and the scales file round-trips."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import export_fixtures as fx
from litenet.errors import LiteNetError
from litenet.export import calibrate as cal
from litenet.export import scales as sc


def hist_of(values: np.ndarray) -> cal.Histogram:
    amax = float(np.abs(values).max())
    return cal.Histogram(np.histogram(np.abs(values), bins=cal.BINS, range=(0, amax))[0], amax)


def test_minmax_is_the_largest_magnitude():
    assert cal.amax_minmax(hist_of(np.array([-3.0, 1.0, 2.0, 0.5]))) == 3.0


def test_percentile_of_a_known_array():
    # |x| = 0.0001, 0.0002, …, 1.0: the 99.99th percentile is 0.9999; the histogram answers to one bin.
    h = hist_of(np.arange(1, 10001) / 10000.0)
    amax = cal.amax_percentile(h, 99.99)
    assert 0.9999 <= amax <= 0.9999 + h.bin_width
    assert cal.amax_percentile(h, 50.0) == pytest.approx(0.5, abs=h.bin_width)
    assert cal.amax_percentile(h, 100.0) == pytest.approx(1.0)


def test_percentile_rejects_out_of_range():
    with pytest.raises(LiteNetError):
        cal.amax_percentile(hist_of(np.ones(3)), 0.0)


def test_kl_divergence_basics():
    p = np.array([1.0, 2.0, 3.0, 0.0])
    assert cal.kl_divergence(p, p * 5) == pytest.approx(0.0)  # scale-free: both are normalised
    assert cal.kl_divergence(p, np.array([3.0, 2.0, 1.0, 0.0])) > 0


def test_quantized_reference_merges_and_spreads():
    counts = np.array([4.0, 0.0, 2.0, 2.0])  # two levels over four bins: groups (4, 0) and (2, 2)
    np.testing.assert_allclose(cal.quantized_reference(counts, levels=2), [4.0, 0.0, 2.0, 2.0])
    np.testing.assert_allclose(cal.quantized_reference(np.array([4.0, 2.0, 1.0, 3.0]), 2), [3, 3, 2, 2])


def test_entropy_keeps_a_range_that_128_levels_already_represent_exactly():
    # Mass only in the first 100 of 2048 bins: clipping at 128 bins loses nothing and each int8
    # level holds one bin, so KL = 0 there; any wider range merges bins. amax = 128 bins.
    counts = np.zeros(cal.BINS, np.int64)
    counts[:100] = np.random.default_rng(0).integers(1, 50, 100)
    h = cal.Histogram(counts, amax=2048.0)  # bin width 1
    assert cal.amax_entropy(h) == pytest.approx(128.0)


def test_entropy_keeps_the_full_range_of_a_uniform_histogram():
    # Uniform counts: at 2048 bins each level covers 16 equal bins, so Q = P and KL = 0; any clip
    # piles the tail into one bin that the quantized version smears out. amax = the maximum.
    h = cal.Histogram(np.full(cal.BINS, 10, np.int64), amax=4.0)
    assert cal.amax_entropy(h) == pytest.approx(4.0)


def test_entropy_and_percentile_clip_a_lone_outlier():
    x = np.concatenate([np.random.default_rng(1).standard_normal(200_000), [40.0]])
    h = hist_of(x)
    assert cal.amax_minmax(h) == 40.0
    assert 3.0 < cal.amax_entropy(h) < 8.0  # near the Gaussian's own extent, nowhere near 40
    assert 3.0 < cal.amax_percentile(h, 99.99) < 5.0


def test_scale_maps_amax_to_127():
    assert cal.scale_from_amax(127.0) == 1.0
    assert cal.scale_from_amax(0.0) == 1.0  # a tensor that is always zero still gets a valid scale


def test_calibration_images_are_seeded_distinct_and_sorted():
    train = np.arange(1000)[:, None]
    a, b = cal.calibration_images(train, 100, seed=3), cal.calibration_images(train, 100, seed=3)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) == 100 and np.all(np.diff(a[:, 0]) > 0)
    assert not np.array_equal(a, cal.calibration_images(train, 100, seed=4))
    assert len(cal.calibration_images(train, 5000)) == 1000  # capped at the split's size


def test_calibrate_records_every_method_and_round_trips_through_json():
    model = fx.SHAPES["seed-like"]
    params = fx.tiny_params(model)
    scales = sc.calibrate(params, model, fx.images(64), "minmax")
    assert set(scales.activation) == {"embed.input", "blocks.0.fc1.input", "blocks.0.fc2.input", "head.input"}
    for name, amax in scales.amax.items():
        assert set(amax) == set(cal.METHODS)
        assert amax["percentile"] <= amax["minmax"] and amax["entropy"] <= amax["minmax"] + 1e-9
        assert scales.activation[name] == pytest.approx(amax["minmax"] / 127, rel=1e-6)
    again = sc.from_json(sc.to_json(scales, model, "tiny"), model)
    assert again.activation == pytest.approx(scales.activation)
    assert sc.with_method(again, "entropy").activation["head.input"] == pytest.approx(
        scales.amax["head.input"]["entropy"] / 127, rel=1e-6)


def test_scales_of_another_model_are_refused():
    model = fx.SHAPES["seed-like"]
    text = sc.to_json(sc.calibrate(fx.tiny_params(model), model, fx.images(16), "minmax"), model, "tiny")
    with pytest.raises(LiteNetError, match="another model"):
        sc.from_json(text, dataclasses.replace(model, width=9))
    with pytest.raises(LiteNetError, match="not valid JSON"):
        sc.from_json("{", model)
