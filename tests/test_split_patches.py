"""Forward-only stages in patches (operator splitting, issue 57; splitting.patch_stages): with --train last:N
the layers before the first trained one run forward only, and a rows-first split lets each reader compute
the rows it needs of them from the stage's input, the halo rows recomputed, instead of keeping their row
tiles (MCUNetV2's patches). numpy: within 1e-6 of the unsplit step; C: the unsplit bits on the host and on
qemu-cortex-m4; the natural order's peak about halves, the halo recomputation is priced."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import need_tools
from onnx import helper
from splitutil import Params, assert_same_bits, assert_split_close, save_model, training_graph

from poet_edge import planning, splitting
from poet_edge.autodiff import DEFAULT_OPTIONS, Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.profiles import load_profile
from poet_edge.schedulers import get_scheduler
from poet_edge.simulator import simulate

# r2: read by a convolution whose output is not in rows (the global pool reads it whole), so c2 is not
# patched either; a's patches span 8 rows (two of its 4-row bands: splitting.PATCH_ROWS), c0's too
STAGE = {"c0", "a", "c1", "r1", "s"}


def stage(path: Path) -> Path:
    """x[1,3,32,32] -> Conv 3->8 3x3 (c0) -> Relu (a) -> Conv 8->8 3x3 (c1) -> Relu (r1) -> Add a (s) ->
    Conv 8->8 3x3 (c2) -> Relu (r2) -> Conv 8->16 3x3 stride 2 -> Relu -> GlobalAveragePool -> Flatten ->
    Gemm 16->5."""
    param = Params(3, 0.3)
    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 8, 8, 3, 3), param("b1", 8)], ["c1"], **p1),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Add", ["r1", "a"], ["s"]),
        helper.make_node("Conv", ["s", param("w2", 8, 8, 3, 3), param("b2", 8)], ["c2"], **p1),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node(
            "Conv", ["r2", param("w3", 16, 8, 3, 3), param("b3", 16)], ["c3"], strides=[2, 2], **p1
        ),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w4", 5, 16), param("b4", 5)], ["y"], transB=1),
    ]
    return save_model(path, "stage", nodes, param.inits, [1, 3, 32, 32], [1, 5])


def _no_remat(g) -> tuple[int, float]:
    """The given order's peak and energy without recomputation."""
    profile = load_profile("cortex-m4")
    problem = planning.price(planning.spec_from_graph(g, 1024), profile, 1 << 40)
    sim = simulate(problem, get_scheduler("none")(problem), profile)
    return sim.peak_ram_bytes, sim.energy_j


def test_stages_are_the_forward_only_row_tiled_tensors(tmp_path):
    path = stage(tmp_path / "m.onnx")
    tg = training_graph(path, "last:1")
    s = splitting.split_graph(tg, splitting.TileSizes(4096, rows_first=True))
    assert splitting.patch_stages(tg, s.tiles, s.rows, set()) == STAGE
    every = training_graph(path, "all")  # the backward reads them all
    s = splitting.split_graph(every, splitting.TileSizes(4096, rows_first=True))
    assert splitting.patch_stages(every, s.tiles, s.rows, set()) == frozenset()


@pytest.mark.parametrize("tile", [4096, 2048, 1024])
def test_patches_give_the_unsplit_step_and_a_lower_peak(tmp_path, tile):
    """No row tile of a stage tensor is made, c1's rows are computed more than once (the halos), the peak of
    the given order falls (4 KB: 84,352 -> 74,112 B); numpy within 1e-6 of the unsplit step."""
    tg = training_graph(stage(tmp_path / "m.onnx"), "last:1")
    plain = splitting.split_graph(tg, splitting.TileSizes(tile, rows_first=True))
    patched = splitting.split_graph(tg, splitting.TileSizes(tile, rows_first=True, patches=True))
    made = {o for n in patched.graph.nodes for o in n.outputs}
    assert not any(o.startswith(tuple(f"{t}/t" for t in STAGE)) for o in made)
    c1 = [o for o in made if o.startswith("patch/c1/")]
    assert sum(patched.graph.shape(o)[2] for o in c1) > tg.shape("c1")[2]
    assert patched.summary()["patches"] and not plain.summary()["patches"]
    peak0, peak1 = _no_remat(plain.graph)[0], _no_remat(patched.graph)[0]
    assert peak1 < peak0
    if tile == 4096:
        assert (peak0, peak1) == (84_352, 74_112)
    assert_split_close(tg, patched, 0.05, 3)


def _opts(path: Path, out: Path, **kw) -> CompileOptions:
    opts = CompileOptions(
        path, "cortex-m4", 4 << 20, out, 1, Loss.CROSS_ENTROPY, 0.05, 1024, "none", "last:1"
    )
    return replace(opts, training=DEFAULT_OPTIONS, **kw)


def test_patched_program_gives_the_unsplit_bits(tmp_path):
    """4 KB rows first, patches on, 3 steps: the unsplit program's losses and parameters bit for bit, on
    the host and on qemu-cortex-m4."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = stage(tmp_path / "m.onnx")
    compile_model(_opts(path, tmp_path / "plain", split="off"))
    compile_model(_opts(path, tmp_path / "patched", split="4KB", tile_order="rows", patches="on"))
    tiles = json.loads((tmp_path / "patched" / "plan.json").read_text())["tiles"]
    assert tiles["patches"] is True
    assert_same_bits(tmp_path / "plain", tmp_path / "patched", 3)


def test_auto_schedules_both_and_keeps_the_cheaper(tmp_path):
    """--patches auto at 48 KB, greedy scheduler: the rows-first choices are scheduled unpatched (8 and 4 KB:
    5.387 and 4.785 mJ) and patched (8 KB: 2.078 mJ, the greedy order's peak far lower), and the compile
    keeps the patched one; off schedules no patched split."""
    path = stage(tmp_path / "m.onnx")
    ram = 48 * 1024
    runs = {}
    for mode in ("auto", "off"):
        o = _opts(path, tmp_path / mode, split="auto", scheduler="greedy", patches=mode)
        runs[mode] = compile_model(replace(o, ram_bytes=ram, milp=replace(o.milp, effort="quick")))
    rows = json.loads((tmp_path / "auto" / "plan.json").read_text())["choices_compared"]
    patched = [r for r in rows if r.get("patches")]
    assert patched and any(r.get("rows_first") and not r.get("patches") for r in rows)
    assert min(r["energy_j"] for r in rows) == runs["auto"].sim.energy_j < runs["off"].sim.energy_j
    assert runs["auto"].split is not None and runs["auto"].split.summary()["patches"]
    off = json.loads((tmp_path / "off" / "plan.json").read_text())["choices_compared"]
    assert not any(r.get("patches") for r in off)


def test_patch_nodes_run_their_producers(tmp_path):
    """Split.origin maps each patch's nodes to the node whose rows it computes (not to its reader)."""
    tg = training_graph(stage(tmp_path / "m.onnx"), "last:1")
    s = splitting.split_graph(tg, splitting.TileSizes(4096, rows_first=True, patches=True))
    made = {o: n.name for n in s.graph.nodes for o in n.outputs}
    producer = {o: n.name for n in tg.nodes for o in n.outputs}
    for out, node in made.items():
        if out.startswith("patch/"):
            assert s.origin[node] == producer[out.split("/")[1]], (node, out)
