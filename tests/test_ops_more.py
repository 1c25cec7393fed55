"""Ops of models users bring, second batch: LeakyRelu, Pad (mode "constant"), Resize / Upsample (nearest,
integer factors). Gradients vs float64 finite differences, forward vs onnxruntime, generated C vs the numpy
reference (host, sanitizers), chain models trained through `poet compile` + `poet run` on the host and
bit-identical on qemu-cortex-m4, the refusals, and operator splitting (--split auto) over Pad / Resize."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import onnx
import oputil
import pytest
from conftest import need_tools, poet
from onnx import helper, numpy_helper
from oputil import c_vs_reference, fd_check, load_model, max_rel_err, mse_training, ort_outputs, rel_close
from oputil import single_op_model as one_op
from splitutil import Params, assert_same_bits, assert_split_close, save_model, stored_floor, training_graph

from poet_edge import autodiff, batch_split, frontend, ops, reference, splitting, trainable
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError

I64, F32 = np.int64, np.float32
LR = 0.05  # a 0.1% error in a C gradient shows in the parameters after 3 steps; the chains stay finite
NO_ROI = np.zeros(0, F32)  # Resize's roi, given empty (only tf_crop_and_resize reads it)
TORCH = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def case(op, shapes, attrs=None, consts=None, opset=17, scale=1.0):
    """``scale`` spreads the inputs (both signs of LeakyRelu well away from its kink)."""
    return pytest.param(op, shapes, attrs or {}, consts or {}, opset, scale, id=f"{op}-{len(CASES)}")


def pads(*p):
    return np.array(p, I64)


def resize_scales(*s):
    """Resize's inputs (roi, scales) from opset 11: an empty roi and these scales."""
    return {1: NO_ROI, 2: np.array(s, F32)}


CASES: list = []
for args in [
    ("LeakyRelu", [(3, 7)], None, None, 17, 2.0),  # alpha 0.01
    ("LeakyRelu", [(2, 3, 4)], {"alpha": 0.2}, None, 17, 2.0),
    ("LeakyRelu", [(2, 5)], {"alpha": -0.3}, None, 7, 2.0),  # negative: the gradient reads X
    ("LeakyRelu", [(2, 2, 3)], {"alpha": 0.0}, None, 16, 2.0),  # a ReLU
    ("LeakyRelu", [(4, 3)], {"alpha": 1.7}, None, 17, 2.0),
    # Pad: (data, pads[, constant_value[, axes]]); pads = begins then ends
    ("Pad", [(1, 2, 3, 4), (8,)], None, {1: pads(0, 0, 1, 2, 0, 0, 2, 1)}, 17, 1.0),  # H, W; zeros
    ("Pad", [(2, 3, 4), (6,), ()], None, {1: pads(1, 0, 2, 0, 2, 1), 2: np.array(1.5, F32)}, 13, 1.0),
    (
        "Pad",
        [(2, 3, 4, 5), (4,), (), (2,)],
        None,
        {1: pads(1, 2, 0, 3), 2: np.array(-0.5, F32), 3: pads(-1, 2)},
        18,
        1.0,
    ),
    ("Pad", [(2, 3, 5), (6,)], None, {1: pads(0, 0, 3, 0, 0, 0)}, 11, 1.0),  # one side only
    ("Pad", [(2, 2, 3, 3)], {"pads": [0, 1, 1, 0, 0, 0, 1, 2], "value": 0.25}, None, 7, 1.0),  # attributes
    ("Pad", [(2, 3), (4,)], None, {1: pads(0, 0, 0, 0)}, 17, 1.0),  # nothing padded: dX is dY
    # Resize: (X, roi, scales[, sizes])
    ("Resize", [(2, 3, 3, 4), (0,), (4,)], TORCH, resize_scales(1, 1, 2, 2), 17, 1.0),  # torch's export
    ("Resize", [(1, 2, 3, 3), (0,), (4,)], TORCH, resize_scales(1, 1, 3, 3), 13, 1.0),
    (
        "Resize",
        [(1, 2, 3, 2), (0,), (4,)],
        {"mode": "nearest"},
        resize_scales(1, 1, 2, 3),
        17,
        1.0,
    ),  # ONNX defaults
    (
        "Resize",
        [(2, 3, 4, 4), (0,), (0,), (4,)],
        TORCH,
        {1: NO_ROI, 2: np.zeros(0, F32), 3: pads(2, 3, 8, 12)},  # sizes
        11,
        1.0,
    ),
    ("Resize", [(2, 3, 5), (0,), (3,)], TORCH, resize_scales(1, 1, 3), 17, 1.0),  # 1 spatial axis
    ("Resize", [(1, 2, 2, 3, 2), (0,), (5,)], TORCH, resize_scales(1, 1, 2, 1, 3), 17, 1.0),  # 3 spatial axes
    ("Resize", [(1, 2, 3, 2), (0,), (2,)], {**TORCH, "axes": [3, 2]}, resize_scales(3, 2), 18, 1.0),
    (
        "Resize",
        [(1, 2, 2, 3), (0,), (4,)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "pytorch_half_pixel",
            "nearest_mode": "round_prefer_ceil",
        },
        resize_scales(1, 1, 3, 2),
        17,
        1.0,
    ),
    (
        "Resize",
        [(1, 2, 2, 3), (0,), (4,)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "tf_half_pixel_for_nn",
            "nearest_mode": "floor",
        },
        resize_scales(1, 1, 3, 2),
        17,
        1.0,
    ),
    (
        "Resize",
        [(1, 2, 3, 3), (4,)],
        {"mode": "nearest"},
        {1: np.array([1, 1, 2, 3], F32)},
        10,
        1.0,
    ),  # Resize-10
    ("Upsample", [(2, 2, 3, 2), (4,)], {"mode": "nearest"}, {1: np.array([1, 1, 2, 3], F32)}, 9, 1.0),
    ("Upsample", [(1, 3, 2, 2)], {"mode": "nearest", "scales": [1.0, 1.0, 3.0, 2.0]}, None, 7, 1.0),
]:
    CASES.append(case(*args))


def _model(op, shapes, attrs, consts, opset, scale):
    return one_op(op, shapes, attrs, consts, opset=opset, scale=scale)


def _data(tg, shape, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(tg.shape("labels"))


@pytest.mark.parametrize("op,shapes,attrs,consts,opset,scale", CASES)
def test_gradient_vs_finite_differences(op, shapes, attrs, consts, opset, scale):
    tg = mse_training(load_model(_model(op, shapes, attrs, consts, opset, scale)))
    assert op in {n.op for n in tg.nodes}
    x, y = _data(tg, shapes[0])
    assert fd_check(tg, scale * x, y) <= 1e-6


@pytest.mark.parametrize("op,shapes,attrs,consts,opset,scale", CASES)
def test_forward_vs_onnxruntime(op, shapes, attrs, consts, opset, scale):
    model = _model(op, shapes, attrs, consts, opset, scale)
    g = load_model(model)
    x = (scale * np.random.default_rng(3).standard_normal(shapes[0])).astype(F32)
    ours = reference.run(g, {"x": x})[g.outputs[0]]
    (theirs,) = ort_outputs(model, {"x": x})
    assert ours.shape == theirs.shape
    assert max_rel_err(ours, theirs) <= 1e-6


# ---- the rules at their edges ----
def test_leaky_relu_gradient_at_zero_follows_torch():
    """torch's leaky_relu backward: x > 0 ? dy : alpha * dy, so x = 0 gets alpha * dy. The gradient node reads
    Y for alpha >= 0 (the same sign test) and X for a negative alpha."""
    x = np.array([-2.0, -0.0, 0.0, 1e-30, 3.0], F32)
    dy = np.full_like(x, 2.0)
    fwd, grad = ops.get("LeakyRelu").forward, ops.get("LeakyReluGrad").forward
    for alpha in (0.1, 0.0, -0.5):
        y = fwd([x], {"alpha": alpha})[0]
        np.testing.assert_array_equal(y, np.where(x > 0, x, x * F32(alpha)))
        t = y if alpha >= 0 else x
        got = grad([t, dy], {"alpha": alpha})[0]
        np.testing.assert_array_equal(got, F32([2 * alpha, 2 * alpha, 2 * alpha, 2, 2]))
    for alpha, read in ((0.2, "y"), (-0.2, "t")):  # y: the op's output; t: its input (x + p0)
        tg = mse_training(load_model(one_op("LeakyRelu", [(2, 3)], {"alpha": alpha})))
        (node,) = [n for n in tg.nodes if n.op == "LeakyReluGrad"]
        assert node.inputs[0] == {"y": "y0", "t": "t0"}[read]


def test_pad_gradient_is_dy_cropped():
    """PadGrad cuts X's part out of dY (Slice's numpy and C kernel), with every axis's pads as attributes."""
    model = one_op("Pad", [(1, 2, 3, 4), (8,)], {}, {1: pads(0, 0, 1, 2, 0, 0, 2, 1)})
    tg = mse_training(load_model(model))
    (node,) = [n for n in tg.nodes if n.op == "PadGrad"]
    assert node.attrs["pads"] == (0, 0, 1, 2, 0, 0, 2, 1) and tg.shape(node.outputs[0]) == (1, 2, 3, 4)
    dy = np.arange(1 * 2 * 6 * 7, dtype=F32).reshape(1, 2, 6, 7)
    np.testing.assert_array_equal(ops.get("PadGrad").forward([dy], node.attrs)[0], dy[:, :, 1:4, 2:6])
    call = ops.get("PadGrad").kernel(node, tg.shape)
    assert call.func == "poet_strided_copy_f32"


def test_resize_gradient_adds_each_block_in_row_major_order():
    """dX of a 2x3 block: ((((((0 + a) + b) + c) + d) + e) + f) in float32, the C kernel's order (1e8 and -1e8
    cancel only when added in that order, leaving the 1s added after them)."""
    dy = np.ones((1, 1, 2, 3), F32)
    dy[0, 0, 0, 0], dy[0, 0, 0, 1] = 1e8, -1e8
    dx = ops.get("ResizeGrad").forward([dy], {"scales": (1, 1, 2, 3)})[0]
    assert dx.shape == (1, 1, 1, 1) and dx[0, 0, 0, 0] == 4.0  # (1e8 - 1e8) + 1 + 1 + 1 + 1
    x = np.arange(6, dtype=F32).reshape(1, 1, 2, 3)
    y = ops.get("Resize").forward([x], {"scales": (1.0, 1.0, 2.0, 3.0)})[0]
    assert y.shape == (1, 1, 4, 9) and y[0, 0, 3, 8] == 5 and y[0, 0, 1, 2] == 0 and y[0, 0, 2, 3] == 4


# ---- refusals: one line naming the node, the op and what is supported ----
def _refused(model, pattern):
    with pytest.raises(PoetError, match=pattern):
        frontend.to_ir(model)


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_modes_other_than_constant_refused(mode):
    model = one_op("Pad", [(1, 2, 3, 3), (8,)], {"mode": mode}, {1: pads(0, 0, 1, 1, 0, 0, 1, 1)}, opset=19)
    _refused(model, rf"node 'op' \(Pad\): unsupported attribute mode='{mode}' \(implemented: 'constant'\)")


def test_pad_negative_pads_refused():
    model = one_op("Pad", [(1, 2, 4, 4), (8,)], {}, {1: pads(0, 0, -1, 0, 0, 0, 1, 1)})
    _refused(
        model,
        r"node 'op' \(Pad\): unsupported negative pads \[0, 0, -1, 0, 0, 0, 1, 1\] \(cropping\); "
        r"supported: mode 'constant' with constant pads >= 0",
    )


def test_pad_nan_constant_refused():
    model = one_op("Pad", [(1, 2, 3), (6,), ()], {}, {1: pads(0, 0, 1, 0, 0, 1), 2: np.array(np.nan, F32)})
    _refused(model, r"node 'op' \(Pad\): unsupported constant_value NaN; supported: mode 'constant' with")


RESIZE_SUPPORTED = r"Resize supports mode 'nearest' upsampling .* by integer factors \(N and C factors 1\)"


@pytest.mark.parametrize(
    "attrs,consts,what",
    [
        (
            {"mode": "linear"},
            resize_scales(1, 1, 2, 2),
            r"unsupported attribute mode='linear' \(implemented: 'nearest'; ",
        ),
        (
            {"mode": "cubic"},
            resize_scales(1, 1, 2, 2),
            r"unsupported attribute mode='cubic' \(implemented: 'nearest'; ",
        ),
        (TORCH, resize_scales(1, 1, 1.5, 1.5), r"scales \(1.0, 1.0, 1.5, 1.5\) for input \(1, 2, 4, 4\); "),
        (TORCH, resize_scales(1, 1, 0.5, 0.5), r"scales \(1.0, 1.0, 0.5, 0.5\) for input \(1, 2, 4, 4\); "),
        (TORCH, resize_scales(1, 2, 2, 2), r"scales \(1.0, 2.0, 2.0, 2.0\) for input \(1, 2, 4, 4\); "),
        (
            TORCH,
            {1: NO_ROI, 2: np.zeros(0, F32), 3: pads(1, 2, 6, 8)},
            r"sizes \(1, 2, 6, 8\) \(factors \(1.0, 1.0, 1.5, 2.0\)\) for input \(1, 2, 4, 4\); ",
        ),
        (
            {**TORCH, "nearest_mode": "round_prefer_floor"},
            resize_scales(1, 1, 3, 3),
            r"unsupported coordinate_transformation_mode='asymmetric' with "
            r"nearest_mode='round_prefer_floor'; ",
        ),
        (
            {"mode": "nearest", "coordinate_transformation_mode": "align_corners"},
            resize_scales(1, 1, 2, 2),
            r"unsupported attribute coordinate_transformation_mode='align_corners' "
            r"\(implemented: 'asymmetric' or ",
        ),
    ],
    ids=[
        "linear",
        "cubic",
        "non-integer",
        "downsampling",
        "channels",
        "sizes",
        "asymmetric-round",
        "align-corners",
    ],
)
def test_resize_refusals(attrs, consts, what):
    shapes = [(1, 2, 4, 4), (0,), (4,)] + ([(4,)] if 3 in consts else [])
    model = one_op("Resize", shapes, attrs, consts, opset=13)
    if "unsupported attribute" in what:  # the attribute check's own words, then what Resize supports
        _refused(model, rf"node 'op' \(Resize\): {what}")
    else:
        _refused(model, rf"node 'op' \(Resize\): {what}{RESIZE_SUPPORTED}")


def test_upsample_linear_refused():
    model = one_op(
        "Upsample", [(1, 2, 2, 2), (4,)], {"mode": "linear"}, {1: np.array([1, 1, 2, 2], F32)}, opset=9
    )
    _refused(
        model,
        r"node 'op' \(Upsample\): unsupported attribute mode='linear' \(implemented: 'nearest'; "
        + RESIZE_SUPPORTED,
    )


# ---- chains compiled to C ----
def conv(w, pad=1, stride=1):
    return ("Conv", [w, (w[0],)], {"pads": [pad] * 4, "strides": [stride, stride]})


def unet_chain():
    """Conv -> LeakyRelu -> Pad (top/right, constant 0.5) -> Conv stride 2 -> Resize x2 (torch's export) ->
    Conv -> LeakyRelu (negative alpha) -> GlobalAveragePool -> Flatten -> Gemm: 6x6 -> 7x7 -> 3x3 -> 6x6."""
    return oputil.chain_model(
        [
            conv((4, 3, 3, 3)),
            ("LeakyRelu", [], {"alpha": 0.1}),
            ("Pad", [pads(0, 0, 1, 0, 0, 0, 0, 1), np.array(0.5, F32)], {}),
            conv((4, 4, 3, 3), pad=0, stride=2),
            ("Resize", [NO_ROI, np.array([1, 1, 2, 2], F32)], TORCH),
            conv((5, 4, 3, 3)),
            ("LeakyRelu", [], {"alpha": -0.2}),
            ("GlobalAveragePool", [], {}),
            ("Flatten", [], {}),
            ("Gemm", [(5, 5), (5,)], {"transB": 1}),
        ],
        (2, 3, 6, 6),
        scale=0.6,
    )


def legacy_chain():
    """Opset 9: 1-D Conv -> Pad (attribute form, channels and length, constant 0.3) -> LeakyRelu ->
    Upsample x3 -> Mul."""
    return oputil.chain_model(
        [
            ("Conv", [(3, 2, 3), (3,)], {}),
            ("Pad", [], {"pads": [0, 1, 1, 0, 1, 2], "value": 0.3}),
            ("LeakyRelu", [], {"alpha": 0.3}),
            ("Upsample", [np.array([1, 1, 3], F32)], {"mode": "nearest"}),
            ("Mul", [(5, 18)], {}),
        ],
        (2, 2, 5),
        opset=9,
        scale=0.8,
    )


CHAINS = {"unet": (unet_chain, (2, 3, 6, 6)), "legacy": (legacy_chain, (2, 2, 5))}


@pytest.mark.parametrize("name", CHAINS)
def test_chain(name, tmp_path):
    """Gradients, forward vs onnxruntime, and the generated C (ASan + UBSan) vs the numpy reference."""
    need_tools("gcc")
    build, shape = CHAINS[name]
    model = build()
    g = load_model(model)
    tg = mse_training(g)
    x, y = _data(tg, shape)
    assert fd_check(tg, x, y, samples=6) <= 1e-6
    xf = x.astype(F32)
    assert max_rel_err(reference.run(g, {"x": xf})[g.outputs[0]], ort_outputs(model, {"x": xf})[0]) <= 1e-6
    onnx.save(model, tmp_path / "m.onnx")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        tmp_path / "m.onnx", tmp_path / "out", steps=3, batch=shape[0], lr=LR, sanitize=True
    )
    assert np.all(np.isfinite(ref_losses)) and rel_close(c_losses, ref_losses, 1e-5), (c_losses, ref_losses)
    for k, v in ref_params.items():
        assert rel_close(c_params[k], v, 1e-5), k


@pytest.mark.parametrize("name", CHAINS)
def test_cli_and_qemu_bit_identical(name, tmp_path):
    """poet inspect / compile / run (host) on the command line, then qemu-cortex-m4 gives the host's bits."""
    oputil.cli_and_qemu_bit_identical(CHAINS[name][0](), tmp_path)


# ---- operator splitting (--split) over Pad, Resize and their gradients ----
def split_model(path, sizes=False, batch=1):
    """x[1,3,12,12] -> Conv 3->8 -> LeakyRelu -> Pad 1 (Constant pads) -> Conv 8->8 stride 2 -> LeakyRelu ->
    Resize x2 (torch's export; ``sizes``: by sizes [1, 8, 12, 12], not scales) -> Conv 8->8 -> LeakyRelu ->
    GlobalAveragePool -> Flatten -> Gemm 8->5."""
    param = Params(7, 0.2)
    k = helper.make_node
    by = np.array([batch, 8, 12, 12], np.int64) if sizes else np.array([1, 1, 2, 2], F32)

    def conv(x, y, w, **kw):
        return k("Conv", [x, param(f"w{w}", 8, 8 if w else 3, 3, 3), param(f"b{w}", 8)], [y], **kw)

    nodes = [
        conv("x", "c0", 0, pads=[1, 1, 1, 1]),
        k("LeakyRelu", ["c0"], ["l0"], alpha=0.1),
        k("Constant", [], ["pads"], value=numpy_helper.from_array(pads(0, 0, 1, 1, 0, 0, 1, 1))),
        k("Pad", ["l0", "pads"], ["p0"]),
        conv("p0", "c1", 1, strides=[2, 2]),
        k("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
        k("Constant", [], ["by"], value=numpy_helper.from_array(by)),
        k("Resize", ["l1", "", *([""] if sizes else []), "by"], ["r0"], **TORCH),  # roi, scales[, sizes]
        conv("r0", "c2", 2, pads=[1, 1, 1, 1]),
        k("LeakyRelu", ["c2"], ["l2"], alpha=0.1),
        k("GlobalAveragePool", ["l2"], ["g"]),
        k("Flatten", ["g"], ["f"]),
        k("Gemm", ["f", param("w3", 5, 8), param("b3", 5)], ["y"], transB=1),
    ]
    return save_model(path, "split_more", nodes, param.inits, [batch, 3, 12, 12], [batch, 5])


@pytest.mark.parametrize("sizes", [False, True], ids=["scales", "sizes"])
def test_pad_resize_gradients_and_leaky_relu_run_in_channel_tiles(tmp_path, sizes):
    """At 512 B tiles Pad, PadGrad, Resize (by scales or by sizes, whose tiles get the factors), ResizeGrad,
    LeakyRelu and LeakyReluGrad run per channel tile, nothing joined between them; the floor falls, the
    numpy steps stay within 1e-6 of the unsplit graph's, and the C program gives the unsplit program's bits
    on host and qemu."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = split_model(tmp_path / "m.onnx", sizes)
    tg = training_graph(path)
    s = splitting.split_graph(tg, 512)
    tiled = {"Pad", "PadGrad", "Resize", "ResizeGrad", "LeakyRelu", "LeakyReluGrad"}
    mine = [n.name for n in tg.nodes if n.op in tiled]
    assert {n.op for n in tg.nodes if n.name in mine} == tiled
    assert set(mine) <= set(s.split_nodes), sorted(set(mine) - set(s.split_nodes))
    parts = [n for n in s.graph.nodes if n.op == "Resize"]
    assert len(parts) >= 2 and all(n.name.startswith("Resize_7/t") for n in parts)
    assert all(s.graph.shape(n.inputs[0])[1] < 8 for n in parts)  # channel tiles of l1, not l1 joined
    assert not {"join/l1", "join/r0"} & {n.name for n in s.graph.nodes}
    assert stored_floor(s.graph) < stored_floor(tg)
    assert_split_close(tg, s, LR, 3)
    base = CompileOptions(path, "host", 4 << 20, tmp_path / "plain", 1, Loss.CROSS_ENTROPY, LR, 8192, "none")
    base = replace(base, train="all", training=autodiff.DEFAULT_OPTIONS, kernels="fast")
    compile_model(replace(base, split="off"))
    compile_model(replace(base, out=tmp_path / "split", split="512B"))
    assert_same_bits(tmp_path / "plain", tmp_path / "split", 3)


def test_a_resize_by_sizes_loads_as_scales_and_runs_per_part_of_the_batch(tmp_path):
    """sizes name the whole input's dims (the batch's N too); the frontend loads them as the factors, so
    batch splitting runs the Resize per part, and the split training stays within 1e-6 of the whole."""
    g = frontend.load(split_model(tmp_path / "m.onnx", sizes=True, batch=2), 2)
    (resize,) = [n for n in g.nodes if n.op == "Resize"]
    assert "sizes" not in resize.attrs and tuple(resize.attrs["scales"]) == (1, 1, 2, 2)
    s = batch_split.split_batch(g, 2)
    assert {n.name for n in s.graph.nodes if n.op == "Resize"} == {"Resize_7/n0", "Resize_7/n1"}
    tg, ts = (
        autodiff.training_graph(x, Loss.CROSS_ENTROPY, trainable.select(x, "all")) for x in (g, s.graph)
    )
    rng = np.random.default_rng(3)
    data = [(rng.standard_normal((2, 3, 12, 12)).astype(np.float32), np.array([1, 4], np.int32))] * 3
    (la, a), (lb, b) = reference.train(tg, data, LR), reference.train(ts, data, LR)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6
    assert all(max_rel_err(b[k], a[k]) <= 1e-6 for k in a)


def test_compile_split_auto_below_the_unsplit_floor(tmp_path):
    """`poet compile` (default --split auto) on cortex-m4: below every floor it refuses, naming the unsplit
    floor, the floor splitting reaches and the node that sets it (not Resize, which runs in channel tiles
    too); between the two it compiles in tiles, and the split program on qemu-cortex-m4 gives the bits of
    the unsplit program."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    from poet_edge import runner

    path = split_model(tmp_path / "m.onnx")
    common = ("--device", "cortex-m4", "--loss", "cross-entropy", "--lr", str(LR), "--scheduler", "greedy")
    r = poet("compile", path, *common, "--ram", "4KB", "-o", tmp_path / "tiny")
    assert r.returncode != 0
    msg = r.stderr
    unsplit = re.search(r"below the memory floor of this model, (\d+) B", msg)
    split = re.search(
        r"with operator splitting \(with any tile size\) the floor is (\d+) B .*, set by node (\S+)", msg
    )
    assert unsplit and split, msg
    assert not split.group(2).startswith("Resize_7") and int(split.group(1)) < int(unsplit.group(1))
    ram = (int(split.group(1)) + int(unsplit.group(1))) // 2
    r = poet("compile", path, *common, "--ram", str(ram), "-o", tmp_path / "m4")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "m4" / "plan.json").read_text())
    assert plan["split"] == "auto" and plan["tiles"]["tensors"]["p0"] >= 2 and plan["peak_ram_bytes"] <= ram
    r = poet("compile", path, *common, "--ram", "4MB", "--split", "off", "-o", tmp_path / "plain")
    assert r.returncode == 0, r.stderr
    host = runner.run_project(tmp_path / "m4", "host", 3)
    qemu = runner.run_project(tmp_path / "m4", "qemu-cortex-m4", 3)
    plain = runner.run_project(tmp_path / "plain", "host", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps] == [s.loss for s in plain.steps]
    for k, v in plain.params.items():
        assert np.array_equal(v, host.params[k]) and np.array_equal(v, qemu.params[k]), k
