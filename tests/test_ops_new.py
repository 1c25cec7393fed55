"""Ops added for models users bring (issue 54): HardSigmoid, HardSwish, MaxPool ceil_mode=1, Expand, Gather on
float data, Squeeze/Unsqueeze on run-time values, Equal and Where. Gradients vs float64 finite differences,
forward vs onnxruntime, generated C vs the numpy reference (host, sanitizers), one model on qemu-cortex-m4
bit-identical to the host, and `poet inspect` / `compile` / `run` on the command line."""

from __future__ import annotations

import numpy as np
import onnx
import oputil
import pytest
from conftest import need_tools
from onnx import TensorProto, helper, numpy_helper
from oputil import c_vs_reference, fd_check, load_model, max_rel_err, mse_training, ort_outputs, rel_close
from oputil import single_op_model as one_op

from poet_edge import frontend, ops, reference
from poet_edge.errors import PoetError

I64 = np.int64
LR = 0.2  # large enough that a 0.1% error in a C gradient shows in the parameters after 3 steps
POOL = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}


def case(op, shapes, attrs=None, consts=None, opset=17, scale=1.0, fd_scale=1.0):
    """``scale`` spreads parameters for the onnxruntime check (every branch of a piecewise op), ``fd_scale``
    for finite differences."""
    return pytest.param(op, shapes, attrs or {}, consts or {}, opset, scale, fd_scale, id=f"{op}-{len(IDS)}")


IDS: list[str] = []
CASES = []
for args in [
    ("HardSigmoid", [(3, 7)], None, None, 17, 4.0, 3.0),
    ("HardSigmoid", [(2, 3, 4)], {"alpha": 0.25, "beta": 0.6}, None, 17, 4.0, 3.0),
    ("HardSigmoid", [(2, 5)], {"alpha": 1 / 6, "beta": 0.5}, None, 7, 5.0, 3.0),  # torch's export
    ("HardSwish", [(3, 7)], None, None, 17, 4.0, 3.0),
    ("HardSwish", [(2, 3, 4)], None, None, 14, 6.0, 3.0),
    ("MaxPool", [(1, 2, 8, 8)], POOL, None, 17, 1.0, 1.0),  # ceil: 4x4 instead of 3x3
    (
        "MaxPool",
        [(2, 2, 5, 5)],
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
        None,
        17,
        1.0,
        1.0,
    ),
    ("MaxPool", [(1, 3, 6, 7)], {**POOL, "pads": [1, 1, 1, 1]}, None, 17, 1.0, 1.0),
    ("MaxPool", [(1, 2, 10)], {"kernel_shape": [3], "strides": [3], "ceil_mode": 1}, None, 17, 1.0, 1.0),
    ("MaxPool", [(1, 2, 7, 7)], POOL, None, 17, 1.0, 1.0),  # ceil_mode=1 with the floor size
    (
        "MaxPool",
        [(1, 1, 2, 2)],
        {"kernel_shape": [1, 1], "strides": [2, 2], "ceil_mode": 1},
        None,
        17,
        1.0,
        1.0,
    ),
    ("Expand", [(3, 1), (3,)], None, {1: np.array([2, 3, 4], I64)}, 17, 1.0, 1.0),
    ("Expand", [(2, 1, 4), (2,)], None, {1: np.array([3, 1], I64)}, 17, 1.0, 1.0),  # bidirectional
    ("Expand", [(2, 3), (2,)], None, {1: np.array([2, 3], I64)}, 17, 1.0, 1.0),
    ("Gather", [(5, 3), (4,)], None, {1: np.array([4, 0, -1, 0], I64)}, 17, 1.0, 1.0),  # repeats, negative
    ("Gather", [(2, 5, 3), (2, 2)], {"axis": 1}, {1: np.array([[1, -2], [0, 1]], I64)}, 17, 1.0, 1.0),
    ("Gather", [(2, 3, 4), ()], {"axis": -1}, {1: np.array(2, I64)}, 17, 1.0, 1.0),  # scalar: drops the axis
    ("Gather", [(4, 3), (3,)], {"axis": 1}, {1: np.array([2, 2, 2], np.int32)}, 17, 1.0, 1.0),
    ("Squeeze", [(2, 1, 3, 1)], {"axes": [1]}, None, 11, 1.0, 1.0),
    ("Squeeze", [(2, 1, 3, 1), (1,)], None, {1: np.array([-1], I64)}, 13, 1.0, 1.0),
    ("Squeeze", [(1, 3, 1)], None, None, 13, 1.0, 1.0),  # no axes: every size-1 dim
    ("Unsqueeze", [(2, 3)], {"axes": [0, 3]}, None, 11, 1.0, 1.0),
    ("Unsqueeze", [(2, 3), (2,)], None, {1: np.array([-1, 1], I64)}, 13, 1.0, 1.0),
]:
    IDS.append(args[0])
    CASES.append(case(*args))


def _model(op, shapes, attrs, consts, opset, scale):
    return one_op(op, shapes, attrs, consts, opset=opset, scale=scale)


def _data(tg, shape, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(tg.shape("labels"))


@pytest.mark.parametrize("op,shapes,attrs,consts,opset,scale,fd_scale", CASES)
def test_gradient_vs_finite_differences(op, shapes, attrs, consts, opset, scale, fd_scale):
    tg = mse_training(load_model(_model(op, shapes, attrs, consts, opset, fd_scale)))
    assert op in {n.op for n in tg.nodes}
    x, y = _data(tg, shapes[0])
    assert fd_check(tg, fd_scale * x, y) <= 1e-6


@pytest.mark.parametrize("op,shapes,attrs,consts,opset,scale,fd_scale", CASES)
def test_forward_vs_onnxruntime(op, shapes, attrs, consts, opset, scale, fd_scale):
    model = _model(op, shapes, attrs, consts, opset, scale)
    g = load_model(model)
    x = (scale * np.random.default_rng(3).standard_normal(shapes[0])).astype(np.float32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    (theirs,) = ort_outputs(model, {"x": x})
    assert ours.shape == theirs.shape
    assert max_rel_err(ours, theirs) <= 1e-6


# ---- the piecewise derivatives at and near their kinks (torch's convention) ----
def test_hard_activation_gradients_at_the_kinks():
    x = np.array([-4, -3, -2.5, 0, 2.5, 3, 4], np.float32)
    dy = np.ones_like(x)
    hs = ops.get("HardSwishGrad").forward([x, dy], {})[0]
    np.testing.assert_array_equal(hs[[0, 1, 3, 5, 6]], [0, 0, 0.5, 1, 1])  # x = -3 -> 0, x = 3 -> 1
    np.testing.assert_allclose(hs[[2, 4]], [-1 / 3, 4 / 3], rtol=1e-6)
    hsig = ops.get("HardSigmoidGrad").forward([x, dy], {"alpha": 1 / 6, "beta": 0.5})[0]
    np.testing.assert_array_equal(hsig, np.float32([0, 0, 1 / 6, 1 / 6, 1 / 6, 0, 0]))


def test_maxpool_ceil_output_size_and_clipped_windows():
    """8x8, k3 s2: floor 3x3, ceil 4x4; the last window holds 2 columns, never starts past the input."""
    x = np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8)
    y = ops.get("MaxPool").forward([x], POOL)[0]
    assert y.shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(
        y[0, 0, :, 3], [23, 39, 55, 63]
    )  # column 7 (clipped window) of rows 2,4,6,7
    dx = ops.get("MaxPoolGrad").forward([x, np.ones_like(y)], POOL)[0]
    assert dx.sum() == 16 and dx[0, 0, 7, 7] == 1
    assert ops.get("MaxPool").infer([(1, 1, 7, 7)], {**POOL, "pads": [0, 0, 1, 1]}) == [(1, 1, 4, 4)]
    assert ops.get("MaxPool").infer([(1, 1, 6, 6)], {**POOL, "pads": [0, 0, 1, 1]}) == [(1, 1, 3, 3)]


def test_gather_grad_adds_repeated_indices_in_order():
    dy = np.array([[1e8], [1.0], [-1e8]], np.float32)  # float32: (0 + 1e8 + 1) - 1e8 = 0, not 1
    attrs = {"indices": (0, 0, 0), "indices_shape": (3,), "shape": (2, 1)}
    dx = ops.get("GatherGrad").forward([dy], attrs)[0]
    np.testing.assert_array_equal(dx, [[0.0], [0.0]])


# ---- Equal and Where (attention-mask patterns) ----
def mask_model(opset=17):
    """r = Relu(x + p); s = Where(Equal(r, 0), q, r) * w; y = Where(mask, s, -3): Equal on run-time values
    (Relu's exact zeros make both outcomes occur), Where with a run-time and a constant bool condition."""
    rng = np.random.default_rng(11)

    def param(name, *shape):
        return numpy_helper.from_array((0.7 * rng.standard_normal(shape)).astype(np.float32), name)

    mask = numpy_helper.from_array(np.array([[True, False, True, True]]), "mask")
    k = helper.make_node
    nodes = [
        k("Add", ["x", "p"], ["t"]),
        k("Relu", ["t"], ["r"]),
        k("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0.0, np.float32))),
        k("Equal", ["r", "zero"], ["m"], name="eq"),
        k("Where", ["m", "q", "r"], ["s"], name="where_rt"),
        k("Mul", ["s", "w"], ["sw"]),
        k("Constant", [], ["neg"], value=numpy_helper.from_array(np.array(-3.0, np.float32))),
        k("Where", ["mask", "sw", "neg"], ["y"], name="where_const"),
    ]
    graph = helper.make_graph(
        nodes,
        "mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
        [param("p", 3, 4), param("q", 4), param("w", 2, 3, 4), mask],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_equal_where_forward_gradients():
    model = mask_model()
    g = load_model(model)
    assert {"Equal", "Where"} <= {n.op for n in g.nodes}
    assert g.trainable == {"p", "q", "w"}  # the bool mask is a frozen 0/1 parameter
    np.testing.assert_array_equal(g.params["mask"], np.float32([[1, 0, 1, 1]]))
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    env = reference.run(g, {"x": x})
    assert 0 < env["m"].sum() < env["m"].size and set(np.unique(env["m"])) == {0.0, 1.0}
    assert max_rel_err(env["y"], ort_outputs(model, {"x": x})[0]) <= 1e-6
    tg = mse_training(g)
    assert "WhereGrad" in {n.op for n in tg.nodes}
    xd, y = _data(tg, (2, 3, 4))
    assert fd_check(tg, xd, y) <= 1e-6
    grads = reference.train_step(tg, xd, y, dict(tg.params), 0.0, np.float64).grads
    assert "mask" not in grads
    assert np.all(grads["w"][:, :, 1] == 0)  # the masked column (-3 selected) gets no gradient


def test_equal_where_c_vs_reference(tmp_path):
    check_c(mask_model(), tmp_path, batch=2)


def causal_attention_model(fill=-1e9):
    """Scores masked by a constant causal (lower-triangular) bool mask, Where(mask, s, fill), then Softmax."""
    rng = np.random.default_rng(5)
    k = helper.make_node
    nodes = [
        k("MatMul", ["x", "w"], ["s"]),
        k("Constant", [], ["fill"], value=numpy_helper.from_array(np.array(fill, np.float32))),
        k("Where", ["mask", "s", "fill"], ["sm"], name="causal"),
        k("Softmax", ["sm"], ["y"], axis=-1),
    ]
    inits = [
        numpy_helper.from_array(np.tril(np.ones((4, 4), bool)), "mask"),
        numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w"),
    ]
    graph = helper.make_graph(
        nodes,
        "causal",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("fill", [-1e9, -np.inf], ids=["-1e9", "-inf"])
def test_causal_mask_attention(tmp_path, fill):
    model = causal_attention_model(fill)
    g = load_model(model)
    x = np.random.default_rng(3).standard_normal((2, 4, 4)).astype(np.float32)
    y = reference.run(g, {"x": x})["y"]
    assert np.all(np.triu(y[0], 1) == 0)  # masked scores get exactly zero weight
    assert max_rel_err(y, ort_outputs(model, {"x": x})[0]) <= 1e-6
    tg = mse_training(g)
    xd, yd = _data(tg, (2, 4, 4))
    assert fd_check(tg, xd, yd) <= 1e-6
    check_c(model, tmp_path, batch=2)


def embedding_model():
    """y = x + Gather(table, [3, 1, 3, 0]): an embedding lookup; the table is trained (repeated row 3)."""
    rng = np.random.default_rng(9)
    nodes = [
        helper.make_node("Gather", ["table", "idx"], ["e"], name="embed"),
        helper.make_node("Add", ["x", "e"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal((6, 5)).astype(np.float32), "table"),
        numpy_helper.from_array(np.array([3, 1, 3, 0], I64), "idx"),
    ]
    graph = helper.make_graph(
        nodes,
        "embedding",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_embedding_table_trained(tmp_path):
    model = embedding_model()
    g = load_model(model)
    assert g.trainable == {"table"}
    tg = mse_training(g)
    x, y = _data(tg, (4, 5))
    grads = reference.train_step(tg, x, y, dict(tg.params), 0.0, np.float64).grads["table"]
    assert np.all(grads[[2, 4, 5]] == 0) and np.all(grads[[0, 1, 3]] != 0)  # rows never gathered: none
    assert fd_check(tg, x, y) <= 1e-6
    check_c(model, tmp_path, batch=4)


# ---- constant patterns folded at compile time ----
def expand_pattern_model():
    """torch's export of x.expand(2, -1, -1): Equal/Where on constants replace the -1s, then Expand."""
    k = helper.make_node
    nodes = [
        k("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([2, -1, -1], I64))),
        k("Constant", [], ["three"], value=numpy_helper.from_array(np.array([3], I64))),
        k("ConstantOfShape", ["three"], ["ones"], value=numpy_helper.from_array(np.array([1], I64))),
        k("Constant", [], ["minus1"], value=numpy_helper.from_array(np.array(-1, I64))),
        k("Mul", ["ones", "minus1"], ["negs"]),
        k("Equal", ["shape", "negs"], ["is_neg"]),
        k("Where", ["is_neg", "ones", "shape"], ["target"]),
        k("Add", ["x", "p"], ["t"]),
        k("Expand", ["t", "target"], ["y"], name="expand"),
    ]
    p = numpy_helper.from_array(np.random.default_rng(2).standard_normal((1, 3, 4)).astype(np.float32), "p")
    graph = helper.make_graph(
        nodes,
        "expand_pattern",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
        [p],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_constant_equal_where_fold_and_expand_runs():
    model = expand_pattern_model()
    g = load_model(model)
    assert [n.op for n in g.nodes] == ["Add", "Expand"]
    assert g.nodes[1].attrs["shape"] == (2, 1, 1)
    x = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": x})["y"], ort_outputs(model, {"x": x})[0]) == 0.0


# ---- refusals: one line naming the node and what is supported ----
def test_gather_out_of_range_and_averagepool_ceil_refused():
    model = one_op("Gather", [(5, 3), (1,)], {}, {1: np.array([5], I64)})
    with pytest.raises(
        PoetError, match=r"node 'op' \(Gather\): index 5 is out of range for axis 0 of size 5"
    ):
        frontend.to_ir(model)
    model = one_op("AveragePool", [(1, 2, 6, 6)], {"kernel_shape": [2, 2], "ceil_mode": 1})
    with pytest.raises(PoetError, match=r"node 'op' \(AveragePool\): unsupported attribute ceil_mode=1"):
        frontend.to_ir(model)


def test_squeeze_of_a_dim_that_is_not_one_refused():
    node = helper.make_node("Squeeze", ["x"], ["y"], name="op", axes=[0])
    graph = helper.make_graph(
        [node],
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    with pytest.raises(PoetError, match=r"node 'op' \(Squeeze\): Squeeze axes \[0\] of shape"):
        frontend.to_ir(model)


# ---- chains compiled to C (a build takes seconds) ----
def chain_model(steps, in_shape, opset=17, seed=0):
    """oputil.chain_model with parameters of standard deviation 0.8."""
    return oputil.chain_model(steps, in_shape, opset, seed, scale=0.8)


def mobilenet_chain():
    """HardSwish / HardSigmoid (MobileNetV3) and ceil-mode MaxPool (SqueezeNet), 8x8 -> 4x4 -> 3x3 -> 2x2."""
    return chain_model(
        [
            ("Mul", [(3, 1, 1)], {}),
            ("Add", [(3, 8, 8)], {}),
            ("HardSwish", [], {}),
            ("MaxPool", [], POOL),
            ("Mul", [(3, 4, 4)], {}),
            ("HardSigmoid", [], {"alpha": 0.3, "beta": 0.4}),
            ("Mul", [(3, 1, 4)], {}),
            ("MaxPool", [], {**POOL, "pads": [1, 1, 1, 1]}),
            ("MaxPool", [], {"kernel_shape": [2, 2], "ceil_mode": 1}),  # inside: the fast kernel's path
        ],
        (2, 3, 8, 8),
    )


def layout_chain():
    """Unsqueeze, Expand, Gather (1-D, 2-D and scalar indices), Squeeze on run-time values."""
    return chain_model(
        [
            ("Mul", [(3, 4)], {}),
            ("Unsqueeze", [np.array([1], I64)], {}),  # (2, 1, 3, 4)
            ("Expand", [np.array([1, 2, 1, 1], I64)], {}),  # (2, 2, 3, 4)
            ("Mul", [(2, 1, 4)], {}),
            ("Gather", [np.array([2, 0, 2, -1], I64)], {"axis": 2}),  # (2, 2, 4, 4)
            ("Gather", [np.array([[0, 3], [3, 3]], I64)], {"axis": -1}),  # (2, 2, 4, 2, 2)
            ("Gather", [np.array(1, I64)], {"axis": 1}),  # (2, 4, 2, 2)
            ("Unsqueeze", [np.array([-1], I64)], {}),  # (2, 4, 2, 2, 1)
            ("Mul", [(4, 1, 2, 1)], {}),
            ("Squeeze", [np.array([4], I64)], {}),  # (2, 4, 2, 2)
        ],
        (2, 3, 4),
    )


CHAINS = {"mobilenet": (mobilenet_chain, (2, 3, 8, 8)), "layout": (layout_chain, (2, 3, 4))}


@pytest.mark.parametrize("name", CHAINS)
def test_chain(name, tmp_path):
    """Gradients, forward vs onnxruntime, and the generated C (ASan + UBSan) vs the numpy reference."""
    build, shape = CHAINS[name]
    model = build()
    g = load_model(model)
    tg = mse_training(g)
    x, y = _data(tg, shape)
    assert fd_check(tg, x, y, samples=6) <= 1e-6
    xf = x.astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": xf})[g.outputs[0]], ort_outputs(model, {"x": xf})[0]) <= 1e-6
    check_c(model, tmp_path, batch=shape[0])


def check_c(model, tmp_path, batch=1):
    """Generated C trains 3 steps like the numpy reference (losses and parameters within 1e-5)."""
    onnx.save(model, tmp_path / "m.onnx")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        tmp_path / "m.onnx", tmp_path / "out", steps=3, batch=batch, lr=LR, sanitize=True
    )
    assert rel_close(c_losses, ref_losses, 1e-5), (c_losses, ref_losses)
    for k, v in ref_params.items():
        assert rel_close(c_params[k], v, 1e-5), k


# ---- the command line and qemu-cortex-m4 ----
QEMU_MODELS = {"mobilenet": mobilenet_chain, "layout": layout_chain, "mask": mask_model}


@pytest.mark.parametrize("name", QEMU_MODELS)
def test_cli_and_qemu_bit_identical(name, tmp_path):
    """poet inspect / compile / run (host) on the command line, then qemu-cortex-m4 gives the host's bits."""
    oputil.cli_and_qemu_bit_identical(QEMU_MODELS[name](), tmp_path)


def test_ceil_maxpool_fast_kernels_equal_reference(tmp_path):
    """The fast MaxPool serves only windows wholly inside the input, ceil-mode windows run the reference
    loops: the whole training run gives the same bits with --kernels fast and --kernels reference."""
    need_tools("gcc")
    from poet_edge import runner
    from poet_edge.autodiff import Loss
    from poet_edge.compiler import CompileOptions, compile_model

    path = tmp_path / "m.onnx"
    onnx.save(mobilenet_chain(), path)
    runs = []
    for kernels in ("fast", "reference"):
        out = tmp_path / kernels
        compile_model(CompileOptions(path, "host", 1 << 20, out, batch=2, loss=Loss.MSE, kernels=kernels))
        runs.append(runner.run_project(out, "host", 3))
    fast, ref = runs
    assert [s.loss for s in fast.steps] == [s.loss for s in ref.steps]
    for k, v in ref.params.items():
        assert np.array_equal(fast.params[k], v), k
