"""The CUDA backend as a data-parallel rank, on the CPU emulator (no GPU, no NCCL here): where the
all-reduce sits in a step (after the last gradient kernel, before grad_average, grad_norm_sq and the
update, on the step's stream, with no host synchronisation), a world of one changes no weight, and
two emulated ranks end where one rank with the global batch does."""

import shutil
import threading

import numpy as np
import pytest
from emulator.device import EmuDevice
from parallel_fixtures import run_ranks, stats_agree, weights_agree

from litenet.errors import LiteNetError
from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train.check_kernels import compare
from litenet.train.gpu_backend import GpuBackend
from tests.golden.record import learnable_images

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")

SMALL = ModelConfig(width=16, hidden=40, blocks=2)
TRAIN = TrainConfig(batch_size=12, lr_base=0.2, loss="cross-entropy")
GRADIENT_KERNELS = {"fused": {"fused_weight_grads"}, "ops": {"embed_backward", "embed_backward_tall"}}


def data(n=40):
    images, labels = learnable_images(n, 10, 0)
    return images, labels.astype(np.int64)


def schedule(steps, n, batch, seed=1):
    """(batches, learning rates, flips) of `steps` steps."""
    rng = np.random.default_rng(seed)
    batches = np.stack([rng.permutation(n)[:batch] for _ in range(steps)])
    return batches, np.linspace(0.05, 0.2, steps), rng.random((steps, batch)) < 0.5


class RecordingDevice(EmuDevice):
    """The emulator, logging every launch, download and synchronisation; it has a stream to pass on."""

    stream = "the step's stream"

    def __init__(self):
        super().__init__()
        self.log = []

    def launch(self, launch):
        self.log.append(launch.kernel)
        super().launch(launch)

    def download(self, view):
        self.log.append("download")
        return super().download(view)

    def synchronize(self):
        self.log.append("synchronize")


class RecordingComm:
    """A world of one (the sum of one buffer is itself) that logs each all-reduce into the device's log."""

    rank, world_size = 0, 1

    def __init__(self, device):
        self.device, self.calls = device, []

    def allreduce_sum_(self, buffer, stream=None):
        self.device.log.append("allreduce")
        self.calls.append((buffer, stream))

    def barrier(self):
        pass

    def close(self):
        pass


class SharedEmuDevice(EmuDevice):
    """The emulator for ranks on threads: its kernels keep block state in globals, so one at a time."""

    lock = threading.Lock()

    def launch(self, launch):
        with SharedEmuDevice.lock:
            super().launch(launch)


def backend(plan="fused", comm=None, device=None, train=TRAIN, **options):
    images, labels = data(n=40)
    cuda = GpuBackend(SMALL, train, init_params(SMALL, train.seed), plan=plan, device=device or EmuDevice(),
                      comm=comm, **options)
    cuda.load_dataset(images, labels)
    return cuda


@pytest.mark.parametrize("plan", ["fused", "ops"])
def test_the_allreduce_sits_between_the_gradients_and_the_update(plan):
    dev = RecordingDevice()
    comm = RecordingComm(dev)
    cuda = backend(plan, comm, dev, steps_per_graph=3)
    dev.log.clear()
    cuda.train_steps(*schedule(4, 40, 12))  # the first step eagerly, then the two graphs of a step
    steps = " ".join(dev.log).split(" sgd_clip_update")[:-1]
    assert len(steps) == 4 and len(comm.calls) == 4
    for step in steps:
        kernels = step.split()
        cut = kernels.index("allreduce")
        assert kernels[cut - 1] in GRADIENT_KERNELS[plan]
        assert kernels[cut + 1:] == ["grad_average", "grad_norm_sq"]
        assert kernels.count("grad_norm_sq") == 1  # the ops plan measures the summed gradient only
    assert "synchronize" not in dev.log and "download" not in dev.log  # nothing waits inside train_steps
    assert all(buffer is cuda.v["grads"] and stream == dev.stream for buffer, stream in comm.calls)


def test_a_world_of_one_changes_no_bit():
    """ops plan: the same launches on the same values (the sum of one buffer, ×1, the row's ‖g_t‖²
    cleared where nothing had written it yet), so weights and statistics are bit-identical."""
    args = schedule(6, 40, 12)
    plain, ranked = backend("ops", graph=True), backend("ops", RecordingComm(RecordingDevice()))
    for b in (plain, ranked):
        b.train_steps(*args)
    for key in ("params", "velocity"):
        assert np.array_equal(plain.state()[key], ranked.state()[key])
    a, b = plain.fetch_stats(), ranked.fetch_stats()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_world_of_one_fused_keeps_the_weights():
    """fused plan: fused_weight_grads measured the rank's ‖g_t‖² in its own order and grad_norm_sq
    measures it again in another, so the norms agree within rounding; with no clip the update reads
    the gradient alone and the weights are bit-identical."""
    train = TrainConfig(batch_size=12, lr_base=0.2, loss="cross-entropy", clip_threshold=1e30)
    args = schedule(4, 40, 12)
    plain, ranked = backend(train=train), backend(train=train, comm=RecordingComm(RecordingDevice()))
    for b in (plain, ranked):
        b.train_steps(*args)
    assert np.array_equal(plain.state()["params"], ranked.state()["params"])
    a, b = plain.fetch_stats(), ranked.fetch_stats()
    compare("grad_norm_sq", "‖g_t‖²", b["grad_sq"], a["grad_sq"], terms=SMALL.embed_inputs * SMALL.width)
    assert np.array_equal(a["loss"], b["loss"]) and np.array_equal(a["path"], b["path"])


@pytest.mark.parametrize("plan", ["fused", "ops"])
def test_two_emulated_ranks_equal_one_rank(plan):
    count = 6
    args = schedule(count, 40, 12)

    def train(comm=None):
        cuda = backend(plan, comm, SharedEmuDevice())
        cuda.train_steps(*args)
        return cuda.state()["params"], cuda.fetch_stats()

    want, want_stats = train()
    (got, stats), (other, other_stats) = run_ranks(2, train)
    assert np.array_equal(got, other) and all(np.array_equal(stats[k], other_stats[k]) for k in stats)
    weights = weights_agree(got, want, count, SMALL, TRAIN)
    assert weights["ok"], weights
    for key in ("loss", "grad_norm", "grad_sq", "path"):
        result = stats_agree(stats[key], want_stats[key], count, SMALL, TRAIN)
        assert result["ok"], (key, result)
    assert np.array_equal(stats["clipped"], want_stats["clipped"])


def test_check_kernels_holds_grad_average_to_its_twin():
    cuda = backend("ops", RecordingComm(RecordingDevice()), check_kernels=2)
    cuda.train_steps(*schedule(2, 40, 12))
    assert any(key.startswith("grad_average.") for key in cuda.check_report)
    assert max(cuda.check_report.values()) <= 1.0


def test_a_batch_that_does_not_split_is_refused():
    class FiveRanks(RecordingComm):
        world_size = 5
    with pytest.raises(LiteNetError, match="does not split evenly over 5 ranks"):
        backend(comm=FiveRanks(RecordingDevice()))
