"""The fp32 ONNX model is the NumPy forward: every preset shape, any batch size, checker-clean, opset 13."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import export_fixtures as fx
from litenet.export import checks, evaluate, onnx_graph
from litenet.export.onnx_fp32 import build_fp32
from litenet.train import network


@pytest.fixture(params=sorted(fx.SHAPES))
def case(request):
    model = fx.SHAPES[request.param]
    params = fx.tiny_params(model, seed=3)
    return model, params, build_fp32(params, model, {"preset": request.param, "class_names": list(fx.CLASSES)})


def test_equals_numpy_forward_within_computed_tolerance(case):
    model, params, proto = case
    x = fx.images(50, seed=4)
    z = evaluate.logits(evaluate.session(proto), x)
    result = checks.fp32_agreement(z, params, model, x)
    assert result["max_abs_diff"] <= result["tolerance"], result
    assert result["argmax_agreement"] == 1.0


def test_checker_accepts_it_and_opset_is_pinned(case):
    _, _, proto = case
    onnx_graph.check(proto)  # raises on any violation, shape inference included
    assert proto.ir_version == onnx_graph.IR_VERSION == 7
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", 13)]
    ops = {n.op_type for n in proto.graph.node}
    assert not ops & {"LayerNormalization", "Gelu"}  # opset 17 / 20: TensorRT 8.6 and old ORT lack them


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_dynamic_batch(case, batch):
    model, params, proto = case
    x = fx.images(batch, seed=batch)
    z = evaluate.logits(evaluate.session(proto), x)
    assert z.shape == (batch, model.classes)
    np.testing.assert_allclose(z, network.forward(params, x, model).z, rtol=0, atol=1e-4)


def test_input_output_and_metadata(case):
    _, _, proto = case
    (inp,), (out,) = proto.graph.input, proto.graph.output
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert (inp.name, dims, inp.type.tensor_type.elem_type) == ("images", ["batch", 32, 32, 3], onnx.TensorProto.FLOAT)
    assert out.name == "logits"
    meta = onnx_graph.read_metadata(proto)
    assert meta["class_names"] == '["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]'
    assert meta["quantization"] == "none"


def test_fp32_tolerance_is_derived_from_the_reference_error():
    z64 = np.array([[10.0, -2.0]])
    z32 = z64 + np.array([[3e-6, 0.0]])
    assert checks.fp32_tolerance(z32, z64) == pytest.approx(1.2e-5)  # 4 × the float32 reference's own error
    assert checks.fp32_tolerance(z64, z64) == pytest.approx(8 * checks.EPS32 * 10)  # floor: 8 ulp of max |z|
