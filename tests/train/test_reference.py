"""The NumPy reference (litenet.ops and the optimisers of litenet.train.optim): finite-difference checks
for every preset, and checks that can fail."""

import dataclasses

import numpy as np
import pytest

from litenet import ops
from litenet.model import MixerConfig, ModelConfig, load_preset, preset_names
from litenet.train import gradcheck
from litenet.train import optim as ref

# The full-size Mixer's float64 forward takes ~50 ms at batch 4 and it has 100 parameter tensors:
# the suite checks the Mixers' shapes with 2 blocks each (`litenet gradcheck` checks all of them).
MIXER_BLOCKS = 2


@pytest.mark.parametrize("name", preset_names())
def test_gradcheck_every_preset(name):
    p = load_preset(name)
    model = dataclasses.replace(p.model, blocks=MIXER_BLOCKS) if p.model.family == "mixer" else p.model
    worst = max(r.rel_error for r in gradcheck.check_model(model, p.train.margin))
    assert worst < gradcheck.TOLERANCE


@pytest.mark.parametrize("model", [ModelConfig(embed="full", input_shift=0.5, width=8, hidden=12, blocks=3),
                                   ModelConfig(width=5, hidden=7, blocks=2, classes=3),
                                   MixerConfig(patch=8, width=6, token_hidden=5, channel_hidden=7, blocks=2, classes=3),
                                   MixerConfig(patch=16, width=4, token_hidden=3, channel_hidden=5, blocks=1,
                                               input_shift=0.0, input_scale=3.0)])
def test_gradcheck_other_shapes(model):
    assert max(r.rel_error for r in gradcheck.check_model(model, 0.3, samples=8)) < gradcheck.TOLERANCE


def test_gradcheck_catches_a_wrong_backward(monkeypatch):
    # The GELU derivative without its second term: the check must see it.
    monkeypatch.setattr(ops, "gelu_backward", lambda da, u, t=None: da * 0.5 * (1 + np.tanh(ops.GELU_C * u)))
    results = gradcheck.check_model(ModelConfig(width=8, hidden=12), samples=8)
    assert max(r.rel_error for r in results) > 1e-3


def test_gelu_matches_its_formula_at_known_points():
    u = np.array([-3.0, -1.0, 0.0, 1.0, 3.0])
    expected = 0.5 * u * (1 + np.tanh(0.79788456 * (u + 0.044715 * u**3)))
    np.testing.assert_allclose(ops.gelu_forward(u), expected, rtol=1e-8)


def test_layernorm_output_is_normalised():
    rng = np.random.default_rng(0)
    x, v = rng.normal(3, 2, (5, 16)), rng.normal(0, 1, (5, 16))
    y, _ = ops.residual_layernorm_forward(x, v, np.ones(16), np.zeros(16), 1e-5)
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(1), 1, rtol=1e-4)


def test_margin_loss_by_hand():
    z = np.array([[1.0, 0.5, 0.9], [0.0, 2.0, 0.0]])
    labels = np.array([0, 1])
    loss, per = ops.margin_loss_forward(z, labels, 0.3)
    np.testing.assert_allclose(per, [0.2, 0.0])  # 0.3 − 1 + 0.9; second sample clears the margin
    dz = ops.margin_loss_backward(z, labels, 0.3)
    np.testing.assert_allclose(dz, [[-0.5, 0, 0.5], [0, 0, 0]])
    assert loss == pytest.approx(0.1)


def test_margin_rival_takes_first_index_on_ties():
    z = np.array([[0.0, 1.0, 1.0]])
    assert ops.rival_class(z, np.array([0]))[0] == 1


def test_cross_entropy_by_hand():
    z = np.array([[0.0, np.log(3.0)]])
    loss, _ = ops.cross_entropy_forward(z, np.array([1]))
    assert loss == pytest.approx(-np.log(0.75))
    np.testing.assert_allclose(ops.cross_entropy_backward(z, np.array([1])), [[0.25, -0.25]])


def test_channel_sum_embedding_sums_colours_first():
    rng = np.random.default_rng(1)
    x = rng.random((2, 32, 32, 3))
    w = rng.random((1024, 4))
    np.testing.assert_allclose(ops.embed_forward(x, w, "channel-sum"), x.reshape(2, 1024, 3).sum(2) @ w)
    np.testing.assert_allclose(ops.embed_forward(x, w, "channel-sum", 0.5), (x.reshape(2, 1024, 3) - 0.5).sum(2) @ w)


def test_uint8_images_are_scaled_by_255():
    x = np.full((1, 32, 32, 3), 255, np.uint8)
    w = np.ones((3072, 1), np.float32)
    assert ops.embed_forward(x, w, "full")[0, 0] == pytest.approx(3072)


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


def test_gradcheck_catches_a_wrong_token_backward(monkeypatch):
    # ∂W of the product across the patches transposed: the check must see it.
    right = ops.token_linear_backward
    monkeypatch.setattr(ops, "token_linear_backward",
                        lambda dy, x, W, want_dx=True: (lambda r: (r[0], r[1].T.reshape(r[1].shape), r[2]))(right(dy, x, W, want_dx)))
    results = gradcheck.check_model(MixerConfig(patch=8, width=4, token_hidden=16, channel_hidden=5, blocks=1), samples=8)
    assert max(r.rel_error for r in results if "token_fc" in r.name) > 1e-3


def test_patchify_takes_row_major_patches_and_its_backward_puts_them_back():
    x = np.arange(2 * 32 * 32 * 3, dtype=np.float64).reshape(2, 32, 32, 3)
    p = ops.patchify(x, 8)
    assert p.shape == (16, 2, 8 * 8 * 3)
    np.testing.assert_array_equal(p[5, 1], x[1, 8:16, 8:16].ravel())  # patch 5 = grid row 1, column 1
    np.testing.assert_array_equal(ops.patchify_backward(p, 8), x)
    np.testing.assert_array_equal(ops.patchify(x, 8, 0.5), p - 0.5)


def test_token_linear_mixes_patches_the_same_for_every_channel():
    rng = np.random.default_rng(2)
    x, W, b = rng.normal(size=(6, 3, 4)), rng.normal(size=(6, 5)), rng.normal(size=5)
    np.testing.assert_allclose(ops.token_linear_forward(x, W, b), np.einsum("tbc,tj->jbc", x, W) + b[:, None, None])
    dy = rng.normal(size=(5, 3, 4))
    dx, dW, db = ops.token_linear_backward(dy, x, W)
    np.testing.assert_allclose(dx, np.einsum("jbc,tj->tbc", dy, W))
    np.testing.assert_allclose(dW, np.einsum("tbc,jbc->tj", x, dy))
    np.testing.assert_allclose(db, dy.sum(axis=(1, 2)))


def test_mean_over_patches_and_its_backward():
    x = np.arange(24.0).reshape(4, 2, 3)
    np.testing.assert_array_equal(ops.mean_tokens_forward(x), x.mean(axis=0))
    np.testing.assert_array_equal(ops.mean_tokens_backward(np.ones((2, 3)), 4), np.full((4, 2, 3), 0.25))


def test_label_smoothing_by_hand():
    z, y, eps = np.array([[0.0, np.log(3.0)]]), np.array([1]), 0.2
    p = np.array([0.25, 0.75])
    q = np.array([eps / 2, 1 - eps + eps / 2])
    loss, _ = ops.cross_entropy_forward(z, y, eps)
    assert loss == pytest.approx(-(q * np.log(p)).sum())
    np.testing.assert_allclose(ops.cross_entropy_backward(z, y, eps), [p - q])


def test_cutmix_target_by_hand_and_its_gradient_by_finite_differences():
    """CutMix's mixed target: q = (1 − ε)((1 − s) onehot(y) + s onehot(y2)) + ε / C, by hand for one
    row; then ∂L/∂z of a batch (y2 = y in one row) against central differences in float64."""
    z, eps = np.array([[0.0, np.log(3.0), 0.5]]), 0.1
    p = np.exp(z[0]) / np.exp(z[0]).sum()
    q = (1 - eps) * np.array([0.0, 0.75, 0.25]) + eps / 3
    mix = (np.array([2]), np.array([0.25]))
    loss, _ = ops.cross_entropy_forward(z, np.array([1]), eps, mix)
    assert loss == pytest.approx(-(q * np.log(p)).sum())
    np.testing.assert_allclose(ops.cross_entropy_backward(z, np.array([1]), eps, mix), [p - q])
    rng = np.random.default_rng(5)
    z, y = rng.standard_normal((4, 5)), np.array([0, 3, 4, 2])
    mix = (np.array([1, 3, 0, 4]), np.array([0.3, 0.6, 0.0, 1.0]))
    grad, h = ops.cross_entropy_backward(z, y, eps, mix), 1e-6
    numeric = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        up, down = z.copy(), z.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (ops.cross_entropy_forward(up, y, eps, mix)[0] - ops.cross_entropy_forward(down, y, eps, mix)[0]) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-10)
    # a share of 0 is the plain target
    np.testing.assert_allclose(ops.cross_entropy_forward(z, y, eps, (mix[0], np.zeros(4)))[1],
                               ops.cross_entropy_forward(z, y, eps)[1], rtol=1e-15)


def test_adamw_matches_its_definition_over_steps():
    rng = np.random.default_rng(3)
    w0, grads = rng.normal(size=6), rng.normal(size=(3, 6))
    w, m, v = w0.copy(), np.zeros(6), np.zeros(6)
    decay = np.array([0.05, 0.05, 0.05, 0, 0, 0])  # the last three (say, biases) do not decay
    want, mm, vv = w0.copy(), np.zeros(6), np.zeros(6)
    for t, g in enumerate(grads, start=1):
        ref.adamw_update(w, m, v, g.copy(), t, 0.01, 0.9, 0.999, 1e-8, decay)
        want = want - 0.01 * decay * want
        mm, vv = 0.9 * mm + 0.1 * g, 0.999 * vv + 0.001 * g * g
        want = want - 0.01 * (mm / (1 - 0.9 ** t)) / (np.sqrt(vv / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(w, want, rtol=1e-12)


def test_gelu_of_a_transposed_view_is_the_gelu_of_its_values():
    """A product's output may be a non-contiguous view (the int8 plan's token product is); GELU's
    two-thread parts must still write into the array they return."""
    u = np.random.default_rng(4).standard_normal((300, 700)).astype(np.float32).T  # > MIN_SPLIT values
    assert not u.flags.c_contiguous and u.size > ops.MIN_SPLIT
    a, t = ops.gelu_forward(u, keep_tanh=True)
    np.testing.assert_array_equal(a, ops.gelu_forward(np.ascontiguousarray(u)))
    da = np.ones_like(u)
    np.testing.assert_array_equal(ops.gelu_backward(da, u, t), ops.gelu_backward(np.ones(u.shape, np.float32),
                                                                                 np.ascontiguousarray(u)))


def test_gelu_in_cache_sized_chunks_gives_the_bits_of_one_pass(monkeypatch):
    """in_parts walks each thread's half in chunks: uneven chunk ends must change no value's bits."""
    u = np.random.default_rng(5).standard_normal(3 * ops.CHUNK_VALUES + 12345).astype(np.float32)
    da = np.random.default_rng(6).standard_normal(u.size).astype(np.float32)
    monkeypatch.setattr(ops, "THREADS", 1)
    monkeypatch.setattr(ops, "CHUNK_VALUES", 4 * u.size)  # one chunk: one pass over everything
    a, t = ops.gelu_forward(u, keep_tanh=True)
    du = ops.gelu_backward(da, u, t)
    monkeypatch.setattr(ops, "THREADS", 2)
    monkeypatch.setattr(ops, "CHUNK_VALUES", 1000)  # many chunks, the last of each half short
    a2, t2 = ops.gelu_forward(u, keep_tanh=True)
    np.testing.assert_array_equal(a2, a)
    np.testing.assert_array_equal(t2, t)
    np.testing.assert_array_equal(ops.gelu_backward(da, u, t2), du)
