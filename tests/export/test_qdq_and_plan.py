"""The QDQ model runs on ONNX Runtime's int8 kernels, and the NumPy plan executor reproduces it."""

from __future__ import annotations

import numpy as np
import pytest

import export_fixtures as fx
import onnx
import onnxruntime as ort

from litenet.export import checks, evaluate, int8_plan, onnx_graph, qdq, refine
from litenet.export import scales as sc
from litenet.graph import products
from litenet.runtime import int8_plan as plan_rt

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module", params=sorted(fx.SHAPES))
def built(request, tmp_path_factory):
    model = fx.SHAPES[request.param]
    params = fx.tiny_params(model, seed=5)
    calib = fx.images(128, seed=6)
    scales = sc.calibrate(params, model, calib, "percentile")
    weights = refine.int8_weights(params, model, scales, calib, plan_rt.WEIGHT_MAX)  # as litenet export does
    proto = qdq.build_qdq(params, model, scales, {"preset": request.param}, weights)
    path = tmp_path_factory.mktemp("plan") / plan_rt.PLAN_FILE
    int8_plan.write_plan(path, int8_plan.plan_tensors(params, model, scales, weights),
                         int8_plan.plan_metadata(model, scales, request.param, list(fx.CLASSES), weights))
    return model, params, scales, proto, plan_rt.load_plan(path)


def test_qdq_model_is_valid_and_only_uses_opset_13(built):
    _, _, _, proto, _ = built
    onnx_graph.check(proto)
    ops = {n.op_type for n in proto.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "MatMul", "Sum"} <= ops
    assert not ops & {"LayerNormalization", "Gelu", "MatMulInteger", "QLinearMatMul"}


def test_activation_quantizers_are_symmetric_int8(built):
    _, _, _, proto, _ = built
    inits = {t.name: t for t in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            zero_point = inits[node.input[2]]
            assert zero_point.data_type == 3  # INT8: TensorRT takes nothing else
            assert not np.any(np.frombuffer(zero_point.raw_data, np.int8))


def test_onnx_runtime_runs_every_matmul_as_int8(built):
    model, _, _, proto, _ = built
    report = evaluate.kernel_report(proto)
    assert report["float_matmuls_after_dq"] == []
    assert report["ops"].get("MatMulIntegerToFloat", 0) == len(products(model))
    assert "DequantizeLinear" not in report["ops"]  # no weight is dequantized per call


def test_plan_executor_matches_onnx_runtime(built):
    model, _, _, proto, plan = built
    x = fx.images(300, seed=8)
    z_onnx = evaluate.logits(evaluate.session(proto), x)
    result = checks.plan_agreement(plan_rt.run_plan(plan, x), z_onnx)
    assert result["argmax_agreement"] >= 0.99, result
    if model.family == "mlp":  # tens of quantized activations an image: a flip (a float-ulp from a .5 tie) is rare
        assert result["images_with_rounding_flips"] <= 3, result
    # A Mixer quantizes T·d values per layer and image: some image almost always has an activation
    # that ONNX Runtime's LayerNorm puts one ulp on the other side of a .5 step; the products
    # themselves are held exactly by test_every_int8_product_is_onnx_runtimes_from_the_same_input.


def _to_plan_layout(op, value: np.ndarray) -> np.ndarray:
    """An ONNX tensor (N, …) in the plan's layout: (N, T, d) → (T, N, d); a token product's (N, d, T) → (T, N, d)."""
    if value.ndim == 2:
        return value
    transposed = op.kind == "token_linear"
    return value.transpose(2, 0, 1) if transposed else value.transpose(1, 0, 2)


def test_every_int8_product_is_onnx_runtimes_from_the_same_input(built):
    """Fed the very input ONNX Runtime quantized, each plan product gives ONNX Runtime's output up to
    float32 rounding: the integer arithmetic (scales, layouts, per-channel axes, biases) is the same."""
    model, _, _, proto, plan = built
    x = fx.images(40, seed=9)
    quantizes = {n.output[0]: n.input[0] for n in proto.graph.node if n.op_type == "QuantizeLinear"}
    wanted = {}
    for op in products(model):
        wanted[op.name] = (quantizes[f"{op.name}.input.quantized"], onnx_graph.OUTPUT_NAME if op.name == "head"
                           else f"{op.name}.out")
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    for pair in wanted.values():
        for name in pair:
            if name != onnx_graph.OUTPUT_NAME:
                probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the QDQ graph as written
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"images": x.astype(np.float32) / 255})))
    for op in products(model):
        x_name, y_name = wanted[op.name]
        ours = plan.product(op, _to_plan_layout(op, got[x_name]))
        theirs = _to_plan_layout(op, got[y_name])
        k = op.params[0].shape[0]
        bound = 4 * k * EPS32 * float(np.abs(theirs).max() + 1)  # float32 sums of k dequantized products
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound, err_msg=op.name)


def test_plan_holds_out_in_int8_weights_and_per_channel_scales(built):
    model, params, scales, _, plan = built
    w = plan.tensors["embed.weight"]
    assert w.dtype == np.int8 and w.shape == (model.width, products(model)[0].params[0].shape[0])
    assert np.abs(w).max() == plan_rt.WEIGHT_MAX  # every column reaches the edge of its own scale
    assert plan.tensors["embed.weight_scale"].shape == (model.width,)
    assert plan.tensors["head.input_scale"][0] == np.float32(scales.activation["head.input"])
    assert plan.metadata["format"] == plan_rt.PLAN_FORMAT


def test_weight_scales_minimise_the_squared_error_per_column():
    w = np.random.default_rng(0).standard_normal((3000, 7)).astype(np.float32)
    w[:, 3] = 0  # a dead column must not divide by zero
    q, s = qdq.quantize_weight(w)
    assert q.dtype == np.int8 and np.abs(q).max() <= plan_rt.WEIGHT_MAX
    assert s[3] == 1.0 and not q[:, 3].any()
    live = [0, 1, 2, 4, 5, 6]
    s_max = np.maximum(np.abs(w).max(0), 1e-30) / plan_rt.WEIGHT_MAX
    err = ((q * s - w) ** 2).sum(0)
    err_max = ((np.clip(np.rint(w / s_max), -64, 64) * s_max - w) ** 2).sum(0)
    assert np.all(err[live] <= err_max[live] + 1e-6)  # never worse than the plain max|W| / 64 scale
    assert np.all(s[live] < s_max[live])  # 3,000 Gaussian weights: clipping the extreme few pays
    inside = np.abs(w) <= s * plan_rt.WEIGHT_MAX  # weights inside the range round to within half a step
    assert np.all((np.abs(q * s - w) <= s / 2 + 1e-6)[inside])


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 127.5, 300.0, -128.4, -129.0, -1e9], np.float32)
    np.testing.assert_array_equal(plan_rt.quantize(x, 1.0), [0, 2, 2, 0, -2, 127, 127, 127, -128, -128, -128])


def test_int_matmul_is_exact_at_the_int32_extremes():
    x = np.full((2, 3072), -128, np.int8)
    w = np.full((5, 3072), 64, np.int8)
    assert np.all(plan_rt.int_matmul(x, w) == -128 * 64 * 3072)


def test_loading_a_foreign_file_is_refused(tmp_path):
    from safetensors.numpy import save_file

    from litenet.errors import LiteNetError

    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "other.safetensors"), metadata={"format": "nope"})
    with pytest.raises(LiteNetError, match="not a LiteNet int8 plan"):
        plan_rt.load_plan(tmp_path / "other.safetensors")
    with pytest.raises(LiteNetError, match="no int8 plan"):
        plan_rt.load_plan(tmp_path / "missing.safetensors")


def test_damaged_plan_metadata_is_refused():
    from litenet.errors import LiteNetError

    with pytest.raises(LiteNetError, match="model description is damaged"):
        plan_rt.plan_from_tensors({}, {"format": plan_rt.PLAN_FORMAT, "model": "{not json"})
