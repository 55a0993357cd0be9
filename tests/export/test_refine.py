"""GPTQ rounding and bias correction: they lower the error they are meant to lower, and change nothing else."""

from __future__ import annotations

import numpy as np
import pytest

import export_fixtures as fx
from litenet.errors import LiteNetError
from litenet.export import int8_plan, qdq, refine
from litenet.export import scales as sc
from litenet import forward
from litenet.export.pipeline import ExportOptions, validate
from litenet.graph import ops_of
from litenet.model import MixerConfig, ModelConfig, param_views
from litenet.runtime import int8_plan as plan_rt


def correlated_inputs(rows: int, k: int, seed: int = 0) -> np.ndarray:
    """Inputs with strongly correlated features, as neighbouring pixels and hidden units are."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, k)) @ rng.standard_normal((k, k)) * 0.3
            + rng.standard_normal((rows, 1))).astype(np.float32)


@pytest.mark.parametrize("k, n, weight_max", [(37, 5, 64), (130, 9, 64), (130, 3, 127)])  # 130 > one GPTQ block
def test_gptq_gives_a_smaller_output_error_than_rounding_to_nearest(k, n, weight_max):
    x = correlated_inputs(4 * k, k)
    w = np.random.default_rng(1).standard_normal((k, n)).astype(np.float32)
    s = qdq.weight_scales(w, weight_max)
    q = refine.gptq_round(w, x.astype(np.float64).T @ x, s, weight_max)
    q_nearest = plan_rt.quantize(w, s[None, :], -weight_max, weight_max)
    assert q.dtype == np.int8 and np.abs(q).max() <= weight_max  # the ±64 rule still holds

    def output_error(q):
        return ((x @ w - x @ (q * s)) ** 2).sum(axis=0)

    assert np.all(output_error(q) < output_error(q_nearest))  # every output channel
    # on the calibration rows it was fitted on, and on fresh rows from the same distribution
    fresh = correlated_inputs(4 * k, k, seed=0)[::-1] + 0.01 * np.random.default_rng(3).standard_normal((4 * k, k))
    assert ((fresh @ w - fresh @ (q * s)) ** 2).sum() < ((fresh @ w - fresh @ (q_nearest * s)) ** 2).sum()


def test_gptq_keeps_weights_that_are_already_on_the_grid():
    rng = np.random.default_rng(2)
    s = np.float32([0.01, 0.02, 0.5])
    q = rng.integers(-64, 65, size=(50, 3)).astype(np.int8)
    w = q * s  # exactly representable: nothing to round, no error to spread
    x = correlated_inputs(200, 50)
    np.testing.assert_array_equal(refine.gptq_round(w, x.astype(np.float64).T @ x, s, 64), q)


def test_gptq_rounds_weights_of_an_input_that_is_always_zero_to_zero():
    x = correlated_inputs(100, 6)
    x[:, 2] = 0
    w = np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)
    q = refine.gptq_round(w, x.astype(np.float64).T @ x, qdq.weight_scales(w), 64)
    assert not q[2].any()


# NOTE: the channel-sum shapes only (1024 embedding inputs): GPTQ inverts the 3072 × 3072 input Gram
# of a full embedding, seconds on a shared 2-core machine; test_qdq_and_plan and the CLI tests cover it.
@pytest.fixture(scope="module", params=["seed-like", "sum-shift-3", "mixer-8", "mixer-4"])
def tiny(request):
    model = fx.SHAPES[request.param]
    params = fx.tiny_params(model, seed=5)
    calib = fx.images(256, seed=6)
    scales = sc.calibrate(params, model, calib, "percentile")
    plain = refine.int8_weights(params, model, scales, calib, 64, "gptq", bias_correction=False)
    return model, params, calib, scales, plain, refine.int8_weights(params, model, scales, calib, 64)


def test_bias_correction_leaves_no_mean_error_where_it_corrects(tiny):
    model, params, calib, scales, plain, corrected = tiny
    for layer, (w_q, s_w) in plain.weights.items():  # only the biases change
        np.testing.assert_array_equal(corrected.weights[layer][0], w_q)
        np.testing.assert_array_equal(corrected.weights[layer][1], s_w)
    assert set(corrected.biases) == set(plain.biases)
    assert ("embed" in corrected.biases) == (model.family == "mixer")  # the MLP's embedding has no bias
    views = param_views(np.asarray(params, np.float32), model)
    points = refine.correction_points(model)
    target = {layer: forward.run(ops_of(model), views, calib, until=point).values[point] for layer, point in points.items()}
    for weights, expect_zero in ((plain, False), (corrected, True)):
        plan = plan_rt.plan_from_tensors(int8_plan.plan_tensors(params, model, scales, weights),
                                         int8_plan.plan_metadata(model, scales, "t", [], weights))
        for layer, point in points.items():
            int8 = forward.run(plan.ops, plan.tensors, calib, product=plan.product, until=point).values[point]
            op = next(o for o in ops_of(model) if o.name == layer)
            diff = target[layer] - int8  # its mean over everything one bias entry adds to (images, patches, …)
            mean_error = refine._bias_sum(op, diff) / (diff.size // len(corrected.biases[layer]))
            scale = float(np.abs(target[layer]).mean())
            if expect_zero:
                assert np.abs(mean_error).max() <= 1e-5 * scale + 1e-6, layer  # float32 rounding only
            elif layer == "head":
                assert np.abs(mean_error).max() > 1e-5 * scale  # there was something to correct


def test_nearest_without_correction_is_the_data_free_quantization(tiny):
    model, params, calib, scales, _, _ = tiny
    weights = refine.int8_weights(params, model, scales, calib, 64, "nearest", bias_correction=False)
    reference = qdq.Int8Weights.nearest(params, model)
    for layer, (w_q, s_w) in reference.weights.items():
        np.testing.assert_array_equal(weights.weights[layer][0], w_q)
        np.testing.assert_array_equal(weights.weights[layer][1], s_w)
    for layer, b in reference.biases.items():
        np.testing.assert_array_equal(weights.biases[layer], b)
    assert weights.describe() == {"weight_range": [-64, 64], "weight_rounding": "nearest", "bias_correction": "none"}


def test_the_files_record_how_the_weights_were_chosen(tiny):
    model, params, _, scales, _, weights = tiny
    meta = int8_plan.plan_metadata(model, scales, "t", [], weights)
    assert meta["weight_rounding"] == "gptq" and meta["bias_correction"].startswith("empirical, 256")
    proto_meta = {p.key: p.value for p in qdq.build_qdq(params, model, scales, {}, weights).metadata_props}
    assert proto_meta["weight_rounding"] == "gptq" and proto_meta["weight_range"] == "[-64, 64]"


def test_an_unknown_rounding_is_refused():
    with pytest.raises(LiteNetError, match="--rounding"):
        validate(ExportOptions(int8=True, rounding="stochastic"))


def test_correction_points_are_the_outputs_or_the_residual_sums_they_feed():
    assert refine.correction_points(ModelConfig(blocks=1)) == {
        "blocks.0.fc1": "blocks.0.fc1", "blocks.0.fc2": "blocks.0.residual", "head": "head"}
    mixer = refine.correction_points(MixerConfig(blocks=1))
    assert mixer["embed"] == "embed"  # read by the LayerNorm and the residual: its own output
    assert mixer["blocks.0.token_fc2"] == "blocks.0.token_residual"
    assert mixer["blocks.0.channel_fc1"] == "blocks.0.channel_fc1"
    assert mixer["blocks.0.channel_fc2"] == "blocks.0.channel_residual"
