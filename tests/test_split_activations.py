"""Operator splitting of the elementwise activations (issue 57): Gelu, Sigmoid, Tanh, HardSwish,
HardSigmoid, Erf, LeakyRelu, their gradients and a same-shape Div are marked ``channelwise`` in their OpDef,
so they run per channel tile (and row tile) like Relu and Clip, with the same flat kernels on fewer elements:
no join of their tiled inputs, the numpy step within 1e-6 of the unsplit one, and the C program gives the
unsplit program's bits, on the host and on qemu-cortex-m4."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx
from conftest import need_tools
from onnx import helper
from splitutil import Params, assert_same_bits, assert_split_close, save_model, stored_floor, training_graph

from poet_edge import autodiff, splitting
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model

LR = 0.05
STEPS = 3
ACTIVATIONS = ("Gelu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Erf", "LeakyRelu", "Div")


def activations_model(path: Path) -> Path:
    """x[1,3,12,12] -> Conv 3->8 -> Gelu (g) -> Conv 8->8 -> Sigmoid (s) -> Mul(s, g) -> HardSwish ->
    Conv 8->8 1x1 (c) -> Tanh(c), Erf(c) -> HardSigmoid(tanh) + Div(erf, s) -> LeakyRelu -> MaxPool 2x2 ->
    GlobalAveragePool ->
    Flatten -> Gemm 8->5 (opset 20, for Gelu)."""
    param = Params(5, 0.15)
    inits = param.inits

    pad = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 3, 3, 3), param("b0", 8)], ["c0"], **pad),
        helper.make_node("Gelu", ["c0"], ["g"]),
        helper.make_node("Conv", ["g", param("w1", 8, 8, 3, 3), param("b1", 8)], ["c1"], **pad),
        helper.make_node("Sigmoid", ["c1"], ["s"]),
        helper.make_node("Mul", ["s", "g"], ["m"]),
        helper.make_node("HardSwish", ["m"], ["h"]),
        helper.make_node("Conv", ["h", param("w2", 8, 8, 1, 1), param("b2", 8)], ["c"]),
        helper.make_node("Tanh", ["c"], ["t"]),
        helper.make_node("Erf", ["c"], ["e"]),
        helper.make_node("HardSigmoid", ["t"], ["hs"], alpha=0.25),
        helper.make_node("Div", ["e", "s"], ["d"]),
        helper.make_node("Add", ["hs", "d"], ["a"]),
        helper.make_node("LeakyRelu", ["a"], ["lr"], alpha=0.2),
        helper.make_node("MaxPool", ["lr"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["mp"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w3", 5, 8), param("b3", 5)], ["y"], transB=1),
    ]
    save_model(path, "activations", nodes, inits, [1, 3, 12, 12], [1, 5])
    m = onnx.load(path)
    m.opset_import[0].version = 20
    onnx.save(m, path)
    return path


def made_by(tg, names: list[str]) -> set[str]:
    return {t for n in tg.nodes if n.name in names for t in n.outputs}


def test_activations_and_their_gradients_run_in_tiles(tmp_path):
    """At 512 B (a 12x12 channel is 576 B: channel and row tiles) every activation node and every gradient
    of one is split, nothing joins the tiles an activation makes, and the floor falls. (Div's gradient
    for its divisor, -dY Y / B, goes through a ReduceSumTo with scale -1 and its own shape, which runs in
    the tiles too.)"""
    tg = training_graph(activations_model(tmp_path / "m.onnx"), "all")
    s = splitting.split_graph(tg, 512)
    ops = {n.name: n.op for n in tg.nodes}
    grads = {f"{op}Grad" for op in ACTIVATIONS}
    mine = [name for name, op in ops.items() if op in ACTIVATIONS or op in grads]
    assert {ops[n] for n in mine} >= set(ACTIVATIONS) | {
        "GeluGrad",
        "SigmoidGrad",
        "TanhGrad",
        "LeakyReluGrad",
    }
    assert set(mine) <= set(s.split_nodes), sorted(set(mine) - set(s.split_nodes))
    made = {f"join/{t}" for n in tg.nodes if n.name in mine for t in n.outputs}
    assert "grad/Div_10/ReduceSumTo" in s.split_nodes
    assert not made & {n.name for n in s.graph.nodes}
    assert s.rows.keys() >= made_by(tg, mine) and stored_floor(s.graph) < stored_floor(tg)
    assert_split_close(tg, s, LR, STEPS)


def test_activation_tiles_in_c_give_the_unsplit_bits_on_host_and_qemu(tmp_path):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = activations_model(tmp_path / "m.onnx")
    base = CompileOptions(path, "host", 4 << 20, tmp_path / "plain", 1, Loss.CROSS_ENTROPY, LR, 8192, "none")
    base = replace(base, train="all", training=autodiff.DEFAULT_OPTIONS, kernels="fast")
    compile_model(replace(base, split="off"))
    compile_model(replace(base, out=tmp_path / "split", split="512B"))
    assert_same_bits(tmp_path / "plain", tmp_path / "split", STEPS)
