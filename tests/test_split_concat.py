"""Channel Concat of tiled tensors without a join (operator splitting, issue 57): a Concat along the
channel axis whose output is tiled is a relabeling, its output's tiles are its inputs' tiles (the classes
are cut at the inputs' offsets), so the Concat runs nothing; likewise its gradient, the channel Slices of
dY, whose tiles are dY's. numpy: within 1e-6 of the unsplit step; C (fast kernels, host and
qemu-cortex-m4): the unsplit bits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import need_tools
from onnx import helper
from splitutil import Params, assert_same_bits, assert_split_close, save_model, stored_floor, training_graph

from poet_edge import autodiff, splitting
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model

LR = 0.05
STEPS = 3


def fire(path: Path, axis: int = 1) -> Path:
    """x[1,3,12,12] -> Conv 3->8 3x3 -> Relu -> Conv 8->4 1x1 (squeeze) -> Relu -> [Conv 4->6 1x1 -> Relu
    (e1); Conv 4->6 3x3 -> Relu (e3)] -> Concat ``axis`` (cat, 12 channels) -> Conv 12->8 1x1 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm 8->5."""
    param = Params(7, 0.3)
    inits = param.inits

    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 4, 8, 1, 1), param("b1", 4)], ["s0"]),
        helper.make_node("Relu", ["s0"], ["s"]),
        helper.make_node("Conv", ["s", param("w2", 6, 4, 1, 1), param("b2", 6)], ["c1"]),
        helper.make_node("Relu", ["c1"], ["e1"]),
        helper.make_node("Conv", ["s", param("w3", 6, 4, 3, 3), param("b3", 6)], ["c3"], **p1),
        helper.make_node("Relu", ["c3"], ["e3"]),
        helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=axis),
        helper.make_node("Conv", ["cat", param("w4", 8, 12, 1, 1), param("b4", 8)], ["c4"]),
        helper.make_node("Relu", ["c4"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w5", 5, 8), param("b5", 5)], ["y"], transB=1),
    ]
    return save_model(path, "fire", nodes, inits, [1, 3, 12, 12], [1, 5])


def with_input(path: Path) -> Path:
    """x[1,3,12,12] -> Conv 3->6 3x3 -> Relu (e) -> Concat(x, e) (9 channels) -> Conv 9->4 1x1 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm 4->5: a piece is the step input, which is never tiled."""
    param = Params(8, 0.3)
    inits = param.inits

    nodes = [
        helper.make_node("Conv", ["x", param("w0", 6, 3, 3, 3), param("b0", 6)], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["e"]),
        helper.make_node("Concat", ["x", "e"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", param("w1", 4, 9, 1, 1), param("b1", 4)], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w2", 5, 4), param("b2", 5)], ["y"], transB=1),
    ]
    return save_model(path, "with_input", nodes, inits, [1, 3, 12, 12], [1, 5])


def dense(path: Path) -> Path:
    """x[1,3,12,12] -> Conv 3->4 3x3 -> Relu (a) -> Conv 4->4 3x3 -> Relu (b) -> Concat(a, b) (c1) -> Conv
    8->4 1x1 -> Relu (d) -> Concat(c1, d) (c2, 12 channels) -> Conv 12->8 1x1 -> Relu -> GlobalAveragePool ->
    Flatten -> Gemm 8->5: c1 is a Concat's output and another's input (DenseNet), a and b also conv inputs."""
    param = Params(9, 0.3)
    inits = param.inits

    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 4, 3, 3, 3), param("b0", 4)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 4, 4, 3, 3), param("b1", 4)], ["cb"], **p1),
        helper.make_node("Relu", ["cb"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["c1"], axis=1),
        helper.make_node("Conv", ["c1", param("w2", 4, 8, 1, 1), param("b2", 4)], ["cd"]),
        helper.make_node("Relu", ["cd"], ["d"]),
        helper.make_node("Concat", ["c1", "d"], ["c2"], axis=1),
        helper.make_node("Conv", ["c2", param("w3", 8, 12, 1, 1), param("b3", 8)], ["c4"]),
        helper.make_node("Relu", ["c4"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w5", 5, 8), param("b5", 5)], ["y"], transB=1),
    ]
    return save_model(path, "dense", nodes, inits, [1, 3, 12, 12], [1, 5])


def _cat_nodes(tg) -> tuple[str, list[str]]:
    """The forward Concat and the channel Slices of its gradient."""
    cat = next(n for n in tg.nodes if n.op == "Concat" and n.outputs == ("cat",))
    dy = {n.inputs[0] for n in tg.nodes if n.op == "Slice"}
    assert len(dy) == 1, dy  # one dY, cut into the inputs' gradients
    return cat.name, [n.name for n in tg.nodes if n.op == "Slice"]


def _whole_readers(s: splitting.Split, t: str) -> list[str]:
    return [n.name for n in s.graph.nodes if t in (*n.inputs, *n.outputs)]


@pytest.mark.parametrize("train", ["all", "bias"])
@pytest.mark.parametrize(("tile", "rows"), [(2048, False), (512, True)])
def test_channel_concat_is_a_relabeling(tmp_path, train, tile, rows):
    """At 2 KB (channel tiles: cat is 6,912 B) and 512 B (a 576 B channel: row tiles too) the Concat and
    its gradient's Slices run nothing: no node makes or reads cat or dY whole, no join of e1 or e3 (or of
    their gradients), the tiles of cat within e1's and e3's channels are e1's and e3's; the floor falls
    below the split floor with the join, and the numpy step stays within 1e-6 of the unsplit one."""
    tg = training_graph(fire(tmp_path / "m.onnx"), train)
    cat, slices = _cat_nodes(tg)
    dy = next(n.inputs[0] for n in tg.nodes if n.name == slices[0])
    dx = [t for n in tg.nodes if n.name in slices for t in n.outputs]
    s = splitting.split_graph(tg, tile)
    per = 3 if tile == 2048 else 1  # channels a tile: 3 x 576 B within 2 KB
    assert s.tiles["cat"] == s.tiles[dy] == tuple(range(0, 13, per))
    assert s.tiles["e1"] == s.tiles["e3"] == s.tiles[dx[0]] == s.tiles[dx[1]] == tuple(range(0, 7, per))
    assert {cat, *slices} <= set(s.split_nodes)
    assert not {cat, *slices} & {n.name for n in s.graph.nodes}
    assert not [n.name for n in s.graph.nodes if n.op == "Concat" and "cat" in n.outputs]
    for t in ("cat", dy, "e1", "e3", *dx):
        assert not _whole_readers(s, t), (t, _whole_readers(s, t))
    assert (len(s.rows.get("cat", ())) > 2) == rows and s.rows.get("cat") == s.rows.get("e1")
    aliases = [t for t in s.graph.tensors if any(t.startswith(f"{u}/") for u in ("cat", *dx))]
    assert not aliases  # cat's tiles are e1's and e3's, their gradients' tiles dY's
    # with the inputs joined (before the relabeling) the split floor was the unsplit one, 16,608 B
    assert stored_floor(s.graph) < stored_floor(tg)
    assert_split_close(tg, s, LR, STEPS)


def test_negative_channel_axis(tmp_path):
    """axis -3 of a rank-4 Concat is the channel axis: the same relabeling."""
    tg = training_graph(fire(tmp_path / "m.onnx", axis=-3), "bias")
    cat, slices = _cat_nodes(tg)
    s = splitting.split_graph(tg, 2048)
    assert {cat, *slices} <= set(s.split_nodes) and not {cat, *slices} & {n.name for n in s.graph.nodes}
    assert_split_close(tg, s, LR, STEPS)


@pytest.mark.parametrize("train", ["all", "bias"])
def test_nested_concats(tmp_path, train):
    """Concat(Concat(a, b), d): both Concats and every channel Slice of their gradients run nothing, at 1 KB
    (channel tiles) and 512 B (row tiles too); c2's tiles are a's, b's and d's; within 1e-6."""
    tg = training_graph(dense(tmp_path / "m.onnx"), train)
    views = [n.name for n in tg.nodes if n.op in ("Concat", "Slice")]
    assert len(views) >= 2 + 4
    for tile in (1024, 512):
        s = splitting.split_graph(tg, tile)
        assert set(views) <= set(s.split_nodes) and not set(views) & {n.name for n in s.graph.nodes}
        assert s.tiles["c1"] == (*s.tiles["a"], *(4 + b for b in s.tiles["b"][1:]))
        assert s.tiles["c2"] == (*s.tiles["c1"], *(8 + b for b in s.tiles["d"][1:]))
        for t in ("c1", "c2"):
            assert not _whole_readers(s, t), (t, _whole_readers(s, t))
        assert_split_close(tg, s, LR, STEPS)


def test_a_concat_of_the_step_input_keeps_its_join(tmp_path):
    """A piece that may not be tiled (the batch x): the Concat reads its inputs whole and its output is
    sliced into tiles, as before; the step is still within 1e-6."""
    tg = training_graph(with_input(tmp_path / "m.onnx"), "all")
    cat, _ = _cat_nodes(tg)
    s = splitting.split_graph(tg, 1024)
    assert "cat" in s.tiles and "e" in s.tiles
    node = next(n for n in s.graph.nodes if n.name == cat)
    assert node.inputs == ("x", "e") and "join/e" in {n.name for n in s.graph.nodes}
    assert_split_close(tg, s, LR, STEPS)


@pytest.mark.parametrize(("model", "train"), [(fire, "all"), (fire, "bias"), (dense, "all")])
def test_concat_tiles_in_c_give_the_unsplit_bits_on_host_and_qemu(tmp_path, model, train):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = model(tmp_path / "m.onnx")
    base = CompileOptions(path, "host", 4 << 20, tmp_path / "plain", 1, Loss.CROSS_ENTROPY, LR, 8192, "none")
    base = replace(base, train=train, training=autodiff.DEFAULT_OPTIONS, kernels="fast")
    compile_model(replace(base, split="off"))
    compile_model(replace(base, out=tmp_path / "split", split="512B"))
    views = [n.name for n in training_graph(path, train).nodes if n.op in ("Concat", "Slice")]
    plan = json.loads((tmp_path / "split" / "plan.json").read_text())
    assert views and set(views) <= set(plan["tiles"]["nodes"])  # relabeled: no Concat, no Slice of dY
    assert_same_bits(tmp_path / "plain", tmp_path / "split", STEPS)
