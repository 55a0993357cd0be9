"""The NumPy reference: finite-difference checks for every preset, and checks that can fail."""

import numpy as np
import pytest

from litenet.model import ModelConfig, load_preset, preset_names
from litenet.train import gradcheck
from litenet.train import reference as ref


@pytest.mark.parametrize("name", preset_names())
def test_gradcheck_every_preset(name):
    p = load_preset(name)
    worst = max(r.rel_error for r in gradcheck.check_model(p.model, p.train.margin))
    assert worst < gradcheck.TOLERANCE


@pytest.mark.parametrize("model", [ModelConfig(embed="full", input_shift=0.5, width=8, hidden=12, blocks=3),
                                   ModelConfig(width=5, hidden=7, blocks=2, classes=3)])
def test_gradcheck_other_shapes(model):
    assert max(r.rel_error for r in gradcheck.check_model(model, 0.3, samples=8)) < gradcheck.TOLERANCE


def test_gradcheck_catches_a_wrong_backward(monkeypatch):
    # The GELU derivative without its second term: the check must see it.
    monkeypatch.setattr(ref, "gelu_backward", lambda da, u: da * 0.5 * (1 + np.tanh(ref.GELU_C * u)))
    results = gradcheck.check_model(ModelConfig(width=8, hidden=12), samples=8)
    assert max(r.rel_error for r in results) > 1e-3


def test_gelu_matches_its_formula_at_known_points():
    u = np.array([-3.0, -1.0, 0.0, 1.0, 3.0])
    expected = 0.5 * u * (1 + np.tanh(0.79788456 * (u + 0.044715 * u**3)))
    np.testing.assert_allclose(ref.gelu_forward(u), expected, rtol=1e-8)


def test_layernorm_output_is_normalised():
    rng = np.random.default_rng(0)
    x, v = rng.normal(3, 2, (5, 16)), rng.normal(0, 1, (5, 16))
    y, _ = ref.residual_layernorm_forward(x, v, np.ones(16), np.zeros(16), 1e-5)
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(1), 1, rtol=1e-4)


def test_margin_loss_by_hand():
    z = np.array([[1.0, 0.5, 0.9], [0.0, 2.0, 0.0]])
    labels = np.array([0, 1])
    loss, per = ref.margin_loss_forward(z, labels, 0.3)
    np.testing.assert_allclose(per, [0.2, 0.0])  # 0.3 − 1 + 0.9; second sample clears the margin
    dz = ref.margin_loss_backward(z, labels, 0.3)
    np.testing.assert_allclose(dz, [[-0.5, 0, 0.5], [0, 0, 0]])
    assert loss == pytest.approx(0.1)


def test_margin_rival_takes_first_index_on_ties():
    z = np.array([[0.0, 1.0, 1.0]])
    assert ref.rival_class(z, np.array([0]))[0] == 1


def test_cross_entropy_by_hand():
    z = np.array([[0.0, np.log(3.0)]])
    loss, _ = ref.cross_entropy_forward(z, np.array([1]))
    assert loss == pytest.approx(-np.log(0.75))
    np.testing.assert_allclose(ref.cross_entropy_backward(z, np.array([1])), [[0.25, -0.25]])


def test_channel_sum_embedding_sums_colours_first():
    rng = np.random.default_rng(1)
    x = rng.random((2, 32, 32, 3))
    w = rng.random((1024, 4))
    np.testing.assert_allclose(ref.embed_forward(x, w, "channel-sum"), x.reshape(2, 1024, 3).sum(2) @ w)
    np.testing.assert_allclose(ref.embed_forward(x, w, "channel-sum", 0.5), (x.reshape(2, 1024, 3) - 0.5).sum(2) @ w)


def test_uint8_images_are_scaled_by_255():
    x = np.full((1, 32, 32, 3), 255, np.uint8)
    w = np.ones((3072, 1), np.float32)
    assert ref.embed_forward(x, w, "full")[0, 0] == pytest.approx(3072)


def test_clip_rule_only_past_the_threshold():
    g = np.full(4, 3.0)  # norm 6
    assert ref.grad_norm_clip(g, 10.0, 1.0) == (6.0, False) and g[0] == 3.0
    g = np.full(4, 6.0)  # norm 12 → rescaled to norm 1
    norm, clipped = ref.grad_norm_clip(g, 10.0, 1.0)
    assert clipped and norm == 12.0 and np.linalg.norm(g) == pytest.approx(1.0)


def test_sgd_momentum_by_hand():
    w, v, g = np.array([1.0]), np.array([0.5]), np.array([0.2])
    ref.sgd_momentum_update(w, v, g, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert v[0] == pytest.approx(0.9 * 0.5 + 0.2 + 0.01 * 1.0)
    assert w[0] == pytest.approx(1.0 - 0.1 * v[0])
