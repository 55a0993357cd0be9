"""The checks of the CUDA inference of Mixer models, shared by the emulator and GPU tests and the benchmark:
fp32 against the NumPy forward and ONNX Runtime, int8 against the plan's executor and the QDQ model, and
int8 launch by launch (every integer product exactly the plan's, from the device's own input)."""

from __future__ import annotations

import numpy as np
from rtcuda_checks import ort_logits

from litenet import forward, graph, ops
from litenet.export.checks import fp32_tolerance, plan_tolerance
from litenet.model import param_views
from litenet.runtime import int8_plan
from litenet.runtime.model_files import ModelFiles
from litenet.weights import load_model

EPS32 = float(np.finfo(np.float32).eps)
# A quantizer's input computed in another order (LayerNorm's sums, CUDA's tanhf against NumPy's tanh)
# differs by a few ulp; where x / s lies that close to a .5 step, the two round to neighbouring
# integers. 64 ulp of |x / s| (at least of 1) is the "close" of such a flip, with room.
FLIP_ULPS = 64


def numpy_logits(folder, images: np.ndarray, dtype=np.float32) -> np.ndarray:
    """The NumPy forward (the op list walked by litenet.forward) of a model folder, in `dtype`."""
    flat, model, _, _ = load_model(folder)
    params = param_views(np.asarray(flat, dtype), model)
    return forward.logits(graph.ops_of(model), params, images, dtype=dtype, batch_size=256)


def check_mixer_fp32(backend, folder, images: np.ndarray) -> dict:
    """Logits against the NumPy forward and ONNX Runtime's fp32 model within the computed fp32 tolerance
    (litenet.export.checks.fp32_tolerance: 4× the NumPy float32 forward's own error against float64)."""
    got = backend.predict(images)
    basis = _basis(images)
    z32, z64 = numpy_logits(folder, basis), numpy_logits(folder, basis, np.float64)
    tol = fp32_tolerance(z32, z64)
    z32, z64 = z32[:len(images)], z64[:len(images)]
    onnx_file = ModelFiles.locate(folder).fp32_onnx
    ort = ort_logits(onnx_file, images) if onnx_file is not None else z32  # a folder without ONNX: NumPy only
    out = {"images": len(images), "vs_numpy": float(np.abs(got - z32).max()), "vs_ort": float(np.abs(got - ort).max()),
           "vs_float64": float(np.abs(got - z64).max()), "tolerance": tol,
           "argmax_vs_numpy": float((got.argmax(1) == z32.argmax(1)).mean())}
    assert got.dtype == np.float32 and got.shape == z32.shape
    assert out["vs_numpy"] <= tol and out["vs_ort"] <= tol, out
    return out


def _basis(images: np.ndarray) -> np.ndarray:
    """The images a tolerance is measured on: at least 64 (on one image the error may be luckily small)."""
    if len(images) >= 64:
        return images
    import export_fixtures as fx
    return np.concatenate([images, fx.images(64 - len(images), seed=123)])


def int8_tolerance(plan: int8_plan.Plan, images: np.ndarray) -> tuple[float, np.ndarray, dict]:
    """How far two correct executions of the plan may differ on these images, computed as fp32_tolerance is.

    The integer products are exact in any correct execution; what may differ is the float32 rounding of
    everything between them (LayerNorm, GELU, the mean), and through it, where a value lies within
    rounding of a .5 step, a quantized activation by one. The plan executed with those float steps in
    float64 instead of float32 shows how far such rounding moves these images' logits: e = max|z32 − z64|.
    A kernel's rounding is of the same kind and size, so it may differ from the float32 plan by about
    2e; 4e leaves room for a different summation order. The floor is plan_tolerance (64 ulp of the
    largest logit), for images where no activation lies near a step.
    Returns (tolerance, the float32 plan's logits, figures).
    """
    basis = _basis(images)
    z32 = int8_plan.run_plan(plan, basis)
    # the product's output is float32 (dequantize_acc): carry it on in float64, so that everything
    # between the products — the residual stream included — is float64
    product64 = lambda op, x: plan.product(op, x).astype(np.float64)
    z64 = forward.logits(plan.ops, plan.tensors, basis, product=product64, dtype=np.float64)
    e = float(np.abs(z32 - z64).max())
    agreement = float((z32.argmax(1) == z64.argmax(1)).mean())
    figures = {"plan_float64_error": e, "plan_float64_argmax": agreement}
    return max(4.0 * e, plan_tolerance(z32)), z32[:len(images)], figures


def check_mixer_int8(backend, folder, images: np.ndarray) -> dict:
    """Logits against the plan's executor within int8_tolerance, with argmax agreement no worse than
    the plan's own against its float64 twin (less 1 %); and against ONNX Runtime on the QDQ model
    within that tolerance plus ONNX Runtime's own distance from the plan (they differ by its fused
    LayerNorm and tanh: docs/int8-plan.md)."""
    files = ModelFiles.locate(folder)
    plan = int8_plan.load_plan(files.plan)
    got = backend.predict(images)
    tol, ref, out = int8_tolerance(plan, images)
    ort = ort_logits(files.int8_onnx, images) if files.int8_onnx is not None else ref  # no QDQ model: the plan only
    ort_gap = float(np.abs(ort - ref).max())
    per_image = np.abs(got - ref).max(axis=1)
    out.update({"images": len(images), "vs_plan": float(per_image.max()), "tolerance": tol,
                "exact_vs_plan": float((per_image == 0).mean()), "vs_ort": float(np.abs(got - ort).max()),
                "ort_vs_plan": ort_gap, "argmax_vs_plan": float((got.argmax(1) == ref.argmax(1)).mean()),
                "argmax_vs_ort": float((got.argmax(1) == ort.argmax(1)).mean())})
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert out["vs_plan"] <= tol, out
    assert out["vs_ort"] <= tol + ort_gap, out
    assert out["argmax_vs_plan"] >= min(out["plan_float64_argmax"], 1.0) - 0.01 - 1.0 / len(images), out
    return out


# ---------------------------------------------------------------------------------------------
# int8 launch by launch


def decode(dev, run, op: graph.Op, batch: int) -> np.ndarray:
    """An int8 buffer of the run as the plan lays out op's output: (T, B, n) for patch tensors, (B, n) else."""
    role = run.program.outputs[op.name].split("/")[-1]
    raw = dev.download(run.output(op.name))
    n = op.shape[-1]
    if role in ("QT", "QA1"):  # token words: word (t/4)·N + col holds patches t … t+3 of column col
        words, cols = raw.shape
        q = raw.view(np.int8).reshape(words, cols, 4).transpose(0, 2, 1).reshape(words * 4, cols)[:op.shape[0]]
        return q.reshape(op.shape[0], batch, n)
    q = raw.view(np.int8).reshape(raw.shape[0], -1)[:, :n]
    return q.reshape(-1, batch, n) if op.tokens else q


def flips_near_steps(q: np.ndarray, x: np.ndarray, scale, magnitude: np.ndarray | None = None) -> int:
    """Compare q with quantize(x, scale): equal, or one apart where x / scale lies within rounding of a
    .5 step — FLIP_ULPS ulp of `magnitude`, the size of the terms x was summed from (default |x|; at
    least 1 step). Returns how many were one apart; anything else fails."""
    want = int8_plan.quantize(x, scale)
    diff = q.astype(int) - want
    s = np.float64(np.float32(scale))
    ratio = np.asarray(x, np.float64) / s
    size = np.abs(ratio) if magnitude is None else np.asarray(magnitude, np.float64) / s
    near = np.abs(np.abs(ratio - np.floor(ratio)) - 0.5) <= FLIP_ULPS * EPS32 * np.maximum(1.0, size)
    bad = (diff != 0) & ~((np.abs(diff) == 1) & near)
    assert not bad.any(), f"{int(bad.sum())} quantized values differ beyond rounding, e.g. {q[bad][:5]} vs {want[bad][:5]}"
    return int((diff != 0).sum())


def layernorm_magnitude(s: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """The size of the terms LayerNorm's y = (s − μ)·rstd·γ + β is made of, per element: (|n| + |μ|·rstd
    + 1)·|γ| + |β|. Another summation order moves μ, and so y, by ulps of these, not of |y| (which
    cancellation can make far smaller)."""
    s64 = np.asarray(s, np.float64)
    mu = s64.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((s64 - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (np.abs(s64 - mu) * rstd + np.abs(mu) * rstd + 1.0) * np.abs(gamma) + np.abs(beta)


def check_mixer_int8_layers(backend, folder, images: np.ndarray) -> dict:
    """Run the int8 launches one at a time and hold each to the plan, given the device's own inputs:
    the patches' quantization, every integer product (with its residual join, or the logits) and the
    pooling's quantization bit for bit; a quantization after LayerNorm or GELU up to flips at .5 steps."""
    plan = int8_plan.load_plan(ModelFiles.locate(folder).plan)
    t, dev, B = plan.tensors, backend.dev, len(images)
    run = backend.prepare(B)
    dev.upload(run.pixels, images.reshape(B, 3072))
    by_name = {op.name: op for op in plan.ops}
    flips, values = 0, 0
    assert [len(region.calls) for region in run.program.regions] == [1] * len(run.launches)
    for region, launch in zip(run.program.regions, run.launches):
        op, out = by_name[region.ops[0]], by_name[region.ops[-1]]  # the op it computes, the op whose output it writes
        stream_before = dev.download(run.tensor("H")) if out.kind == "residual" else None
        dev.launch(launch)
        scale = lambda reader: t[f"{reader}.input_scale"].reshape(())
        nxt = [r for r in graph.consumers(plan.ops).get(out.name, []) if r.kind in graph.PRODUCTS]
        if op.kind == "patches":
            x = ops.patchify(ops.pixels_to_float(images), op.attrs["patch"], op.attrs["input_shift"],
                             op.attrs["input_scale"])
            np.testing.assert_array_equal(decode(dev, run, out, B), int8_plan.quantize(x, scale(nxt[0].name)))
        elif op.kind == "layernorm" and nxt:
            s = dev.download(run.tensor("H")).reshape(-1, B, op.shape[-1])
            ln = (t[f"{op.name}.gamma"], t[f"{op.name}.beta"], op.attrs["eps"])
            y = ops.layernorm_forward(s, *ln)[0]
            flips += flips_near_steps(decode(dev, run, out, B), y, scale(nxt[0].name), layernorm_magnitude(s, *ln))
            values += y.size
        elif op.kind == "layernorm":  # the final one, in float for the mean
            s = dev.download(run.tensor("H")).reshape(-1, B, op.shape[-1])
            ln = (t[f"{op.name}.gamma"], t[f"{op.name}.beta"], op.attrs["eps"])
            y = ops.layernorm_forward(s, *ln)[0]
            got = dev.download(run.tensor("Y")).reshape(y.shape)
            assert np.all(np.abs(got - y) <= FLIP_ULPS * EPS32 * layernorm_magnitude(s, *ln)), op.name
        elif op.kind == "mean_tokens":
            y = dev.download(run.tensor("Y")).reshape(-1, B, by_name[op.inputs[0]].shape[-1])
            np.testing.assert_array_equal(decode(dev, run, out, B),
                                          int8_plan.quantize(ops.mean_tokens_forward(y), scale(nxt[0].name)))
        else:  # a product, from the quantized input the device wrote
            y = plan.integer_product(op, decode(dev, run, by_name[op.inputs[0]], B))
            if out.kind == "gelu":
                a = ops.gelu_forward(y)  # tanh's few-ulp differences scale with u, not with GELU(u) (≈ 0 for u < 0)
                flips += flips_near_steps(decode(dev, run, out, B), a, scale(nxt[0].name), np.abs(a) + np.abs(y))
                values += y.size
            elif out.kind == "residual":
                want = stream_before.reshape(y.shape) + y
                np.testing.assert_array_equal(dev.download(run.tensor("H")).reshape(y.shape), want, err_msg=op.name)
            else:  # the embedding into the stream, or the head into the logits
                got = dev.download(run.output(out.name)).reshape(y.shape)
                np.testing.assert_array_equal(got, y, err_msg=op.name)
    assert flips <= max(2, values // 1000), f"{flips} of {values} quantized values flipped at a .5 step"
    return {"images": B, "launches": len(run.launches), "flips": flips, "quantized_values": values}


# ---------------------------------------------------------------------------------------------
# Model folders


def plan_only_mixer(folder, model, seed: int = 0):
    """A Mixer folder with weights, config and an int8 plan but no ONNX (nearest rounding, percentile
    calibration on 64 synthetic images, no bias correction): seconds at litenet-mixer's size, where
    the whole export takes minutes on a 2-core machine."""
    import export_fixtures as fx

    from litenet.export import int8_plan as plan_export
    from litenet.export import refine
    from litenet.export import scales as sc

    params = fx.write_model(folder, model, seed=seed)
    calib = fx.images(64, seed=6)
    scales = sc.calibrate(params, model, calib, "percentile")
    weights = refine.int8_weights(params, model, scales, calib, int8_plan.WEIGHT_MAX, rounding="nearest",
                                  bias_correction=False)
    plan_export.write_plan(folder / int8_plan.PLAN_FILE, plan_export.plan_tensors(params, model, scales, weights),
                           plan_export.plan_metadata(model, scales, "test", list(fx.CLASSES), weights))
    return folder


def export_mixer(folder, model, calib: int = 256, seed: int = 0, quick: bool = False):
    """A Mixer folder as litenet train + litenet export --int8 write it (tiny_params' weights, synthetic
    calibration images): weights, config, ONNX fp32 and QDQ int8, and the int8 plan. `quick`: weights
    rounded to nearest and no bias correction (GPTQ and the correction take minutes at litenet-mixer's size;
    the plan's format and arithmetic are the same)."""
    import export_fixtures as fx
    import pytest

    from litenet.export.pipeline import ExportOptions, export_model

    fx.write_model(folder, model, seed=seed)
    ds = fx.fake_dataset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
        options = ExportOptions(int8=True, calib=calib, engine=False, rounding="nearest" if quick else "gptq",
                                bias_correction=not quick)
        export_model(folder, options=options, log=lambda line: None)
    return folder
