"""ONNX -> IR: numpy forward vs onnxruntime, batch resolution, and clear errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oputil import max_rel_err, ort_outputs, single_op_model

from poet_edge import frontend, reference
from poet_edge.errors import PoetError


@pytest.mark.parametrize("batch", [1, 3])
def test_mlp_forward_matches_onnxruntime(mlp_path, batch):
    g = frontend.load(mlp_path, batch)
    x = np.random.default_rng(0).standard_normal((batch, 1, 8, 8)).astype(np.float32)
    ours = reference.run(g, {"input": x})["logits"]
    (theirs,) = ort_outputs(onnx.load(str(mlp_path)), {"input": x})
    assert ours.shape == (batch, 10)
    assert max_rel_err(ours, theirs) <= 1e-5


@pytest.mark.parametrize(
    "op,shapes,attrs",
    [
        ("Gemm", [(3, 4), (5, 4), (5,)], {"transB": 1, "alpha": 0.7, "beta": 0.3}),
        ("MatMul", [(3, 4), (4, 2)], {}),
        ("Add", [(2, 3), (3,)], {}),
        ("Relu", [(4, 4)], {}),
        ("Flatten", [(2, 3, 2)], {"axis": 1}),
    ],
)
def test_single_op_forward_matches_onnxruntime(op, shapes, attrs):
    model = single_op_model(op, shapes, attrs)
    g = frontend.to_ir(model)
    x = np.random.default_rng(1).standard_normal(shapes[0]).astype(np.float32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    (theirs,) = ort_outputs(model, {"x": x})
    assert max_rel_err(ours, theirs) <= 1e-5


def test_reshape_with_constant_shape():
    model = single_op_model("Reshape", [(2, 6), (2,)], consts={1: np.array([0, -1], np.int64)})
    g = frontend.to_ir(model)
    assert g.shape(g.outputs[0]) == (2, 6)


def test_initializers_are_parameters(mlp_path):
    g = frontend.load(mlp_path)
    assert set(g.params) == {f"fc{i}.{k}" for i in range(3) for k in ("weight", "bias")}
    assert g.trainable == frozenset(g.params)


def _model(nodes, inputs, outputs, inits=()):
    m = helper.make_model(
        helper.make_graph(nodes, "m", inputs, outputs, list(inits)),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    return m


def test_unsupported_op_names_op_node_and_supported_set():
    m = _model(
        [helper.make_node("Celu", ["x"], ["y"], name="my_celu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    with pytest.raises(PoetError, match=r"node 'my_celu': unsupported op Celu; supported: .*Gemm.*Relu"):
        frontend.to_ir(m)


def test_dynamic_non_batch_dimension_is_an_error():
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "features"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "features"])],
    )
    with pytest.raises(PoetError, match=r"input 'x': dimension 1 \('features'\) is dynamic"):
        frontend.to_ir(m)


def test_batch_resolves_first_dimension():
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
    )
    assert frontend.to_ir(m, batch=7).shape("y") == (7, 5)


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"this is not protobuf \x00\xff")
    with pytest.raises(PoetError, match="not a valid ONNX model"):
        frontend.load(bad)


def test_missing_file(tmp_path):
    with pytest.raises(PoetError, match="no such file"):
        frontend.load(tmp_path / "nope.onnx")
