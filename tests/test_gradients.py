"""Backward rules vs central finite differences in float64 (rel. error <= 1e-6)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oputil import fd_check, load_model, mse_training, single_op_model

from poet_edge import autodiff, frontend

CASES = [
    ("Gemm", [(3, 4), (4, 5), (5,)], {}),
    ("Gemm", [(3, 4), (5, 4), (1, 5)], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", [(4, 3), (4, 5), (3, 1)], {"transA": 1}),
    ("Gemm", [(4, 3), (5, 4), (3, 5)], {"transA": 1, "transB": 1, "beta": -1.5}),
    ("Gemm", [(3, 4), (4, 5)], {}),
    ("MatMul", [(3, 4), (4, 6)], {}),
    ("Add", [(2, 3, 4), (4,)], {}),
    ("Add", [(2, 3, 4), (3, 1)], {}),
    ("Add", [(2, 1, 4), (2, 3, 1)], {}),
    ("Relu", [(3, 7)], {}),
    ("Flatten", [(2, 3, 4)], {"axis": 2}),
]


@pytest.mark.parametrize("op,shapes,attrs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_gradient(op, shapes, attrs):
    tg = mse_training(load_model(single_op_model(op, shapes, attrs)))
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shapes[0])
    y = rng.standard_normal(tg.shape("labels"))
    assert fd_check(tg, x, y) <= 1e-6


def test_reshape_gradient():
    model = single_op_model("Reshape", [(2, 6), (3,)], consts={1: np.array([3, -1, 2], np.int64)})
    tg = mse_training(load_model(model))
    rng = np.random.default_rng(2)
    assert fd_check(tg, rng.standard_normal((2, 6)), rng.standard_normal((3, 2, 2))) <= 1e-6


@pytest.mark.parametrize("loss", list(autodiff.Loss))
def test_mlp_gradient(mlp_path, loss):
    g = frontend.load(mlp_path, batch=3)
    tg = autodiff.training_graph(g, loss)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1, 8, 8))
    y = rng.integers(0, 10, 3) if loss == autodiff.Loss.CROSS_ENTROPY else rng.standard_normal((3, 10))
    assert fd_check(tg, x, y, samples=8) <= 1e-6


def test_cross_entropy_matches_torch_definition(mlp_path):
    """torch.nn.functional.cross_entropy(reduction='mean'): mean_i(logsumexp(z_i) - z_i[y_i])."""
    from poet_edge import reference

    g = frontend.load(mlp_path, batch=5)
    tg = autodiff.training_graph(g)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((5, 1, 8, 8)), rng.integers(0, 10, 5)
    env = reference.run(tg, {"input": x, "labels": y}, dtype=np.float64)
    z = env["logits"]
    expect = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(5), y])
    assert abs(env["loss"] - expect) <= 1e-12 * abs(expect)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    p[np.arange(5), y] -= 1
    np.testing.assert_allclose(env[tg.nodes[7].outputs[0]], p / 5, rtol=1e-12)


def test_sgd_update_is_p_minus_lr_g(mlp_path):
    from poet_edge import reference

    tg = autodiff.training_graph(frontend.load(mlp_path, batch=2))
    rng = np.random.default_rng(5)
    params = {k: np.asarray(v, np.float64) for k, v in tg.params.items()}
    r = reference.train_step(
        tg, rng.standard_normal((2, 1, 8, 8)), np.array([1, 2]), params, 0.25, np.float64
    )
    for p in params:
        np.testing.assert_array_equal(r.params[p], params[p] - 0.25 * r.grads[p])


def _three_uses_of_w() -> autodiff.Graph:
    """y = ((x W) W) W: the gradient of W has three contributions, the last use's first."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(6).standard_normal((4, 4)).astype(np.float32) / 2
    nodes = [
        helper.make_node("MatMul", ["input", "W"], ["h1"], name="mm1"),
        helper.make_node("MatMul", ["h1", "W"], ["h2"], name="mm2"),
        helper.make_node("MatMul", ["h2", "W"], ["output"], name="mm3"),
    ]
    graph = helper.make_graph(
        nodes,
        "three_uses",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return mse_training(load_model(model, batch=3))


def test_shared_weight_gradient_is_summed_as_produced_in_reverse_node_order():
    tg = _three_uses_of_w()
    pos = {o: k for k, n in enumerate(tg.nodes) for o in n.outputs}
    by_out = {o: n for n in tg.nodes for o in n.outputs}
    update = next(n for n in tg.nodes if n.op == "SGDUpdate")
    final = by_out[update.inputs[1]]
    inner = by_out[final.inputs[0]]
    assert final.op == inner.op == "Add"
    # ((g_mm3 + g_mm2) + g_mm1): contributions in the order the backward pass produces them
    assert [by_out[t].name.split("/")[1] for t in (*inner.inputs, final.inputs[1])] == ["mm3", "mm2", "mm1"]
    for add in (inner, final):  # each Add right after the node that made its new contribution
        assert pos[add.outputs[0]] == pos[add.inputs[1]] + 1
    rng = np.random.default_rng(7)
    assert fd_check(tg, rng.standard_normal((3, 4)), rng.standard_normal((3, 4))) <= 1e-6


def _shared(op: str, x: list[int], w: list[int], **attrs: object) -> autodiff.Graph:
    """y = op(op(x, W), W) (a Gemm or a padded 3x3 Conv reading one W twice), MSE, W trained."""
    from onnx import TensorProto

    wv = np.random.default_rng(9).standard_normal(w).astype(np.float32) / 4
    nodes = [
        helper.make_node(op, ["input", "W"], ["h"], name="first", **attrs),
        helper.make_node(op, ["h", "W"], ["output"], name="second", **attrs),
    ]
    graph = helper.make_graph(
        nodes,
        "shared",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, x)],
        [numpy_helper.from_array(wv, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return mse_training(load_model(model, batch=x[0]), frozenset({"W"}))


@pytest.mark.parametrize(
    "op,x,w,attrs,folded",
    [
        ("Gemm", [2, 8], [8, 8], {}, "Gemm"),  # operands 128 B, the gradient 256 B: folded
        ("Conv", [1, 8, 2, 2], [8, 8, 3, 3], {"pads": [1, 1, 1, 1]}, "ConvGradWeight"),  # 256 B vs 2,304 B
        ("Conv", [1, 2, 8, 8], [2, 2, 3, 3], {"pads": [1, 1, 1, 1]}, None),  # maps 1,024 B vs 144 B: an Add
    ],
    ids=["gemm", "conv-small-maps", "conv-big-maps"],
)
def test_a_shared_weight_sums_its_gradient_in_the_node_that_makes_it(op, x, w, attrs, folded):
    """autodiff._fold: where the operands weigh no more than the gradient, the second contribution's node
    takes the first as its running sum (Gemm: C, beta 1; ConvGradWeight: partial) and no Add is left;
    otherwise the Add stays. Finite differences agree either way."""
    tg = _shared(op, x, w, **attrs)
    by_out = {o: n for n in tg.nodes for o in n.outputs}
    update = next(n for n in tg.nodes if n.op == "SGDUpdate")
    last = by_out[update.inputs[1]]
    adds = [n for n in tg.nodes if n.op == "Add" and n.name.startswith("grad/W/")]
    if folded is None:
        assert last.op == "Add" and len(adds) == 1
    else:
        assert not adds and last.op == folded and len(last.inputs) == 3
        first = by_out[last.inputs[2]]
        assert first.op == folded and len(first.inputs) == 2
        assert last.attrs.get("partial", False) or last.attrs.get("beta") == 1.0
    rng = np.random.default_rng(10)
    assert fd_check(tg, rng.standard_normal(x), rng.standard_normal(x)) <= 1e-6


def _gru():
    from conftest import EXAMPLES

    return autodiff.training_graph(frontend.load(EXAMPLES / "zoo" / "gru_unrolled.onnx", batch=2))


def test_unrolled_gru_holds_one_partial_sum_per_weight_gradient():
    """In node order, at most the running sum and one new contribution of a weight's gradient are alive
    at once (summed at the end, all 48 per-step gradients of W_hh were alive together). The weights'
    contributions are Gemms that add their products to the running sum themselves (autodiff._fold: the
    operands, a step's rows, weigh less than the gradient), so no Add and only the running sum and the new
    one; the bias's are ReduceSumTo's, summed by Adds."""
    tg = _gru()
    by_out = {o: n for n in tg.nodes for o in n.outputs}
    pos = {o: k for k, n in enumerate(tg.nodes) for o in n.outputs}
    last_use: dict[str, int] = {}
    for k, n in enumerate(tg.nodes):
        for t in n.inputs:
            last_use[t] = k
    uses = {"W_hh": 48, "W_ih": 49, "b_hh": 49}  # W_hh: steps 1-48; b_hh: 48 Gemms and step 0's Split
    for p, n_uses in uses.items():
        update = next(n for n in tg.nodes if n.op == "SGDUpdate" and n.inputs[0] == p)
        chain, t = [], update.inputs[1]  # the running sums, last first
        while (n := by_out[t]).op == "Add" or (n.op == "Gemm" and len(n.inputs) == 3):
            chain.append(n)
            t = n.inputs[0] if n.op == "Add" else n.inputs[2]
        assert len(chain) == n_uses - 1
        assert {n.op for n in chain} == ({"Add"} if p == "b_hh" else {"Gemm"})
        sums = [(*n.inputs, *n.outputs) if n.op == "Add" else (n.inputs[2], n.outputs[0]) for n in chain]
        parts = {t for ts in sums for t in ts}
        events = sorted((pos[t], 1) for t in parts) + sorted((last_use[t] + 1, -1) for t in parts)
        alive = most = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            alive += d
            most = max(most, alive)
        assert most <= (3 if p == "b_hh" else 2)  # (the running sum, the new contribution,) their sum


def test_unrolled_gru_gradient_matches_finite_differences():
    tg = _gru()
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((2, 49, 10)), rng.integers(0, 12, 2)
    assert fd_check(tg, x, y, samples=3) <= 1e-6


def _qkv(step_v: int = 1, use_v: bool = True) -> autodiff.Graph:
    """x[2,6] @ W[6,9] = h, cut by three Slices along axis 1 into q, k, v (an attention block's
    projection); y = q * k + v, or q * k (v unread). ``step_v`` -1: v is h's last three columns reversed."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 9)).astype(np.float32), "W")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
    cuts = {"q": (0, 3, 1), "k": (3, 6, 1), "v": (6, 9, 1) if step_v == 1 else (8, 5, -1)}
    for name, (a, b, st) in cuts.items():
        for k, v in (("s", a), ("e", b), ("a", 1), ("st", st)):
            inits.append(numpy_helper.from_array(np.array([v], np.int64), f"{name}_{k}"))
        nodes.append(
            helper.make_node("Slice", ["h", *(f"{name}_{k}" for k in ("s", "e", "a", "st"))], [name])
        )
    nodes.append(helper.make_node("Mul", ["q", "k"], ["qk"]))
    nodes.append(
        helper.make_node("Add", ["qk", "v"], ["y"]) if use_v else helper.make_node("Identity", ["qk"], ["y"])
    )
    graph = helper.make_graph(
        nodes,
        "qkv",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
        inits,
    )
    return mse_training(load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))


@pytest.mark.parametrize("use_v", [True, False])
def test_a_tensor_cut_by_slices_gets_a_concat_gradient(use_v):
    """A tensor that only Slices read, cut along one axis into pieces that cover it, gets the Concat of the
    pieces' gradients (Zeros for an unread piece), not a sum of zero-padded SliceGrads; its gradient matches
    finite differences. A reversed piece (step -1) is not a cut: SliceGrads and Adds as before."""
    tg = _qkv(use_v=use_v)
    ops = [n.op for n in tg.nodes]
    assert "SliceGrad" not in ops and ops.count("Concat") == 1 and ops.count("Zeros") == (0 if use_v else 1)
    (cat,) = [n for n in tg.nodes if n.op == "Concat"]
    assert cat.attrs["axis"] == 1 and tg.shape(cat.outputs[0]) == (2, 9)
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((2, 6)), rng.standard_normal((2, 3))
    assert fd_check(tg, x, y) <= 1e-6
    rev = _qkv(step_v=-1)
    assert [n.op for n in rev.nodes].count("SliceGrad") == 3 and "Concat" not in [n.op for n in rev.nodes]
    assert fd_check(rev, x, y) <= 1e-6
