"""check_kernels for the Mixer's CUDA backend on the CPU emulator: every launch of the first N steps
held to its kernel's twin (litenet/train/cuda/mixer_twins.py), in fp32 and on the tensor cores; a
wrong output is named (step, launch, kernel, buffer); the check only reads, so training continues
with graph replay to the same numbers as an unchecked run."""

import numpy as np
import pytest
from emulator.device import EmuDevice
from mixer_schedule import random_schedule

from litenet.model import MixerConfig, TrainConfig, init_params
from litenet.train.cuda import mixer_twins
from litenet.train.cuda.check import KernelMismatch
from litenet.train.cuda.mixer_backend import MixerCudaBackend

# Odd sizes everywhere: no width, hidden size, row count or column count is a multiple of a tile.
MODEL = MixerConfig(patch=8, width=7, token_hidden=5, channel_hidden=11, blocks=2)
STEPS, BATCH, IMAGES = 3, 3, 11


def recipe(**changes) -> TrainConfig:
    values = {"epochs": 1, "batch_size": BATCH, "optimizer": "adamw", "lr_base": 0.02, "loss": "cross-entropy",
              "label_smoothing": 0.1, "augment": "crop+flip+cutout", "cutout_size": 12, "weight_decay": 0.05,
              "decay": "weights", "warmup_steps": 1, "clip_threshold": 0.5}  # 0.5: some steps clip
    return TrainConfig(**{**values, **changes})


def schedule(seed=0):
    return random_schedule(STEPS, BATCH, IMAGES, 0.02, seed=seed)


def trained(train, device=None, **options):
    images, labels, batches, lrs, flips, crops, cutouts = schedule()
    cuda = MixerCudaBackend(MODEL, train, init_params(MODEL, 0), device=device or EmuDevice(sm_count=4),
                            steps_per_graph=2, **options)
    cuda.load_dataset(images, labels)
    cuda.train_steps(batches, lrs, flips=flips, crops=crops, cutouts=cutouts)
    return cuda, cuda.fetch_stats()


def test_checked_steps_pass_and_change_nothing():
    checked, stats = trained(recipe(), check_kernels=2)
    plain, want = trained(recipe())
    launched = {launch.kernel for launch in checked._steps}
    assert set(checked.check_report) == launched  # every kernel of the step was held to its twin
    assert max(max(v.values()) for v in checked.check_report.values()) <= 1.0
    assert np.any(stats["clipped"])  # the clip rule's branch ran under the check too
    for key in stats:
        np.testing.assert_array_equal(stats[key], want[key], err_msg=key)
    assert np.array_equal(checked.state()["params"], plain.state()["params"])


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_checked_step_in_tensor_core_precision(precision):
    cuda, _ = trained(recipe(precision=precision), check_kernels=1)
    products = [k for k in cuda.check_report if k.endswith("_" + precision)]
    assert products and max(max(v.values()) for v in cuda.check_report.values()) <= 1.0


def test_a_wrong_output_is_named():
    def writes_target(launch) -> bool:  # the second block's channel MLP writing GELU(u) to A2[1]
        return launch.kernel == "linear_gelu_forward" and np.shares_memory(launch.args[4], device.target)

    class Faulty(EmuDevice):  # corrupts one value of that output right after the kernel runs
        def launch(self, launch):
            super().launch(launch)
            if writes_target(launch):
                self.target.reshape(-1)[5] += 0.25

    device = Faulty(sm_count=4)
    cuda = MixerCudaBackend(MODEL, recipe(), init_params(MODEL, 0), device=device, check_kernels=2)
    device.target = cuda.v["A2"][1]
    images, labels, batches, lrs, *_ = schedule()
    cuda.load_dataset(images, labels)
    position = next(i for i, launch in enumerate(cuda._steps) if writes_target(launch)) + 1
    with pytest.raises(KernelMismatch, match=rf"^check-kernels, step 0, launch {position} of {len(cuda._steps)}: "
                                             r"linear_gelu_forward: a \(A2\[1\]\) differs .* > tolerance"):
        cuda.train_steps(batches, lrs)


def test_a_wrong_twin_is_caught(monkeypatch):
    real = mixer_twins.MIXER_TWINS["mean_tokens_forward"]
    def off_by_one_token(a):
        out = real.outputs(a)["y"]
        return {"y": mixer_twins.Out(out.want * a["T"] / (a["T"] - 1), out.terms)}
    monkeypatch.setitem(mixer_twins.MIXER_TWINS, "mean_tokens_forward", mixer_twins.KernelTwin(real.reads, off_by_one_token))
    with pytest.raises(KernelMismatch, match=r"step 0, launch \d+ of \d+: mean_tokens_forward: y \(POOL\)"):
        trained(recipe(), check_kernels=1)
