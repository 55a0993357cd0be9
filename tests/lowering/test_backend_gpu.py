"""The lowering on a real GPU (`make test-gpu`; skipped without CuPy or a GPU): every region held to its
reference calls and every reference call to NumPy at the presets' real sizes, the reference tier's
training against the NumPy backend, 200 fast steps against it, graph replay, recompute, memory."""

import dataclasses

import numpy as np
import pytest
from networks import ADAMW, MIXED
from training import assert_losses_match, run_pair

from litenet.model import load_preset, override

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    from litenet.gpu.device import CupyDevice
    return CupyDevice()


def preset(name: str, **train):
    p = load_preset(name)
    return p.model, override(p.train, train) if train else p.train


@pytest.mark.parametrize("name, train", [("litenet-seed", {}), ("litenet-base", {}),
                                         ("litenet-base", {"optimizer": "adamw", "label_smoothing": 0.1,
                                                           "decay": "weights", "lr_base": 0.001}),
                                         ("litenet-mixer", {}), ("litenet-mixer", {"precision": "bf16"}),
                                         ("litenet-mixer-cutmix", {"precision": "bf16"})])
def test_check_kernels_at_the_presets_sizes(device, name, train):
    model, t = preset(name, **train)
    _, _, gpu, _ = run_pair(model, t, device, count=1, n=2 * t.batch_size, check_kernels=1)
    assert gpu.check_report and max(gpu.check_report.values()) <= 1.0


@pytest.mark.parametrize("name", ["litenet-base", "litenet-mixer"])
def test_reference_tier_at_the_presets_sizes(device, name):
    model, t = preset(name)
    a, b, gpu, _ = run_pair(model, t, device, count=3, n=2 * t.batch_size, kernels="reference", check_kernels=1)
    assert max(gpu.check_report.values()) <= 1.0
    assert_losses_match(a, b, rtol=1e-4)


@pytest.mark.parametrize("plan", ["fused", "ops"])
def test_200_fast_steps_match_the_numpy_backend(device, plan):
    """Cross-entropy: the margin loss's subgradient jumps where a hinge sits within rounding of zero, so
    two float32 orders of summation may branch apart after ~140 steps (docs/decisions.md, "Tolerances")."""
    model, t = preset("litenet-seed", loss="cross-entropy")
    a, b, _, _ = run_pair(model, t, device, count=200, n=200 * t.batch_size // 4, numpy_dtype=np.float32, plan=plan)
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=2e-3, atol=2e-3)


def test_a_network_of_neither_family_on_the_gpu(device):
    a, b, _, _ = run_pair(MIXED, ADAMW, device, count=20, kernels="fast", numpy_dtype=np.float32)
    assert_losses_match(a, b, rtol=1e-3)


def test_graph_replay_recompute_and_memory(device):
    model, t = preset("litenet-mixer", precision="bf16")
    a, _, keep, _ = run_pair(model, t, device, count=6, n=512, steps_per_graph=3)
    b, _, again, _ = run_pair(model, dataclasses.replace(t, activations="recompute"), device, count=6, n=512,
                              graph=False)
    assert np.array_equal(a["loss"], b["loss"])  # replayed graphs = eager launches; recompute = keep
    assert np.array_equal(keep.state()["params"], again.state()["params"])
    # the wide tiles' BF16 copies shrink keep's arena more than recompute's (test_backend_emulated's
    # test_recompute_keeps_its_memory_with_the_second_stream)
    assert again.memory_report()["arena_bytes"] < 0.55 * keep.memory_report()["arena_bytes"]


def test_the_forward_run_of_a_layer_list_on_the_gpu(device):
    """What `litenet-infer --backend cuda` runs for a layer list (litenet/lowering/forward.py), both tiers."""
    from litenet import forward
    from litenet.graph import ops_of
    from litenet.lowering.forward import ForwardRun
    from litenet.model import init_params, param_views

    params = init_params(MIXED, 0)
    images = np.random.default_rng(0).integers(0, 256, (256, 32, 32, 3), dtype=np.uint8)
    want = forward.logits(ops_of(MIXED), param_views(params.astype(np.float64), MIXED), images)
    for kernels in ("reference", "fast"):
        run = ForwardRun.lowered(MIXED, params, device, len(images), kernels=kernels)
        device.upload(run.pixels, images.reshape(len(images), 3072))
        for launch in run.launches:
            device.launch(launch)
        np.testing.assert_allclose(device.download(run.logits), want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
