"""The reference tier on the CPU emulator: every reference kernel held to its NumPy twin (the check of
`--check-kernels`, launch by launch, over whole training steps of every op kind, loss and optimiser),
and training by the reference kernels alone tracking the NumPy backend — for both families, for the
settings only the NumPy backend honoured before the lowering (AdamW, label smoothing, decay of weights
only on an MLP), and for a network of neither family."""

import numpy as np
import pytest
from networks import ADAMW, BASE_LIKE, MIXED, MIXER, SEED_LIKE, SGD
from training import assert_losses_match, run_pair

from litenet.train import twins
from litenet.train.check_kernels import run_reference
from litenet.lowering.program import Call, Program
from litenet.lowering.arena import Arena
from litenet.model import TrainConfig

MLP_ADAMW = TrainConfig(batch_size=12, optimizer="adamw", loss="cross-entropy", label_smoothing=0.1, decay="weights",
                        lr_base=0.001)  # the settings of the issue that once trained something else on the GPU
CASES = {
    "mlp-sgd-margin": (SEED_LIKE, SGD),
    "mlp-adamw-smoothing-decay": (BASE_LIKE, MLP_ADAMW),
    "mlp-cross-entropy-cutmix": (BASE_LIKE, TrainConfig(batch_size=12, loss="cross-entropy", augment="crop+flip+cutmix")),
    "mixer-adamw-augment": (MIXER, ADAMW),
    "mixer-sgd-margin-cutmix": (MIXER, TrainConfig(batch_size=8, loss="cross-entropy", augment="flip+cutmix",
                                                  clip_threshold=0.5)),
    "mixed": (MIXED, ADAMW),
}


@pytest.mark.parametrize("case", CASES)
def test_every_reference_kernel_matches_its_twin(emu, case):
    """Two steps, every launch held to its NumPy twin (an error raises KernelMismatch)."""
    model, train = CASES[case]
    _, _, gpu, _ = run_pair(model, train, emu(), count=2, kernels="reference", check_kernels=2)
    kernels = {key.split(".")[0] for key in gpu.check_report}
    assert kernels == {c.kernel for c in gpu.program.calls()}  # every launch of the step was checked


def test_the_checks_cover_every_reference_kernel(emu):
    """Across the cases above, every reference kernel but the inputs' ∂ (saliency's, next test) is held."""
    used = set()
    for model, train in CASES.values():
        from litenet.lowering import lower_training
        used |= {c.kernel for c in lower_training(model, train, train.batch_size, 4, "reference").calls()}
    reference = {k for k in twins.TWINS if k.endswith("_reference")}
    assert reference - used == {"pixel_rows_backward_reference", "patches_backward_reference"}


@pytest.mark.parametrize("kernel, args", [
    ("pixel_rows_backward_reference", dict(drows=(5, 3072), full=1)),
    ("pixel_rows_backward_reference", dict(drows=(5, 1024), full=0)),
    ("patches_backward_reference", dict(dpatches=(16, 5, 192), patch=8, scale=4.0)),
])
def test_input_gradients_match_their_twins(emu, kernel, args):
    rng = np.random.default_rng(0)
    program = Program({}, [])
    name, shape = next((k, v) for k, v in args.items() if isinstance(v, tuple))
    dy, dx = program.add("dy", shape), program.add("dx", (5, 32, 32, 3))
    scalars = {k: (np.float32(v) if isinstance(v, float) else np.int32(v)) for k, v in args.items() if k != name}
    call = Call(kernel, 60, {name: dy, "dimages": dx, "B": np.int32(5), **scalars})
    device = emu()
    from litenet.lowering.program import Region
    program.regions.append(Region("∂images", "backward", (), [call]))
    views = device.allocate(Arena.plan(program))
    device.upload(views["dy"], rng.standard_normal(shape).astype(np.float32))
    assert max(run_reference(device, views, call, {}).values()) <= 1.0


@pytest.mark.parametrize("case", ["mlp-sgd-margin", "mlp-adamw-smoothing-decay", "mixer-adamw-augment", "mixed"])
def test_reference_training_tracks_the_numpy_backend(emu, case):
    model, train = CASES[case]
    a, b, _, _ = run_pair(model, train, emu(), count=6, kernels="reference")
    assert_losses_match(a, b)


def test_reference_logits_match_the_numpy_forward(emu):
    from training import data
    _, _, gpu, ref = run_pair(MIXED, ADAMW, emu(), count=1, kernels="reference")
    images, _ = data(19, MIXED.classes, seed=5)  # a last partial chunk too
    np.testing.assert_allclose(gpu.logits(images), ref.logits(images), rtol=1e-5, atol=1e-5)
