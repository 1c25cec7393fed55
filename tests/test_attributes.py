"""Declared ONNX attributes (OpDef.attributes) against the ONNX schemas, one error for every problem of a
model (opset, data input, ops, attributes and values), the opset range, and opset-11 Softmax."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper
from oputil import fd_check, load_model, mse_training, ort_outputs, single_op_model

from poet_edge import frontend, ops, reference
from poet_edge.errors import PoetError
from poet_edge.frontend import MAX_OPSET, MIN_OPSET


def _schemas(op: str) -> list[onnx.defs.OpSchema]:
    """The schema versions of ``op`` used by some opset in MIN_OPSET..MAX_OPSET."""
    out: dict[int, onnx.defs.OpSchema] = {}
    for v in range(MIN_OPSET, MAX_OPSET + 1):
        try:
            s = onnx.defs.get_schema(op, v)
        except onnx.defs.SchemaError:
            continue  # the op does not exist yet at opset v
        out[s.since_version] = s
    return list(out.values())


@pytest.mark.parametrize("op", ops.supported_onnx_ops())
def test_declared_attributes_are_the_schemas(op):
    """Every attribute an op declares exists in some ONNX version of it in the supported opsets, and every
    attribute of those versions is declared: handled (possibly for some values only) or refused."""
    in_schema = {a for s in _schemas(op) for a in s.attributes}
    assert in_schema or _schemas(op) is not None
    declared = set(ops.get(op).attributes)
    assert declared <= in_schema, f"{op} declares attributes no ONNX version has: {declared - in_schema}"
    assert in_schema <= declared, f"{op}: ONNX attributes neither handled nor refused: {in_schema - declared}"


def test_versions_after_22_were_reviewed():
    """The op versions above opset 22 that MAX_OPSET admits: each was read in the ONNX changelog and only adds
    element types (float4 / int4 / float8 / int2), which the frontend refuses (float32 data only). Raising
    MAX_OPSET or adding an op changes this list: review the new versions, then update it."""
    seen = {
        (op, s.since_version) for op in ops.supported_onnx_ops() for s in _schemas(op) if s.since_version > 22
    }
    reviewed = {
        (op, v)
        for op in ("Flatten", "Identity", "Pad", "Reshape", "Squeeze", "Transpose", "Unsqueeze")
        for v in (23, 24, 25)
    }
    assert seen == reviewed


# ---- models ---------------------------------------------------------------------------------------
def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inits, in_shape, opset=17, inputs=None):
    graph = helper.make_graph(
        nodes, "m", inputs or [_vi("x", in_shape)], [_vi(nodes[-1].output[0], None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _w(name, *shape):
    return numpy_helper.from_array(np.full(shape, 0.1, np.float32), name)


def _refusal(model, batch=1) -> str:
    with pytest.raises(PoetError) as e:
        frontend.to_ir(model, batch)
    return str(e.value)


def test_layer_norm_stash_type_refused():
    """stash_type was ignored: statistics in another type than float32 were computed in float32."""
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", stash_type=0)
    msg = _refusal(_model([node], [_w("s", 8)], [2, 8]))
    want = "node 'ln' (LayerNormalization): unsupported attribute stash_type=0 (implemented: 1 (float32"
    assert msg == want + " statistics))"


def test_every_problem_in_one_error():
    """Bad attribute values, an attribute the op does not know, an unsupported op and a dynamic non-batch
    dimension of the data input: all named in one error, each with its node and what is supported."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s"], ["a"], name="ln", stash_type=0),
        helper.make_node("AveragePool", ["a"], ["b"], name="pool", kernel_shape=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["b", "w"], ["c"], name="conv", dilations=[2, 2], group=1, bogus=3),
        helper.make_node("LRN", ["c"], ["d"], name="lrn", size=3),
        helper.make_node(
            "BatchNormalization",
            ["d", "s4", "s4", "s4", "s4"],
            ["e"],
            name="bn",
            momentum=0.5,
            training_mode=1,
        ),
    ]
    inits = [_w("s", 8), _w("w", 4, 4, 1, 1), _w("s4", 4)]
    msg = _refusal(_model(nodes, inits, None, inputs=[_vi("x", [1, 4, "H", 8])]))
    lines = msg.splitlines()
    assert lines[0] == "the model has 7 problems (every one poet found is listed):"
    assert "input 'x': dimension 2 ('H') is dynamic" in lines[1]
    assert "node 'ln' (LayerNormalization): unsupported attribute stash_type=0 (implemented: 1" in lines[2]
    assert "node 'pool' (AveragePool): unsupported attribute ceil_mode=1 (implemented: 0)" in lines[3]
    assert (
        "node 'conv' (Conv): unsupported attribute bogus=3 (not implemented; Conv handles: auto_pad, "
        in lines[4]
    )
    assert (
        "node 'conv' (Conv): unsupported attribute dilations=[2, 2] (implemented: 1 on every axis)"
        in lines[5]
    )
    assert "node 'lrn': unsupported op LRN" in lines[6]
    assert (
        "node 'bn' (BatchNormalization): unsupported attribute training_mode=1 (implemented: 0: " in lines[7]
    )
    assert "momentum" not in msg  # accepted: it only updates the frozen running statistics
    assert msg.count("supported: ") == 1 and "Conv, " in lines[8]  # the supported ops, once


def test_the_error_is_capped():
    nodes = [
        helper.make_node("LRN", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"n{i}", size=3)
        for i in range(25)
    ]
    lines = _refusal(_model(nodes, [], [1, 3, 4, 4])).splitlines()
    assert lines[0].startswith("the model has 25 problems")
    assert [ln for ln in lines if ln.startswith("  - ")] == [
        f"  - node 'n{i}': unsupported op LRN" for i in range(20)
    ]
    assert "  ... and 5 more" in lines


@pytest.mark.parametrize("opset", [1, 6, MAX_OPSET + 1, 30])
def test_opset_outside_the_range_refused(opset):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [], [2, 3], opset=opset)
    msg = _refusal(model)
    assert msg == (
        f"the model uses ONNX opset {opset}; poet supports opsets {MIN_OPSET} to {MAX_OPSET} (re-export it "
        "with one of them, e.g. torch.onnx.export(..., opset_version=17), or convert it with "
        "onnx.version_converter.convert_version)"
    )


@pytest.mark.parametrize("opset", [MIN_OPSET, MAX_OPSET])
def test_opsets_at_the_ends_of_the_range_load(opset):
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")
    model = _model(nodes, [w, _w("b", 4)], [2, 3], opset=opset)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    got = reference.run(frontend.to_ir(model), {"x": x})["y"]
    np.testing.assert_allclose(got, np.maximum(x @ onnx.numpy_helper.to_array(w).T + 0.1, 0), rtol=1e-6)


# ---- Softmax before opset 13: the input flattened to 2-D at axis ---------------------------------------
SOFTMAX_11 = [
    ((2, 3, 4), {}, "axis 1 (the default): over the last two axes together"),
    ((2, 3, 4), {"axis": 0}, "over everything"),
    ((2, 3, 4), {"axis": -1}, "the last axis: opset 13's Softmax"),
    ((3, 5), {}, "rank 2: axis 1 is the last"),
]


@pytest.mark.parametrize(("shape", "attrs", "what"), SOFTMAX_11, ids=[c[2] for c in SOFTMAX_11])
def test_softmax_opset_11_matches_onnxruntime(shape, attrs, what):
    model = single_op_model("Softmax", [shape], attrs, opset=11)
    g = load_model(model)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    (want,) = ort_outputs(model, {"x": x})
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-7)
    if len(shape) == 3 and attrs.get("axis", 1) != -1:  # normalized over more than one axis
        assert not np.allclose(want.sum(axis=-1), 1.0)


def test_softmax_opset_11_gradient():
    tg = mse_training(load_model(single_op_model("Softmax", [(2, 3, 4)], {}, opset=11)))
    assert [n.op for n in tg.nodes if n.phase.value == "forward"].count("Reshape") >= 2
    rng = np.random.default_rng(1)
    assert fd_check(tg, rng.standard_normal((2, 3, 4)), rng.standard_normal(tg.shape("labels"))) <= 1e-6


def test_accepted_without_effect_and_spelled_out_defaults_load():
    """Attributes that do not change training (MaxPool's storage_order, Dropout's seed) and defaults spelled
    out are accepted."""
    nodes = [
        helper.make_node(
            "MaxPool", ["x"], ["a"], kernel_shape=[2, 2], storage_order=1, ceil_mode=0, dilations=[1, 1]
        ),
        helper.make_node("Dropout", ["a"], ["b"], seed=3),
        helper.make_node("LayerNormalization", ["b", "s"], ["y"], stash_type=1, axis=-1),
    ]
    g = frontend.to_ir(_model(nodes, [_w("s", 3)], [1, 2, 4, 4], opset=17))
    assert [n.op for n in g.nodes] == ["MaxPool", "Dropout", "LayerNormalization"]


def test_a_refused_attribute_does_not_cascade():
    """The readers of a node refused for an attribute get only the op and attribute checks."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s"], ["a"], name="ln", stash_type=11),
        helper.make_node("Reshape", ["a", "shape"], ["b"], name="r"),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    shape = numpy_helper.from_array(np.array([-1], np.int64), "shape")
    msg = _refusal(_model(nodes, [_w("s", 8), shape], [2, 8]))
    assert "\n" not in msg and re.match(
        r"^node 'ln' \(LayerNormalization\): unsupported attribute stash_type=11", msg
    )
