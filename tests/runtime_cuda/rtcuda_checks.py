"""The checks of the CUDA inference backend, shared by the emulator and GPU tests and the benchmark:
fp32 against ONNX Runtime and the NumPy forward, int8 against the plan executor and the QDQ model,
and int8 layer by layer (quantized inputs and int32 sums exactly as docs/int8-plan.md says)."""

from __future__ import annotations

import numpy as np

from litenet import forward, ops
from litenet.export.checks import fp32_tolerance, plan_tolerance
from litenet.runtime import int8_plan
from litenet.runtime.cuda_net import forward_fp32, load_fp32
from litenet.runtime.model_files import ModelFiles

EPS32 = float(np.finfo(np.float32).eps)
# Tiny shapes (odd widths: pads and tails everywhere; tests/export/export_fixtures.SHAPES) and the
# two presets' own shapes.
MODEL_SHAPES = ("seed-like", "full-shift", "sum-shift-3", "litenet-seed", "litenet-base")


def ort_logits(path, images: np.ndarray) -> np.ndarray:
    """ONNX Runtime (CPU) on the float input x/255, as the onnxruntime backend feeds it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: images.astype(np.float32) / np.float32(255)})[0]


def check_fp32(backend, folder, images: np.ndarray) -> dict:
    """Logits against ONNX Runtime's fp32 model and the NumPy twin, within the computed fp32 tolerance
    (litenet.export.checks.fp32_tolerance: 4× the NumPy float32 forward's own error against float64)."""
    from litenet.model import ModelConfig
    from litenet.train import network
    from litenet.weights import load_model

    files = ModelFiles.locate(folder)
    got = backend.predict(images)
    params, model, _, _ = load_model(folder)
    assert isinstance(model, ModelConfig)
    # The NumPy error is measured on at least 64 images: on one image it may be luckily small.
    basis = images if len(images) >= 64 else np.concatenate([images, _synthetic(64 - len(images))])
    z32 = network.forward(params.astype(np.float32), basis, model).z
    z64 = network.forward(params.astype(np.float64), basis, model).z
    tol = fp32_tolerance(z32, z64)
    z64 = z64[:len(images)]
    ort = ort_logits(files.fp32_onnx, images)
    shape, tensors, _ = load_fp32(files)
    twin = forward_fp32(shape, tensors, images)
    out = {"images": len(images), "vs_ort": float(np.abs(got - ort).max()), "vs_twin": float(np.abs(got - twin).max()),
           "vs_float64": float(np.abs(got - z64).max()), "tolerance": tol,
           "argmax_vs_ort": float((got.argmax(1) == ort.argmax(1)).mean())}
    assert got.dtype == np.float32 and got.shape == ort.shape
    assert out["vs_ort"] <= tol and out["vs_twin"] <= tol, out
    return out


def _synthetic(n: int) -> np.ndarray:
    import export_fixtures as fx
    return fx.images(n, seed=123)


def check_int8(backend, folder, images: np.ndarray, max_flip_fraction: float = 0.002) -> dict:
    """Logits against the plan executor (run_plan) and ONNX Runtime on the QDQ model: equal within
    plan_tolerance on all but a few images (an activation within rounding of a .5 step), argmax
    agreement ≥ 99.9 % (docs/int8-plan.md, "How a CUDA kernel should be checked")."""
    files = ModelFiles.locate(folder)
    got = backend.predict(images)
    ref = int8_plan.run_plan(int8_plan.load_plan(files.plan), images)
    ort = ort_logits(files.int8_onnx, images)
    out = {"images": len(images)}
    # ONNX Runtime rounds its own way on top of the plan (its dequantize multiplies acc by a scale
    # product it forms per call), so its flips add to the kernel's: it gets 2.5× the plan's allowance
    # (docs/decisions.md, "Tolerances").
    for name, want, allowance in (("plan", ref, 1.0), ("ort", ort, 2.5)):
        per_image = np.abs(got - want).max(axis=1)
        flips = int((per_image > plan_tolerance(want)).sum())
        out.update({f"vs_{name}": float(per_image.max()), f"flips_vs_{name}": flips,
                    f"argmax_vs_{name}": float((got.argmax(1) == want.argmax(1)).mean()),
                    f"exact_vs_{name}": float((per_image == 0).mean())})
        assert flips <= max(1, int(allowance * max_flip_fraction * len(images))), out
        assert out[f"argmax_vs_{name}"] >= (0.999 if len(images) >= 1000 else 1 - 1.0 / len(images)), out
    out["tolerance"] = plan_tolerance(ref)
    return out


def check_int8_layers(backend, folder, images: np.ndarray) -> dict:
    """Run the tiles plan one launch at a time and hold every layer to the plan's arithmetic given the
    device's own inputs: the embedding's h and every quantized input bit for bit; each fc2's int32
    sums through s = h + (float(acc)·m + b) bit for bit; each GELU output's quantization except for
    values within float rounding of a .5 step (counted)."""
    plan = int8_plan.load_plan(ModelFiles.locate(folder).plan)
    t, dev = plan.tensors, backend.dev
    run = backend.prepare(len(images))
    assert run.mode == "tiles", "layer checks need mode='tiles'"
    dev.upload(run.pixels, images.reshape(len(images), 3072))
    got = lambda name: dev.download(run.logits if name == "logits" else run.tensor(name))  # noqa: E731
    B, d = len(images), plan_shape_width(plan)
    H = t["blocks.0.fc1.weight"].shape[0]
    q_bytes = lambda name, k: got(name).view(np.int8).reshape(B, -1)[:, :k]  # noqa: E731
    launches = iter(run.launches)
    dev.launch(next(launches))  # embedding
    h = got("h")[:, :d]
    op = {o.name: o for o in plan.ops}
    np.testing.assert_array_equal(h, forward.run(plan.ops, t, images, product=plan.product, until="embed").values["embed"])
    flips = 0
    for i in range(plan.model.blocks):
        p = f"blocks.{i}"
        np.testing.assert_array_equal(q_bytes("qh", d), int8_plan.quantize(h, t[f"{p}.fc1.input_scale"]))
        dev.launch(next(launches))  # fc1 + GELU + quantize for fc2
        want_qa = int8_plan.quantize(ops.gelu_forward(plan.product(op[f"{p}.fc1"], h)), t[f"{p}.fc2.input_scale"])
        qa = q_bytes("qa", H)
        assert np.abs(qa.astype(int) - want_qa).max(initial=0) <= 1
        flips += int((qa != want_qa).sum())
        dev.launch(next(launches))  # fc2 + residual, from the device's own qa
        acc = int8_plan.int_matmul(qa, t[f"{p}.fc2.weight"])
        want_s = h + (int8_plan.dequantize_acc(acc, t[f"{p}.fc2.input_scale"].reshape(()), t[f"{p}.fc2.weight_scale"])
                      + t[f"{p}.fc2.bias"])
        np.testing.assert_array_equal(got("s")[:, :d], want_s)
        dev.launch(next(launches))  # LayerNorm, and after the last block the head
        want_h = ops.layernorm_forward(want_s, t[f"{p}.ln.gamma"], t[f"{p}.ln.beta"], plan.model.ln_eps)[0]
        if i < plan.model.blocks - 1:
            h = got("h")[:, :d]
            np.testing.assert_allclose(h, want_h, rtol=0, atol=64 * EPS32 * max(1.0, float(np.abs(want_h).max())))
    want = plan.product(op["head"], want_h)
    head_flips = int((np.abs(got("logits") - want).max(axis=1) > plan_tolerance(want)).sum())
    assert head_flips <= max(1, B // 500)
    assert flips <= max(1, B * H // 1000), f"{flips} GELU outputs quantized to the neighbouring integer"
    return {"images": B, "gelu_rounding_flips": flips, "gelu_values": B * H * plan.model.blocks, "head_flips": head_flips}


def plan_shape_width(plan) -> int:
    return int(plan.tensors["embed.weight"].shape[0])
