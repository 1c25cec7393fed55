"""Operator splitting (issue 57, poet_edge/splitting.py): big tensors become channel tiles and the nodes that
make and read them run tile by tile. The split training step gives the unsplit step's parameters bit for bit
in the generated C (reference and fast kernels, host and qemu-cortex-m4), within 1e-6 of it in numpy (whose
conv sums in another order), and the memory floor falls below budgets no unsplit schedule can meet."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import need_tools, poet
from onnx import helper, numpy_helper
from oputil import max_rel_err
from splitutil import Params, assert_same_bits, assert_split_close, save_model

from poet_edge import autodiff, frontend, planning, reference, runner, splitting, trainable
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.memory_floor import memory_floor
from poet_edge.profiles import load_profile

LR = 0.05
STEPS = 3


def two_convs(param: Params, out: str) -> list:
    """x[.,3,12,12] -> Conv 3->8 3x3 (pad 1) -> Relu (a) -> Conv 8->8 3x3 (pad 1) -> ``out``: the start of
    the blocks below (their first four parameters w0, b0, w1, b1, drawn in that order)."""
    p1 = {"pads": [1, 1, 1, 1]}
    return [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 8, 8, 3, 3), param("b1", 8)], [out], **p1),
    ]


def resnet_block(path: Path, batch: int = 1, head: int = 6, mean: bool = False) -> Path:
    """x[B,3,12,12] -> Conv 3->8 3x3 -> Relu (a) -> Conv 8->8 3x3 (b) -> Add(a, b) -> Relu -> depthwise
    3x3 stride 2 -> Clip(0, 6) -> Conv 8->6 1x1 -> Relu -> GlobalAveragePool (``mean``: ReduceMean over
    the spatial axes, as torch's dynamo exporter writes adaptive_avg_pool2d) -> Flatten -> Gemm 6->5: a
    residual Add, 1-bit masks, depthwise and grouped channels, and 6 channels (uneven tiles)."""
    param = Params(3, 0.4)
    inits = param.inits

    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        *two_convs(param, "b"),
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node(
            "Conv", ["r", param("w2", 8, 1, 3, 3), param("b2", 8)], ["d"], group=8, strides=[2, 2], **p1
        ),
        helper.make_node("Clip", ["d", "lo", "hi"], ["e"]),
        helper.make_node("Conv", ["e", param("w3", head, 8, 1, 1), param("b3", head)], ["f"]),
        helper.make_node("Relu", ["f"], ["g"]),
        helper.make_node("ReduceMean", ["g"], ["p"], axes=[-1, -2], keepdims=1)
        if mean
        else helper.make_node("GlobalAveragePool", ["g"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w4", 5, head), param("b4", 5)], ["y"], transB=1),
    ]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", 0.0), ("hi", 6.0))]
    model = save_model(path, "resnet_block", nodes, inits, [batch, 3, 12, 12], [batch, 5])
    if mean:  # ReduceMean takes its axes as an attribute only before opset 18
        m = onnx.load(model)
        m.opset_import[0].version = 13
        onnx.save(m, model)
    return model


def _tg(path: Path, train: str = "all"):
    g = frontend.load(path)
    chosen = trainable.select(g, train)
    return autodiff.training_graph(g, Loss.CROSS_ENTROPY, chosen, options=autodiff.DEFAULT_OPTIONS)


def _floor(tg, stored: bool = True) -> int:
    spec = planning.spec_from_graph(tg, 1024, stored=frozenset(tg.trainable) if stored else frozenset())
    return memory_floor(planning.price(spec, load_profile("host"), 1 << 40)).bytes


def test_tiles_replace_every_big_node(tmp_path):
    tg = _tg(resnet_block(tmp_path / "m.onnx"), "bias")
    s = splitting.split_graph(tg, 1024)  # 8 channels of 12x12 floats (4.5 KB) -> 5 tiles
    g = s.graph
    assert s.tiles
    for t, b in s.tiles.items():  # channel bounds, at least 2 tiles; a mask shares its source's bounds
        assert b[0] == 0 and list(b) == sorted(set(b)) and len(b) >= 3
        assert len(tg.shape(t)) == 1 or (b[-1] == tg.shape(t)[1] and tg.tensor(t).nbytes > 1024)
    ops = {n.op for n in g.nodes}
    assert {"ConvPart", "ConvGradInputPart"} <= ops and "ConvGradInput" not in ops
    # no split node reads or writes a whole tiled tensor; only Concat joins (for unsplit readers) make one
    whole = set(s.tiles)
    for n in g.nodes:
        if n.op != "Concat" and n.name.rsplit("/", 1)[0] in s.split_nodes:
            assert not whole & {*n.inputs, *n.outputs}, n.name
    # the conv parts of one output tile chain over ascending input tiles, bias on the last only
    parts = [n for n in g.nodes if n.op == "ConvPart"]
    for n in parts:
        assert n.attrs["bias"] == (not any(m.inputs[-1:] == n.outputs for m in parts))
    assert _floor(g) < _floor(tg)
    assert splitting.split_graph(tg, 1 << 30).tiles == {}  # nothing above a huge tile size


@pytest.mark.parametrize("train, batch", [("all", 1), ("bias", 2)])
def test_reference_matches_the_unsplit_step(tmp_path, train, batch):
    tg = _tg(resnet_block(tmp_path / "m.onnx", batch), train)
    s = splitting.split_graph(tg, 512)
    assert bool(s.blocks) == (train == "all")  # trainable weights in blocks along the tiles
    assert_split_close(tg, s, LR, STEPS)


def _opts(path: Path, out: Path, batch: int, train: str, **kw) -> CompileOptions:
    opts = CompileOptions(path, "host", 4 << 20, out, batch, Loss.CROSS_ENTROPY, LR, 8192, "none", train)
    return replace(opts, training=autodiff.DEFAULT_OPTIONS, **kw)


def _same_bits_as_unsplit(path: Path, tmp_path: Path, train: str, qemu: bool, **split: object) -> None:
    """The split compile (``split``: its options; fast kernels, batch 1) gives the unsplit program's losses
    and parameters bit for bit on the host, and on qemu-cortex-m4 when ``qemu``."""
    compile_model(_opts(path, tmp_path / "plain", 1, train, split="off"))
    compile_model(_opts(path, tmp_path / "split", 1, train, kernels="fast", **split))
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    for target in ("host", *(("qemu-cortex-m4",) if qemu else ())):
        run = runner.run_project(tmp_path / "split", target, STEPS)
        assert [x.loss for x in plain.steps] == [x.loss for x in run.steps], target
        for k, v in plain.params.items():
            assert np.array_equal(v, run.params[k]), (target, k)


@pytest.mark.parametrize(
    "train, batch, kernels, tile",
    # batch 2 at 4 KB: channel tiles only (row tiles at batch > 1 are within rounding, not bit-identical)
    [("bias", 1, "fast", "1KB"), ("all", 1, "reference", "512B"), ("all", 2, "fast", "4KB")],
)
def test_c_on_host_bit_identical(tmp_path, train, batch, kernels, tile):
    need_tools("gcc")
    path = resnet_block(tmp_path / "m.onnx", batch)
    runs = {}
    order = "auto" if batch == 1 else "channels"
    for label, split in (("plain", "off"), ("split", tile)):
        compile_model(
            _opts(path, tmp_path / label, batch, train, kernels=kernels, split=split, tile_order=order)
        )
        runs[label] = runner.run_project(tmp_path / label, "host", STEPS)
    plan = json.loads((tmp_path / "split" / "plan.json").read_text())
    assert plan["split"] == tile and plan["tiles"]["tensors"]
    assert json.loads((tmp_path / "plain" / "plan.json").read_text())["tiles"] is None
    assert [s.loss for s in runs["plain"].steps] == [s.loss for s in runs["split"].steps]
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["split"].params[k]), k
    # against numpy: 1e-5 at batch 1; at batch 2 the unsplit C program (the same bits) is 2.2e-4 from numpy
    # in w0 after 3 steps (summation orders differ, and a ReLU near 0 can decide the other way)
    c = runner.load_plan(tmp_path / "split")
    _, ref = reference.train(_tg(path, train), runner.batches(c, STEPS), LR)
    for k, v in ref.items():
        assert max_rel_err(runs["split"].params[k], v.reshape(-1)) <= (1e-5 if batch == 1 else 1e-3), k


def test_auto_splits_below_the_unsplit_floor_and_qemu_gives_the_host_bits(tmp_path):
    """cortex-m4 at a budget under the floor of every unsplit choice: --split off refuses it and names the
    floor splitting reaches; auto compiles, and qemu-cortex-m4 gives the host's and the unsplit program's
    parameters, in the budget."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = resnet_block(tmp_path / "m.onnx")
    tg = _tg(path, "bias")
    reserve = load_profile("cortex-m4").mcu.ram_reserve_bytes
    spec = planning.spec_from_graph(tg, reserve, stored=frozenset(tg.trainable))
    unsplit = memory_floor(planning.price(spec, load_profile("cortex-m4"), 1)).bytes
    ram = unsplit - 2048
    opts = replace(
        CompileOptions(
            path, "cortex-m4", ram, tmp_path / "m4", 1, Loss.CROSS_ENTROPY, LR, None, "scale", "bias"
        ),
        training=autodiff.DEFAULT_OPTIONS,
    )
    with pytest.raises(PoetError, match="with --split auto the floor is"):
        compile_model(replace(opts, split="off"))
    c = compile_model(replace(opts, split="auto"))
    assert c.split is not None and c.predicted_ram_bytes <= ram
    # what auto compared (plan.json choices_compared): each order at two tile sizes (or one), rows first
    # first, the least energy kept
    assert 2 <= len(c.compared) <= 4 and all(r["tile_bytes"] for r in c.compared)
    assert [r["rows_first"] for r in c.compared][-1:] == [False] and c.compared[0]["rows_first"]
    best = min((r for r in c.compared if r["energy_j"]), key=lambda r: r["energy_j"])
    assert (c.split.tile_bytes, c.split.rows_first) == (best["tile_bytes"], best["rows_first"])
    # a choice whose scheduler stopped once its bound passed the cheapest before it costs more than that
    assert all(r["energy_j"] > best["energy_j"] for r in c.compared if r.get("stopped_above_best"))
    compile_model(replace(opts, out=tmp_path / "plain", ram_bytes=4 << 20, split="off"))
    host = runner.run_project(tmp_path / "m4", "host", STEPS)
    qemu = runner.run_project(tmp_path / "m4", "qemu-cortex-m4", STEPS)
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps] == [s.loss for s in plain.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k
        assert np.array_equal(host.params[k], plain.params[k]), k
    assert qemu.measured_ram_bytes <= ram


def test_cli_split_flag(tmp_path):
    path = resnet_block(tmp_path / "m.onnx")
    bad = poet("compile", path, "--device", "host", "--ram", "1MB", "--split", "big", "-o", tmp_path / "x")
    assert bad.returncode != 0 and "expected auto, off or a tile size" in bad.stderr
    assert not (tmp_path / "x").exists()
    assert "--split" in poet("compile", "--help").stdout


def test_auto_splits_only_below_the_unsplit_floor_with_the_largest_fitting_tiles(tmp_path):
    from poet_edge.compiler import plan_choices

    path = resnet_block(tmp_path / "m.onnx")
    tg = _tg(path, "bias")
    prof = load_profile("host")
    opts = _opts(path, tmp_path / "x", 1, "bias", split="auto", ram_bytes=1 << 20, tile_order="channels")
    assert all(tile is None for _, tile in plan_choices(tg, 8192, prof, opts))  # fits unsplit
    everything = frozenset(tg.trainable)
    unsplit = _floor(tg) - 1024 + 8192  # _floor uses a 1 KB reserve
    tight = replace(opts, ram_bytes=unsplit - 1)
    choices = plan_choices(tg, 8192, prof, tight)
    assert [s for s, _ in choices] == [everything] * len(choices) and 1 <= len(choices) <= 2

    def floor(tile: int | splitting.TileSizes) -> int:
        spec = planning.spec_from_graph(splitting.split_graph(tg, tile).graph, 8192, stored=everything)
        return memory_floor(planning.price(spec, prof, 1)).bytes

    # the largest uniform size that fits and half of it; each as is, or the mixed split at its floor
    # (tiles only as small as that floor needs: a floor no higher, fewer nodes)
    top = next(t for t in splitting.TILE_SIZES if floor(t) <= tight.ram_bytes)
    assert tight.ram_bytes < floor(top * 2)
    for (_, tile), size in zip(choices, (top, top // 2), strict=False):
        assert isinstance(tile, splitting.TileSizes) and not tile.rows_first
        if tile.sizes:
            assert floor(tile) <= floor(size)
            nodes = len(splitting.split_graph(tg, tile).graph.nodes)
            assert nodes < len(splitting.split_graph(tg, size).graph.nodes)
        else:
            assert tile.default == size
    assert plan_choices(tg, 8192, prof, replace(tight, split="off")) == [(everything, None)]
    assert plan_choices(tg, 8192, prof, replace(tight, split="2KB")) == [
        (everything, splitting.TileSizes(2048))
    ]
    both = plan_choices(tg, 8192, prof, replace(tight, split="2KB", tile_order="auto"))
    assert both == [(everything, splitting.TileSizes(2048, rows_first=r)) for r in (True, False)]
    auto = plan_choices(tg, 8192, prof, replace(tight, tile_order="auto"))
    firsts = [isinstance(t, splitting.TileSizes) and t.rows_first for _, t in auto]
    assert firsts[0] and not firsts[-1] and len(auto) <= 4
    assert [t for _, t in auto if not (isinstance(t, splitting.TileSizes) and t.rows_first)] == [
        t for _, t in choices
    ]  # every channels-first choice is still scheduled
    with pytest.raises(PoetError, match="expected auto, off or a tile size"):
        plan_choices(tg, 8192, prof, replace(tight, split="2 lumps"))


def test_trainable_weights_in_blocks_no_node_reads_whole(tmp_path):
    """--train all: every split convolution's weight (and bias) is cut into blocks along the tiles; no node
    reads a blocked parameter whole, each block has one update, and a weight bigger than a tile has its
    output's class tiled even where an unsplit node makes a tensor of it (GlobalAveragePool's gradient:
    sliced). The numpy step equals the unsplit one; blocks join back to the whole parameters."""
    tg = _tg(resnet_block(tmp_path / "m.onnx", head=64), "all")  # w3: 64x8 floats, 2 KB
    s = splitting.split_graph(tg, 1024)
    assert {"w0", "w1", "w2", "w3", "b3", "w4"} <= set(s.blocks)  # w4: the Gemm's 5x64 (1,280 B)
    g = s.graph
    assert not set(s.blocks) & {t for n in g.nodes for t in n.inputs} and not set(s.blocks) & set(g.params)
    updates = [n.inputs[0] for n in g.nodes if n.phase.value == "update"]
    assert sorted(updates) == sorted(g.trainable)  # one update per block (and per unsplit parameter)
    assert max(g.tensor(b[0]).nbytes for b in s.blocks["w3"]) <= 1024
    assert any(n.op == "Slice" for n in g.nodes)  # the pool gradient's output, sliced into the tiles
    names = frozenset([b[0] for b in s.blocks["w3"]] + [b[0] for b in s.blocks["w4"]])
    assert s.param_names(frozenset(["w3", "w4"])) == names
    assert splitting.split_graph(tg, 2048).param_names(frozenset(["w4"])) == {"w4"}  # fits a tile: whole
    assert _floor(g) < _floor(tg)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    y = rng.integers(0, 5, tg.shape(tg.inputs[1])).astype(np.int32)
    la, a = reference.train(tg, [(x, y)] * STEPS, LR)
    lb, b = reference.train(g, [(x, y)] * STEPS, LR)
    b = s.join_params(b)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6 and set(a) == set(b)
    for k in a:
        assert b[k].shape == a[k].shape and max_rel_err(b[k], a[k]) <= 1e-6, k
    flat = {k: np.asarray(v).reshape(-1) for k, v in tg.params.items()}
    blocks = s.summary()["parameters"]
    cut = splitting.cut_blocks(flat, blocks)  # type: ignore[arg-type]
    assert set(cut) == set(g.params)
    for k, v in splitting.join_blocks(cut, blocks).items():  # type: ignore[arg-type]
        assert np.array_equal(v, flat[k]), k


def test_blocks_in_c_bit_identical_and_params_load_whole(tmp_path):
    """The generated C with blocked weights and sliced tensors gives the unsplit program's bits (fast
    kernels); --load-params takes whole parameters and the run reports them whole."""
    need_tools("gcc")
    path = resnet_block(tmp_path / "m.onnx", head=64)
    for label, split in (("plain", "off"), ("split", "1KB")):
        compile_model(_opts(path, tmp_path / label, 1, "all", kernels="fast", split=split))
    plan = json.loads((tmp_path / "split" / "plan.json").read_text())
    assert "w3" in plan["tiles"]["parameters"]
    rng = np.random.default_rng(5)
    tg = _tg(path, "all")
    start = {k: (v + 0.01 * rng.standard_normal(v.shape)).astype(np.float32) for k, v in tg.params.items()}
    np.savez(tmp_path / "start.npz", **start)  # type: ignore[arg-type]
    runs = {
        label: runner.run_project(tmp_path / label, "host", STEPS, load_params=tmp_path / "start.npz")
        for label in ("plain", "split")
    }
    assert [s.loss for s in runs["plain"].steps] == [s.loss for s in runs["split"].steps]
    assert set(runs["plain"].params) == set(runs["split"].params)
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["split"].params[k]), k
    bad = dict(start, w3=start["w3"][:10])
    np.savez(tmp_path / "bad.npz", **bad)  # type: ignore[arg-type]
    with pytest.raises(PoetError, match="w3"):
        runner.run_project(tmp_path / "split", "host", 1, load_params=tmp_path / "bad.npz")


def pool_head(path: Path) -> Path:
    """x[1,4,8,8] -> Conv 4->64 3x3 (a 9 KB weight) -> Relu -> MaxPool 2x2 -> AveragePool 2x2 ->
    GlobalAveragePool -> Flatten -> Gemm: pools (per tile) and Flatten's gradient (whole, then sliced)."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array((0.3 * rng.standard_normal(s)).astype(np.float32), n)
        for n, s in (("w", (64, 4, 3, 3)), ("b", (64,)), ("fc", (5, 64)), ("fb", (5,)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["a"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", "fc", "fb"], ["y"], transB=1),
    ]
    return save_model(path, "pool_head", nodes, inits, [1, 4, 8, 8], [1, 5])


@pytest.mark.parametrize("fused", [True, False])
def test_weight_bigger_than_a_tile_with_adam(tmp_path, fused):
    """A weight bigger than the tile size is cut into blocks of at most a tile; the pools and their
    gradients run per tile; a tensor an unsplit node makes (Flatten's gradient) is sliced into the tiles;
    Adam's state is cut with the blocks; fused and plain updates. numpy: the unsplit step; C (fast
    kernels): its bits."""
    from poet_edge.optimizer import Optimizer, OptimizerKind

    need_tools("gcc")
    path = pool_head(tmp_path / "m.onnx")
    adam = Optimizer(OptimizerKind.ADAM)
    opts = replace(autodiff.DEFAULT_OPTIONS, fused_updates=fused)
    g = frontend.load(path)
    tg = autodiff.training_graph(g, Loss.CROSS_ENTROPY, trainable.select(g, "all"), adam, opts)
    s = splitting.split_graph(tg, 2048)
    assert max(s.graph.tensor(b[0]).nbytes for b in s.blocks["w"]) <= 2048
    assert any(n.name.startswith("slice/") for n in s.graph.nodes)
    pools = {n.op for n in s.graph.nodes if "/t" in n.name and "Pool" in n.op}
    assert pools == {
        "MaxPool",
        "MaxPoolGrad",
        "AveragePool",
        "AveragePoolGrad",
        "GlobalAveragePool",
        "GlobalAveragePoolGrad",
    }, pools
    states = [t for t, v in s.graph.tensors.items() if v.role.value == "optimizer-state"]
    assert len(states) == 2 * len(s.graph.trainable)
    rng = np.random.default_rng(6)
    batch = [(rng.standard_normal((1, 4, 8, 8)).astype(np.float32), np.array([3], np.int32))] * STEPS
    la, a = reference.train(tg, batch, LR)
    lb, b = reference.train(s.graph, batch, LR)
    b = s.join_params(b)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6
    for k in a:
        assert max_rel_err(b[k], a[k]) <= 1e-6, k
    runs = {}
    for label, split in (("plain", "off"), ("split", "2KB")):
        o = _opts(path, tmp_path / label, 1, "all", kernels="fast", split=split, optimizer=adam)
        compile_model(replace(o, training=opts))
        runs[label] = runner.run_project(tmp_path / label, "host", STEPS)
    assert [x.loss for x in runs["plain"].steps] == [x.loss for x in runs["split"].steps]
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["split"].params[k]), k


def dense_model(path: Path, batch: int) -> Path:
    """x[B,4,8] -> MatMul W0 [8,24] (3-D, W's columns the outputs) -> Relu -> Flatten -> Gemm W1 [40,96] +
    b1, transB (W's rows the outputs) -> Relu -> Gemm W2 [40,5] + b2 (columns): the three ways a dense
    weight is laid out."""
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array((0.3 * rng.standard_normal(s)).astype(np.float32), n)
        for n, s in (("w0", (8, 24)), ("w1", (40, 96)), ("b1", (40,)), ("w2", (40, 5)), ("b2", (5,)))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"]),
    ]
    return save_model(path, "dense", nodes, inits, [batch, 4, 8], [batch, 5])


@pytest.mark.parametrize(
    "fused, kernels, optimizer, batch", [(True, "fast", "sgd", 2), (False, "reference", "adam", 1)]
)
def test_dense_weights_in_column_blocks(tmp_path, fused, kernels, optimizer, batch):
    """Gemm / MatMul weights bigger than a tile are cut into blocks of their output columns (Gemm transB:
    rows of W; else its columns; a 3-D MatMul too), the bias with them: no node reads a blocked weight whole,
    each block has one update, the input gradient is a chain of GemmPart nodes. numpy: the unsplit step
    within 1e-6; C: its bits."""
    from poet_edge.optimizer import PLAIN_SGD, Optimizer, OptimizerKind

    need_tools("gcc")
    path = dense_model(tmp_path / "m.onnx", batch)
    opt = Optimizer(OptimizerKind.ADAM) if optimizer == "adam" else PLAIN_SGD
    opts = replace(autodiff.DEFAULT_OPTIONS, fused_updates=fused)
    g = frontend.load(path)
    tg = autodiff.training_graph(g, Loss.CROSS_ENTROPY, trainable.select(g, "all"), opt, opts)
    s = splitting.split_graph(tg, 512)
    expect = {"w0": 2, "b1": 40, "w1": 40, "w2": 2, "b2": 2}
    if batch == 2 or not fused:  # w0's gradient is then a batched MatMul and a ReduceSumTo: left whole
        del expect["w0"]
    assert {k: len(v) for k, v in s.blocks.items()} == expect
    assert s.blocks["w1"][1][1:] == (1, 2, 0, 96) and s.blocks["w2"][1][1:] == (0, 40, 2, 5)
    ng = s.graph
    assert not set(s.blocks) & {t for n in ng.nodes for t in n.inputs}
    assert max(ng.tensor(b[0]).nbytes for bs in s.blocks.values() for b in bs) <= 512
    assert sorted(n.inputs[0] for n in ng.nodes if n.phase.value == "update") == sorted(ng.trainable)
    parts = [n for n in ng.nodes if n.op == "GemmPart"]
    assert len(parts) == 40 + 2 and sum(n.attrs["final"] for n in parts) == 2  # dX of w1 and of w2
    assert _floor(ng) < _floor(tg)
    rng = np.random.default_rng(8)
    data = [
        (rng.standard_normal((batch, 4, 8)).astype(np.float32), rng.integers(0, 5, batch).astype(np.int32))
    ] * STEPS
    la, a = reference.train(tg, data, LR)
    lb, b = reference.train(ng, data, LR)
    b = s.join_params(b)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6 and set(a) == set(b)
    for k in a:
        assert b[k].shape == a[k].shape and max_rel_err(b[k], a[k]) <= 1e-6, k
    runs = {}
    for label, split in (("plain", "off"), ("split", "512B")):
        o = _opts(path, tmp_path / label, batch, "all", kernels=kernels, split=split, optimizer=opt)
        compile_model(replace(o, training=opts))
        runs[label] = runner.run_project(tmp_path / label, "host", STEPS)
    assert [x.loss for x in runs["plain"].steps] == [x.loss for x in runs["split"].steps]
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["split"].params[k]), k


def test_row_tiles_with_halos(tmp_path):
    """A channel tile still bigger than the tile size is cut into row tiles (at 512 B, one 12x12 channel of
    576 B: rows of at least MIN_ROWS). Conv parts read the rows their output rows need through windows (the
    halo: Concat of row tiles and slices of their neighbours), nothing reads a row-tiled tensor whole, and
    the floor falls below channel tiles alone; the numpy step is within 1e-6 of the unsplit one."""
    tg = _tg(resnet_block(tmp_path / "m.onnx"), "all")
    s = splitting.split_graph(tg, 512)
    chan = splitting.split_graph(tg, 512, rows=False)
    assert s.rows and not chan.rows and set(s.rows) <= set(s.tiles)
    for t, b in s.rows.items():
        assert b[0] == 0 and b[-1] == tg.shape(t)[2]
        assert min(hi - lo for lo, hi in zip(b, b[1:], strict=False)) >= splitting.MIN_ROWS
    for n in s.graph.nodes:
        if n.op not in ("Concat", "Slice") and n.name.rsplit("/", 1)[0] in s.split_nodes:
            assert not set(s.rows) & {*n.inputs, *n.outputs}, n.name
    halos = [n for n in s.graph.nodes if n.name.startswith("win/") and n.op == "Concat"]
    assert halos and all(len(n.inputs) >= 2 for n in halos)
    parts = [n for n in s.graph.nodes if n.op == "ConvPart" and any(i.startswith("win/") for i in n.inputs)]
    assert parts and all(min(n.attrs["pads"]) >= 0 for n in parts)
    assert _floor(s.graph) < _floor(chan.graph)
    assert s.summary()["rows"] == {t: list(b) for t, b in sorted(s.rows.items())}
    assert_split_close(tg, s, LR, STEPS)


def strided_1x1(path: Path) -> Path:
    """x[1,3,11,11] -> Conv 3->8 3x3 -> Relu -> Conv 8->8 1x1 stride 2 (a ResNet shortcut: its stride is
    above its kernel, so every other input row is read by no output) -> Relu -> GlobalAveragePool ->
    Flatten -> Gemm 8->5."""
    param = Params(5, 0.4)
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 8, 8, 1, 1), param("b1", 8)], ["c1"], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w2", 5, 8), param("b2", 5)], ["y"], transB=1),
    ]
    return save_model(path, "strided_1x1", nodes, param.inits, [1, 3, 11, 11], [1, 5])


@pytest.mark.parametrize("tile", [512, 768, 1024])
def test_row_tiles_of_a_conv_whose_stride_is_above_its_kernel(tmp_path, tile):
    """dX row tiles of a 1x1 stride-2 convolution that start at a row no dY row reads: the part takes one
    more dY row (its taps all land above the tile, in the pads cut away) instead of a negative pad; the
    numpy step stays within 1e-6 of the unsplit one."""
    tg = _tg(strided_1x1(tmp_path / "m.onnx"), "all")
    s = splitting.split_graph(tg, splitting.TileSizes(tile, rows_first=True))
    starts = {b for t, bounds in s.rows.items() if tg.shape(t)[2] == 11 for b in bounds[1:-1]}
    assert any(b % 2 for b in starts)  # a tile of the 11-row map starts at an odd row
    assert all(min(n.attrs["pads"]) >= 0 for n in s.graph.nodes if "pads" in n.attrs)
    assert_split_close(tg, s, LR, STEPS)


def test_strided_row_tiles_in_c_bit_identical(tmp_path):
    """The same model in C (--kernels fast, rows first in 512 B tiles): the unsplit program's bits."""
    need_tools("gcc")
    path = strided_1x1(tmp_path / "m.onnx")
    compile_model(_opts(path, tmp_path / "plain", 1, "all", split="off"))
    compile_model(_opts(path, tmp_path / "rows", 1, "all", split="512B", tile_order="rows", kernels="fast"))
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    rows = runner.run_project(tmp_path / "rows", "host", STEPS)
    assert [s.loss for s in plain.steps] == [s.loss for s in rows.steps]
    for k, v in plain.params.items():
        assert np.array_equal(v, rows.params[k]), k


@pytest.mark.parametrize(
    "train, kernels, batch", [("all", "fast", 1), ("bias", "reference", 1), ("all", "fast", 2)]
)
def test_row_tiles_in_c_bit_identical_on_host_and_qemu(tmp_path, train, kernels, batch):
    """At batch 1 the row-tiled program gives the unsplit program's bits: windows change no sum, and the
    weight and bias gradients chain over the row tiles (each call's sums start at the previous call's), on
    the host and on qemu-cortex-m4. At batch 2 those chains add row tile by row tile over both samples (the
    unsplit kernel: sample by sample): within 1e-6 of the unsplit program, and QEMU still has the host's
    bits."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = resnet_block(tmp_path / "m.onnx", batch)
    compile_model(_opts(path, tmp_path / "plain", batch, train, kernels=kernels, split="off"))
    compile_model(_opts(path, tmp_path / "rows", batch, train, kernels=kernels, split="512B"))
    plan = json.loads((tmp_path / "rows" / "plan.json").read_text())
    assert plan["tiles"]["rows"]
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    host = runner.run_project(tmp_path / "rows", "host", STEPS)
    qemu = runner.run_project(tmp_path / "rows", "qemu-cortex-m4", STEPS)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k, v in plain.params.items():
        assert np.array_equal(host.params[k], qemu.params[k]), k
        if batch == 1:
            assert np.array_equal(v, host.params[k]), k
        else:
            assert max_rel_err(host.params[k], v) <= 1e-6, k
    if batch == 1:
        assert [s.loss for s in plain.steps] == [s.loss for s in host.steps]


def test_rows_first_cuts_bands_of_all_channels(tmp_path):
    """Rows first (TileSizes.rows_first): a 4-D tensor becomes bands of rows of all its channels, cut in
    channels too only where a band of MIN_ROWS rows still exceeds the tile; a convolution's output has at
    least its input's bands (a strided one's window then spans about one band). Fewer channel tiles than
    channels first, the same tile size, no row-tiled tensor read whole, the numpy step within 1e-6 of the
    unsplit one."""
    tg = _tg(resnet_block(tmp_path / "m.onnx"), "bias")
    rows = splitting.split_graph(tg, splitting.TileSizes(2048, rows_first=True))
    chan = splitting.split_graph(tg, 2048)
    assert rows.rows_first and not chan.rows_first and rows.summary()["rows_first"]
    floats = {t for t in rows.rows if tg.tensor(t).dtype == "float32"}  # (a mask packs its source's bits)
    whole = [t for t in floats if rows.tiles[t] == (0, tg.shape(t)[1])]
    assert whole, "a band of all channels"
    assert sum(len(b) - 1 for b in rows.tiles.values()) < sum(len(b) - 1 for b in chan.tiles.values())
    for t in floats:
        b = rows.rows[t]
        assert min(hi - lo for lo, hi in zip(b, b[1:], strict=False)) >= splitting.MIN_ROWS
        widest = max(hi - lo for lo, hi in zip(rows.tiles[t], rows.tiles[t][1:], strict=False))
        band = max(hi - lo for lo, hi in zip(b, b[1:], strict=False))
        shape = tg.shape(t)
        assert band * widest * shape[0] * shape[3] * 4 <= 2048 or widest == 1 or band == splitting.MIN_ROWS
    for n in rows.graph.nodes:
        if n.op not in ("Concat", "Slice") and n.name.rsplit("/", 1)[0] in rows.split_nodes:
            assert not set(rows.rows) & {*n.inputs, *n.outputs}, n.name
    assert_split_close(tg, rows, LR, STEPS)


def test_rows_first_in_c_bit_identical_on_host_and_qemu(tmp_path):
    """--tile-order rows at batch 1: the unsplit program's bits on the host and on qemu-cortex-m4, and
    --tile-order auto schedules both orders and keeps the cheaper (plan.json's compared choices)."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = resnet_block(tmp_path / "m.onnx")
    compile_model(_opts(path, tmp_path / "plain", 1, "bias", split="off"))
    compile_model(_opts(path, tmp_path / "rows", 1, "bias", split="2KB", tile_order="rows"))
    compile_model(_opts(path, tmp_path / "auto", 1, "bias", split="2KB"))
    plan = json.loads((tmp_path / "rows" / "plan.json").read_text())
    assert plan["tiles"]["rows_first"] and plan["tiles"]["rows"]
    compared = json.loads((tmp_path / "auto" / "plan.json").read_text())["choices_compared"]
    assert sorted(c["rows_first"] for c in compared) == [False, True]
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    host = runner.run_project(tmp_path / "rows", "host", STEPS)
    qemu = runner.run_project(tmp_path / "rows", "qemu-cortex-m4", STEPS)
    assert [s.loss for s in plain.steps] == [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k, v in plain.params.items():
        assert np.array_equal(v, host.params[k]) and np.array_equal(v, qemu.params[k]), k


def se_block(path: Path) -> Path:
    """x[1,3,12,12] -> Conv 3->16 3x3 -> Relu (a) -> squeeze and excitation: GlobalAveragePool -> Conv 16->4
    1x1 -> Relu -> Conv 4->16 1x1 -> Sigmoid (gate [1,16,1,1]) -> Mul(a, gate) -> Conv 16->8 1x1 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm 8->5 (MobileNetV3's block)."""
    param = Params(7, 0.4)
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 16, 3, 3, 3), param("b0", 16)], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("GlobalAveragePool", ["a"], ["s0"]),
        helper.make_node("Conv", ["s0", param("w1", 4, 16, 1, 1), param("b1", 4)], ["s1"]),
        helper.make_node("Relu", ["s1"], ["s2"]),
        helper.make_node("Conv", ["s2", param("w2", 16, 4, 1, 1), param("b2", 16)], ["s3"]),
        helper.make_node("Sigmoid", ["s3"], ["gate"]),
        helper.make_node("Mul", ["a", "gate"], ["e"]),
        helper.make_node("Conv", ["e", param("w3", 8, 16, 1, 1), param("b3", 8)], ["f"]),
        helper.make_node("Relu", ["f"], ["g"]),
        helper.make_node("GlobalAveragePool", ["g"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w4", 5, 8), param("b4", 5)], ["y"], transB=1),
    ]
    return save_model(path, "se_block", nodes, param.inits, [1, 3, 12, 12], [1, 5])


@pytest.mark.parametrize("train", ["all", "bias"])
def test_squeeze_and_excitation_gate_runs_in_tiles(tmp_path, train):
    """The gate [1, C, 1, 1] goes with the channel tiles of the map it scales: the Mul, its gradient's Muls
    and the ReduceSumTo that sums the gate's gradient run per tile, nothing joins the map, and the floor falls
    below what joining it cost; numpy within 1e-6, C on the host (and, training all, on qemu-cortex-m4) the
    unsplit program's bits."""
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if train == "all" else ()))
    path = se_block(tmp_path / "m.onnx")
    tg = _tg(path, train)
    s = splitting.split_graph(tg, 1024)
    assert {"Mul_7", "grad/Mul_7/Mul", "grad/Mul_7/Mul_2", "grad/Mul_7/ReduceSumTo"} <= set(s.split_nodes)
    assert "a" in s.tiles and "gate" in s.tiles and s.tiles["gate"] == s.tiles["a"]
    joined = [n.outputs[0] for n in s.graph.nodes if n.name.startswith("join/")]
    assert all(tg.shape(t)[2:] == (1, 1) for t in joined), joined  # (the head's pooled values only)
    assert _floor(s.graph) < _floor(tg) // 2
    assert_split_close(tg, s, LR, STEPS)
    _same_bits_as_unsplit(path, tmp_path, train, train == "all", split="1KB")


def test_reduce_mean_over_the_spatial_axes_runs_in_tiles(tmp_path):
    """ReduceMean over the trailing axes (torch's dynamo export of adaptive_avg_pool2d) and its gradient
    (BroadcastTo) run per channel tile, like GlobalAveragePool: no join of their tiled input, and the C
    program keeps the unsplit bits."""
    need_tools("gcc")
    path = resnet_block(tmp_path / "m.onnx", head=8, mean=True)
    tg = _tg(path, "all")
    s = splitting.split_graph(tg, 512)
    ops = {n.name.rsplit("/", 1)[0]: n.op for n in s.graph.nodes if n.op in ("ReduceMean", "BroadcastTo")}
    assert set(ops.values()) == {"ReduceMean", "BroadcastTo"} and set(ops) <= set(s.split_nodes)
    assert not [n for n in s.graph.nodes if n.op == "Concat" and n.outputs[0] == "g"]
    runs = {}
    for label, split in (("plain", "off"), ("split", "512B")):
        compile_model(_opts(path, tmp_path / label, 1, "all", kernels="fast", split=split))
        runs[label] = runner.run_project(tmp_path / label, "host", STEPS)
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["split"].params[k]), k


def test_batch_in_storage_loads_windows_of_rows(tmp_path):
    """With --input storage, convolutions read the batch x through windows of its rows (Slices of x), and
    planning turns each window into a load of those rows from storage (one read per sample and channel):
    x is never whole in RAM, the floor falls below whole-batch loads, and the program keeps the bits of
    the unsplit one (batch in RAM) on the host and on qemu-cortex-m4."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = resnet_block(tmp_path / "m.onnx")
    tg = _tg(path, "all")
    floors = {}
    for rows in (False, True):
        s = splitting.split_graph(tg, 512, input_rows=rows)
        stored = s.param_names(frozenset(tg.trainable))
        spec = planning.spec_from_graph(s.graph, 1024, planning.InputPlace.STORAGE, stored)
        loads = [n for n in spec.nodes if n.kind == "input"]
        assert len(loads) >= 2 if rows else [n.name for n in loads] == [planning.input_node_name("x")]
        assert spec.input_bytes == tg.tensor("x").nbytes
        floors[rows] = memory_floor(planning.price(spec, load_profile("host"), 1 << 40)).bytes
    assert floors[True] < floors[False]
    storage = planning.InputPlace.STORAGE
    compile_model(_opts(path, tmp_path / "plain", 1, "all", kernels="fast", split="off"))
    compile_model(_opts(path, tmp_path / "rows", 1, "all", kernels="fast", split="512B", input=storage))
    assert "load a box of the batch from storage" in (tmp_path / "rows" / "poet_model.c").read_text()
    assert_same_bits(tmp_path / "plain", tmp_path / "rows", STEPS)


def audio_1d(path: Path) -> Path:
    """x[1,1,1600] (raw audio) -> Conv1d 1->8 k9 s2 p4 -> Relu -> MaxPool k3 s2 p1 -> Conv1d 8->16 k5 p2 ->
    Relu -> Add(a residual Conv1d 8->16 k1) -> AveragePool k2 s2 -> GlobalAveragePool -> Flatten -> Gemm
    16->5: 1-D maps long in L and narrow in channels, which channel tiles alone cannot cut small."""
    param, p4s2 = Params(11, 0.4), {"pads": [4, 4], "strides": [2]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 1, 9), param("b0", 8)], ["c0"], **p4s2),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["m"], kernel_shape=[3], strides=[2], pads=[1, 1]),
        helper.make_node("Conv", ["m", param("w1", 16, 8, 5), param("b1", 16)], ["c1"], pads=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("Conv", ["m", param("w2", 16, 8, 1), param("b2", 16)], ["k"]),
        helper.make_node("Add", ["r", "k"], ["s"]),
        helper.make_node("AveragePool", ["s"], ["v"], kernel_shape=[2], strides=[2]),
        helper.make_node("GlobalAveragePool", ["v"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w3", 5, 16), param("b3", 5)], ["y"], transB=1),
    ]
    return save_model(path, "audio_1d", nodes, param.inits, [1, 1, 1600], [1, 5])


@pytest.mark.parametrize("train", ["all", "bias"])
def test_1d_maps_in_row_tiles(tmp_path, train):
    """1-D convolutions, pools and their gradients run on ranges of L (rows, axis 2) with halos, as 2-D ones
    on rows: the split floor falls well below what channel tiles alone reach, numpy is within 1e-6 and C
    gives the unsplit program's bits on the host and on qemu-cortex-m4 (the pool gradients' row parts pass
    the kernels the 1-D window as rows of H, pool_common.Window.along_rows)."""
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if train == "all" else ()))
    path = audio_1d(tmp_path / "m.onnx")
    tg = _tg(path, train)
    channels = splitting.split_graph(tg, 1024, rows=False)
    assert not channels.rows
    for rows_first in (False, True):
        s = splitting.split_graph(tg, splitting.TileSizes(1024, rows_first=rows_first))
        assert {"a", "c1", "s"} <= set(s.rows)
        ops = {n.op for n in s.graph.nodes if "rows" in n.attrs}
        assert {"MaxPoolGrad", "AveragePoolGrad"} <= ops
        assert _floor(s.graph) < _floor(channels.graph) * 0.75
        assert_split_close(tg, s, LR, STEPS)
    _same_bits_as_unsplit(path, tmp_path, train, train == "all", split="1KB", tile_order="rows")


def test_1d_batch_in_storage_loads_ranges_of_its_length(tmp_path):
    """With --input storage, the 1-D convolution on the batch reads it through windows of its length, each
    a load of that range from storage (one read per sample and channel): x is never whole in RAM, the floor
    falls below whole-batch loads, and the program keeps the unsplit one's bits on the host and on
    qemu-cortex-m4."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = audio_1d(tmp_path / "m.onnx")
    tg = _tg(path, "bias")
    floors = {}
    for rows in (False, True):  # channel tiles only (x read whole), or row tiles too
        s = splitting.split_graph(tg, splitting.TileSizes(1024, rows_first=True), rows=rows, input_rows=True)
        spec = planning.spec_from_graph(s.graph, 1024, planning.InputPlace.STORAGE, frozenset(tg.trainable))
        loads = [n for n in spec.nodes if n.kind == "input"]
        assert len(loads) >= 2 if rows else [n.name for n in loads] == [planning.input_node_name("x")]
        floors[rows] = memory_floor(planning.price(spec, load_profile("host"), 1 << 40)).bytes
    assert floors[True] < floors[False] - tg.tensor("x").nbytes // 2
    storage = planning.InputPlace.STORAGE
    compile_model(_opts(path, tmp_path / "plain", 1, "bias", kernels="fast", split="off"))
    opts = _opts(
        path, tmp_path / "rows", 1, "bias", kernels="fast", split="1KB", tile_order="rows", input=storage
    )
    compile_model(opts)
    assert "load a box of the batch from storage" in (tmp_path / "rows" / "poet_model.c").read_text()
    assert_same_bits(tmp_path / "plain", tmp_path / "rows", STEPS)


def test_whole_input_read_through_windows_by_the_first_layer(tmp_path):
    """With the batch in RAM (whole, bigger than a tile), the first convolution's parts and its weight's
    gradient read windows of x's rows (Slices) instead of making the output with all its rows or joining
    dY: rows first at 512 B, w0's gradient is a chain over dY's row tiles, none of its nodes reads a
    window of all of dY's rows, and the C program (fast kernels) keeps the unsplit bits on the host and on
    qemu-cortex-m4."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = resnet_block(tmp_path / "m.onnx")
    tg = _tg(path, "all")
    s = splitting.split_graph(tg, splitting.TileSizes(512, rows_first=True))
    grads = [n for n in s.graph.nodes if n.name.startswith("update/w0/")]
    assert len([n for n in grads if n.op == "ConvGradWeight"]) >= 3
    assert all(not i.startswith("win/grad/") for n in grads for i in n.inputs)
    assert any(i.startswith("win/x/") for n in grads for i in n.inputs)
    assert not [n for n in s.graph.nodes if n.op == "Slice" and n.name.startswith("slice/c0/")]
    assert_split_close(tg, s, LR, STEPS)
    compile_model(_opts(path, tmp_path / "plain", 1, "all", kernels="fast", split="off"))
    compile_model(_opts(path, tmp_path / "rows", 1, "all", kernels="fast", split="512B", tile_order="rows"))
    assert_same_bits(tmp_path / "plain", tmp_path / "rows", STEPS)


def preact_block(path: Path) -> Path:
    """x[1,3,12,12] -> Conv 3->8 3x3 -> Relu (a) -> Conv 8->8 3x3 (b) -> Add(a, b) -> BatchNormalization
    (inference form, unfolded: nothing before it to fold into) -> Relu -> Conv 8->6 1x1 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm 6->5: a pre-activation residual block."""
    param = Params(5, 0.4)
    rng = np.random.default_rng(5)
    ranges = (("gs", 0.5, 1.5), ("gb", -0.2, 0.2), ("gm", -0.2, 0.2), ("gv", 0.5, 1.5))
    stats = {k: rng.uniform(lo, hi, 8).astype(np.float32) for k, lo, hi in ranges}
    nodes = [
        *two_convs(param, "b"),
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("BatchNormalization", ["s", "gs", "gb", "gm", "gv"], ["n"], epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Conv", ["r", param("w2", 6, 8, 1, 1), param("b2", 6)], ["f"]),
        helper.make_node("Relu", ["f"], ["g"]),
        helper.make_node("GlobalAveragePool", ["g"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w3", 5, 6), param("b3", 5)], ["y"], transB=1),
    ]
    inits = param.inits + [numpy_helper.from_array(v, k) for k, v in stats.items()]
    return save_model(path, "preact_block", nodes, inits, [1, 3, 12, 12], [1, 5])


@pytest.mark.parametrize("train", ["all", "bias"])
def test_unfolded_batchnorm_runs_in_channel_tiles(tmp_path, train):
    """A BatchNormalization the exporter could not fold runs per channel tile and row tile, each part
    reading Slices of its scale, bias, mean and var; its input gradient too, and its scale's gradient per
    channel tile as a chain over the row tiles (its sums continued, the last part dividing), the [C] parts
    joined: nothing joins the maps around it, the floor falls below half, numpy is within 1e-6, and C
    gives the unsplit program's bits on the host and (training all) on qemu-cortex-m4."""
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if train == "all" else ()))
    path = preact_block(tmp_path / "m.onnx")
    tg = _tg(path, train)
    bn = [n.name for n in tg.nodes if n.op.startswith("BatchNorm")]
    assert len(bn) == 3  # the node, its input gradient, its scale's gradient
    s = splitting.split_graph(tg, 512)
    assert set(bn) <= set(s.split_nodes)
    assert any(n.op == "Slice" and n.inputs == ("gv",) for n in s.graph.nodes)
    chain = [n for n in s.graph.nodes if n.op == "BatchNormGradScale" and n.attrs.get("partial")]
    assert chain and all(len(n.inputs) == 5 for n in chain)
    joined = [n.outputs[0] for n in s.graph.nodes if n.name.startswith("join/")]
    assert all(len(tg.shape(t)) < 3 or tg.shape(t)[2:] == (1, 1) for t in joined), joined
    assert _floor(s.graph) < _floor(tg) // 2
    assert_split_close(tg, s, LR, STEPS)
    _same_bits_as_unsplit(path, tmp_path, train, train == "all", split="512B")


def layer_scale_block(path: Path, shape: tuple[int, ...]) -> Path:
    """resnet-like block whose residual branch ends in a Mul and an Add by per-channel parameters of
    ``shape`` ([1, 8, 1, 1] or [8, 1, 1]: a normalization written as Mul and Add, a layer scale):
    x[1,3,12,12] -> Conv 3->8 -> Relu (a) -> Conv 8->8 -> Mul(gamma) -> Add(beta) -> Add(a, .) -> Relu ->
    Conv 8->6 1x1 -> GlobalAveragePool -> Flatten -> Gemm 6->5."""
    param = Params(9, 0.4)
    rng = np.random.default_rng(9)
    g = numpy_helper.from_array(rng.uniform(0.5, 1.5, shape).astype(np.float32), "gamma")
    b = numpy_helper.from_array(rng.uniform(-0.2, 0.2, shape).astype(np.float32), "beta")
    nodes = [
        *two_convs(param, "c1"),
        helper.make_node("Mul", ["c1", "gamma"], ["m"]),
        helper.make_node("Add", ["m", "beta"], ["n"]),
        helper.make_node("Add", ["a", "n"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Conv", ["r", param("w2", 6, 8, 1, 1), param("b2", 6)], ["f"]),
        helper.make_node("GlobalAveragePool", ["f"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w3", 5, 6), param("b3", 5)], ["y"], transB=1),
    ]
    return save_model(path, "layer_scale", nodes, [*param.inits, g, b], [1, 3, 12, 12], [1, 5])


@pytest.mark.parametrize("shape, train", [((1, 8, 1, 1), "all"), ((8, 1, 1), "bias")])
def test_per_channel_parameters_are_sliced_per_tile(tmp_path, shape, train):
    """A Mul or Add by a per-channel parameter runs per channel tile on a Slice of it, and the parameter's
    gradient (a ReduceSumTo to its shape) per channel tile, joined along its channel axis: nothing joins
    the map, the floor falls below half (before, the map was joined: 12.0 KB of 16.6), numpy is within
    1e-6, and C gives the unsplit program's bits on the host and (training all) on qemu-cortex-m4."""
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if train == "all" else ()))
    path = layer_scale_block(tmp_path / "m.onnx", shape)
    tg = _tg(path, train)
    assert {"gamma", "beta"} <= tg.trainable
    s = splitting.split_graph(tg, 512)
    assert {"Mul_3", "Add_4"} <= set(s.split_nodes)
    axis = len(shape) - 3
    sliced = [n for n in s.graph.nodes if n.op == "Slice" and n.inputs[0] in ("gamma", "beta")]
    assert sliced and all(n.attrs["axes"] == (axis,) for n in sliced)
    joined = [n.outputs[0] for n in s.graph.nodes if n.name.startswith("join/")]
    assert all(len(tg.shape(t)) < 4 or tg.shape(t)[2:] == (1, 1) for t in joined), joined
    assert _floor(s.graph) < _floor(tg) // 2
    assert_split_close(tg, s, LR, STEPS)
    _same_bits_as_unsplit(path, tmp_path, train, train == "all", split="512B")
