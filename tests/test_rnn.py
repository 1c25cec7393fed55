"""GRU and LSTM: forward vs onnxruntime, BPTT gradients vs finite differences, refusals, generated C
vs the numpy reference (host, sanitizers), host vs qemu-cortex-m4 bit for bit, the GRU keyword spotter.

An omitted B followed by a given initial_h is not tested: the frontend refuses an empty middle input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oputil import c_vs_reference, fd_check, load_model, max_rel_err, mse_training, ort_outputs, rel_close

from poet_edge import autodiff, reference
from poet_edge.errors import PoetError

S, B, IN, H = 4, 2, 3, 5
GATES = {"GRU": 3, "LSTM": 4}


def rnn_model(
    op: str,
    direction: str = "forward",
    bias: bool = True,
    init: bool = True,
    use: tuple[int, ...] = (0, 1),
    attrs: dict | None = None,
    seq_lens: list[int] | None = None,
    seed: int = 0,
    dx: bool = True,
) -> onnx.ModelProto:
    """y = sum of the used outputs (Y flattened to [S, D*B*H], the states tiled to match) of op(x + px, ...):
    input x[S, B, IN]; px makes dX a checked parameter gradient; every weight and initial state is trained."""
    rng = np.random.default_rng(seed)
    d, g = (2 if direction == "bidirectional" else 1), GATES[op]
    inits = []

    def param(name, shape, scale=0.5):
        inits.append(numpy_helper.from_array((scale * rng.standard_normal(shape)).astype(np.float32), name))
        return name

    ins = ["xp", param("W", (d, g * H, IN)), param("R", (d, g * H, H))]
    ins.append(param("Bias", (d, 2 * g * H)) if bias else "")
    if seq_lens is not None:
        inits.append(numpy_helper.from_array(np.array(seq_lens, np.int32), "lens"))
    ins.append("lens" if seq_lens is not None else "")
    n_states = 2 if op == "LSTM" else 1
    ins += [param(f"init{k}", (d, B, H)) if init else "" for k in range(n_states)]
    while ins[-1] == "":
        ins.pop()
    outs = ["Y", "Yh", "Yc"][: max(use) + 1]
    nodes = [
        helper.make_node("Add", ["x", param("px", (S, B, IN))], ["xp"])
        if dx
        else helper.make_node("Identity", ["x"], ["xp"]),
        helper.make_node(op, ins, outs, name="rnn", hidden_size=H, direction=direction, **(attrs or {})),
    ]
    terms = []
    for k in use:
        if k == 0:
            nodes.append(helper.make_node("Reshape", ["Y", "shape_y"], ["t0"]))
        else:
            nodes.append(helper.make_node("Reshape", [outs[k], "shape_s"], [f"s{k}"]))
            nodes.append(helper.make_node("Mul", [f"s{k}", param(f"w{k}", (S, d * B * H))], [f"t{k}"]))
        terms.append(f"t{k}")
    inits += [
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("shape_y", [S, -1]), ("shape_s", [1, -1]))
    ]
    y = terms[0]
    for k, t in enumerate(terms[1:]):
        nodes.append(helper.make_node("Add", [y, t], [f"sum{k}"]))
        y = f"sum{k}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes,
        f"{op}_test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, B, IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [S, d * B * H])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


CASES = {
    "gru": ("GRU", {}),
    "gru_reverse_no_bias": ("GRU", {"direction": "reverse", "bias": False, "init": False}),
    "gru_bidirectional": ("GRU", {"direction": "bidirectional"}),
    "gru_no_initial_h": ("GRU", {"init": False, "use": (1,)}),
    "gru_only_y_full_lens": ("GRU", {"use": (0,), "seq_lens": [S] * B}),
    "gru_lbr0": ("GRU", {"lbr": 0}),
    "gru_lbr0_bidirectional_only_y": ("GRU", {"lbr": 0, "direction": "bidirectional", "use": (0,)}),
    "gru_lbr0_reverse_no_init": ("GRU", {"lbr": 0, "direction": "reverse", "init": False, "dx": False}),
    "lstm": ("LSTM", {"use": (0, 1, 2)}),
    "lstm_reverse_no_init": ("LSTM", {"direction": "reverse", "init": False}),
    "lstm_bidirectional": ("LSTM", {"direction": "bidirectional", "use": (1, 2)}),
    "lstm_no_dx": ("LSTM", {"dx": False, "use": (1,)}),
    "gru_bidirectional_no_dx": ("GRU", {"direction": "bidirectional", "dx": False}),
    "lstm_yc_only_no_bias": ("LSTM", {"use": (2,), "bias": False, "init": False}),
}


def _model(name):
    op, kw = CASES[name]
    kw = dict(kw)
    attrs = {"linear_before_reset": kw.pop("lbr", 1)} if op == "GRU" else {}
    return rnn_model(op, attrs=attrs, **kw)


@pytest.mark.parametrize("name", CASES)
def test_forward_vs_onnxruntime(name):
    model = _model(name)
    g = load_model(model)
    x = np.random.default_rng(1).standard_normal((S, B, IN)).astype(np.float32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    theirs = ort_outputs(model, {"x": x})[0]
    assert max_rel_err(ours, theirs) <= 1e-6


@pytest.mark.parametrize("name", CASES)
def test_bptt_gradients_vs_finite_differences(name):
    model = _model(name)
    tg = mse_training(load_model(model))
    assert any(n.op in ("GRUGrad", "LSTMGrad") for n in tg.nodes)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((S, B, IN))
    y = rng.standard_normal(tg.shape(load_model(model).outputs[0]))
    assert fd_check(tg, x, y, samples=8) <= 1e-6


def test_lstm_cell_states_are_a_scheduled_value():
    """LSTM's backward reads the cell states from their own node: bytes visible to the scheduler."""
    tg = mse_training(load_model(_model("lstm")))
    states = [n for n in tg.nodes if n.op == "LSTMStates"]
    assert len(states) == 1 and tg.shape(states[0].outputs[0]) == (S, 1, B, H)
    grad = next(n for n in tg.nodes if n.op == "LSTMGrad")
    assert states[0].outputs[0] in grad.inputs


def test_work_counts_the_recomputed_gates():
    from poet_edge import ops

    tg = mse_training(load_model(_model("gru")))
    fwd = next(n for n in tg.nodes if n.op == "GRU")
    bwd = next(n for n in tg.nodes if n.op == "GRUGrad")
    work = {
        n.op: ops.get(n.op).work([tg.shape(t) for t in n.inputs], [tg.shape(t) for t in n.outputs], n.attrs)
        for n in (fwd, bwd)
    }
    assert work["GRU"].macs == S * B * 3 * H * (IN + H)
    assert work["GRUGrad"].macs == 3 * work["GRU"].macs
    tg = mse_training(load_model(_model("gru_bidirectional_no_dx")))
    bwd = next(n for n in tg.nodes if n.op == "GRUGrad")
    assert len(bwd.outputs) == 5 and not bwd.attrs["has_dx"]  # no dX buffer when X needs no gradient
    w = ops.get("GRUGrad").work(
        [tg.shape(t) for t in bwd.inputs], [tg.shape(t) for t in bwd.outputs], bwd.attrs
    )
    assert w.macs == S * 2 * B * (3 * 3 * H * (IN + H) - 3 * H * IN)
    # linear_before_reset=0: r ⊙ h for all units first (one more reset-gate pass); without Y_h the forward's
    # last step evaluates it for every unit again
    g = load_model(_model("gru_lbr0_bidirectional_only_y"))
    fwd = g.nodes[1]
    w = ops.get("GRU").work([g.shape(t) for t in fwd.inputs], [g.shape(t) for t in fwd.outputs], fwd.attrs)
    assert w.macs == 2 * B * (S * 3 * H * (IN + H) + H * (IN + H) * (S + H))


@pytest.mark.parametrize(
    ("op", "attrs", "match"),
    [
        ("GRU", {"linear_before_reset": 2}, "linear_before_reset=2"),
        ("GRU", {"linear_before_reset": 1, "layout": 1}, "layout=1"),
        ("GRU", {"linear_before_reset": 1, "clip": 3.0}, "clip"),
        ("GRU", {"linear_before_reset": 1, "activations": ["Relu", "Tanh"]}, "activations"),
        ("LSTM", {"input_forget": 1}, "input_forget=1"),
        ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]}, "activations"),
    ],
)
def test_unsupported_attributes_refused(op, attrs, match):
    model = rnn_model(op, attrs=attrs)
    with pytest.raises(PoetError, match=rf"node 'rnn' \({op}\).*{match}"):
        load_model(model)


def test_default_activations_spelled_out_are_accepted():
    load_model(rnn_model("GRU", attrs={"linear_before_reset": 1, "activations": ["Sigmoid", "Tanh"]}))


def test_partial_sequence_lens_refused():
    model = rnn_model("GRU", attrs={"linear_before_reset": 1}, seq_lens=[S, S - 1])
    with pytest.raises(PoetError, match=r"node 'rnn' \(GRU\).*sequence_lens.*only full lengths"):
        load_model(model)


def test_runtime_sequence_lens_refused():
    model = rnn_model("GRU", attrs={"linear_before_reset": 1}, seq_lens=[S, S])
    lens = next(k for k, t in enumerate(model.graph.initializer) if t.name == "lens")
    del model.graph.initializer[lens]  # 'lens' is computed at run time instead of being a constant
    model.graph.node.insert(1, helper.make_node("Relu", ["xp"], ["lens"]))
    with pytest.raises(PoetError, match=r"node 'rnn' \(GRU\): input 4 'lens' must be a constant"):
        load_model(model)


def test_peepholes_refused():
    model = rnn_model("LSTM")
    rnn = next(n for n in model.graph.node if n.op_type == "LSTM")
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 3 * H), np.float32), "P"))
    rnn.input.append("P")
    with pytest.raises(PoetError, match="peephole"):
        load_model(model)


# ---- generated C ----
@pytest.mark.parametrize(
    "name",
    [
        "gru",
        "gru_bidirectional",
        "gru_no_initial_h",
        "gru_bidirectional_no_dx",
        "gru_lbr0",
        "gru_lbr0_bidirectional_only_y",
        "gru_lbr0_reverse_no_init",
        "lstm",
        "lstm_bidirectional",
        "lstm_reverse_no_init",
        "lstm_no_dx",
    ],
)
def test_generated_c_vs_reference(name, tmp_path):
    """3 SGD steps in C (host, ASan+UBSan) vs the numpy reference: losses and parameters within 1e-5."""
    from conftest import need_tools

    need_tools("gcc")
    onnx.save(_model(name), tmp_path / "m.onnx")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        tmp_path / "m.onnx", tmp_path / "out", steps=3, lr=0.05, sanitize=True
    )
    assert rel_close(c_losses, ref_losses, 1e-5), (c_losses, ref_losses)
    for k, v in ref_params.items():
        assert rel_close(c_params[k], v, 1e-5), k


@pytest.mark.parametrize("name", ["gru_bidirectional", "gru_lbr0_bidirectional_only_y", "lstm"])
def test_bit_identical_on_cortex_m4(name, tmp_path):
    from conftest import need_tools

    from poet_edge import runner
    from poet_edge.compiler import CompileOptions, compile_model

    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    onnx.save(_model(name), tmp_path / "m.onnx")
    compile_model(
        CompileOptions(
            tmp_path / "m.onnx", "cortex-m4", 256 * 1024, tmp_path / "out", 1, autodiff.Loss.MSE, 0.05
        )
    )
    host = runner.run_project(tmp_path / "out", "host", 3)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k


def test_zoo_gru_kws_on_cortex_m4_within_its_floor(tmp_path):
    """The zoo's GRU keyword spotter at 150 KiB (its floor is 146,336 B): trains on qemu-cortex-m4 bit for
    bit like on the host, linked into a 150 KiB RAM region."""
    from conftest import EXAMPLES, need_tools

    from poet_edge import runner
    from poet_edge.compiler import CompileOptions, compile_model

    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    model = EXAMPLES / "zoo" / "gru_kws.onnx"
    compile_model(
        CompileOptions(model, "cortex-m4", 150 * 1024, tmp_path / "out", 1, autodiff.Loss.CROSS_ENTROPY, 0.05)
    )
    host = runner.run_project(tmp_path / "out", "host", 2)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", 2)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k


def test_forward_matches_onnx_node_tests():
    """ONNX's own GRU/LSTM node tests request only Y_h (an omitted Y is refused for training, so
    test_onnx_node.py records them as refusals): compare our forward on every case whose attributes we
    support, on each output the case names (the GRU cases use linear_before_reset=0)."""
    from test_onnx_node import cases

    from poet_edge import ops
    from poet_edge.frontend import node_attrs
    from poet_edge.ir import Node
    from poet_edge.ops.base import attribute_problems

    checked = []
    for case in cases():  # the single-node cases of supported ops, collected once per session
        pn = case.model.graph.node[0]
        if pn.op_type not in GATES:
            continue
        attrs = node_attrs(pn)
        node = Node(
            "n", pn.op_type, tuple(t for t in pn.input if t), ("Y", "Y_h", "Y_c")[: len(pn.output)], attrs
        )
        try:
            if attribute_problems(ops.get(pn.op_type), node_attrs(pn)):
                continue
            ops.get(pn.op_type).check(node)
        except PoetError:
            continue  # linear_before_reset=0, layout=1, peepholes: refused with a message
        feeds, expected = case.data_sets[0]
        values = dict(zip([i.name for i in case.model.graph.input], feeds, strict=True))
        if len(pn.input) > 4 and pn.input[4]:
            attrs["sequence_lens"] = tuple(int(v) for v in values[pn.input[4]])
        xs = [np.asarray(values[t]) for k, t in enumerate(pn.input) if t and k != 4]
        got = ops.get(pn.op_type).forward(xs, attrs)
        outs = [k for k, t in enumerate(pn.output) if t]
        for k, e in zip(outs, expected, strict=True):
            np.testing.assert_allclose(got[k], e, rtol=1e-5, atol=1e-6)
        checked.append(case.name)
    print("checked:", checked)
    want = {
        "test_lstm_defaults",
        "test_lstm_with_initial_bias",
        "test_gru_defaults",
        "test_gru_with_initial_bias",
    }
    assert want <= set(checked), checked


@pytest.mark.parametrize("name", ["gru_kws", "lstm_kws"])
def test_trains_like_pytorch(name):
    """3 SGD steps of the numpy reference (float32) vs PyTorch's own training of the same model, stored by
    tests/data/rnn/make_torch_reference.py: losses and logits after training within 1e-5 (relative)."""
    from conftest import EXAMPLES, ROOT

    from poet_edge import frontend

    data = np.load(ROOT / "tests" / "data" / "rnn" / f"{name}.npz")
    path = (
        EXAMPLES / "zoo" / "gru_kws.onnx"
        if name == "gru_kws"
        else ROOT / "tests" / "data" / "rnn" / "lstm_kws.onnx"
    )
    g = frontend.load(path, batch=3)
    tg = autodiff.training_graph(g)
    batches = [(data["x"], data["labels"])] * len(data["losses"])
    losses, params = reference.train(tg, batches, 0.05)
    assert max_rel_err(losses, data["losses"]) <= 1e-5
    after = reference.run(g, {g.inputs[0]: data["x"]}, params)[g.outputs[0]]
    assert max_rel_err(after, data["logits_after"]) <= 1e-5
