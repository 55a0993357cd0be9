"""The CUDA inference of Mixer models on the CPU emulator (no GPU): each new kernel against its NumPy twin
on odd shapes, then whole forwards — fp32 against the NumPy forward and ONNX Runtime, int8 against the
plan's executor, ONNX Runtime's QDQ model and, launch by launch, the plan's integer arithmetic."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mixer_checks import (
    check_mixer_fp32,
    check_mixer_int8,
    check_mixer_int8_layers,
    export_mixer,
    flips_near_steps,
    layernorm_magnitude,
)

from litenet import ops
from litenet.gpu.infer_layout import pad16, pad64
from litenet.gpu.launch import named_launch
from litenet.model import MixerConfig
from litenet.runtime import int8_plan
from litenet.runtime.cuda_backend import CudaInference
from litenet.runtime.model_files import ModelFiles

i32, f32 = np.int32, np.float32

# Tiny Mixers: every patch side the kernels treat differently (T = 64, 16, 4, 1), widths and hidden widths
# that are not multiples of 4, 16 or 64, token MLPs wider and narrower than the patch count.
SHAPES = {
    "p4-d8-t70": MixerConfig(patch=4, width=8, token_hidden=70, channel_hidden=12, blocks=1, input_shift=0.0),
    "p8-d13-t5": MixerConfig(patch=8, width=13, token_hidden=5, channel_hidden=33, blocks=2, input_shift=0.3,
                             input_scale=2.0),
    "p16-d20-t3": MixerConfig(patch=16, width=20, token_hidden=3, channel_hidden=130, blocks=1, input_scale=4.0),
    "p32-d7-t2": MixerConfig(patch=32, width=7, token_hidden=2, channel_hidden=9, blocks=2, input_shift=0.1),
}


@pytest.fixture(scope="module")
def mixers(tmp_path_factory) -> dict:
    return {name: export_mixer(tmp_path_factory.mktemp(f"rtcuda-{name}"), model) for name, model in SHAPES.items()}


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(abs(hash(key)) % 2**32)


# ---------------------------------------------------------------------------------------------
# Kernels against their twins


@pytest.mark.parametrize("patch,batch,shift,scale", [(4, 3, 0.47, 4.0), (8, 1, 0.0, 1.0), (16, 2, 0.25, 2.5),
                                                     (32, 1, 0.5, 1.0)])
def test_patches_infer_is_patchify_and_its_quantization(emu_device, images, patch, batch, shift, scale):
    x = images[:batch]
    pixels, T = patch * patch * 3, (32 // patch) ** 2
    want = ops.patchify(ops.pixels_to_float(x), patch, shift, scale)
    s_x = f32(0.021)
    out, q = np.zeros((T * batch, pixels), f32), np.zeros((T * batch, pad64(pixels) // 4), i32)
    common = {"images": np.ascontiguousarray(x.reshape(batch, 3072)), "B": i32(batch), "patch": i32(patch),
              "shift": f32(shift), "scale": f32(scale)}
    emu_device.launch(named_launch("patches_infer", 2, out=out, use_out=i32(1), q=np.zeros(4, i32), use_q=i32(0),
                                   q_stride=i32(0), q_scale=f32(1), **common))
    np.testing.assert_array_equal(out.reshape(want.shape), want)
    emu_device.launch(named_launch("patches_infer", 3, out=np.zeros(4, f32), use_out=i32(0), q=q, use_q=i32(1),
                                   q_stride=i32(pad64(pixels)), q_scale=s_x, **common))
    qb = q.view(np.int8)
    np.testing.assert_array_equal(qb[:, :pixels].reshape(want.shape), int8_plan.quantize(want, s_x))
    assert not qb[:, pixels:].any()  # the pad bytes stay zero


def _token_words(q: np.ndarray, rows: int) -> np.ndarray:
    """(k, N) int8 → token words (rows, N) int32: word (t/4)·N + n holds q[t … t+3, n] (zero-padded)."""
    padded = np.zeros((rows * 4, q.shape[1]), np.int8)
    padded[:len(q)] = q
    return np.ascontiguousarray(padded.reshape(rows, 4, -1).transpose(0, 2, 1)).view(np.int32).reshape(rows, -1)


def _from_token_words(words: np.ndarray) -> np.ndarray:
    rows, cols = words.shape
    return words.view(np.int8).reshape(rows, cols, 4).transpose(0, 2, 1).reshape(rows * 4, cols)


@pytest.mark.parametrize("tokens", [False, True], ids=["rows", "token-words"])
@pytest.mark.parametrize("T,B,d", [(5, 3, 13), (16, 2, 40), (1, 1, 7), (4, 1, 600)])
def test_layernorm_quantize_is_layernorm_then_quantize(emu_device, tokens, T, B, d):
    rng = _rng("ln", T, B, d)
    x = (rng.standard_normal((T, B, d)) * 2 + 0.5).astype(f32)
    gamma, beta = (1 + 0.3 * rng.standard_normal(d)).astype(f32), (0.2 * rng.standard_normal(d)).astype(f32)
    s_x = f32(0.013)
    y = ops.layernorm_forward(x, gamma, beta, 1e-5)[0]
    q = np.zeros((pad16(T) // 4, B * d) if tokens else (T * B, pad64(d) // 4), i32)
    emu_device.launch(named_launch("layernorm_quantize", -(-T * B // 8), x=x, R=i32(T * B), d=i32(d), gamma=gamma,
                                   beta=beta, eps=f32(1e-5), q=q, q_scale=s_x, tokens=i32(B if tokens else 0),
                                   q_stride=i32(0 if tokens else pad64(d))))
    if tokens:
        got = _from_token_words(q)
        assert not got[T:].any()  # pad patches stay zero
        got = got[:T].reshape(T, B, d)
    else:
        got = q.view(np.int8).reshape(T * B, -1)
        assert not got[:, d:].any()
        got = got[:, :d].reshape(T, B, d)
    flips_near_steps(got, y, s_x, layernorm_magnitude(x, gamma, beta, 1e-5))


@pytest.mark.parametrize("epilogue", ["gelu", "residual"])
@pytest.mark.parametrize("T_in,T_out,N", [(5, 7, 37), (16, 16, 1), (64, 70, 300), (70, 64, 260), (3, 1, 9)])
def test_token_linear_int8_is_the_plans_product(emu_device, epilogue, T_in, T_out, N):
    rng = _rng("token", T_in, T_out, N)
    q_in = rng.integers(-128, 128, (T_in, N)).astype(np.int8)
    w = rng.integers(-64, 65, (T_out, T_in)).astype(np.int8)
    mult = (rng.uniform(0.5, 2, T_out) * 1e-4).astype(f32)
    bias = rng.standard_normal(T_out).astype(f32)
    w_packed = np.zeros((T_out, pad16(T_in)), np.int8)
    w_packed[:, :T_in] = w
    acc = int8_plan.int_matmul(q_in.T, w).T  # (T_out, N), exact
    y = acc.astype(f32) * mult[:, None] + bias[:, None]
    res = rng.standard_normal((T_out, N)).astype(f32)
    res_after, q_out = res.copy(), np.full((pad16(T_out) // 4, N), -1, i32)  # -1: pads must be written as zeros
    gelu = epilogue == "gelu"
    s_next = f32(0.004)
    emu_device.launch(named_launch(
        "token_linear_int8", -(-N // 256) * -(-T_out // 16), x=_token_words(q_in, pad16(T_in) // 4),
        W=np.ascontiguousarray(w_packed).view(np.int32), Kw=i32(pad16(T_in) // 4), T_out=i32(T_out), N=i32(N),
        mult=mult, bias=bias, gelu=i32(gelu), res=res_after, use_res=i32(not gelu), q=q_out, use_q=i32(gelu),
        q_scale=s_next))
    if gelu:
        got = _from_token_words(q_out)
        assert not got[T_out:].any()
        a = ops.gelu_forward(y)
        flips_near_steps(got[:T_out], a, s_next, np.abs(a) + np.abs(y))
        np.testing.assert_array_equal(res_after, res)
    else:
        np.testing.assert_array_equal(res_after, res + y)  # bit for bit: the same integers, the same two roundings


@pytest.mark.parametrize("T,B,d", [(5, 3, 13), (64, 2, 8), (1, 1, 70)])
def test_mean_tokens_quantize_is_the_mean_then_quantize(emu_device, T, B, d):
    x = _rng("mean", T, B, d).standard_normal((T, B, d)).astype(f32)
    s_x = f32(0.0037)
    q = np.zeros((B, pad64(d) // 4), i32)
    emu_device.launch(named_launch("mean_tokens_quantize", 1, x=x, T=i32(T), B=i32(B), d=i32(d), q=q,
                                   q_stride=i32(pad64(d)), q_scale=s_x))
    got = q.view(np.int8).reshape(B, -1)
    np.testing.assert_array_equal(got[:, :d], int8_plan.quantize(ops.mean_tokens_forward(x), s_x))  # same sum order
    assert not got[:, d:].any()


# ---------------------------------------------------------------------------------------------
# Whole forwards


def _backend(mixers, shape, precision, device, **options):
    """The launch-per-op forward unless `mode` says otherwise (the one-launch kernel's grid barrier is met
    on the emulator only with one block: test_mixer_rows_*)."""
    options.setdefault("mode", "ops")
    return CudaInference(ModelFiles.locate(mixers[shape]), precision, device=device, **options)


@pytest.mark.parametrize("shape", SHAPES)
def test_fp32_matches_numpy_and_onnxruntime(mixers, images, emu_device, shape):
    check_mixer_fp32(_backend(mixers, shape, "fp32", emu_device), mixers[shape], images[:5])


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_matches_plan_and_onnxruntime(mixers, images, emu_device, shape):
    out = check_mixer_int8(_backend(mixers, shape, "int8", emu_device), mixers[shape], images[:5])
    assert out["exact_vs_plan"] > 0.5  # most images bit for bit: the same integers, the same roundings


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_launches_follow_the_plan(mixers, images, emu_device, shape):
    check_mixer_int8_layers(_backend(mixers, shape, "int8", emu_device), mixers[shape], images[:3])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_litenet_mixer_size(tmp_path_factory, images, emu_device, precision):
    """The preset's own shape (T = 64 patches, d 128, MLPs 64 / 512, 8 blocks): 2 images."""
    from mixer_checks import plan_only_mixer

    from litenet.model import load_preset

    folder = plan_only_mixer(tmp_path_factory.mktemp("rtcuda-litenet-mixer"), load_preset("litenet-mixer").model)
    be = CudaInference(ModelFiles.locate(folder), precision, device=emu_device, mode="ops")
    assert len(be.prepare(2).launches) == 53
    check = check_mixer_fp32 if precision == "fp32" else check_mixer_int8
    print(check(be, folder, images[:2]))  # int8: some of 425 k quantized values an image flip at a .5 step


def test_fp32_split_sums_match(mixers, images):
    """With many SMs a small batch's long sums are cut over several blocks (split-K): same answers."""
    from emu_infer import EmuInferDevice

    be = _backend(mixers, "p16-d20-t3", "fp32", EmuInferDevice(sm_count=40))
    assert max(int(launch.args[-3]) for launch in be.prepare(5).launches if launch.kernel.startswith("linear")) > 1
    check_mixer_fp32(be, mixers["p16-d20-t3"], images[:5])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_an_image_gets_the_same_logits_in_any_batch(mixers, images, emu_device, precision):
    """On the emulator's 3 SMs no sum is split, so each image's sums run in one order whatever the batch
    (int8 everywhere: its sums are exact; fp32 on a GPU may split a small batch's sums: split_sums)."""
    be = _backend(mixers, "p8-d13-t5", precision, emu_device)
    together = be.predict(images[:6])
    alone = np.concatenate([be.predict(images[i:i + 1]) for i in (0, 5)])
    np.testing.assert_array_equal(together[[0, 5]], alone)


def test_repeated_batch_size_replays_a_graph_and_large_inputs_are_split(mixers, images, emu_device):
    be = _backend(mixers, "p16-d20-t3", "int8", emu_device)
    first = be.predict(images[:5])
    run = be.prepare(5)
    assert run.graph is None and run.runs == 1 and run.mode == "ops"
    before = emu_device.launches
    np.testing.assert_array_equal(be.predict(images[:5]), first)
    assert run.graph is not None and emu_device.launches - before == len(run.launches)
    parts = _backend(mixers, "p16-d20-t3", "int8", emu_device, chunk=2).predict(images[:5])
    np.testing.assert_array_equal(parts, first)


def test_launches_walk_the_op_list(mixers, emu_device):
    """One launch per op, GELU and residual joins fused into their products: 6 per block + 5."""
    for precision in ("fp32", "int8"):
        be = _backend(mixers, "p8-d13-t5", precision, emu_device)
        run = be.prepare(2)
        assert len(run.launches) == 6 * SHAPES["p8-d13-t5"].blocks + 5
        assert [region.ops[0] for region in run.program.regions][:3] == ["patches", "embed", "blocks.0.token_ln"]
        assert "Mixer" in be.describe() and be.classes == ModelFiles.locate(mixers["p8-d13-t5"]).classes


def test_mixer_is_no_longer_declined_for_its_family(mixers):
    reason = CudaInference.unavailable_reason(ModelFiles.locate(mixers["p8-d13-t5"]), "int8")
    assert reason is None or "family" not in reason
    with pytest.raises(ValueError, match="fused"):
        _backend(mixers, "p8-d13-t5", "int8", None, mode="tiles")


# The one-launch fp32 forward (kernels/infer_mixer.cu). On the emulator "fused" runs with one block (its
# grid barrier could never be met by more); "phases" runs the same code a phase a launch on any grid.


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode,grid,batch", [("fused", 1, 5), ("phases", 3, 5), ("phases", 7, 1), ("phases", 40, 2)])
def test_mixer_rows_match_the_twins(mixers, images, shape, mode, grid, batch, precision):
    from emu_infer import EmuInferDevice

    be = _backend(mixers, shape, precision, EmuInferDevice(sm_count=grid), mode=mode)
    run = be.prepare(batch)
    assert len(run.launches) == (1 if mode == "fused" else 3 * SHAPES[shape].blocks + 2)
    assert {launch.kernel for launch in run.launches} == {f"infer_mixer_{precision}_rows"}
    if precision == "fp32":
        check_mixer_fp32(be, mixers[shape], images[:batch])
    else:
        check_mixer_int8(be, mixers[shape], images[:batch])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_mixer_rows_fused_is_its_phases_bit_for_bit(mixers, images, precision):
    from emu_infer import EmuInferDevice

    one = EmuInferDevice(sm_count=1)
    fused = _backend(mixers, "p8-d13-t5", precision, one, mode="fused").predict(images[:4])
    phases = _backend(mixers, "p8-d13-t5", precision, one, mode="phases").predict(images[:4])
    np.testing.assert_array_equal(fused, phases)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("mode,grid", [("fused", 1), ("phases", 3)])
def test_mixer_rows_forward_after_forward(mixers, images, precision, mode, grid):
    """The state a forward leaves (each tile's count of finished channel units, the patches' statistics) does
    not reach the next: the second batch through one backend gets a fresh backend's logits, bit for bit."""
    from emu_infer import EmuInferDevice

    used = _backend(mixers, "p8-d13-t5", precision, EmuInferDevice(sm_count=grid), mode=mode)
    used.predict(images[:3])
    fresh = _backend(mixers, "p8-d13-t5", precision, EmuInferDevice(sm_count=grid), mode=mode)
    np.testing.assert_array_equal(used.predict(images[3:6]), fresh.predict(images[3:6]))


def test_mixer_rows_int8_is_the_launch_per_op_bit_for_bit_mostly(mixers, images):
    """The same integers and roundings as the int8 kernels a launch per op: the same logits on most images
    (the float steps' order may move a value across a .5 step now and then)."""
    from emu_infer import EmuInferDevice

    rows = _backend(mixers, "p4-d8-t70", "int8", EmuInferDevice(sm_count=1), mode="fused").predict(images[:8])
    ops = _backend(mixers, "p4-d8-t70", "int8", EmuInferDevice(sm_count=1)).predict(images[:8])
    assert np.mean(np.all(rows == ops, axis=1)) >= 0.5


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_mixer_rows_channel_products_wider_than_the_block(tmp_path_factory, images, precision):
    """A hidden width past 256 on one block: the channel fc1 unit's 300 columns take rows_dots two passes
    (its fc2's 6 columns share each warp's lanes with 4 slices of the sum)."""
    from emu_infer import EmuInferDevice

    model = MixerConfig(patch=16, width=6, token_hidden=3, channel_hidden=300, blocks=1, input_shift=0.2)
    folder = export_mixer(tmp_path_factory.mktemp("rtcuda-mixer-wide"), model)
    be = CudaInference(ModelFiles.locate(folder), precision, device=EmuInferDevice(sm_count=1), mode="fused")
    check = check_mixer_fp32 if precision == "fp32" else check_mixer_int8
    check(be, folder, images[:2])


def test_mixer_rows_shared_memory_is_all_dynamic():
    """fits() holds the dynamic shared memory (smem_floats) to the 48 KB every GPU grants; a static __shared__
    variable would push the launches that fill it past that (an invalid-argument launch at batch 8 on an H100)."""
    from litenet.gpu import sources

    assert "__shared__" not in sources.source_path("infer_mixer").read_text(encoding="utf-8")


def test_mixer_rows_at_litenet_mixer_size(tmp_path_factory, images):
    """The preset's own shape (T = 64, d 128, MLPs 64 / 512, 8 blocks), one launch, 1 and 3 images."""
    from emu_infer import EmuInferDevice
    from mixer_checks import plan_only_mixer

    from litenet.model import load_preset

    folder = plan_only_mixer(tmp_path_factory.mktemp("rtcuda-mixer-rows"), load_preset("litenet-mixer").model)
    for precision, check in (("fp32", check_mixer_fp32), ("int8", check_mixer_int8)):
        be = CudaInference(ModelFiles.locate(folder), precision, device=EmuInferDevice(sm_count=1), mode="fused")
        assert len(be.prepare(1).launches) == 1
        check(be, folder, images[:1])
        check(be, folder, images[1:4])


def test_auto_mode_runs_the_one_launch_only_up_to_its_batch(mixers, emu_device):
    """Auto runs the one launch up to MIXER_FUSED_MAX_BATCH images (where it beat the launch per op on a GPU),
    or up to the batch it is told."""
    from litenet.runtime.cuda_backend import MIXER_FUSED_MAX_BATCH

    files = ModelFiles.locate(mixers["p4-d8-t70"])
    default = CudaInference(files, "fp32", device=emu_device)
    if MIXER_FUSED_MAX_BATCH:
        limit = MIXER_FUSED_MAX_BATCH
        assert [default.mode_for(b) for b in (1, limit, limit + 1)] == ["fused", "fused", "ops"]
        assert f"one launch up to batch {limit}" in default.describe()
    else:
        assert default.mode_for(1) == "ops" and "one launch" not in default.describe()
    fp32 = CudaInference(files, "fp32", device=emu_device, fused_max_batch=4)
    assert [fp32.mode_for(b) for b in (1, 4, 5, 4096)] == ["fused", "fused", "ops", "ops"]
    assert "one launch up to batch 4" in fp32.describe()
    int8 = CudaInference(ModelFiles.locate(mixers["p4-d8-t70"]), "int8", device=emu_device, mode="ops")
    assert int8.mode_for(1) == "ops"


def test_one_launch_refuses_a_grid_that_cannot_all_be_resident(mixers, images):
    """The grid barrier needs every block resident (one a multiprocessor): a larger grid is refused before
    anything is allocated, where it would hang; a launch a phase takes any grid."""
    from emu_infer import EmuInferDevice

    from litenet.errors import LiteNetError

    files = ModelFiles.locate(mixers["p8-d13-t5"])
    be = CudaInference(files, "fp32", device=EmuInferDevice(sm_count=2), mode="fused", fused_grid=3)
    with pytest.raises(LiteNetError, match="every block resident"):
        be.predict(images[:1])
    assert not be._runs
    phases = CudaInference(files, "fp32", device=EmuInferDevice(sm_count=2), mode="phases", fused_grid=3)
    assert phases.predict(images[:1]).shape == (1, 10)
    with pytest.raises(ValueError, match="positive"):
        CudaInference(files, "fp32", device=EmuInferDevice(sm_count=2), fused_grid=-1)


def test_is_mixer_reads_the_op_list():
    from litenet.graph import ops_of
    from litenet.lowering.fast.mixer_rows import is_mixer
    from litenet.model import load_preset

    assert all(is_mixer(ops_of(m)) for m in SHAPES.values())
    assert not is_mixer(ops_of(load_preset("litenet-base").model))
    ops = ops_of(SHAPES["p8-d13-t5"])
    rewired = list(ops)
    rewired[6] = dataclasses.replace(ops[6], inputs=(ops[2].name, ops[5].name))  # the token residual skips a block
    assert rewired[6].kind == "residual" and not is_mixer(rewired)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_litenet_infer_backend_cuda_runs_a_mixer(mixers, images, emu_device, monkeypatch, capsys, tmp_path, precision):
    """`litenet-infer --backend cuda` end to end, the emulator standing in for CuPy's device."""
    import json

    from mixer_checks import numpy_logits
    from PIL import Image

    from litenet.runtime import cli, int8_plan

    from emu_infer import EmuInferDevice

    # one SM, so that a one-launch forward's grid barrier would be met on the emulator
    monkeypatch.setattr("litenet.gpu.device.CupyDevice", lambda: EmuInferDevice(sm_count=1))
    monkeypatch.setattr(CudaInference, "unavailable_reason", classmethod(lambda cls, model, precision: None))
    Image.fromarray(images[0]).save(tmp_path / "image.png")
    folder = mixers["p8-d13-t5"]
    code = cli.main([str(tmp_path / "image.png"), "--model", str(folder), "--backend", "cuda", "--json",
                     "--precision", precision])
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["backend"] == "cuda" and record["precision"] == precision
    want = (numpy_logits(folder, images[:1]) if precision == "fp32" else
            int8_plan.run_plan(int8_plan.load_plan(ModelFiles.locate(folder).plan), images[:1]))[0]
    np.testing.assert_allclose(record["logits"], want, rtol=0, atol=1e-5)
