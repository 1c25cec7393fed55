"""Elementwise / transformer ops: gradients vs finite differences, forward vs onnxruntime, C vs reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oputil import (
    c_vs_reference,
    chain_model,
    fd_check,
    load_model,
    max_rel_err,
    mse_training,
    ort_outputs,
    rel_close,
    single_op_model,
)

from poet_edge import autodiff, reference
from poet_edge.errors import PoetError

I64 = np.int64
LR = 0.2  # large enough that a 0.1% error in a C gradient shows in the parameters after 3 steps


_COUNT: dict[str, int] = {}


def case(
    op,
    shapes,
    attrs=None,
    consts=None,
    opset=17,
    n_outputs=1,
    ort=True,
    scale=1.0,
    seed=0,
    fd_scale=1.0,
    data_seed=1,
):
    """One single-op model; ``ort=False`` skips the onnxruntime check.
    ``scale`` scales the parameters (wide ranges reach every branch of a kernel); finite differences use
    ``fd_scale`` for parameters and data instead: saturated activations have gradients so small that
    float64 rounding noise of the loss dominates their relative error."""
    _COUNT[op] = _COUNT.get(op, 0) + 1
    return pytest.param(
        dict(
            op=op,
            shapes=shapes,
            attrs=attrs or {},
            consts=consts or {},
            opset=opset,
            n_outputs=n_outputs,
            scale=scale,
            seed=seed,
            fd_scale=fd_scale,
            data_seed=data_seed,
        ),
        ort,
        id=f"{op}-{_COUNT[op]}",
    )


CASES = [
    case("Sub", [(2, 3, 4), (4,)]),
    case("Sub", [(2, 1, 4), (2, 3, 1)]),
    case("Sub", [(3, 4), (2, 3, 4)]),
    case("Mul", [(2, 3, 4), (3, 1)]),
    case("Mul", [(2, 1, 4), (2, 3, 1)]),
    case("Mul", [(4,), (3, 4)]),
    case("Div", [(2, 3, 4), (4,)], seed=2),  # seeds keep divisors away from 0 (finite differences)
    case("Div", [(2, 1, 4), (2, 3, 1)], seed=2),
    case("Sigmoid", [(3, 7)]),
    case("Sigmoid", [(2, 3, 4)], scale=4.0, fd_scale=0.5),
    case("Tanh", [(3, 7)]),
    case("Tanh", [(2, 3, 4)], scale=3.0, fd_scale=0.5),
    case("Erf", [(4, 5)], fd_scale=0.5),
    case("Erf", [(2, 3, 4)], scale=2.0, fd_scale=0.5),
    case("Gelu", [(4, 5)], opset=20),
    case("Gelu", [(2, 3, 4)], {"approximate": "tanh"}, opset=20, scale=2.0, fd_scale=0.5),
    case("Gelu", [(2, 3, 4)], {"approximate": "none"}, opset=20, scale=3.0, fd_scale=0.5),
    case("Softmax", [(2, 3, 4)]),
    case("Softmax", [(2, 3, 4)], {"axis": 1}),
    case("Softmax", [(2, 3, 4)], {"axis": 0}),
    case("Softmax", [(3, 5)], {"axis": -2}),
    case("LayerNormalization", [(2, 3, 4), (4,), (4,)]),
    case("LayerNormalization", [(2, 3, 4), (3, 4), (3, 4)], {"axis": 1, "epsilon": 1e-3}, data_seed=2),
    case("LayerNormalization", [(2, 3, 4), (4,)], {"axis": -1}),
    case("LayerNormalization", [(3, 5), (3, 5), (3, 5)], {"axis": 0}),
    case("MatMul", [(3, 4), (4, 5)]),
    case("MatMul", [(2, 3, 4), (4, 5)]),
    case("MatMul", [(3, 1, 2, 4), (1, 2, 4, 3)]),
    case("MatMul", [(2, 3, 4), (2, 4, 2)]),
    case("MatMul", [(4,), (2, 4, 3)]),
    case("MatMul", [(2, 3, 4), (4,)]),
    case("MatMul", [(4,), (4,)]),
    case("Transpose", [(2, 3, 4)]),
    case("Transpose", [(2, 3, 4)], {"perm": [1, 0, 2]}),
    case("Transpose", [(2, 3, 4, 5)], {"perm": [0, 2, 3, 1]}),
    case(
        "Slice",
        [(5, 6), (2,), (2,), (2,), (2,)],
        consts={
            1: np.array([1, -4], I64),
            2: np.array([4, 100], I64),
            3: np.array([0, 1], I64),
            4: np.array([1, 2], I64),
        },
    ),
    case(
        "Slice",
        [(5, 6), (1,), (1,), (1,), (1,)],
        consts={
            1: np.array([-1], I64),
            2: np.array([-100], I64),
            3: np.array([1], I64),
            4: np.array([-2], I64),
        },
    ),
    case("Slice", [(4, 6, 3), (2,), (2,)], consts={1: np.array([1, 2], I64), 2: np.array([3, 5], I64)}),
    case(
        "Slice",
        [(4, 6), (1,), (1,), (1,)],
        consts={1: np.array([-3], I64), 2: np.array([2**62], I64), 3: np.array([-1], I64)},
    ),
    case("Concat", [(2, 3), (2, 4), (2, 1)], {"axis": 1}),
    case("Concat", [(2, 3), (1, 3)], {"axis": 0}),
    case("Concat", [(2, 3, 2), (2, 3, 1)], {"axis": -1}),
    case("Split", [(6, 4), (2,)], {"axis": 0}, consts={1: np.array([2, 4], I64)}, n_outputs=2),
    case("Split", [(2, 7)], {"axis": 1, "num_outputs": 3}, opset=18, n_outputs=3),
    case("Split", [(2, 6)], {"axis": -1}, opset=13, n_outputs=3),
    case("ReduceMean", [(2, 3, 4)], {"axes": [1]}),
    case("ReduceMean", [(2, 3, 4)], {"axes": [0, 2], "keepdims": 0}),
    case("ReduceMean", [(2, 3, 4)], {"keepdims": 0}),
    case("ReduceMean", [(2, 3, 4), (1,)], {"keepdims": 1}, consts={1: np.array([-1], I64)}, opset=18),
    case("Identity", [(2, 3)]),
    case("Dropout", [(2, 3), (1,)], consts={1: np.array(0.25, np.float32)}),
    case(
        "Dropout", [(2, 3), (1,), (1,)], consts={1: np.array(0.5, np.float32), 2: np.array(True)}, ort=False
    ),
]


def _data(tg, shape, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(tg.shape("labels"))


def _model(p, scale=None):
    return single_op_model(
        p["op"],
        p["shapes"],
        p["attrs"],
        p["consts"],
        opset=p["opset"],
        n_outputs=p["n_outputs"],
        scale=p["scale"] if scale is None else scale,
        seed=p["seed"],
    )


@pytest.mark.parametrize("p,ort", CASES)
def test_gradient(p, ort):
    tg = mse_training(load_model(_model(p, p["fd_scale"])))
    x, y = _data(tg, p["shapes"][0], p["data_seed"])
    assert fd_check(tg, p["fd_scale"] * x, y) <= 1e-6


@pytest.mark.parametrize("p,ort", CASES)
def test_forward_vs_onnxruntime(p, ort):
    if not ort:
        pytest.skip("onnxruntime applies a random dropout mask in training mode; ours is the identity")
    model = _model(p)
    g = load_model(model)
    x = np.random.default_rng(3).standard_normal(p["shapes"][0]).astype(np.float32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    (theirs,) = ort_outputs(model, {"x": x})
    assert ours.shape == theirs.shape
    assert max_rel_err(ours, theirs) <= 1e-5


# ---- chains of ops, compiled to C once each (a build takes seconds) ----
CHAINS = {
    "elementwise": (
        chain_model(
            [
                ("Sub", [(4,)], {}),
                ("Mul", [(3, 1)], {}),
                ("Div", [("pos", (2, 3, 4))], {}),
                ("Sigmoid", [], {}),
                ("Sub", [(3, 4)], {}),
                ("Tanh", [], {}),
                ("Mul", [(4,)], {}),
                ("Erf", [], {}),
                ("Gelu", [], {}),
                ("Mul", [(2, 1, 4)], {}),
                ("Gelu", [], {"approximate": "tanh"}),
                ("Div", [("pos", (4,))], {}),
            ],
            (2, 3, 4),
            opset=20,
        ),
        (2, 3, 4),
    ),
    "normalize": (
        chain_model(
            [
                ("Softmax", [], {"axis": 1}),
                ("LayerNormalization", [(3, 4), (3, 4)], {"axis": 1}),
                ("Softmax", [], {}),
                ("LayerNormalization", [(4,)], {"epsilon": 1e-3}),
                ("Softmax", [], {"axis": 0}),
                ("ReduceMean", [], {"axes": [1], "keepdims": 0}),
            ],
            (2, 3, 4),
        ),
        (2, 3, 4),
    ),
    "layout": (
        chain_model(
            [
                ("MatMul", [(1, 2, 4, 3)], {}),
                ("Transpose", [], {"perm": [0, 2, 3, 1]}),
                (
                    "Slice",
                    [np.array([-1], I64), np.array([-100], I64), np.array([2], I64), np.array([-2], I64)],
                    {},
                ),
                ("Concat", [(2, 3, 3, 2)], {"axis": 2}),
                (
                    "Slice",
                    [
                        np.array([0, 1], I64),
                        np.array([2, 5], I64),
                        np.array([0, 2], I64),
                        np.array([1, 2], I64),
                    ],
                    {},
                ),
                ("MatMul", [(2,)], {}),
                ("Identity", [], {}),
                ("ReduceMean", [], {"axes": [2], "keepdims": 1}),
                ("Dropout", [np.array(0.5, np.float32), np.array(True)], {}),
                ("Transpose", [], {"perm": [0, 2, 1]}),
            ],
            (2, 1, 3, 4),
        ),
        (2, 1, 3, 4),
    ),
    "split": (
        single_op_model("Split", [(4, 6), (2,)], {"axis": 1}, consts={1: np.array([2, 4], I64)}, n_outputs=2),
        (4, 6),
    ),
}


@pytest.mark.parametrize("name", CHAINS)
def test_chain(name, tmp_path):
    """Gradients, forward vs onnxruntime (Dropout's training mode excepted) and generated C vs reference."""
    model, shape = CHAINS[name]
    g = load_model(model)
    tg = mse_training(g)
    x, y = _data(tg, shape)
    if name != "elementwise":  # twelve saturating ops deep, some gradients (~1e-8) drown in rounding noise
        assert fd_check(tg, x, y, samples=6) <= 1e-6
    if name != "layout":  # onnxruntime applies a random mask in Dropout's training mode
        xf = x.astype(np.float32)
        ours = reference.run(g, {"x": xf})[g.outputs[0]]
        assert max_rel_err(ours, ort_outputs(model, {"x": xf})[0]) <= 1e-5
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


# ---- Split with every output used: y = Concat(s2 * s0, s1) ----
def split_model(opset=18):
    rng = np.random.default_rng(0)
    p = numpy_helper.from_array(rng.standard_normal((3, 8)).astype(np.float32), "p")
    nodes = [
        helper.make_node("Add", ["x", "p"], ["t"]),
        helper.make_node("Split", ["t"], ["s0", "s1", "s2"], axis=1, num_outputs=3),
        helper.make_node("Mul", ["s1", "s0"], ["m"]),
        helper.make_node("Concat", ["s2", "m"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "split_all",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
        [p],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_split_all_outputs(tmp_path):
    model = split_model()
    tg = mse_training(load_model(model))
    x, y = _data(tg, (3, 8))
    assert fd_check(tg, x, y) <= 1e-6
    ours = reference.run(load_model(model), {"x": x.astype(np.float32)})["y"]
    assert max_rel_err(ours, ort_outputs(model, {"x": x.astype(np.float32)})[0]) <= 1e-5
    check_c(model, tmp_path, batch=3)


def test_split_unused_output_gets_zero_gradient():
    model = single_op_model("Split", [(2, 6)], {"axis": 1, "num_outputs": 3}, opset=18, n_outputs=3)
    tg = mse_training(load_model(model))
    assert "Zeros" in {n.op for n in tg.nodes}
    x, y = _data(tg, (2, 6))
    grads = reference.train_step(tg, x, y, dict(tg.params), 0.0, np.float64).grads["p0"]
    assert np.all(grads[:, 2:] == 0) and np.any(grads[:, :2] != 0)


# ---- a tiny attention block: every transformer op in one training graph ----
def attention_model(batch=2, seq=4, dim=8):
    rng = np.random.default_rng(7)

    def w(name, *shape, s=0.3):
        return numpy_helper.from_array((s * rng.standard_normal(shape)).astype(np.float32), name)

    inits = [
        w("ln_s", dim, s=1.0),
        w("ln_b", dim),
        w("wqkv", dim, 3 * dim),
        w("wo", dim, dim),
        w("w1", dim, dim),
        numpy_helper.from_array(np.array([batch, seq, 2, dim // 2], I64), "heads"),
        numpy_helper.from_array(np.array([batch, seq, dim], I64), "merged"),
        numpy_helper.from_array(np.array([dim, dim, dim], I64), "thirds"),
        numpy_helper.from_array(np.array([1], I64), "rm_axes"),
    ]
    k = helper.make_node
    nodes = [
        k("LayerNormalization", ["x", "ln_s", "ln_b"], ["h"], axis=-1),
        k("MatMul", ["h", "wqkv"], ["qkv"]),
        k("Split", ["qkv", "thirds"], ["q", "kk", "v"], axis=-1),
        k("Reshape", ["q", "heads"], ["q4"]),
        k("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        k("Reshape", ["kk", "heads"], ["k4"]),
        k("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        k("Reshape", ["v", "heads"], ["v4"]),
        k("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        k("MatMul", ["qh", "kt"], ["sc"]),
        k("Constant", [], ["inv_sqrt_d"], value=numpy_helper.from_array(np.array(0.5, np.float32))),
        k("Mul", ["sc", "inv_sqrt_d"], ["scs"]),
        k("Softmax", ["scs"], ["att"], axis=-1),
        k("MatMul", ["att", "vh"], ["o4"]),
        k("Transpose", ["o4"], ["o3"], perm=[0, 2, 1, 3]),
        k("Reshape", ["o3", "merged"], ["o"]),
        k("MatMul", ["o", "wo"], ["proj"]),
        k("Add", ["x", "proj"], ["r"]),
        k("MatMul", ["r", "w1"], ["f"]),
        k("Gelu", ["f"], ["g"], approximate="tanh"),
        k("Sigmoid", ["g"], ["sg"]),
        k("Sub", ["r", "sg"], ["d"]),
        k("Slice", ["d", "st", "en", "ax"], ["sl"]),
        k("Dropout", ["sl"], ["dr"]),
        k("Div", ["dr", "two"], ["hv"]),
        k("Tanh", ["hv"], ["th"]),
        k("ReduceMean", ["th", "rm_axes"], ["y"], keepdims=0),
    ]
    inits += [
        numpy_helper.from_array(np.array([0], I64), "st"),
        numpy_helper.from_array(np.array([6], I64), "en"),
        numpy_helper.from_array(np.array([2], I64), "ax"),
        numpy_helper.from_array(np.full(6, 2.0, np.float32), "two"),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 6])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=8)


def test_attention_block(tmp_path):
    model = attention_model()
    g = load_model(model, batch=2)
    assert "inv_sqrt_d" in g.params and "inv_sqrt_d" not in g.trainable
    tg = mse_training(g)
    x, y = _data(tg, (2, 4, 8))
    assert fd_check(tg, x, y, samples=6) <= 1e-6
    xf = x.astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": xf})["y"], ort_outputs(model, {"x": xf})[0]) <= 1e-5
    check_c(model, tmp_path, batch=2)


# ---- refusals ----
def test_layer_norm_stat_outputs_refused():
    model = single_op_model("LayerNormalization", [(2, 4), (4,)], n_outputs=3)
    with pytest.raises(PoetError, match="Mean / InvStdDev"):
        load_model(model)


def test_dropout_mask_refused():
    model = single_op_model("Dropout", [(2, 4)], n_outputs=2)
    with pytest.raises(PoetError, match="mask output"):
        load_model(model)


# ---- determinism: the new kernels and poet_tanhf / poet_erff give the same bits on a Cortex-M ----
@pytest.mark.parametrize("name", ["attention", "elementwise"])
def test_bit_identical_on_cortex_m4(name, tmp_path):
    from conftest import need_tools

    from poet_edge import runner
    from poet_edge.compiler import CompileOptions, compile_model

    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    model, batch = (attention_model(), 2) if name == "attention" else (CHAINS[name][0], 2)
    onnx.save(model, tmp_path / "m.onnx")
    compile_model(
        CompileOptions(
            tmp_path / "m.onnx", "cortex-m4", 256 * 1024, tmp_path / "out", batch, autodiff.Loss.MSE, LR
        )
    )
    host = runner.run_project(tmp_path / "out", "host", 3)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k


def test_layer_norm_matches_onnx_node_tests_on_y():
    """The ONNX node tests all request Mean/InvStdDev (refused), so check their Y output here."""
    from test_onnx_node import cases  # shares the cached collection with the node tests

    from poet_edge import ops
    from poet_edge.frontend import node_attrs

    checked = 0
    for c in cases():
        pn = c.model.graph.node
        if pn[0].op_type != "LayerNormalization":
            continue
        feeds, expected = c.data_sets[0]
        y = ops.get("LayerNormalization").forward([np.asarray(f) for f in feeds], node_attrs(pn[0]))[0]
        np.testing.assert_allclose(y, expected[0], rtol=1e-5, atol=1e-6)
        checked += 1
    assert checked >= 17
