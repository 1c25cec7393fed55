"""Shape-subgraph folding in the frontend and float constants as frozen parameters."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oputil import c_vs_reference, fd_check, load_model, max_rel_err, mse_training, ort_outputs, rel_close

from poet_edge import reference
from poet_edge.errors import PoetError
from poet_edge.ir import Role

I64 = np.int64
FOLD_ONLY = {"Shape", "Gather", "Unsqueeze", "Squeeze", "ConstantOfShape", "Cast", "Constant"}


def make(nodes, inits, in_shape=("N", 2, 3, 4), out_shape=None, opset=13):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return [
        numpy_helper.from_array((0.3 * rng.standard_normal((24, 5))).astype(np.float32), "w"),
        numpy_helper.from_array((0.3 * rng.standard_normal(5)).astype(np.float32), "b"),
    ]


def view_model():
    """What torch exports for ``x.view(x.size(0), -1)`` followed by a Linear layer (opset 13)."""
    k = helper.make_node
    nodes = [
        k("Shape", ["x"], ["s"]),
        const("zero", np.array(0, I64)),
        k("Gather", ["s", "zero"], ["n"], axis=0),
        const("ax0", np.array([0], I64)),
        k("Unsqueeze", ["n", "ax0"], ["n1"]),
        const("minus1", np.array([-1], I64)),
        k("Concat", ["n1", "minus1"], ["shape"], axis=0),
        k("Reshape", ["x", "shape"], ["flat"]),
        k("Gemm", ["flat", "w", "b"], ["y"]),
    ]
    return make(nodes, weights(), out_shape=["N", 5])


def arithmetic_model():
    """Opset 11 flavour: Unsqueeze/Squeeze with axes attributes, Cast, Slice of a shape, int Mul and Div,
    ConstantOfShape; the target shape is (N, 2*3*4 // 1)."""
    k = helper.make_node
    nodes = [
        k("Shape", ["x"], ["s"]),
        const("starts", np.array([1], I64)),
        const("ends", np.array([4], I64)),
        k("Slice", ["s", "starts", "ends"], ["tail"]),  # (2, 3, 4)
        const("i0", np.array([0], I64)),
        const("i1", np.array([1], I64)),
        const("i2", np.array([2], I64)),
        k("Gather", ["tail", "i0"], ["d1"]),
        k("Gather", ["tail", "i1"], ["d2"]),
        k("Gather", ["tail", "i2"], ["d3"]),
        k("Mul", ["d1", "d2"], ["d12"]),
        k("Mul", ["d12", "d3"], ["d123"]),
        k("ConstantOfShape", ["i1"], ["one"], value=numpy_helper.from_array(np.array([1], I64))),
        k("Div", ["d123", "one"], ["feat"]),
        k("Cast", ["feat"], ["feat64"], to=TensorProto.INT64),
        k("Shape", ["x"], ["s2"]),
        k("Gather", ["s2", "i0"], ["n"]),
        k("Squeeze", ["n"], ["n0"], axes=[0]),
        k("Unsqueeze", ["n0"], ["n1"], axes=[0]),
        k("Concat", ["n1", "feat64"], ["shape"], axis=0),
        k("Reshape", ["x", "shape"], ["flat"]),
        k("Gemm", ["flat", "w", "b"], ["y"]),
    ]
    return make(nodes, weights(1), out_shape=["N", 5], opset=11)


@pytest.mark.parametrize("builder", [view_model, arithmetic_model])
def test_shape_subgraph_folds_and_matches_onnxruntime(builder):
    model = builder()
    g = load_model(model, batch=3)
    assert [n.op for n in g.nodes] == ["Reshape", "Gemm"]
    assert g.nodes[0].attrs["shape"] in ((3, -1), (3, 24))
    x = np.random.default_rng(0).standard_normal((3, 2, 3, 4)).astype(np.float32)
    ours = reference.run(g, {"x": x})["y"]
    assert max_rel_err(ours, ort_outputs(model, {"x": x})[0]) <= 1e-5
    tg = mse_training(g)
    assert tg.trainable == {"w", "b"}
    assert fd_check(tg, x.astype(np.float64), np.random.default_rng(1).standard_normal((3, 5))) <= 1e-6


def test_folded_view_model_runs_in_c(tmp_path):
    onnx.save(view_model(), tmp_path / "m.onnx")
    check_c(tmp_path)


def check_c(tmp_path):
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        tmp_path / "m.onnx", tmp_path / "out", steps=3, batch=2, lr=0.2
    )
    assert rel_close(c_losses, ref_losses, 1e-5)
    for k, v in ref_params.items():
        assert rel_close(c_params[k], v, 1e-5), k


def gelu_model():
    """Erf-based GELU as exported before opset 20, plus a positional-embedding Constant and a float
    initializer expression that must stay trainable."""
    k = helper.make_node
    rng = np.random.default_rng(2)
    pos = (0.1 * rng.standard_normal((3, 4))).astype(np.float32)
    nodes = [
        const("pos", pos),
        k("Add", ["x", "pos"], ["xp"]),
        const("sqrt2", np.array(math.sqrt(2.0), np.float32)),
        k("Div", ["xp", "sqrt2"], ["xs"]),
        k("Erf", ["xs"], ["e"]),
        const("one", np.array(1.0, np.float32)),
        k("Add", ["e", "one"], ["e1"]),
        k("Mul", ["xp", "e1"], ["m"]),
        const("half", np.array(0.5, np.float32)),
        k("Mul", ["m", "half"], ["g"]),
        k("Add", ["ga", "gb"], ["gab"]),
        k("Mul", ["g", "gab"], ["y"]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), n) for n in ("ga", "gb")]
    return make(nodes, inits, in_shape=["N", 3, 4], out_shape=["N", 3, 4])


def test_float_constants_become_frozen_parameters(tmp_path):
    model = gelu_model()
    g = load_model(model, batch=2)
    for name in ("pos", "sqrt2", "one", "half"):
        assert name in g.params and g.tensor(name).role == Role.PARAMETER
        assert name not in g.trainable
    assert g.trainable == {"ga", "gb"}  # float initializers are never folded, even Add(ga, gb)
    assert "gab" in {o for n in g.nodes for o in n.outputs}
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": x})["y"], ort_outputs(model, {"x": x})[0]) <= 1e-5
    tg = mse_training(g)
    assert {n.inputs[0] for n in tg.nodes if n.op == "SGDUpdate"} == {"ga", "gb"}
    assert fd_check(tg, x.astype(np.float64), np.random.default_rng(4).standard_normal((2, 3, 4))) <= 1e-6
    onnx.save(model, tmp_path / "m.onnx")
    check_c(tmp_path)


# ---- refusals ----
def test_shape_value_into_unfoldable_op_is_refused():
    k = helper.make_node
    nodes = [
        k("Shape", ["x"], ["s"]),
        const("zero", np.array(0, I64)),
        k("Gather", ["s", "zero"], ["n"]),
        const("start", np.array(0, I64)),
        const("step", np.array(1, I64)),
        k("Range", ["start", "n", "step"], ["r"]),
        k("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        k("Add", ["x", "rf"], ["y"]),
    ]
    model = make(nodes, [], in_shape=["N"], out_shape=["N"])
    with pytest.raises(
        PoetError,
        match=r"node 'Range_5': unsupported op Range \(its inputs are compile-time "
        r"constants, but Range is not evaluated at compile time",
    ):
        load_model(model, batch=4)


def test_fold_only_op_on_runtime_data_is_refused():
    k = helper.make_node
    nodes = [k("Relu", ["x"], ["r"]), k("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    model = make(nodes, [], in_shape=["N", 3], out_shape=["N", 3], opset=11)
    with pytest.raises(
        PoetError,
        match=r"node 'Cast_1' \(Cast\): supported only inside a shape "
        r"computation evaluated at compile time, but input 'r' is computed "
        r"at run time",
    ):
        load_model(model)


@pytest.mark.parametrize("table_is_initializer", [True, False])
def test_float_gather_runs(table_is_initializer):
    """Gather on float data was refused before issue 54; now an op (tests/test_ops_new.py checks it fully)."""
    k = helper.make_node
    table = numpy_helper.from_array(np.ones((10, 4), np.float32), "table")
    idx = numpy_helper.from_array(np.array([1, 2, 3], I64), "idx")
    if table_is_initializer:  # an embedding lookup
        nodes, inits = [k("Gather", ["table", "idx"], ["e"]), k("Add", ["x", "e"], ["y"])], [table, idx]
        in_shape = [3, 4]
    else:  # gathering rows of run-time data
        nodes, inits = [k("Relu", ["x"], ["r"]), k("Gather", ["r", "idx"], ["y"])], [idx]
        in_shape = [10, 4]
    model = make(nodes, inits, in_shape=in_shape, out_shape=[3, 4])
    g = load_model(model)
    assert "Gather" in {n.op for n in g.nodes}
    assert ("table" in g.trainable) == table_is_initializer  # an embedding table is trained
    x = np.random.default_rng(0).standard_normal(in_shape).astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": x})["y"], ort_outputs(model, {"x": x})[0]) <= 1e-6


def test_fold_only_ops_never_reach_the_graph():
    g = load_model(arithmetic_model(), batch=2)
    assert not FOLD_ONLY & {n.op for n in g.nodes}
