"""Pools in row tiles (issue 57, poet_edge/splitting.py): MaxPool, AveragePool and their gradients run per row
tile, each part on the rows its windows read (pool_common.forward_rows / grad_rows), so no pool node needs its
whole input or output. A gradient part reads the dY rows whose windows touch its dX rows and the X rows those
windows read, and writes only its own rows: every dX element gets the unsplit additions in the unsplit order.
The split step keeps the unsplit parameters bit for bit in C (host, reference and fast kernels, and
qemu-cortex-m4)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import need_tools
from onnx import helper, numpy_helper
from oputil import max_rel_err
from splitutil import assert_same_bits, assert_split_close, save_model, stored_floor, training_graph

from poet_edge import autodiff, frontend, ops, planning, reference, runner, splitting, trainable
from poet_edge import microbench as mb
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.memory_floor import memory_floor
from poet_edge.ops.pool_common import forward_rows, grad_rows, output_spans
from poet_edge.profiles import load_profile

LR = 0.001  # the conv weight gradient sums 576 positions: a larger step overshoots (loss 3.6 -> 45)
STEPS = 3
ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"
# (kernel, stride, pads top/bottom, ceil_mode): overlapping, non-overlapping, padded, clipped last window
GEOMETRIES = [(3, 2, (1, 1), 0), (3, 2, (1, 1), 1), (2, 2, (0, 0), 0), (3, 1, (1, 1), 0), (2, 1, (0, 1), 0)]


def pools_model(path: Path) -> Path:
    """x[1,2,24,24] -> Conv 2->4 3x3 -> Relu -> MaxPool 3x3 stride 2 pad 1 ceil_mode (13x13, overlapping
    windows, the last one clipped) -> AveragePool 3x3 stride 1 pad 1 (count_include_pad 0: edge counts) ->
    MaxPool 2x2 stride 2 (6x6) -> Flatten -> Gemm 144->5."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array((scale * rng.standard_normal(s)).astype(np.float32), n)
        for n, s, scale in (
            ("w", (4, 2, 3, 3), 0.4),
            ("b", (4,), 0.4),
            ("fc", (5, 144), 0.05),
            ("fb", (5,), 0.4),
        )
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node(
            "MaxPool", ["r"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1
        ),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["a"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["q"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1),
    ]
    return save_model(path, "pools", nodes, inits, [1, 2, 24, 24], [1, 5])


def _attrs(k: int, s: int, pads: tuple[int, int], ceil: int) -> dict[str, object]:
    return {"kernel_shape": (k, 2), "strides": (s, 2), "pads": (pads[0], 0, pads[1], 0), "ceil_mode": ceil}


@pytest.mark.parametrize(
    "op, k, s, pads, ceil",
    [("MaxPool", *g) for g in GEOMETRIES] + [("AveragePool", *g) for g in GEOMETRIES if not g[3]],
)
def test_row_parts_give_the_whole_pool_bit_for_bit(op, k, s, pads, ceil):
    """numpy: the forward parts (output rows cut where input row tiles start, joined) and the gradient parts
    (dX rows cut at the row tiles) equal the whole op's outputs exactly, for row tiles that cut windows
    (AveragePool: ceil_mode 0 only)."""
    rng = np.random.default_rng(k * 10 + s)
    x = rng.standard_normal((1, 3, 17, 6)).astype(np.float32)
    x[0, 1, 5:9] = 1.0  # ties: the first maximum wins in every part too
    attrs = _attrs(k, s, pads, ceil)
    grad_attrs = {**attrs, "x_shape": x.shape} if op == "AveragePool" else attrs
    fwd, grad = ops.get(op), ops.get(op + "Grad")
    y = fwd.forward([x], attrs)[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = grad.forward([dy] if op == "AveragePool" else [x, dy], grad_attrs)[0]
    for bounds in ((0, 5, 11, 17), (0, 4, 8, 12, 17), (0, 8, 17)):
        parts = []
        for a, b in output_spans(x.shape, attrs, bounds):
            lo, hi, pa = forward_rows(x.shape, attrs, a, b)
            parts.append(fwd.forward([x[:, :, lo:hi]], pa)[0])
            assert parts[-1].shape[2] == b - a and fwd.infer([(1, 3, hi - lo, 6)], pa)[0][2] == b - a
        assert np.array_equal(np.concatenate(parts, axis=2), y)
        parts = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            oa, ob, lo, hi, pa = grad_rows(x.shape, grad_attrs, a, b)
            ins = [dy[:, :, oa:ob]] if op == "AveragePool" else [x[:, :, lo:hi], dy[:, :, oa:ob]]
            parts.append(grad.forward(ins, pa)[0])
            shapes = [tuple(v.shape) for v in ins]
            assert tuple(grad.infer(shapes, pa)[0]) == (1, 3, b - a, 6)
        assert np.array_equal(np.concatenate(parts, axis=2), dx)


def test_rows_outside_every_window_are_not_cut():
    """Stride above the kernel leaves rows no window reads: a row tile there has no gradient part, so
    grad_rows refuses it (and plan_rows keeps such a pool's dX out of row tiles)."""
    attrs = _attrs(1, 3, (0, 0), 0)
    grad_rows((1, 1, 12, 4), attrs, 0, 4)  # row 0 and 3 read
    with pytest.raises(ValueError, match="not all read"):
        grad_rows((1, 1, 12, 4), attrs, 4, 6)  # rows 4, 5: no window


def test_pools_run_in_row_tiles(tmp_path):
    """At 512 B (one 24x24 channel: 2,304 B) the conv output, the pools' inputs and outputs and their
    gradients are in row tiles; every pool node reads windows of rows and writes a row tile (or a piece of
    a small output joined along the rows); none reads all rows of a row-tiled tensor; the floor falls below
    channel tiles alone; numpy within 1e-6 of the unsplit step (convs sum in another order there)."""
    tg = training_graph(pools_model(tmp_path / "m.onnx"))
    s = splitting.split_graph(tg, 512)
    assert {"c", "r", "m", "a"} <= set(s.rows) and s.rows["r"] == (0, 4, 9, 14, 19, 24)
    assert s.rows["m"] == (0, 6, 13) and "q" not in s.rows
    pools = [n for n in s.graph.nodes if n.op in splitting.POOL_OPS]
    ops_seen = {n.op for n in pools}
    assert ops_seen == set(splitting.POOL_OPS)
    for n in pools:
        assert not set(s.rows) & {*n.inputs, *n.outputs}, n.name
        for t in n.inputs:
            assert not any(t == f"win/{u}/t{i}/0-{b[-1]}" for u, b in s.rows.items() for i in range(8)), (
                n.name
            )
        if n.op.endswith("Grad"):
            assert "rows" in n.attrs and min(n.attrs["pads"]) >= 0, n.name
    assert len([n for n in pools if n.op == "MaxPoolGrad"]) == 4 * (5 + 2)  # 4 channel tiles, 5 + 2 row tiles
    made = {o: n for n in pools for o in n.outputs}
    joins = [n for n in s.graph.nodes if n.op == "Concat" and n.outputs[0].startswith("q/")]
    assert len(joins) == 4 and all(made[i].op == "MaxPool" for n in joins for i in n.inputs)
    chan = splitting.split_graph(tg, 512, rows=False)
    assert stored_floor(s.graph, 8192) < stored_floor(chan.graph, 8192)
    assert_split_close(tg, s, LR, STEPS)


def _opts(path: Path, out: Path, train: str, **kw) -> CompileOptions:
    opts = CompileOptions(path, "host", 4 << 20, out, 1, Loss.CROSS_ENTROPY, LR, 8192, "none", train)
    return replace(opts, training=autodiff.DEFAULT_OPTIONS, **kw)


@pytest.mark.parametrize("train, kernels", [("all", "fast"), ("bias", "reference")])
def test_pool_row_tiles_in_c_bit_identical_on_host_and_qemu(tmp_path, train, kernels):
    """The program with pools in row tiles gives the unsplit program's losses and parameters bit for bit on
    the host, and qemu-cortex-m4 gives the host's bits; both within 1e-5 of numpy."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = pools_model(tmp_path / "m.onnx")
    compile_model(_opts(path, tmp_path / "plain", train, kernels=kernels, split="off"))
    compile_model(_opts(path, tmp_path / "rows", train, kernels=kernels, split="512B"))
    plan = json.loads((tmp_path / "rows" / "plan.json").read_text())
    assert {"m", "a", "r"} <= set(plan["tiles"]["rows"])
    host = assert_same_bits(tmp_path / "plain", tmp_path / "rows", STEPS)
    c = runner.load_plan(tmp_path / "rows")
    _, ref = reference.train(training_graph(path, train), runner.batches(c, STEPS), LR)
    for k, v in ref.items():
        assert max_rel_err(host.params[k], v.reshape(-1)) <= 1e-5, k


@pytest.mark.parametrize("train", ["all", "bias"])
def test_lenet5_floor_no_longer_set_by_a_pool(train):
    """lenet5 (28x28 conv1 output, 2x2 pools): at 1 KB tiles no pool node sets the split floor any more,
    and it falls below the 18,432 B that MaxPoolGrad's whole channel tiles set before."""
    g = frontend.load(ZOO / "lenet5.onnx", 1)
    tg = autodiff.training_graph(
        g, Loss.CROSS_ENTROPY, trainable.select(g, train), options=autodiff.DEFAULT_OPTIONS
    )
    s = splitting.split_graph(tg, 1024)
    spec = planning.spec_from_graph(s.graph, 8192, stored=frozenset(s.graph.trainable))
    floor = memory_floor(planning.price(spec, load_profile("host"), 1 << 40))
    op = {n.name: n.op for n in s.graph.nodes}[floor.node]
    assert op not in splitting.POOL_OPS and floor.bytes < 18432, floor.explanation
    assert s.rows["grad//MaxPool/MaxPoolGrad"] == (0, 7, 14, 21, 28)  # bounds inside 2x2 windows


def _part_cases(count: int) -> list[mb.KernelCase]:
    """Pool gradient row parts on drawn shapes, geometries and cuts: (X window, dY rows) -> dX rows."""
    rng = np.random.default_rng(11)
    cases: list[mb.KernelCase] = []
    while len(cases) < count:
        k, s = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        pad = int(rng.integers(0, k))
        x = (
            int(rng.integers(1, 3)),
            int(rng.integers(1, 4)),
            int(rng.integers(5, 15)),
            int(rng.integers(2, 9)),
        )
        attrs = {"kernel_shape": (k, 2), "strides": (s, 1), "pads": (pad, 0, pad, 1), "ceil_mode": int(s > 1)}
        a = int(rng.integers(0, x[2] - 1))
        b = int(rng.integers(a + 1, x[2] + 1))
        try:
            oa, ob, lo, hi, pa = grad_rows(x, attrs, a, b)
        except ValueError:
            continue
        window = (*x[:2], hi - lo, x[3])
        dy = (*x[:2], ob - oa, ops.get("MaxPool").infer([x], attrs)[0][3])
        case = mb.op_case("MaxPoolGrad", [window, dy], pa)
        cases.append(mb.KernelCase(**{**case.__dict__, "name": f"#{len(cases)} {case.name} rows {a}-{b}"}))
        avg = {**pa, "x_shape": window, "ceil_mode": 0}
        if ops.get("AveragePool").infer([window], avg)[0][2] == ob - oa:
            case = mb.op_case("AveragePoolGrad", [dy], avg)
            cases.append(
                mb.KernelCase(**{**case.__dict__, "name": f"#{len(cases)} {case.name} rows {a}-{b}"})
            )
    return cases


def test_row_part_kernels_fast_equal_reference_under_sanitizers(tmp_path):
    """The fast and reference pool gradient kernels on row parts give the same bits, and neither writes
    outside its dX rows (guarded arena, AddressSanitizer and UBSan on the host)."""
    need_tools("gcc")
    cases = _part_cases(120)
    found = mb.compare_all("host", cases, tmp_path, sanitize=True)
    assert not found.failures(), found.failures()[:10]
    assert len(found.first_diff) == len(cases)
    assert any(c.call.startswith("poet_avgpool2d_grad_f32") for c in cases)


def test_a_pool_that_skips_rows_keeps_its_input_whole_in_rows(tmp_path):
    """MaxPool 1x1 stride 3 reads every third row: a row tile of dX would hold rows no window reads, so its
    class (X, dX and what channelwise ops link to them) stays out of row tiles; the step is still exact."""
    rng = np.random.default_rng(6)
    inits = [
        numpy_helper.from_array((0.3 * rng.standard_normal(s)).astype(np.float32), n)
        for n, s in (("w", (4, 2, 3, 3)), ("fc", (5, 256)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[1, 1], strides=[3, 3]),
        helper.make_node("Flatten", ["m"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1),
    ]
    save_model(tmp_path / "gaps.onnx", "gaps", nodes, inits, [1, 2, 24, 24], [1, 5])
    tg = training_graph(tmp_path / "gaps.onnx")
    s = splitting.split_graph(tg, 512)
    assert s.tiles["r"] == (0, 1, 2, 3, 4) and "r" not in s.rows and "c" not in s.rows
    assert splitting.plan_rows(tg, 512, s.tiles) == {}
