"""activations = "recompute" (mixer_plans.ActivationSlots) on the CPU emulator: the Mixer's CUDA
backend keeping one block's activations and re-running each block's LayerNorms and GELU products in
the backward trains bit for bit as keeping them all; the other backends refuse it in one line."""

import dataclasses

import numpy as np
import pytest
from emulator.device import EmuDevice
from test_mixer_backend_emulated import MODEL, recipe, run, schedule

from litenet.errors import LiteNetError, UsageError
from litenet.model import ModelConfig, TrainConfig, init_params
from litenet.train.cuda.mixer_backend import MixerCudaBackend
from litenet.train.cuda.mixer_plans import ActivationSlots
from litenet.train.numpy_backend import NumpyBackend

DEEPER = dataclasses.replace(MODEL, blocks=3)  # two blocks recomputed into the shared slots, one left from the forward


def assert_recompute_is_keep(make, data) -> tuple:
    """Train the same steps with activations keep and recompute (`make(activations)` → a backend):
    parameters and both AdamW moments must be equal bit for bit, the statistics to 1e-5 (of each field's largest
    value). Returns both backends."""
    keep, recompute = make("keep"), make("recompute")
    want, got = run(keep, *data), run(recompute, *data)
    for field in want:  # NOTE: the statistics (‖g‖², the residual paths' sums) are added up across
        # blocks with float atomicAdd, in whatever order the blocks finish on a GPU (the emulator runs
        # them in order): their last bits vary between any two runs (2e-6 seen), so they are held to
        # 1e-5 of the field's largest value — a cross term ⟨∂s, ∂x⟩ near 0 is a cancellation of terms
        # that large (1.6e-8 against 4e-5 on an H200: 2e-5 apart relative to itself, 1e-8 to the field).
        scale = float(np.abs(want[field]).max())
        np.testing.assert_allclose(got[field], want[field], rtol=1e-5, atol=1e-5 * scale, err_msg=field)
    want_state, got_state = keep.state(), recompute.state()
    for key in ("params", "m", "v"):
        assert np.array_equal(got_state[key], want_state[key]), key
    return keep, recompute


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_recomputing_activations_trains_bit_for_bit_as_keeping_them(precision):
    def make(activations):
        train = recipe(precision=precision, activations=activations)
        return MixerCudaBackend(DEEPER, train, init_params(DEEPER, 0), device=EmuDevice(sm_count=4), steps_per_graph=2)

    data = schedule(3)
    keep, recompute = assert_recompute_is_keep(make, data)
    # The LayerNorms and GELU products of every block but the last run again: 4 launches each.
    assert len(recompute._steps) == len(keep._steps) + 4 * (DEEPER.blocks - 1)
    assert recompute.arena.size < keep.arena.size
    assert recompute.v["U2"].shape[0] == 1 and recompute.v["Y"].shape[0] == 3
    images = data[0]
    assert np.array_equal(recompute.logits(images[:5]), keep.logits(images[:5]))  # evaluation through the slots


def test_slots_map_every_layernorm_and_block():
    keep, shared = ActivationSlots(3, "keep"), ActivationSlots(3, "recompute")
    assert [keep.layernorm(i) for i in range(7)] == list(range(7))
    assert [keep.block(b) for b in range(3)] == [0, 1, 2]
    assert [shared.layernorm(i) for i in range(7)] == [0, 1, 0, 1, 0, 1, 2]  # the final LayerNorm its own
    assert [shared.block(b) for b in range(3)] == [0, 0, 0]


def test_the_setting_is_checked():
    assert TrainConfig().activations == "keep"
    with pytest.raises(UsageError, match="activations must be one of keep, recompute"):
        TrainConfig(activations="checkpoint")


def test_the_other_backends_refuse_recompute_in_one_line():
    train = recipe(activations="recompute")
    with pytest.raises(LiteNetError, match="Mixer's CUDA backend only"):
        NumpyBackend(MODEL, train, init_params(MODEL, 0))
    from litenet.train.cuda.backend import CudaBackend
    mlp = ModelConfig(width=16, hidden=32, blocks=1)
    with pytest.raises(LiteNetError, match="Mixer's CUDA backend only"):
        CudaBackend(mlp, train, init_params(mlp, 0), device=EmuDevice(sm_count=4))
