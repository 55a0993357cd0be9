"""The fast tier changes no bit: on the CPU emulator, 5 training steps of each case reproduce, bit for bit,
the losses, gradient norms and parameters that the hand-written planners the lowering replaced gave
(tests/golden/lowering_emulated.json, recorded at commit 5e5bc88 by the same steps): the same kernels on the
same inputs in the same order of sums, whatever the arena's layout. The emulator runs every tensor-core
fragment in software: the four longest cases (1–4 minutes each on a 2-core CPU) run only with
LITENET_LONG_TESTS=1 (their bits were checked when the golden file was recorded, and on a GPU the presets'
own comparison holds them: bench/results/gpu-lowering.md)."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from training import data

from litenet.model import MixerConfig, ModelConfig, TrainConfig, init_params
from litenet.train import schedule
from litenet.train.gpu_backend import GpuBackend

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "lowering_emulated.json").read_text())["cases"]
SMALL = ModelConfig(width=16, hidden=40, blocks=2)
BASE = ModelConfig(embed="full", input_shift=0.5, width=20, hidden=24, blocks=2)
MIXER = MixerConfig(patch=8, width=12, token_hidden=6, channel_hidden=20, blocks=2)
MIXER_TRAIN = dict(batch_size=8, loss="cross-entropy", optimizer="adamw", label_smoothing=0.1, lr_base=0.01)
CASES = {
    "seed_fused": (SMALL, TrainConfig(batch_size=12, lr_base=0.2), dict(plan="fused")),
    "seed_ops_rows": (SMALL, TrainConfig(batch_size=12, lr_base=0.2), dict(plan="ops", embed="rows")),
    "base_ops_tiles": (ModelConfig(embed="full", input_shift=0.5, width=20, hidden=24, blocks=1, classes=7),
                       TrainConfig(batch_size=12, loss="cross-entropy", augment="flip"), dict(plan="ops", embed="tiles")),
    "base_tall": (BASE, TrainConfig(batch_size=12, loss="cross-entropy"), dict(plan="ops", embed="tiles", tall=True)),
    "base_wide": (BASE, TrainConfig(batch_size=12, loss="cross-entropy"), dict(plan="ops", embed="tiles", wide=True)),
    "base_wide_bf16": (BASE, TrainConfig(batch_size=12, loss="cross-entropy", precision="bf16"),
                       dict(plan="ops", embed="tiles", wide=True)),
    "base_bf16": (BASE, TrainConfig(batch_size=12, loss="cross-entropy", precision="bf16"), dict(plan="ops", embed="tiles")),
    "base_tf32": (BASE, TrainConfig(batch_size=12, loss="margin", precision="tf32"), dict(plan="ops", embed="tiles")),
    "base_wide_bf16_rows": (ModelConfig(width=20, hidden=24, blocks=2),
                            TrainConfig(batch_size=12, loss="cross-entropy", precision="bf16"),
                            dict(plan="ops", embed="rows", wide=True)),
    "mixer": (MIXER, TrainConfig(**MIXER_TRAIN, augment="crop+flip+cutout", decay="weights"), {}),
    "mixer_cutmix_bf16": (MIXER, TrainConfig(**MIXER_TRAIN, augment="crop+flip+cutmix", precision="bf16"), {}),
    "mixer_recompute": (MixerConfig(patch=8, width=12, token_hidden=6, channel_hidden=20, blocks=3),
                        TrainConfig(**MIXER_TRAIN, augment="crop+flip", activations="recompute"), {}),
    "mixer_tf32": (MIXER, TrainConfig(**MIXER_TRAIN, precision="tf32"), {}),
}
LONG = {"base_wide_bf16", "base_bf16", "base_tf32", "mixer_tf32"}
LONG_SKIP = pytest.mark.skipif(os.environ.get("LITENET_LONG_TESTS") != "1",
                               reason="minutes of emulated tensor-core fragments: LITENET_LONG_TESTS=1 runs it")


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow, LONG_SKIP]) if c in LONG else c
                                  for c in CASES])
def test_the_fast_tier_gives_the_replaced_planners_bits(emu, case):
    model, train, options = CASES[case]
    images, labels = data(40, model.classes)
    gpu = GpuBackend(model, train, init_params(model, train.seed), device=emu(), steps_per_graph=2, **options)
    gpu.load_dataset(images, labels)
    rng = np.random.default_rng(3)
    batches = np.stack([rng.permutation(40)[:train.batch_size] for _ in range(5)])
    gpu.train_steps(batches, np.full(5, 0.05, np.float32), **schedule.epoch_augments(batches, train, 0))
    stats, want = gpu.fetch_stats(), GOLDEN[case]
    assert stats["loss"].tolist() == want["loss"]
    assert stats["grad_norm"].tolist() == want["grad_norm"]
    assert hashlib.sha256(gpu.state()["params"][:2000].tobytes()).hexdigest() == want["params_sha256"]
