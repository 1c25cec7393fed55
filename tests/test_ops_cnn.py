"""CNN ops (Conv, BatchNormalization, Clip, MaxPool, AveragePool, GlobalAveragePool): backward vs float64
finite differences, numpy forward vs onnxruntime, generated C vs the numpy reference, and refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oputil import c_vs_reference, fd_check, load_model, max_rel_err, mse_training, ort_outputs
from oputil import single_op_model as one_op

from poet_edge import frontend, ops, reference
from poet_edge.errors import PoetError
from poet_edge.work import OpClass


def _bn_stats(c: int, seed: int = 7) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {3: rng.standard_normal(c).astype(np.float32), 4: rng.uniform(0.5, 2.0, c).astype(np.float32)}


def _scalar(v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _vi(name: str, shape, dtype=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


P1 = [1, 1, 1, 1]  # one pixel of padding on every side


# (op, input shapes, attributes, constant inputs, opset)
CASES = [
    ("Conv", [(1, 2, 5, 5), (3, 2, 3, 3), (3,)], {}, None, 17),
    ("Conv", [(2, 2, 6, 5), (4, 2, 3, 3), (4,)], {"strides": [2, 2], "pads": P1}, None, 17),
    ("Conv", [(1, 4, 5, 6), (4, 2, 3, 2)], {"group": 2, "pads": [1, 0, 0, 1]}, None, 17),
    ("Conv", [(1, 3, 6, 6), (6, 1, 3, 3), (6,)], {"group": 3, "strides": [2, 2], "pads": P1}, None, 17),
    ("Conv", [(1, 3, 7, 6), (3, 1, 3, 3)], {"group": 3, "strides": [2, 1], "pads": P1}, None, 17),
    ("Conv", [(2, 3, 4, 4), (5, 3, 1, 1), (5,)], {}, None, 17),
    ("Conv", [(1, 2, 5, 6), (2, 2, 2, 3)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, None, 17),
    ("Conv", [(1, 2, 5, 6), (3, 2, 3, 2), (3,)], {"auto_pad": "SAME_LOWER"}, None, 17),
    ("Conv", [(1, 2, 6, 5), (2, 2, 3, 3)], {"auto_pad": "VALID", "strides": [2, 1]}, None, 17),
    ("Conv", [(1, 2, 9), (3, 2, 3), (3,)], {"strides": [2], "pads": [1, 2]}, None, 17),
    ("BatchNormalization", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)], {}, _bn_stats(3), 17),
    ("BatchNormalization", [(4, 5), (5,), (5,), (5,), (5,)], {"epsilon": 1e-3}, _bn_stats(5), 17),
    ("BatchNormalization", [(2, 2, 7), (2,), (2,), (2,), (2,)], {}, _bn_stats(2), 15),
    ("Clip", [(3, 8), (), ()], {}, {1: _scalar(-0.5), 2: _scalar(0.7)}, 17),
    ("Clip", [(2, 3, 4), ()], {}, {1: _scalar(0.0)}, 17),  # max missing: ReLU
    ("Clip", [(2, 3, 4), (), ()], {}, {1: _scalar(0.0), 2: _scalar(6.0)}, 13),  # ReLU6
    ("Clip", [(4, 5)], {"min": -0.3, "max": 0.4}, None, 10),  # bounds as attributes (opset < 11)
    ("Clip", [(4, 5)], {"max": 0.1}, None, 7),
    ("MaxPool", [(1, 2, 6, 6)], {"kernel_shape": [2, 2], "strides": [2, 2]}, None, 17),
    ("MaxPool", [(2, 2, 7, 6)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, None, 17),
    ("MaxPool", [(1, 3, 5, 5)], {"kernel_shape": [3, 2]}, None, 17),  # stride 1: overlapping windows
    (
        "MaxPool",
        [(1, 2, 5, 6)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        None,
        17,
    ),
    ("MaxPool", [(1, 2, 9)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, None, 17),
    ("AveragePool", [(1, 2, 6, 6)], {"kernel_shape": [2, 2], "strides": [2, 2]}, None, 17),
    ("AveragePool", [(2, 2, 5, 5)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, None, 17),
    (
        "AveragePool",
        [(2, 2, 5, 5)],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        None,
        17,
    ),
    (
        "AveragePool",
        [(1, 3, 7, 6)],
        {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [2, 0, 1, 1]},
        None,
        17,
    ),
    (
        "AveragePool",
        [(1, 2, 5, 6)],
        {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
        None,
        17,
    ),
    (
        "AveragePool",
        [(1, 2, 9)],
        {"kernel_shape": [4], "strides": [3], "pads": [1, 2], "count_include_pad": 1},
        None,
        17,
    ),
    ("GlobalAveragePool", [(2, 3, 4, 5)], {}, None, 17),
    ("GlobalAveragePool", [(1, 4, 6)], {}, None, 17),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _model(op, shapes, attrs, consts, opset, seed=0):
    return one_op(op, shapes, attrs, consts=consts, opset=opset, seed=seed)


@pytest.mark.parametrize("op,shapes,attrs,consts,opset", CASES, ids=IDS)
def test_gradient_vs_finite_differences(op, shapes, attrs, consts, opset):
    g = load_model(_model(op, shapes, attrs, consts, opset))
    tg = mse_training(g)
    if op == "BatchNormalization":  # frozen statistics: never trainable, no gradient computed for them
        assert tg.trainable == {"p0", "p1", "p2"} and "c3" in tg.params and "c4" in tg.params
        assert {n.inputs[0] for n in tg.nodes if n.op == "SGDUpdate"} == {"p0", "p1", "p2"}
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shapes[0])
    y = rng.standard_normal(tg.shape("labels"))
    assert fd_check(tg, x, y) <= 1e-6


@pytest.mark.parametrize("op,shapes,attrs,consts,opset", CASES, ids=IDS)
def test_forward_vs_onnxruntime(op, shapes, attrs, consts, opset):
    model = _model(op, shapes, attrs, consts, opset)
    g = load_model(model)
    x = np.random.default_rng(2).standard_normal(shapes[0]).astype(np.float32)
    expect = ort_outputs(model, {"x": x})[0]
    got = reference.run(g, {"x": x})[g.outputs[0]]
    assert got.shape == expect.shape
    assert max_rel_err(got, expect) <= 1e-5


def test_work_macs_and_class():
    def work(op, shapes, attrs):
        g = load_model(one_op(op, shapes, attrs))
        n = g.nodes[-1]
        return ops.get(n.op).work([g.shape(t) for t in n.inputs], [g.shape(t) for t in n.outputs], n.attrs)

    w = work("Conv", [(2, 4, 8, 8), (6, 2, 3, 3), (6,)], {"group": 2, "pads": P1, "strides": [2, 2]})
    assert (w.op_class, w.macs, w.workspace_bytes) == (OpClass.CONV, 2 * 6 * 4 * 4 * 2 * 3 * 3, 0)
    w = work("Conv", [(1, 4, 8, 8), (8, 1, 3, 3)], {"group": 4})
    assert (w.op_class, w.macs) == (OpClass.DEPTHWISE, 8 * 6 * 6 * 9)
    assert work("Conv", [(1, 1, 8, 8), (4, 1, 3, 3)], {}).op_class == OpClass.CONV
    w = work("MaxPool", [(1, 3, 6, 6)], {"kernel_shape": [2, 2], "strides": [2, 2]})
    assert (w.op_class, w.elements) == (OpClass.REDUCE, 3 * 9 * 4)


def test_backward_graph_ops():
    """The internal ops that backward rules emit (bias gradients through ChannelSum)."""
    g = load_model(one_op("Conv", [(1, 2, 5, 5), (3, 2, 3, 3), (3,)], {}))
    tg = mse_training(g)
    internal = sorted(n.op for n in tg.nodes if n.phase.value == "backward")
    assert {"ConvGradWeight", "ChannelSum"} <= set(internal)
    g = load_model(one_op("BatchNormalization", [(2, 3, 4), (3,), (3,), (3,), (3,)], consts=_bn_stats(3)))
    internal = {n.op for n in mse_training(g).nodes}
    assert {"BatchNormGradInput", "BatchNormGradScale", "ChannelSum"} <= internal


def test_maxpool_ties_take_first_index():
    x = np.array([[[[1.0, 3.0, 3.0], [3.0, 2.0, 0.0], [3.0, 1.0, 3.0]]]], np.float32)
    attrs = {"kernel_shape": (2, 2), "strides": (1, 1)}
    dx = ops.get("MaxPoolGrad").forward([x, np.ones((1, 1, 2, 2), np.float32)], attrs)[0]
    np.testing.assert_array_equal(dx[0, 0], [[0, 2, 0], [1, 0, 0], [0, 0, 1]])


# ---- generated C vs the numpy reference ------------------------------------------------------------
C_CASES = [
    CASES[1],  # Conv stride 2, pads, bias, batch 2
    CASES[3],  # depthwise (multiplier 2), stride 2
    CASES[2],  # grouped, asymmetric pads, no bias
    CASES[9],  # 1-D conv
    CASES[10],  # BatchNormalization
    CASES[15],  # ReLU6
    CASES[14],  # Clip min only
    CASES[19],  # MaxPool overlapping + pads
    CASES[20],  # MaxPool stride 1
    CASES[25],  # AveragePool count_include_pad
    CASES[26],  # AveragePool asymmetric pads, count_include_pad 0
    CASES[29],  # GlobalAveragePool
]


C_IDS = [f"{c[0]}-{i}" for i, c in enumerate(C_CASES)]


@pytest.mark.parametrize("op,shapes,attrs,consts,opset", C_CASES, ids=C_IDS)
def test_c_vs_reference(tmp_path, op, shapes, attrs, consts, opset):
    path = tmp_path / "m.onnx"
    onnx.save(_model(op, shapes, attrs, consts, opset), str(path))
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(path, tmp_path / "out", steps=3)
    assert max_rel_err(c_losses, ref_losses) <= 1e-5
    for name, value in ref_params.items():
        assert max_rel_err(c_params[name], value) <= 1e-5, name


def _small_cnn() -> onnx.ModelProto:
    """Conv -> BN -> Clip(0, 6) -> depthwise Conv -> MaxPool -> AveragePool -> GlobalAveragePool chain."""
    rng = np.random.default_rng(3)

    def init(name, shape, positive=False):
        v = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape) * 0.5
        return numpy_helper.from_array(v.astype(np.float32), name)

    inits = [
        init("w1", (4, 2, 3, 3)),
        init("b1", (4,)),
        init("s", (4,), True),
        init("t", (4,)),
        init("mu", (4,)),
        init("var", (4,), True),
        init("w2", (4, 1, 3, 3)),
        numpy_helper.from_array(_scalar(0.0), "lo"),
        numpy_helper.from_array(_scalar(6.0), "hi"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "t", "mu", "var"], ["bn"], name="bn"),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["r6"], name="relu6"),
        helper.make_node("Conv", ["r6", "w2"], ["dw"], name="dw", group=4, strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["dw"], ["mp"], name="mp", kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("AveragePool", ["mp"], ["ap"], name="ap", kernel_shape=[2, 2]),
        helper.make_node("GlobalAveragePool", ["ap"], ["y"], name="gap"),
    ]
    graph = helper.make_graph(nodes, "small_cnn", [_vi("x", [2, 2, 8, 8])], [_vi("y", [2, 4, 1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_small_cnn_gradients_and_c(tmp_path):
    model = _small_cnn()
    g = load_model(model)
    assert g.trainable == {"w1", "b1", "s", "t", "w2"}  # mu, var frozen; lo, hi constants
    x = np.random.default_rng(4).standard_normal((2, 2, 8, 8)).astype(np.float32)
    assert max_rel_err(reference.run(g, {"x": x})["y"], ort_outputs(model, {"x": x})[0]) <= 1e-5
    tg = mse_training(g)
    labels = np.random.default_rng(5).standard_normal((2, 4, 1, 1))
    assert fd_check(tg, x.astype(np.float64), labels, samples=6) <= 1e-6
    path = tmp_path / "cnn.onnx"
    onnx.save(model, str(path))
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        path, tmp_path / "out", steps=3, sanitize=True
    )
    assert max_rel_err(c_losses, ref_losses) <= 1e-5
    for name, value in ref_params.items():
        assert max_rel_err(c_params[name], value) <= 1e-5, name


def test_small_cnn_bit_identical_on_cortex_m4(tmp_path):
    """-ffp-contract=off and only + - * / sqrtf: the CNN kernels give the same bits on a Cortex-M4 (QEMU)."""
    from conftest import need_tools

    from poet_edge import runner
    from poet_edge.autodiff import Loss
    from poet_edge.compiler import CompileOptions, compile_model

    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = tmp_path / "cnn.onnx"
    onnx.save(_small_cnn(), str(path))
    compile_model(CompileOptions(path, "cortex-m4", 256 * 1024, tmp_path / "out", loss=Loss.MSE))
    host = runner.run_project(tmp_path / "out", "host", 3)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for name, value in host.params.items():
        assert np.array_equal(value, qemu.params[name]), name


# ---- refusals --------------------------------------------------------------------------------------
def _one_node(op, inputs, outputs, inits, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["x", *inputs], outputs, name="the_node", **attrs)
    graph = helper.make_graph(
        [node],
        "m",
        [_vi("x", [1, 2, 6, 6])],
        [_vi(o, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _refused(model) -> str:
    with pytest.raises(PoetError) as e:
        frontend.to_ir(model)
    return str(e.value)


def test_conv_dilation_refused():
    w = np.ones((2, 2, 3, 3), np.float32)
    msg = _refused(_one_node("Conv", ["w"], ["y"], {"w": w}, dilations=[2, 2]))
    assert "the_node" in msg and "dilations" in msg


def test_maxpool_dilation_and_ceil_refused():
    msg = _refused(_one_node("MaxPool", [], ["y"], {}, kernel_shape=[2, 2], dilations=[1, 2]))
    assert "the_node" in msg and "dilations" in msg
    msg = _refused(_one_node("AveragePool", [], ["y"], {}, kernel_shape=[2, 2], ceil_mode=1))
    assert "the_node" in msg and "ceil_mode" in msg


def test_batchnorm_training_mode_refused():
    stats = {k: np.ones(2, np.float32) for k in ("s", "b", "m", "v")}
    msg = _refused(_one_node("BatchNormalization", list(stats), ["y"], stats, training_mode=1))
    assert "the_node" in msg and "training_mode" in msg


def test_maxpool_indices_refused():
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], name="the_node", kernel_shape=[2, 2])
    graph = helper.make_graph(
        [node], "m", [_vi("x", [1, 2, 6, 6])], [_vi("y", None), _vi("idx", None, TensorProto.INT64)]
    )
    msg = _refused(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert "the_node" in msg and "Indices" in msg


def test_conv_3d_and_bad_shapes_refused():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="the_node")
    graph = helper.make_graph(
        [node],
        "m",
        [_vi("x", [1, 2, 4, 4, 4])],
        [_vi("y", None)],
        [numpy_helper.from_array(np.ones((2, 2, 3, 3, 3), np.float32), "w")],
    )
    msg = _refused(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert "the_node" in msg and "2-D" in msg
    msg = _refused(_one_node("Conv", ["w"], ["y"], {"w": np.ones((2, 3, 3, 3), np.float32)}))
    assert "the_node" in msg and "group" in msg
