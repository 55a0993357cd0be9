"""litenet trace: prints every step with its formula and reproduces network.backward's gradients."""

import numpy as np

from litenet.cli import main
from litenet.insight import trace as trace_module
from litenet.model import init_params, load_preset


def test_trace_prints_the_formulas_and_matches_training(capsys):
    assert main(["trace", "--random", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    for formula in ("y = x W (+ b)", "∂W = xᵀ ∂y", "∂x = ∂s (identity path) + ∂x_main", "s[b, i] = Σ_k",
                    "ops.layernorm_backward", "identity-path share", "paths join at embed"):
        assert formula in out
    assert "max |difference| = 0" in out


def test_trace_of_a_trained_model_with_cross_entropy(model_dir, dataset, capsys):  # noqa: F811
    assert main(["trace", "--model", str(model_dir), "--batch", "3"]) == 0
    out = capsys.readouterr().out
    assert "CIFAR-10 test images" in out and "block 1 backward" in out and "softmax" in out


def test_trace_calls_the_reference_functions(monkeypatch):
    """The trace runs litenet.ops itself (what training runs, what a debugger steps into), not a copy."""
    called = []
    original = trace_module.ops.gelu_backward
    monkeypatch.setattr(trace_module.ops, "gelu_backward", lambda *a: called.append(1) or original(*a))
    preset = load_preset("litenet-seed")
    params = init_params(preset.model, 0)
    images = np.zeros((1, 32, 32, 3), np.uint8)
    trace_module.trace(params, images, np.array([3]), preset.model, preset.train, trace_module.Printer(2))
    assert called == [1]


def test_trace_of_the_mixer_walks_its_ops(capsys):
    assert main(["trace", "--random", "--batch", "2", "--preset", "litenet-mixer-cpu"]) == 0
    out = capsys.readouterr().out
    for text in ("ops.patchify", "ops.token_linear_forward", "ops.token_linear_backward", "ops.mean_tokens_backward",
                 "paths join at blocks.0.token_residual", "max |difference| = 0"):
        assert text in out


def test_trace_shows_the_cuda_launches_without_a_gpu(capsys):
    """`litenet trace --backend cuda`: the step as the lowering launches it, op → region → kernels."""
    assert main(["trace", "--backend", "cuda", "--preset", "litenet-mixer"]) == 0
    text = capsys.readouterr().out
    assert "blocks.0.token_fc1 + blocks.0.token_gelu  [forward, fast: product + GELU epilogue]" in text
    assert "adamw_update<<<" in text and "patches_gather<<<" in text
    assert main(["trace", "--backend", "cuda", "--preset", "litenet-seed", "--kernels", "reference"]) == 0
    text = capsys.readouterr().out
    assert "linear_backward_weight_reference<<<" in text and "fast:" not in text
