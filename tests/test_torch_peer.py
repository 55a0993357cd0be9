"""The PyTorch peers of the Mixer benchmarks (bench/torch_mixer.py) train the recipe LiteNet trains:
the eager peer's first steps' losses, from the same weights, batches and augmentation draws (crop,
flip, cutout, CutMix), are the NumPy backend's; the peer of record (GraphedTrainer) takes the eager
peer's steps. Needs PyTorch (CPU is enough); skipped without it. What only CUDA runs — torch.compile's
forward inside the one graph of the whole step — is held by the `gpu` test at the end."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from litenet.model import MixerConfig, TrainConfig, init_params
from litenet.train import schedule
from litenet.train.numpy_backend import NumpyBackend

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_mixer_gpu import run_steps  # noqa: E402
from torch_mixer import GraphedTrainer, TorchTrainer, set_matmul_precision  # noqa: E402

MODEL = MixerConfig(patch=8, width=8, token_hidden=6, channel_hidden=12, blocks=1, input_shift=0.47, input_scale=4.0)
AUGMENTS = ["crop+flip+cutout", "crop+flip+cutmix"]
# The two peers run the same ops in the same order and differ only in how fused AdamW takes its
# learning rate (a float or a 0-dim tensor): a few fp32 ulps (2⁻²³ ≈ 1.2e-7) at most, in either precision.
RTOL, ATOL = 1e-6, 1e-7


def recipe(augment: str):
    """(train, images, labels, batches, draws, lrs): three steps of a small run's first epoch."""
    train = TrainConfig(batch_size=8, optimizer="adamw", loss="cross-entropy", label_smoothing=0.1, augment=augment,
                        cutout_size=12, lr_base=0.05, weight_decay=0.05, decay="weights", clip_threshold=float("inf"))
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (24, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 24).astype(np.uint8)
    batches = schedule.epoch_batches(len(images), train, 0)[:3]
    return train, images, labels, batches, schedule.epoch_augments(batches, train, 0), np.full(len(batches), 0.01)


def losses_of(trainer, batches, draws, lrs) -> list[float]:
    """The trainer's losses, fed the benchmark's way: the draws uploaded once, the steps sliced."""
    got, step = [], trainer.step
    trainer.step = lambda *args: got.append(float(step(*args)))
    run_steps(trainer, batches, draws["flips"], draws["crops"], lrs, draws.get("cutouts"), draws.get("mixes"))
    return got


@pytest.mark.parametrize("augment", AUGMENTS)
def test_the_peer_takes_the_same_steps_as_litenet(augment):
    train, images, labels, batches, draws, lrs = recipe(augment)
    ours = NumpyBackend(MODEL, train, init_params(MODEL, 0), dtype=np.float64)
    ours.load_dataset(images, labels)
    ours.train_steps(batches, lrs, **draws)
    peer = TorchTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu")
    np.testing.assert_allclose(losses_of(peer, batches, draws, lrs), ours.fetch_stats()["loss"], rtol=2e-5)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("augment", AUGMENTS)
def test_the_peer_of_record_takes_the_eager_peers_steps(augment, precision):
    """Its whole step, run eagerly (no graph, no compilation), from the eager peer's weights and draws:
    the same losses, and the same weights after them."""
    train, images, labels, batches, draws, lrs = recipe(augment)
    eager = TorchTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu", precision=precision)
    peer = GraphedTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu", precision=precision,
                          compile=False, graph=False)
    want, got = losses_of(eager, batches, draws, lrs), losses_of(peer, batches, draws, lrs)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    assert want[0] != want[-1]  # the steps did train
    for (name, p), q in zip(peer.net.named_parameters(), eager.net.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="torch.compile on CPU needs a C++ compiler")
def test_the_peer_of_records_compiled_forward_takes_the_eager_peers_steps():
    """torch.compile's forward (Inductor's CPU code, about half a minute to build) inside the same whole
    step. Its kernels may sum in another order, which moves an fp32 sum of n terms by up to n · 2⁻²⁴ of
    its largest: 1.1e-5 for the longest here (a patch's 8 · 8 · 3 = 192 values), 3e-5 for a few in a row."""
    train, images, labels, batches, draws, lrs = recipe("crop+flip+cutmix")
    eager = TorchTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu", precision="fp32")
    peer = GraphedTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu", precision="fp32",
                          compile=True, graph=False)
    np.testing.assert_allclose(losses_of(peer, batches, draws, lrs), losses_of(eager, batches, draws, lrs), rtol=3e-5)


def test_the_peer_of_record_refuses_a_step_without_a_draw_its_recipe_makes():
    train, images, labels, batches, draws, _ = recipe("crop+flip+cutmix")
    peer = GraphedTrainer(MODEL, train, init_params(MODEL, 0), images, labels, device="cpu", precision="fp32",
                          compile=False, graph=False)
    rows = [torch.as_tensor(draws[k][0].astype(np.int64)) for k in ("crops", "mixes")]
    with pytest.raises(ValueError, match="mixes"):
        peer.step(torch.as_tensor(batches[0]), torch.as_tensor(draws["flips"][0]), rows[0], 0.01)


def test_fp32_is_matched_with_tf32_off_and_tf32_switches_it_on():
    before = torch.get_float32_matmul_precision()
    try:
        set_matmul_precision("fp32")
        assert not torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "highest"
        set_matmul_precision("tf32")
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        with pytest.raises(ValueError, match="fp16"):
            set_matmul_precision("fp16")
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_graphed_compiled_peer_replays_the_eager_peers_steps(precision):
    """On a GPU: torch.compile's forward in the one captured graph of the whole step, replayed, against the
    eager peer from the same weights and draws (the capture's warm-up undone). Compiled kernels sum and
    round at other points: fp32 as in the CPU test above with a step's worth of such sums behind each
    loss (1e-4); BF16 keeps 8 significant bits (a rounding 2⁻⁹ ≈ 2e-3), where fused kernels keep fp32
    between ops that eager rounds to BF16, a few such roundings in a row (2e-2)."""
    train, images, labels, batches, draws, lrs = recipe("crop+flip+cutmix")
    eager = TorchTrainer(MODEL, train, init_params(MODEL, 0), images, labels, precision=precision)
    peer = GraphedTrainer(MODEL, train, init_params(MODEL, 0), images, labels, precision=precision)
    want, got = losses_of(eager, batches, draws, lrs), losses_of(peer, batches, draws, lrs)
    np.testing.assert_allclose(got, want, rtol={"fp32": 1e-4, "bf16": 2e-2}[precision])
    assert peer.setup_seconds > 0
