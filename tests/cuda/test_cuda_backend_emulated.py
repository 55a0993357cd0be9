"""The whole CudaBackend on the CPU emulator: a step equals the reference, training tracks the NumPy
backend, graph replay equals eager launches, check_kernels catches a wrong kernel, and the
statistics ring, logits, state and user errors behave. Small models keep the emulator quick."""

import numpy as np
import pytest
from emulator.device import EmuDevice
from backend_helpers import backend_pair, compare_one_step, data, schedule

from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train.cuda.backend import CudaBackend
from litenet.train.cuda.check import KernelMismatch

SMALL = ModelConfig(width=16, hidden=40, blocks=2)
FULL = ModelConfig(embed="full", input_shift=0.5, width=20, hidden=24, blocks=1, classes=7)
TRAIN = TrainConfig(batch_size=12, lr_base=0.2)


def pair(model, train, plan, dtype=np.float32, **options):
    return backend_pair(model, train, plan, EmuDevice(), dtype=dtype, **options)


@pytest.mark.parametrize("plan,embed,tall,wide", [
    ("fused", "rows", None, None), ("fused", "tiles", None, None), ("ops", "rows", None, None),
    ("ops", "tiles", None, None), ("ops", "tiles", True, None), ("ops", "tiles", None, True)])
@pytest.mark.parametrize("model,loss", [(SMALL, "margin"), (FULL, "cross-entropy")])
def test_one_step_equals_reference(model, loss, plan, embed, tall, wide):
    """The gradient of one step (the velocity after it, v = g + wd·w) against float64 NumPy, with
    each version of the embedding, and with tall (128-row) or wide (256 or 128 × 128) tiles for every product."""
    train = TrainConfig(batch_size=12, loss=loss)
    cuda, ref = pair(model, train, plan, dtype=np.float64, embed=embed, tall=tall, wide=wide)
    compare_one_step(cuda, ref, model, 12)


@pytest.mark.parametrize("plan", ["fused", "ops"])
def test_training_tracks_numpy_backend(plan):
    cuda, ref = pair(SMALL, TRAIN, plan)
    args = schedule(25, 40, 12)
    cuda.train_steps(*args)
    ref.train_steps(*args)
    a, b = cuda.fetch_stats()["loss"], ref.fetch_stats()["loss"]
    np.testing.assert_allclose(a, b, rtol=1e-3)


def test_graph_replay_equals_eager_launches():
    replayed, _ = pair(SMALL, TRAIN, "fused", steps_per_graph=3)  # graphs of 3 steps and of 1
    eager, _ = pair(SMALL, TRAIN, "fused", graph=False)
    args = schedule(6, 40, 12)
    for b in (replayed, eager):
        b.train_steps(*args)
    np.testing.assert_array_equal(replayed.state()["params"], eager.state()["params"])
    np.testing.assert_array_equal(replayed.fetch_stats()["loss"], eager.fetch_stats()["loss"])


def test_statistics_ring_wraps_and_steps_continue():
    cuda, ref = pair(SMALL, TRAIN, "fused", capacity=8)
    args = schedule(20, 40, 12, flips=False)
    cuda.train_steps(*args)
    ref.train_steps(*args)
    a, b = cuda.fetch_stats(), ref.fetch_stats()
    assert a["loss"].shape == (20,) and a["path"].shape == (20, 2, 3) and a["grad_sq"].shape == (20, 15)
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-3)
    assert cuda.fetch_stats()["loss"].shape == (0,)


@pytest.mark.parametrize("plan,kernel,buffer", [("fused", "fused_rows", "DS"), ("ops", "residual_join", "G1")])
def test_check_kernels_names_the_wrong_kernel(plan, kernel, buffer):
    class Faulty(EmuDevice):  # corrupts one value of one output right after the kernel runs
        def launch(self, launch):
            super().launch(launch)
            if launch.kernel == kernel:
                self.target.reshape(-1)[3] += 0.5

    images, labels = data()
    cuda = CudaBackend(SMALL, TRAIN, init_params(SMALL, 0), plan=plan, device=Faulty(), check_kernels=2)
    cuda.dev.target = cuda.v[buffer]
    cuda.load_dataset(images, labels)
    position = 1 + next(i for i, launch in enumerate(cuda._steps) if launch.kernel == kernel)
    with pytest.raises(KernelMismatch, match=rf"^check-kernels, step 0, launch {position} of {len(cuda._steps)}: "
                                             rf"{kernel}"):
        cuda.train_steps(*schedule(1, 40, 12))


@pytest.mark.parametrize("embed", ["rows", "tiles"])
def test_check_kernels_passes_and_reports(embed):
    cuda, _ = pair(SMALL, TRAIN, "ops", check_kernels=1, embed=embed)
    cuda.train_steps(*schedule(2, 40, 12))
    assert "sgd_clip_update" in cuda.check_report
    assert max(max(v.values()) for v in cuda.check_report.values()) <= 1.0


def test_logits_state_and_reports():
    cuda, ref = pair(FULL, TRAIN, "fused")
    images, _ = data(n=30, seed=5)
    np.testing.assert_allclose(cuda.logits(images), ref.logits(images), rtol=1e-4, atol=1e-5)
    state = {"params": ref.params * 0.5, "velocity": ref.params * 0.1}
    cuda.load_state(state)
    np.testing.assert_array_equal(cuda.state()["params"], state["params"].astype(np.float32))
    report = cuda.memory_report()
    assert report["arena_bytes"] > 0 and "| X |" in report["buffers"]
    assert cuda.layer_stats()["Z"]["nan"] == 0


def test_user_mistakes_raise_litenet_error():
    images, labels = data()
    cuda = CudaBackend(SMALL, TRAIN, init_params(SMALL, 0), device=EmuDevice())
    with pytest.raises(LiteNetError, match="load_dataset"):
        cuda.train_steps(*schedule(1, 40, 12))
    with pytest.raises(LiteNetError, match="uint8"):
        cuda.load_dataset(images.astype(np.float32), labels)
    cuda.load_dataset(images, labels)
    with pytest.raises(LiteNetError, match="shape"):
        cuda.train_steps(np.zeros((2, 5), int), np.ones(2))
    with pytest.raises(LiteNetError, match="outside"):
        cuda.train_steps(np.full((1, 12), 40), np.ones(1))
    with pytest.raises(LiteNetError, match="parameters"):
        CudaBackend(SMALL, TRAIN, np.zeros(3), device=EmuDevice())
