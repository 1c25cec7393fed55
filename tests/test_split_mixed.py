"""Mixed tile sizes (operator splitting, issue 57): each class cut only as finely as a target floor needs
(splitting.split_for_floor, TileSizes). The mixed split of a small conv model (residual Add, max pool, a
channel Concat, GlobalAveragePool, Gemm) reaches the lowest uniform floor with fewer nodes, is
deterministic, and gives the unsplit step: numpy within 1e-6, C (fast kernels) bit for bit on the host and
on qemu-cortex-m4."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import need_tools
from onnx import helper
from splitutil import Params, assert_same_bits, assert_split_close, save_model, stored_floor, training_graph

from poet_edge import autodiff, planning, runner, splitting
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.ir import Graph
from poet_edge.memory_floor import node_need
from poet_edge.profiles import load_profile

LR = 0.05
STEPS = 3
RESERVE = 1024  # splitutil.stored_floor's
LADDER = (16384, 8192, 4096, 2048, 1024, 512)


def model(path: Path) -> Path:
    """x[1,3,24,24] -> Conv 3->8 3x3 -> Relu (a) -> Conv 8->8 3x3 -> Relu (b) -> Add(a, b) -> MaxPool 2x2
    (d, 12x12) -> Conv 8->8 1x1 -> Relu (e) -> Conv 8->8 3x3 -> Relu (f) -> Concat(e, f) (g) -> Conv 16->8
    1x1 -> Relu -> GlobalAveragePool -> Flatten -> Gemm 8->5: 18 KB maps before the pool, 4.5 KB after."""
    param = Params(11, 0.3)
    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 8, 8, 3, 3), param("b1", 8)], ["c1"], **p1),
        helper.make_node("Relu", ["c1"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("MaxPool", ["c"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["d", param("w2", 8, 8, 1, 1), param("b2", 8)], ["c2"]),
        helper.make_node("Relu", ["c2"], ["e"]),
        helper.make_node("Conv", ["e", param("w3", 8, 8, 3, 3), param("b3", 8)], ["c3"], **p1),
        helper.make_node("Relu", ["c3"], ["f"]),
        helper.make_node("Concat", ["e", "f"], ["g"], axis=1),
        helper.make_node("Conv", ["g", param("w4", 8, 16, 1, 1), param("b4", 8)], ["c4"]),
        helper.make_node("Relu", ["c4"], ["h"]),
        helper.make_node("GlobalAveragePool", ["h"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w5", 5, 8), param("b5", 5)], ["y"], transB=1),
    ]
    return save_model(path, "mixed", nodes, param.inits, [1, 3, 24, 24], [1, 5])


def planning_need(split: splitting.Split) -> Mapping[str, int]:
    """Each node's need as the memory floor counts it (stored_floor's fixed bytes included; a fused group's
    for each member): what the compile passes to split_for_floor."""
    g = split.graph
    spec = planning.spec_from_graph(g, RESERVE, stored=frozenset(g.trainable))
    p = planning.price(spec, load_profile("host"), 1 << 40)
    preds = p.preds()
    return {m: node_need(p, v, preds) for v, ns in enumerate(spec.nodes) for m in (ns.name, *ns.epilogue)}


def lowest_uniform(tg: Graph) -> tuple[int, splitting.Split]:
    """The lowest floor over LADDER with one tile size, and the largest size's split that reaches it."""
    best: tuple[int, splitting.Split] | None = None
    for t in LADDER:
        s = splitting.split_graph(tg, t)
        if best is None or stored_floor(s.graph) < best[0]:
            best = (stored_floor(s.graph), s)
    assert best is not None
    return best


def mixed(tg: Graph, target: int) -> splitting.Split:
    return splitting.split_for_floor(tg, target, ladder=LADDER, need=planning_need)


# (train, lowest uniform floor, its tile size, its nodes, the mixed split's nodes at that floor, a tensor
# of a class the mixed split cuts coarser)
EXPECTED = [("all", 10688, 512, 4007, 2901, "h"), ("bias", 10496, 512, 2832, 2172, "h")]


@pytest.mark.parametrize(("train", "floor", "tile", "nodes", "mixed_nodes", "coarse"), EXPECTED)
def test_mixed_reaches_the_uniform_floor_with_fewer_nodes(
    tmp_path, train, floor, tile, nodes, mixed_nodes, coarse
):
    """At the lowest uniform floor the mixed split's floor is no higher, with fewer nodes: some classes keep
    tiles twice the uniform size (the maps after the pool, up to the last convolution's output h, in 1 KB
    tiles where the floor needs 512 B tiles of the maps before it); the Concat is still a relabeling of its
    inputs' tiles. The summary reports each tensor's size."""
    tg = training_graph(model(tmp_path / "m.onnx"), train)
    f, uniform = lowest_uniform(tg)
    assert (f, uniform.tile_bytes, len(uniform.graph.nodes)) == (floor, tile, nodes)
    s = mixed(tg, f)
    assert stored_floor(s.graph) <= f
    assert len(s.graph.nodes) == mixed_nodes < nodes
    assert s.mixed and len(set(s.sizes.values())) == 2 and min(s.sizes.values()) == tile
    assert s.sizes[coarse] == 2 * tile  # the floor never asked this class for the finest tiles
    assert "Concat_10" in s.split_nodes and not [n for n in s.graph.nodes if "g" in n.outputs]
    summary = s.summary()
    assert summary["tile_bytes"] == max(s.sizes.values())
    assert summary["tile_sizes"] == dict(sorted(s.sizes.items()))
    assert "tile_sizes" not in uniform.summary()
    assert_split_close(tg, s, LR, STEPS)


def test_never_more_nodes_than_one_size(tmp_path):
    """At the floor of each uniform size (--train bias), the mixed split's floor is no higher and it has at
    most the nodes of the coarsest uniform split within that floor."""
    tg = training_graph(model(tmp_path / "m.onnx"), "bias")
    uniform = [(t, splitting.split_graph(tg, t)) for t in LADDER]
    floors = {t: stored_floor(s.graph) for t, s in uniform}
    for t, _ in uniform:
        s = mixed(tg, floors[t])
        coarsest = next(u for size, u in uniform if floors[size] <= floors[t])
        assert stored_floor(s.graph) <= floors[t]
        assert len(s.graph.nodes) <= len(coarsest.graph.nodes), t


def test_deterministic(tmp_path):
    """The same graph and target give the same split graph, tile sizes and blocks."""
    path = model(tmp_path / "m.onnx")
    a = mixed(training_graph(path), 12576)
    b = mixed(training_graph(path), 12576)
    assert a.graph.nodes == b.graph.nodes and a.graph.tensors == b.graph.tensors
    assert a.sizes == b.sizes and a.tiles == b.tiles and a.rows == b.rows and a.blocks == b.blocks
    assert a.asked == b.asked


def test_one_size_is_the_uniform_split(tmp_path):
    """TileSizes with no per-tensor size is split_graph with that size: the same graph and summary."""
    tg = training_graph(model(tmp_path / "m.onnx"))
    for t in (4096, 1024):
        a, b = splitting.split_graph(tg, t), splitting.split_graph(tg, splitting.TileSizes(t))
        assert a.graph.nodes == b.graph.nodes and a.summary() == b.summary() and not a.mixed
    with pytest.raises(PoetError):
        splitting.TileSizes(1024, {"a": 0})
    with pytest.raises(PoetError):
        splitting.split_for_floor(tg, 0)


def test_node_bytes_is_the_floors_count(tmp_path):
    """node_bytes (what split_for_floor counts by default) is memory_floor's node need without the fixed
    bytes, for every scheduling node that fuses no epilogue; with the batch in storage too."""
    tg = training_graph(model(tmp_path / "m.onnx"))
    for rows_in, place in ((False, planning.InputPlace.RAM), (True, planning.InputPlace.STORAGE)):
        s = splitting.split_graph(tg, 1024, input_rows=rows_in)
        g = s.graph
        spec = planning.spec_from_graph(g, RESERVE, place, frozenset(g.trainable))
        p = planning.price(spec, load_profile("host"), 1 << 40)
        mine = splitting.node_bytes(g, input_storage=rows_in)
        plain = [(v, ns.name) for v, ns in enumerate(spec.nodes) if not ns.epilogue and ns.name in mine]
        assert len(plain) > len(g.nodes) // 2
        for v, name in plain:
            assert mine[name] == node_need(p, v) - p.fixed_bytes, name
        if rows_in:
            assert any(n.op == "Slice" and n.inputs == ("x",) for n in g.nodes)


def test_default_need_meets_its_target(tmp_path):
    """Without a need function, split_for_floor bounds node_bytes: floor_bytes is at most the target (the
    uniform 1 KB split's), with fewer nodes; a target no split reaches gives the finest it found."""
    tg = training_graph(model(tmp_path / "m.onnx"))
    uniform = splitting.split_graph(tg, 1024)
    target = splitting.floor_bytes(uniform)
    s = splitting.split_for_floor(tg, target, ladder=LADDER)
    assert splitting.floor_bytes(s) <= target and len(s.graph.nodes) < len(uniform.graph.nodes)
    low = splitting.split_for_floor(tg, 64, ladder=LADDER)
    assert splitting.floor_bytes(low) > 64 and min(low.sizes.values()) == LADDER[-1]


@pytest.mark.parametrize(("train", "qemu"), [("all", True), ("bias", False)])
def test_mixed_sizes_in_c_give_the_unsplit_bits(tmp_path, train, qemu):
    """The C program (fast kernels) of the mixed split gives the unsplit program's losses and parameters
    bit for bit: on the host, and (--train all) on qemu-cortex-m4."""
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if qemu else ()))
    path = model(tmp_path / "m.onnx")
    tg = training_graph(path, train)
    f = next(e[1] for e in EXPECTED if e[0] == train)
    s = mixed(tg, f)
    assert s.asked is not None and s.mixed
    base = CompileOptions(path, "host", 4 << 20, tmp_path / "plain", 1, Loss.CROSS_ENTROPY, LR, 8192, "none")
    base = replace(base, train=train, training=autodiff.DEFAULT_OPTIONS, kernels="fast")
    compile_model(replace(base, split="off"))
    c = compile_model(replace(base, out=tmp_path / "split", split="auto", tiles=s.asked))
    assert c.split is not None and c.split.graph.nodes == s.graph.nodes
    if qemu:
        assert_same_bits(tmp_path / "plain", tmp_path / "split", STEPS)
        return
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    host = runner.run_project(tmp_path / "split", "host", STEPS)
    assert [a.loss for a in plain.steps] == [b.loss for b in host.steps]
    for k, v in plain.params.items():
        assert (v == host.params[k]).all(), k


def test_auto_compiles_the_mixed_split_at_a_uniform_floor(tmp_path):
    """--split auto below the unsplit floor: each fitting uniform size's choice becomes the mixed split at
    that size's floor when it has fewer nodes (compiler._coarsest): at the floor of the finest size auto
    tries, 1 KB (--train all), the two choices (rows first, channels first) are mixed splits of 828 and
    1,760 nodes (uniform: 2,104), their floors no higher."""
    from poet_edge.compiler import plan_choices

    path = model(tmp_path / "m.onnx")
    tg = training_graph(path, "all")
    uniform = splitting.split_graph(tg, splitting.TILE_SIZES[-1])
    f = stored_floor(uniform.graph)
    ram = f + 8192 - RESERVE  # the compile's reserve
    opts = CompileOptions(path, "host", ram, tmp_path / "o", 1, Loss.CROSS_ENTROPY, LR, 8192, "scale", "all")
    opts = replace(opts, training=autodiff.DEFAULT_OPTIONS, split="auto")
    choices = plan_choices(tg, 8192, load_profile("host"), opts)
    assert [s for s, _ in choices] == [frozenset(tg.trainable)] * 2
    nodes = []
    for _, tile in choices:
        assert isinstance(tile, splitting.TileSizes) and tile.sizes
        s = splitting.split_graph(tg, tile)
        assert stored_floor(s.graph) <= f
        nodes.append(len(s.graph.nodes))
    assert [t.rows_first for _, t in choices if t] == [True, False] and nodes == [828, 1760]
    assert max(nodes) < len(uniform.graph.nodes)
    assert plan_choices(tg, 8192, load_profile("host"), opts) == choices  # deterministic
