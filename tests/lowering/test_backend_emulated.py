"""The CUDA backend (the op-list lowering) on the CPU emulator: the fast tier's regions held to their
reference calls by --check-kernels, its steps against float64 NumPy, training tracking the NumPy backend,
graph replay, the statistics ring, logits, state, reports and the user's mistakes."""

import numpy as np
import pytest
from networks import ADAMW, BASE_LIKE, MIXED, MIXER, SEED_LIKE, SGD
from training import assert_losses_match, data, run_pair, steps

from litenet.errors import LiteNetError, UsageError
from litenet.train.check_kernels import KernelMismatch
from litenet.model import TrainConfig, init_params, param_views
from litenet.train.gpu_backend import GpuBackend

CE = TrainConfig(batch_size=12, loss="cross-entropy", augment="flip")
FAST = {  # name → (model, train, GpuBackend options)
    "mlp-fused-rows": (SEED_LIKE, SGD, dict(plan="fused", embed="rows")),
    "mlp-fused-tiles": (SEED_LIKE, SGD, dict(plan="fused", embed="tiles")),
    "mlp-ops-rows": (SEED_LIKE, SGD, dict(plan="ops", embed="rows")),
    "mlp-ops-tiles": (BASE_LIKE, CE, dict(plan="ops", embed="tiles")),
    "mlp-tall": (BASE_LIKE, CE, dict(plan="ops", tall=True)),
    "mlp-wide": (BASE_LIKE, CE, dict(plan="ops", wide=True)),
    "mlp-wide-bf16": (BASE_LIKE, TrainConfig(batch_size=12, loss="cross-entropy", precision="bf16"), dict(wide=True)),
    "mlp-tf32": (BASE_LIKE, TrainConfig(batch_size=12, precision="tf32"), {}),
    "mlp-adamw": (BASE_LIKE, TrainConfig(batch_size=12, optimizer="adamw", loss="cross-entropy", label_smoothing=0.1,
                                         decay="weights", lr_base=0.001), {}),
    "mixer": (MIXER, ADAMW, {}),
    "mixer-bf16-cutmix": (MIXER, TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw", precision="bf16",
                                             augment="crop+flip+cutmix", label_smoothing=0.1), {}),
    "mixer-recompute": (MIXER, TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw",
                                           activations="recompute"), {}),
    "mixer-wide": (MIXER, ADAMW, dict(wide=True)),
    "mixer-wide-bf16": (MIXER, TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw", precision="bf16",
                                           augment="crop+flip+cutmix", label_smoothing=0.1), dict(wide=True)),
    # the forward's GELU products write only BF16 copies, of their "…/fwd" tensors (tokens.drop_unread, recompute)
    "mixer-wide-bf16-recompute": (MIXER, TrainConfig(batch_size=8, loss="cross-entropy", optimizer="adamw",
                                                     precision="bf16", activations="recompute"), dict(wide=True)),
    "mixed": (MIXED, ADAMW, {}),
}


@pytest.mark.parametrize("case", FAST)
def test_fast_regions_match_their_reference_calls(emu, case):
    """Two steps region by region: each fast region against its reference calls, each of those against
    its NumPy twin (a mismatch raises KernelMismatch)."""
    model, train, options = FAST[case]
    _, _, gpu, _ = run_pair(model, train, emu(), count=2, check_kernels=2, **options)
    fast = {r.rewrite for r in gpu.program.regions if r.rewrite}
    assert fast and all(any(key.startswith(f"{name}: ") for key in gpu.check_report) for name in fast)
    assert max(gpu.check_report.values()) <= 1.0


@pytest.mark.parametrize("case", ["mlp-fused-rows", "mlp-ops-tiles", "mlp-tall", "mlp-wide"])
def test_one_fast_step_equals_float64_numpy(emu, case):
    """The gradient of one step (the velocity after it, v = g + wd·w) against float64 NumPy."""
    model, train, options = FAST[case]
    _, _, gpu, ref = run_pair(model, train, emu(), count=1, **options)
    got, want = param_views(gpu.state()["velocity"], model), param_views(ref.state()["velocity"], model)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-4, atol=2e-5 * np.abs(want[name]).max(), err_msg=name)


@pytest.mark.parametrize("case", ["mlp-fused-rows", "mlp-ops-tiles", "mlp-adamw", "mixer", "mixed"])
def test_fast_training_tracks_the_numpy_backend(emu, case):
    model, train, options = FAST[case]
    a, b, _, _ = run_pair(model, train, emu(), count=8, numpy_dtype=np.float32, **options)
    assert_losses_match(a, b, rtol=2e-4)


@pytest.mark.parametrize("precision, options", [("fp32", {}), ("bf16", dict(wide=True))])
def test_recompute_changes_no_bit(emu, precision, options):
    """activations = recompute re-runs each block's forward launches on the same inputs: the same bits
    (in BF16 with wide channel products, the LayerNorms' BF16 copies re-made too)."""
    model, train, _ = FAST["mixer-recompute"]
    train = TrainConfig(**{**train.__dict__, "precision": precision})
    a, _, kept, _ = run_pair(model, TrainConfig(**{**train.__dict__, "activations": "keep"}), emu(), count=4, **options)
    b, _, again, _ = run_pair(model, train, emu(), count=4, **options)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert np.array_equal(kept.state()["params"], again.state()["params"])
    assert any(r.phase == "recompute" for r in again.program.regions)
    assert again.arena.size < kept.arena.size


@pytest.mark.parametrize("case", ["mlp-fused-rows", "mixer"])
def test_graph_replay_equals_eager_launches(emu, case):
    model, train, options = FAST[case]
    a, _, replayed, _ = run_pair(model, train, emu(), count=7, steps_per_graph=3, **options)
    b, _, eager, _ = run_pair(model, train, emu(), count=7, graph=False, **options)
    assert np.array_equal(replayed.state()["params"], eager.state()["params"])
    assert np.array_equal(a["loss"], b["loss"])


def test_statistics_ring_wraps_and_steps_continue(emu):
    images, labels = data(48, SEED_LIKE.classes)
    gpu = GpuBackend(SEED_LIKE, SGD, init_params(SEED_LIKE, 0), device=emu(), capacity=2)
    gpu.load_dataset(images, labels)
    batches, lrs, draws = steps(SGD, 48, 4)
    gpu.train_steps(batches, lrs, **draws)
    a = gpu.fetch_stats()
    assert a["loss"].shape == (4,) and a["path"].shape == (4, 2, 3) and a["grad_sq"].shape == (4, 15)
    assert gpu.fetch_stats()["loss"].shape == (0,)


def test_draws_left_out_after_given_ones_are_off_again(emu):
    """A call that leaves a draw kind out means "off" for its steps, also after a call that gave that kind
    (the backend fills a left-out kind's ring once, and again after it was given)."""
    from litenet.train.numpy_backend import NumpyBackend

    images, labels = data(48, MIXER.classes)
    params = init_params(MIXER, ADAMW.seed)
    gpu = GpuBackend(MIXER, ADAMW, params, device=emu(), capacity=2)  # each call reuses the same ring slots
    ref = NumpyBackend(MIXER, ADAMW, params, dtype=np.float64)
    for b in (gpu, ref):
        b.load_dataset(images, labels)
    batches, lrs, draws = steps(ADAMW, 48, 6)
    assert {"flips", "crops", "cutouts"} <= set(draws)
    for part, given in ((slice(0, 2), False), (slice(2, 4), True), (slice(4, 6), False)):
        kinds = {k: a[part] for k, a in draws.items()} if given else {}
        for b in (gpu, ref):
            b.train_steps(batches[part], lrs[part], **kinds)
    assert_losses_match(gpu.fetch_stats(), ref.fetch_stats(), rtol=1e-4)


@pytest.mark.parametrize("kernel, model, tensor", [("residual_join", SEED_LIKE, "∂embed"),
                                                   ("layernorm_backward_join", MIXER, "∂embed"),
                                                   ("fused_rows", SEED_LIKE, "fused.DS")])
def test_check_kernels_names_the_wrong_kernel(emu, kernel, model, tensor):
    class Faulty(emu):  # corrupts one value of one output right after the kernel runs
        def launch(self, launch):
            super().launch(launch)
            if launch.kernel == kernel:
                self.target.reshape(-1)[3] += 0.5

    train = ADAMW if model is MIXER else SGD
    options = {"plan": "fused" if kernel == "fused_rows" else "ops"} if model is SEED_LIKE else {}
    images, labels = data(48, model.classes)
    gpu = GpuBackend(model, train, init_params(model, 0), device=Faulty(), check_kernels=1, **options)
    gpu.dev.target = gpu.v[tensor]
    gpu.load_dataset(images, labels)
    with pytest.raises(KernelMismatch, match=r"^check-kernels, step 0, region .* fast region"):
        gpu.train_steps(*steps(train, 48, 1)[:2], **steps(train, 48, 1)[2])


def test_logits_state_and_reports(emu):
    _, _, gpu, ref = run_pair(BASE_LIKE, CE, emu(), count=1)
    images, _ = data(30, BASE_LIKE.classes, seed=5)
    np.testing.assert_allclose(gpu.logits(images), ref.logits(images), rtol=1e-4, atol=1e-5)
    state = {"params": ref.params * 0.5, "velocity": ref.params * 0.1, "updates": np.array([7])}
    gpu.load_state(state)
    np.testing.assert_array_equal(gpu.state()["params"], state["params"].astype(np.float32))
    assert gpu.state()["updates"][0] == 7
    report = gpu.memory_report()
    assert report["arena_bytes"] > 0 and "| params |" in report["buffers"]


def test_evaluation_at_a_larger_batch_gives_the_same_logits(emu):
    """Evaluation may run at a larger batch than training (on a GPU, the largest that needs no more memory):
    every image's logits agree to fp32 rounding (a product's summation order follows its tiles, which
    follow the batch) and name the same class, a padded last batch included."""
    images, _ = data(30, MIXER.classes, seed=5)
    params = init_params(MIXER, 0)
    at_training = GpuBackend(MIXER, ADAMW, params, device=emu())
    larger = GpuBackend(MIXER, ADAMW, params, device=emu(), eval_batch=4 * at_training.batch)
    assert at_training.eval_batch == at_training.batch and larger.eval_batch == 4 * at_training.batch
    wide, narrow = larger.logits(images), at_training.logits(images)
    np.testing.assert_allclose(wide, narrow, rtol=1e-5, atol=1e-6)
    assert np.array_equal(wide.argmax(axis=1), narrow.argmax(axis=1))
    with pytest.raises(UsageError, match="eval_batch"):
        GpuBackend(MIXER, ADAMW, params, device=emu(), eval_batch=0)


@pytest.mark.parametrize("wide_from_rows", [None, "evaluation only"])
def test_bf16_evaluation_runs_the_channel_products_as_the_step_does(emu, monkeypatch, wide_from_rows):
    """In BF16 the evaluation takes the step's wide channel products, and its GELU product writes only the
    copy fc2 reads (no backward reads u). Where its batch takes wide tiles and the step's does not, the
    parameters' BF16 copy it reads is remade before each evaluation: its logits follow the weights the step
    made, within BF16's rounding of the NumPy backend's."""
    from litenet.lowering.fast import tokens

    model, train, options = FAST["mixer-wide-bf16"]
    if wide_from_rows:  # wide tiles for products of more rows than a training batch has
        options = {}
        rows = train.batch_size * (32 // model.patch) ** 2
        monkeypatch.setattr(tokens, "choose_wide", lambda M, N, K, precision: M > rows)
    _, _, gpu, ref = run_pair(model, train, emu(), count=1, n=16, eval_batch=2 * train.batch_size, **options)
    step, evaluation = ({c.kernel for c in p.calls()} for p in (gpu.program, gpu.eval_program))
    assert "linear_gelu_forward_copy_only_wide_bf16" in evaluation
    assert ("linear_gelu_forward_to_copy_wide_bf16" in step) == (not wide_from_rows)
    images, _ = data(20, model.classes, seed=5)
    got, want = gpu.logits(images), ref.logits(images)
    np.testing.assert_allclose(got, want, atol=0.02 * np.abs(want).max())


def test_a_gpu_evaluates_at_the_largest_batch_that_fits_in_the_step(emu):
    """Off the emulator the evaluation batch is the training batch times 2ᵏ, at most EVAL_BATCH_MAX, whose
    arena is no larger than evaluating at the training batch would make it."""
    from litenet.train.gpu_backend import EVAL_BATCH_MAX

    class LikeAGpu(emu):
        capability = "sm_90"

    gpu = GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=LikeAGpu())
    assert gpu.batch <= gpu.eval_batch <= EVAL_BATCH_MAX and gpu.eval_batch % gpu.batch == 0
    at_training = GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=LikeAGpu(), eval_batch=gpu.batch)
    assert gpu.arena.size <= at_training.arena.size
    larger = GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=LikeAGpu(), eval_batch=2 * gpu.eval_batch)
    assert gpu.eval_batch == EVAL_BATCH_MAX or larger.arena.size > at_training.arena.size  # the largest that fits


@pytest.mark.parametrize("case, check", [("mixer-bf16-cutmix", 0), ("mlp-ops-tiles", 1)])
def test_every_launched_kernel_is_prepared_before_the_first_launch(emu, case, check):
    """GpuBackend hands the device every kernel of the step, the parameter copies, the evaluation (and,
    with --check-kernels, the reference calls) at once, so they compile in parallel before any launch."""
    class Recording(emu):
        def __init__(self):
            super().__init__()
            self.prepared, self.launched, self.launches_before = None, set(), None

        def prepare(self, kernels):
            self.prepared, self.launches_before = set(kernels), self.launches
            return super().prepare(self.prepared)

        def launch(self, launch):
            self.launched.add(launch.kernel)
            super().launch(launch)

    model, train, options = FAST[case]
    device = Recording()
    _, _, gpu, _ = run_pair(model, train, device, count=3, check_kernels=check, **options)
    gpu.logits(data(10, model.classes)[0])
    assert device.launches_before == 0 and device.launched and device.launched <= device.prepared


def test_print_launches_names_op_and_kernel(emu, capsys):
    GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=emu(), print_launches=True)
    text = capsys.readouterr().err
    assert "blocks.0.token_fc1 + blocks.0.token_gelu  [forward, fast: product + GELU epilogue]" in text
    assert "token_linear_gelu_forward<<<" in text and "adamw_update<<<" in text


def test_user_mistakes_are_one_line_errors(emu):
    images, labels = data(48, SEED_LIKE.classes)
    gpu = GpuBackend(SEED_LIKE, SGD, init_params(SEED_LIKE, 0), device=emu())
    with pytest.raises(LiteNetError, match="load_dataset"):
        gpu.train_steps(*steps(SGD, 48, 1)[:2])
    with pytest.raises(LiteNetError, match="uint8"):
        gpu.load_dataset(images.astype(np.float32), labels)
    gpu.load_dataset(images, labels)
    with pytest.raises(LiteNetError, match="shape"):
        gpu.train_steps(np.zeros((2, 5), int), np.ones(2))
    with pytest.raises(LiteNetError, match="outside"):
        gpu.train_steps(np.full((1, 12), 48), np.ones(1))
    with pytest.raises(LiteNetError, match="parameters"):
        GpuBackend(SEED_LIKE, SGD, np.zeros(3), device=emu())
    with pytest.raises(UsageError, match="--kernels fast"):
        GpuBackend(SEED_LIKE, TrainConfig(precision="bf16"), init_params(SEED_LIKE, 0), device=emu(), kernels="reference")
    with pytest.raises(UsageError, match="activations keep"):
        GpuBackend(SEED_LIKE, TrainConfig(activations="recompute"), init_params(SEED_LIKE, 0), device=emu())
    with pytest.raises(UsageError, match="tall tiles are for networks of vectors"):
        GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=emu(), tall=True)


@pytest.mark.parametrize("second_stream", ["late", "early"])
@pytest.mark.parametrize("case", ["mlp-ops-tiles", "mixer-bf16-cutmix"])
def test_the_second_stream_changes_no_bit(emu, case, second_stream):
    """The backward's ∂W launches on the graph's second stream, replayed as late or as early as their waits
    allow, train bit for bit as every launch on one stream does."""
    model, train, options = FAST[case]
    a, _, two, _ = run_pair(model, train, emu(second_stream=second_stream), count=7, steps_per_graph=3, **options)
    b, _, one, _ = run_pair(model, train, emu(), count=7, steps_per_graph=3, branches="off", **options)
    assert two.program.labels["second stream"] > 0 and not any(c.stream for c in one.program.calls())
    assert np.array_equal(two.state()["params"], one.state()["params"])
    assert np.array_equal(a["loss"], b["loss"]) and np.array_equal(a["grad_sq"], b["grad_sq"])


def test_a_missing_wait_between_the_streams_changes_bits(emu, monkeypatch):
    """The test above can fail: with no waits the second stream's ∂W launches run after the update."""
    from litenet.gpu import streams

    model, train, options = FAST["mixer-bf16-cutmix"]
    b, _, one, _ = run_pair(model, train, emu(), count=4, steps_per_graph=3, branches="off", **options)
    monkeypatch.setattr(streams, "waits", lambda lanes, touched: [None] * len(lanes))
    a, _, two, _ = run_pair(model, train, emu(), count=4, steps_per_graph=3, **options)
    assert not np.array_equal(two.state()["params"], one.state()["params"])


@pytest.mark.parametrize("case", ["mlp-ops-tiles", "mixer-bf16-cutmix"])
def test_the_main_stream_waits_for_the_second_only_at_the_join(emu, case):
    """The arena keeps what a second-stream call touches until the step's end, so no main-stream launch
    writes bytes a lagging ∂W launch still reads: the ∂W launches may trail the whole backward, and the
    main stream waits for them once, where ‖g‖² reads the gradient."""
    from litenet.gpu import streams

    model, train, options = FAST[case]
    _, _, gpu, _ = run_pair(model, train, emu(), count=1, **options)
    lanes, after = streams.schedule(gpu._steps)
    main_waits = [gpu._steps[j].kernel for j, i in enumerate(after) if i is not None and lanes[j] == 0]
    assert main_waits == ["grad_norm_sq"]


def test_recompute_keeps_its_memory_with_the_second_stream():
    """Under activations = recompute the arena does not hold the ∂W launches' bytes to the step's end
    (that would keep every recomputed block's activations, all recompute saves): planned at
    litenet-mixer's real size (batch 256), recompute's arena is under a third of keep's in 64 × 64 tiles
    (302 against 983 MiB) and under 0.45× with the wide tiles' BF16 copies (323 against 856)."""
    import dataclasses

    from litenet.lowering import lower_training
    from litenet.lowering.arena import Arena
    from litenet.model import load_preset

    p = load_preset("litenet-mixer")
    train = dataclasses.replace(p.train, precision="bf16")

    def arena_bytes(activations, wide):
        program = lower_training(p.model, dataclasses.replace(train, activations=activations), train.batch_size, 16,
                                 precision="bf16", sm_count=132, wide=wide)
        return Arena.plan(program).size

    assert arena_bytes("recompute", False) < 0.33 * arena_bytes("keep", False)
    assert arena_bytes("recompute", None) < 0.45 * arena_bytes("keep", None)


def test_recompute_reruns_both_layernorms_and_both_gelu_products():
    """Before its backward every block but the last runs its two LayerNorms and its two GELU products again
    (docs/mixer.md, "Memory"), so across blocks only the residual stream stays: at no launch are the
    LayerNorm outputs (y, n, 1/σ) of more than two blocks alive, where keeping them all would hold eight."""
    import dataclasses
    import re

    from litenet.lowering import lower_training
    from litenet.lowering.fast.common import LAYERNORM_REWRITE
    from litenet.lowering.fast.tokens import PRODUCT_GELU_REWRITE
    from litenet.model import load_preset

    p = load_preset("litenet-mixer")
    train = dataclasses.replace(p.train, precision="bf16", activations="recompute")
    program = lower_training(p.model, train, 64, 16, precision="bf16", sm_count=132)
    blocks = p.model.blocks
    again = sorted(r.rewrite for r in program.regions if r.phase == "recompute")
    assert again == sorted([LAYERNORM_REWRITE, PRODUCT_GELU_REWRITE] * 2 * (blocks - 1))
    calls = program.calls()
    first, last = {}, {}
    for i, call in enumerate(calls):
        for name in call.tensors():
            first.setdefault(name, i)
            last[name] = i
    block_of = {name: int(m.group(1)) for name in first if (m := re.match(r"^blocks\.(\d+)\.\w+_ln", name))}
    most = max(len({b for name, b in block_of.items() if first[name] <= i <= last[name]}) for i in range(len(calls)))
    assert most <= 2


@pytest.mark.parametrize("activations", ["keep", "recompute"])
def test_mixer_channel_weight_sums_apart_at_real_size(activations):
    """At litenet-mixer's size in BF16 (batch 128, 132 multiprocessors) each channel ∂W is two launches: its
    partials, K split past the one-launch kernel's 16 (geometry.choose_summed_splits: one block a
    multiprocessor), then their sum right after it, on the same (second) stream and scratch, which holds them;
    each token ∂W too, at its one launch's split."""
    import dataclasses

    from litenet.lowering import lower_training
    from litenet.lowering.fast.geometry import Gemm, choose_summed_splits
    from litenet.model import load_preset

    p = load_preset("litenet-mixer")
    train = dataclasses.replace(p.train, precision="bf16", activations=activations)
    program = lower_training(p.model, train, 128, 16, precision="bf16", sm_count=132)
    calls = [c for r in program.regions for c in r.calls]
    kernels = [c.kernel for c in calls]
    assert "linear_backward_weight_wide_bf16" not in kernels
    at = [i for i, k in enumerate(kernels) if k == "linear_backward_weight_partials_wide_bf16"]
    assert len(at) == 2 * p.model.blocks  # fc1's and fc2's of every block
    splits = choose_summed_splits(4, 128 * 64, 132)
    assert splits == 32
    for i in at:
        partials, total = calls[i], calls[i + 1]
        assert total.kernel == "linear_backward_weight_sum_wide"
        assert partials.stream == total.stream == 1
        assert partials.args["scratch"] == total.args["scratch"] and total.args["scratch"].tensor == "side.scratch"
        assert int(partials.args["splits"]) == int(total.args["splits"]) == splits and partials.grid == 4 * splits
        g = Gemm(int(total.args["n_in"]), int(total.args["n_out"]), 128 * 64, splits, precision="bf16", wide=True)
        assert program.tensors["side.scratch"].size >= g.scratch
    # the token ∂W likewise: its partials at the one launch's split, then their sum, on the second stream
    at = [i for i, k in enumerate(kernels) if k == "token_linear_backward_weight_partials_bf16"]
    assert len(at) == 2 * p.model.blocks and "token_linear_backward_weight_bf16" not in kernels
    for i in at:
        partials, total = calls[i], calls[i + 1]
        assert total.kernel == "token_linear_backward_weight_sum" and partials.stream == total.stream == 1
        assert partials.args["scratch"] == total.args["scratch"] and int(partials.args["splits"]) == int(total.args["splits"]) > 16
