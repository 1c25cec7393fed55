"""Batch splitting (issue 57, poet_edge/batch_split.py): the batch in k parts through the per-sample layers.
numpy: the loss bit-identical to the unsplit graph's, the parameters after 3 SGD steps within 1e-6 (the
weight gradients sum the parts in another order); C: host within 1e-5 of numpy, qemu-cortex-m4 the host's
bits; the compile picks batch parts when the floor needs them; bad --batch-parts values are refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import need_tools, poet
from onnx import helper
from oputil import max_rel_err
from splitutil import Params, save_model

from poet_edge import autodiff, batch_split, frontend, reference, runner, trainable
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.ir import Graph
from poet_edge.schedulers.milp import MilpOptions

LR = 0.05
STEPS = 3
BATCH = 4


def resnet(path: Path) -> Path:
    """x[N,3,8,8] -> Conv 3->6 3x3 -> Relu -> Conv 6->6 3x3 -> Add (residual) -> Relu -> MaxPool 2 ->
    GlobalAveragePool -> Flatten -> Gemm 6->5."""
    param = Params(11, 0.3)
    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 6, 3, 3, 3), param("b0", 6)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 6, 6, 3, 3), param("b1", 6)], ["c1"], **p1),
        helper.make_node("Add", ["c1", "a"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["m"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w2", 5, 6), param("b2", 5)], ["y"], transB=1),
    ]
    return save_model(path, "resnet", nodes, param.inits, ["N", 3, 8, 8], ["N", 5])


def mlp(path: Path) -> Path:
    """x[N,12] -> Gemm 12->16 -> Relu -> Gemm 16->16 -> Sigmoid -> Gemm 16->5."""
    param = Params(12, 0.4)
    nodes = [
        helper.make_node("Gemm", ["x", param("w0", 12, 16), param("b0", 16)], ["h0"]),
        helper.make_node("Relu", ["h0"], ["a0"]),
        helper.make_node("Gemm", ["a0", param("w1", 16, 16), param("b1", 16)], ["h1"]),
        helper.make_node("Sigmoid", ["h1"], ["a1"]),
        helper.make_node("Gemm", ["a1", param("w2", 16, 5), param("b2", 5)], ["y"]),
    ]
    return save_model(path, "mlp", nodes, param.inits, ["N", 12], ["N", 5])


def merged(path: Path) -> Path:
    """x[N,2,6,6] -> Conv 2->4 3x3 -> Relu (a) -> Reshape [N*4, 36] (merges the batch: the boundary) ->
    Gemm 36->3 -> Relu -> Reshape [N, 12] -> Gemm 12->5."""
    param = Params(13, 0.3)
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 4, 2, 3, 3), param("b0", 4)], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Reshape", ["a", "s0"], ["f"]),
        helper.make_node("Gemm", ["f", param("w1", 36, 3), param("b1", 3)], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Reshape", ["hr", "s1"], ["g"]),
        helper.make_node("Gemm", ["g", param("w2", 12, 5), param("b2", 5)], ["y"]),
    ]
    consts = [
        helper.make_tensor("s0", 7, [2], [-1, 36]),  # INT64
        helper.make_tensor("s1", 7, [2], [-1, 12]),
    ]
    return save_model(path, "merged", nodes, param.inits + consts, ["N", 2, 6, 6], ["N", 5])


def small_maps(path: Path) -> Path:
    """x[N,8,2,2] -> Conv 8->8 3x3 -> Relu -> Conv 8->8 3x3 -> GlobalAveragePool -> Flatten -> Gemm 8->5: maps
    smaller than the weights, so each part's ConvGradWeight adds to the running sum (autodiff._fold)."""
    param = Params(14, 0.3)
    p1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", param("w0", 8, 8, 3, 3), param("b0", 8)], ["c0"], **p1),
        helper.make_node("Relu", ["c0"], ["a"]),
        helper.make_node("Conv", ["a", param("w1", 8, 8, 3, 3), param("b1", 8)], ["c1"], **p1),
        helper.make_node("GlobalAveragePool", ["c1"], ["p"]),
        helper.make_node("Flatten", ["p"], ["q"]),
        helper.make_node("Gemm", ["q", param("w2", 5, 8), param("b2", 5)], ["y"], transB=1),
    ]
    return save_model(path, "small_maps", nodes, param.inits, ["N", 8, 2, 2], ["N", 5])


MODELS = {"resnet": resnet, "mlp": mlp, "merged": merged, "small_maps": small_maps}
FOLDED = {"resnet": (0, 1), "mlp": (0, 3), "merged": (0, 0), "small_maps": (2, 1)}  # (ConvGradWeight, Gemm)


def _training(g: Graph) -> Graph:
    chosen = trainable.select(g, "all")
    return autodiff.training_graph(g, Loss.CROSS_ENTROPY, chosen, options=autodiff.DEFAULT_OPTIONS)


def _data(tg: Graph) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    y = rng.integers(0, 5, tg.shape(tg.inputs[1])).astype(np.int32)
    return [(x, y)] * STEPS


@pytest.mark.parametrize("parts", [2, 3, 4])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_numpy_loss_bits_and_parameters(tmp_path, name, parts):
    """The split training graph's first loss is the unsplit one bit for bit; after 3 steps the losses and
    the parameters are within 1e-6 of them."""
    g = frontend.load(MODELS[name](tmp_path / "m.onnx"), BATCH)
    s = batch_split.split_batch(g, parts)
    assert s.sizes == batch_split.part_sizes(BATCH, parts) and sum(s.sizes) == BATCH
    tg, ts = _training(g), _training(s.graph)
    la, a = reference.train(tg, _data(tg), LR)
    lb, b = reference.train(ts, _data(tg), LR)
    assert la[0] == lb[0]  # the same parameters: the same bits
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6  # then the parameters differ within rounding
    assert set(a) == set(b)
    for k in a:
        assert max_rel_err(b[k], a[k]) <= 1e-6, k


def test_sizes_and_names_are_deterministic(tmp_path):
    """Parts as equal as possible (larger first); nodes named <node>/n<i>; the same graph twice."""
    assert batch_split.part_sizes(8, 3) == (3, 3, 2)
    assert batch_split.part_sizes(4, 4) == (1, 1, 1, 1)
    g = frontend.load(resnet(tmp_path / "m.onnx"), BATCH)
    s1, s2 = batch_split.split_batch(g, 3), batch_split.split_batch(g, 3)
    assert [n.name for n in s1.graph.nodes] == [n.name for n in s2.graph.nodes]
    names = {n.name for n in s1.graph.nodes}
    assert {"x/n0", "x/n1", "x/n2"} <= names  # the Slices of x
    # every node of the 9 runs per part; one Concat joins the output y
    assert len(s1.replicated) == 9 and s1.joined == ("y",)
    assert len(s1.graph.nodes) == 3 + 9 * 3 + 1
    assert batch_split.split_batch(g, 1).graph is g


def test_a_node_that_merges_the_batch_is_the_boundary(tmp_path):
    """The Reshape to [N*4, 36] is not per-sample: the Conv and Relu run per part, the Relu's output is
    joined by a Concat along axis 0, and the rest runs whole."""
    g = frontend.load(merged(tmp_path / "m.onnx"), BATCH)
    s = batch_split.split_batch(g, 2)
    assert len(s.replicated) == 2 and s.joined == ("a",)
    (cat,) = [n for n in s.graph.nodes if n.op == "Concat"]
    assert cat.attrs["axis"] == 0 and cat.outputs == ("a",)
    assert len(s.graph.nodes) == 2 + 2 * 2 + 1 + 5


def test_a_gemm_of_transposed_samples_is_not_per_sample():
    """Gemm with transA=1 (the batch is the reduced axis) and a Softmax over axis 0 mix samples."""
    from poet_edge import ops

    gemm, softmax = ops.get("Gemm").per_sample, ops.get("Softmax").per_sample
    assert gemm is not None and softmax is not None
    assert gemm([(4, 3), (3, 2)], [True, False], {}) and not gemm(
        [(4, 3), (4, 2)], [True, False], {"transA": 1}
    )
    assert softmax([(4, 3)], [True], {"axis": 1}) and not softmax([(4, 3)], [True], {"axis": 0})
    assert ops.get("GRU").per_sample is None  # conservative default


def _opts(path: Path, out: Path, ram: int, **kw: object) -> CompileOptions:
    base = CompileOptions(path, "host", ram, out, BATCH, Loss.CROSS_ENTROPY, LR, 2048, "scale")
    base = replace(base, milp=MilpOptions(effort="quick"))
    return replace(base, training=autodiff.DEFAULT_OPTIONS, kernels="fast", split="auto", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "parts", "split"),
    [("resnet", 3, "auto"), ("resnet", 2, "1kb"), ("mlp", 4, "auto"), ("small_maps", 4, "auto")],
)
def test_c_host_matches_numpy_and_qemu_matches_host(tmp_path, name, parts, split):
    """Batch parts alone and with channel tiles of 1 KB: host within 1e-5 of numpy, QEMU the host's bits,
    the first loss the unsplit project's bits. Where a part's operands weigh no more than the gradient, the
    weights' gradients are summed over the parts in the nodes that make them (autodiff._fold: Gemm with
    C, ConvGradWeight partial)."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = MODELS[name](tmp_path / "m.onnx")
    c = compile_model(replace(_opts(path, tmp_path / "out", 1 << 20, batch_parts=parts), split=split))
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["batch_split"]["parts"] == parts
    assert plan["batch_split"]["sizes"] == list(batch_split.part_sizes(BATCH, parts))
    assert (plan["tiles"] is not None) == (split != "auto")
    grads = [n for n in c.training.nodes if n.name.startswith("grad/")]
    convs = sum(n.op == "ConvGradWeight" and bool(n.attrs.get("partial")) for n in grads)
    gemms = sum(n.op == "Gemm" and len(n.inputs) == 3 for n in grads)
    assert (convs, gemms) == tuple((parts - 1) * k for k in FOLDED[name])
    host = runner.run_project(tmp_path / "out", "host", STEPS)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", STEPS)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k, v in host.params.items():
        assert np.array_equal(v, qemu.params[k]), k
    compile_model(_opts(path, tmp_path / "plain", 1 << 20, batch_parts=1))
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    assert plain.steps[0].loss == host.steps[0].loss  # the C loss of the same parameters: the same bits
    losses, ref = reference.train(c.training, runner.batches(plan, STEPS), LR)
    assert max_rel_err(np.array([s.loss for s in host.steps]), np.array(losses)) <= 1e-5
    for k, v in ref.items():
        assert max_rel_err(host.params[k].reshape(v.shape), v) <= 1e-5, k


@pytest.mark.parametrize(("parts", "split", "train"), [(4, "auto", "all"), (2, "1kb", "bias")])
def test_batch_parts_load_their_samples_from_storage(tmp_path, parts, split, train):
    """--input storage with batch parts: each part's Slice of x is a load of its samples from storage, and a
    row window of a part a load of those rows of those samples (splitting.batch_windows); x is never
    loaded whole, so the floor falls below the batch-in-RAM one, and the program keeps the bits of the
    batch in RAM: host within 1e-5 of numpy, QEMU the host's bits, every parameter the RAM-batch
    program's."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    from poet_edge import planning, splitting
    from poet_edge.compiler import Training, parts_floor
    from poet_edge.profiles import load_profile

    path = resnet(tmp_path / "m.onnx")
    storage = planning.InputPlace.STORAGE
    opts = replace(
        _opts(path, tmp_path / "out", 1 << 20, batch_parts=parts, train=train), split=split, input=storage
    )
    training = Training(frontend.load(path, BATCH), opts)
    host = load_profile("host")
    in_ram = replace(opts, input=planning.InputPlace.RAM)
    assert parts_floor(training, 2048, host, opts, parts) < parts_floor(training, 2048, host, in_ram, parts)
    c = compile_model(opts)
    assert c.batch is not None and c.batch.parts == parts
    g = c.split.graph if c.split is not None else c.training
    loads = [
        n.name for n in planning.spec_from_graph(g, 2048, storage, frozenset()).nodes if n.kind == "input"
    ]
    assert planning.input_node_name("x") not in loads and len(loads) >= parts
    windows = splitting.batch_windows(g)
    # with tiles and no weight gradient reading a part whole, only its tiles are loaded, never the part
    assert bool(windows.virtual) == (split != "auto")
    code = (tmp_path / "out" / "poet_model.c").read_text()
    assert "load a box of the batch from storage" in code and "load the batch from storage" not in code
    host_run = runner.run_project(tmp_path / "out", "host", STEPS)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", STEPS)
    assert [s.loss for s in host_run.steps] == [s.loss for s in qemu.steps]
    for k, v in host_run.params.items():
        assert np.array_equal(v, qemu.params[k]), k
    compile_model(replace(in_ram, out=tmp_path / "ram"))
    ram = runner.run_project(tmp_path / "ram", "host", STEPS)
    for k, v in ram.params.items():
        assert np.array_equal(v, host_run.params[k]), k
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    losses, ref = reference.train(c.training, runner.batches(plan, STEPS), LR)
    assert max_rel_err(np.array([s.loss for s in host_run.steps]), np.array(losses)) <= 1e-5
    for k, v in ref.items():
        assert max_rel_err(host_run.params[k].reshape(v.shape), v) <= 1e-5, k


def test_auto_splits_the_batch_when_the_floor_needs_it(tmp_path):
    """At batch 8, below the unsplit floor, --split auto runs the batch in the fewest parts whose floor
    fits; plan.json says how many and the floors are deterministic."""
    path = resnet(tmp_path / "m.onnx")
    opts = replace(_opts(path, tmp_path / "o", 0), batch=8)
    from poet_edge.compiler import Training, parts_floor
    from poet_edge.profiles import load_profile

    training = Training(frontend.load(path, 8), opts)
    host = load_profile("host")
    floors = [parts_floor(training, 2048, host, opts, k) for k in (1, 2, 4, 8)]
    assert floors == sorted(floors, reverse=True) and floors[2] < floors[0]
    budget = (floors[1] + floors[2]) // 2  # only 4 parts or more fit (of 2, 3, 4)
    c = compile_model(replace(opts, ram_bytes=budget, out=tmp_path / "auto"))
    plan = json.loads((tmp_path / "auto" / "plan.json").read_text())
    parts = plan["batch_split"]["parts"]
    assert c.batch is not None and parts == c.batch.parts
    assert 2 < parts <= 4 and plan["tiles"] is None
    assert parts_floor(training, 2048, host, opts, parts) <= budget < floors[1]
    assert plan["peak_ram_bytes"] <= budget
    with pytest.raises(PoetError, match="batch in 8 parts"):
        compile_model(replace(opts, ram_bytes=budget, out=tmp_path / "off", split="off"))


def test_bad_batch_parts(tmp_path):
    path = resnet(tmp_path / "m.onnx")
    with pytest.raises(PoetError, match="a batch of 4 splits into 1 to 4 parts"):
        compile_model(_opts(path, tmp_path / "o", 1 << 20, batch_parts=5))
    with pytest.raises(PoetError, match=r"1 to 1 parts \(at batch 1 only a sequence's positions split"):
        compile_model(replace(_opts(path, tmp_path / "o", 1 << 20, batch_parts=2), batch=1))
    with pytest.raises(PoetError, match="--split off splits nothing"):
        compile_model(replace(_opts(path, tmp_path / "o", 1 << 20, batch_parts=2), split="off"))
    r = poet("compile", path, "--device", "host", "--ram", "1MB", "--batch", "4", "--batch-parts", "0")
    assert r.returncode == 2 and "--batch-parts 0: the batch splits into at least 1 part" in r.stderr
    r = poet("compile", path, "--device", "host", "--ram", "1MB", "--batch-parts", "two")
    assert r.returncode == 2 and "use auto or a number of parts" in r.stderr
    with pytest.raises(PoetError, match="at most 64 parts"):
        batch_split.parts_wanted("65")
    r = poet("compile", "--help")
    assert "--batch-parts" in r.stdout and "docs/batch_split.md" in r.stdout


def test_batch_1_is_not_rewritten(tmp_path):
    """At batch 1 the compile runs no rewrite: no batch_split in plan.json, no part in the graph."""
    path = resnet(tmp_path / "m.onnx")
    c = compile_model(replace(_opts(path, tmp_path / "o", 1 << 20), batch=1))
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert c.batch is None and "batch_split" not in plan
    assert not any("/n" in n.name for n in c.training.nodes)


def test_sweep_floor_counts_the_batch_parts(tmp_path):
    """poet sweep's floor (the line on its plots and its summary) is the lowest the compile can reach: with
    the batch in the most parts allowed, where that is lower than tiles of the whole batch (bert_tiny at
    batch 8, --train bias: attention's maps are not cut by tiles, a sample's are smaller;
    bench/results/batch_split.md)."""
    from poet_edge import sweep

    path = Path(__file__).parent.parent / "examples" / "zoo" / "bert_tiny.onnx"
    opts = CompileOptions(path, "cortex-m4", 1 << 20, tmp_path, 8, Loss.CROSS_ENTROPY, LR, None, "scale")
    opts = replace(opts, train="bias", training=autodiff.DEFAULT_OPTIONS, split="auto")
    assert sweep.floor_bytes(replace(opts, batch_parts=1)) == 336448
    assert sweep.floor_bytes(opts) == sweep.floor_bytes(replace(opts, batch_parts=8)) == 107072


def test_inspect_reports_the_floor_with_the_batch_in_parts(tmp_path):
    """`poet inspect` at batch > 1 gives the lowest floor with the batch in one-sample parts and tiles too
    (here far below the unsplit floor; on this small model no lower than tiles alone); at batch 1 it has
    no such line."""
    path = resnet(tmp_path / "m.onnx")
    r = json.loads(poet("inspect", path, "--batch", "4", "--input", "storage", "--json").stdout)
    assert r["floor_parts"] == 4 and 0 < r["floor_parts_bytes"] < r["floor_stored_bytes"] // 2
    text = poet("inspect", path, "--batch", "4", "--input", "storage").stdout
    assert f"{r['floor_parts_bytes']:,} B" in text and "--batch-parts 4" in text
    one = json.loads(poet("inspect", path, "--json").stdout)
    assert one["floor_parts"] == 0 and "--batch-parts" not in poet("inspect", path).stdout


def test_verify_paging_loads_the_batch_whole(tmp_path):
    """--verify-paging checks the batch's CRC-32, which covers the whole batch: with batch parts and
    --input storage the batch is then loaded whole (no box loads) and the program keeps the bits."""
    need_tools("gcc")
    from poet_edge import planning

    path = resnet(tmp_path / "m.onnx")
    storage = planning.InputPlace.STORAGE
    base = replace(_opts(path, tmp_path / "v", 1 << 20, batch_parts=2), input=storage, verify_paging=True)
    c = compile_model(base)
    loads = [n.name for n in c.spec.nodes if n.kind == "input"]
    assert loads == [planning.input_node_name("x")]
    code = (tmp_path / "v" / "poet_model.c").read_text()
    assert "poet_input_crc" in code and "load a box of the batch" not in code
    compile_model(replace(base, verify_paging=False, out=tmp_path / "w"))
    a, b = (runner.run_project(tmp_path / d, "host", STEPS) for d in ("v", "w"))
    for k, v in a.params.items():
        assert np.array_equal(v, b.params[k]), k


def encoder(path: Path) -> Path:
    """A transformer-like block at batch 1, x[1,8,6] (8 positions): LayerNormalization -> MatMul 6->12 ->
    Add bias -> Tanh -> MatMul 12->6 -> Add bias -> Add x (residual) r -> Reshape [1,8,2,3] -> Transpose
    (0,2,1,3) q [1,2,8,3] and Transpose (0,2,3,1) k [1,2,3,8] -> MatMul q.k -> Softmax over the keys ->
    MatMul by q (the values) -> Transpose back -> Reshape [1,8,6] -> MatMul 6->6 -> Add bias -> ReduceMean
    over the positions -> Gemm 6->5."""
    param = Params(17, 0.4)
    nodes = [
        helper.make_node("LayerNormalization", ["x", param("g0", 6), param("b0", 6)], ["h"], axis=-1),
        helper.make_node("MatMul", ["h", param("w1", 6, 12)], ["m1"]),
        helper.make_node("Add", ["m1", param("c1", 12)], ["a1"]),
        helper.make_node("Tanh", ["a1"], ["t"]),
        helper.make_node("MatMul", ["t", param("w2", 12, 6)], ["m2"]),
        helper.make_node("Add", ["m2", param("c2", 6)], ["a2"]),
        helper.make_node("Add", ["a2", "x"], ["r"]),
        helper.make_node("Reshape", ["r", "s0"], ["v"]),
        helper.make_node("Transpose", ["v"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["v"], ["k"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["q", "k"], ["sc"]),
        helper.make_node("Softmax", ["sc"], ["pr"], axis=3),
        helper.make_node("MatMul", ["pr", "q"], ["o"]),
        helper.make_node("Transpose", ["o"], ["v2"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["v2", "s1"], ["u"]),
        helper.make_node("MatMul", ["u", param("w3", 6, 6)], ["m3"]),
        helper.make_node("Add", ["m3", param("c3", 6)], ["a3"]),
        helper.make_node("ReduceMean", ["a3"], ["p"], axes=[1], keepdims=0),
        helper.make_node("Gemm", ["p", param("w4", 5, 6), param("b4", 5)], ["y"], transB=1),
    ]
    consts = [helper.make_tensor("s0", 7, [4], [1, 8, 2, 3]), helper.make_tensor("s1", 7, [3], [1, 8, 6])]
    return save_model(path, "encoder", nodes, param.inits + consts, [1, 8, 6], [1, 5])


@pytest.mark.parametrize("parts", [2, 3, 8])
def test_sequence_positions_in_parts_numpy(tmp_path, parts):
    """At batch 1 a sequence model's positions run in parts through the position-wise layers, and the
    attention per part of its queries (the position axis moved to 2 by the Transpose): the keys and the
    values are joined (along axes 3 and 2), the scores, Softmax and values' product run per part, the
    ReduceMean over the positions joins them (axis 1); the parameters after 3 SGD steps are within 1e-6
    of the unsplit graph's (the weight gradients sum the parts in another order)."""
    g = frontend.load(encoder(tmp_path / "m.onnx"), 1)
    assert batch_split.sequence_length(g) == 8
    s = batch_split.split_tokens(g, parts)
    assert s.axis == 1 and s.sizes == batch_split.part_sizes(8, parts) and s.what == "positions"
    assert s.joined == ("k", "q", "a3")  # x is cut by Slices
    assert len(s.replicated) == 17  # every node but the ReduceMean and the Gemm
    cats = {n.outputs[0]: n.attrs["axis"] for n in s.graph.nodes if n.op == "Concat"}
    assert cats == {"k": 3, "q": 2, "a3": 1}
    tg, ts = _training(g), _training(s.graph)
    la, a = reference.train(tg, _data(tg), LR)
    lb, b = reference.train(ts, _data(tg), LR)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6
    for k in a:
        assert max_rel_err(b[k], a[k]) <= 1e-6, k
    assert batch_split.split_tokens(g, 1).graph is g
    assert batch_split.sequence_length(frontend.load(resnet(tmp_path / "r.onnx"), 1)) == 1  # no sequence


def test_sequence_positions_in_parts_c(tmp_path):
    """The encoder with its positions in 3 parts, compiled: host within 1e-5 of numpy, qemu-cortex-m4 the
    host's bits, and the first loss the unsplit program's bits (each position's rows are computed alone)."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = encoder(tmp_path / "m.onnx")
    c = compile_model(replace(_opts(path, tmp_path / "out", 1 << 20, batch_parts=3), batch=1))
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["batch_split"]["axis"] == 1 and plan["batch_split"]["sizes"] == [3, 3, 2]
    host = runner.run_project(tmp_path / "out", "host", STEPS)
    qemu = runner.run_project(tmp_path / "out", "qemu-cortex-m4", STEPS)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k, v in host.params.items():
        assert np.array_equal(v, qemu.params[k]), k
    compile_model(replace(_opts(path, tmp_path / "plain", 1 << 20, batch_parts=1), batch=1))
    plain = runner.run_project(tmp_path / "plain", "host", STEPS)
    assert plain.steps[0].loss == host.steps[0].loss
    losses, ref = reference.train(c.training, runner.batches(plan, STEPS), LR)
    assert max_rel_err(np.array([s.loss for s in host.steps]), np.array(losses)) <= 1e-5
    for k, v in ref.items():
        assert max_rel_err(host.params[k].reshape(v.shape), v) <= 1e-5, k


def test_auto_splits_the_positions_when_the_floor_needs_it(tmp_path):
    """bert_tiny at batch 1, --train bias, --input storage, every parameter in storage: the unsplit floor
    (tiles too: 42,512 B) is set by a [1, 32, 128] dense layer's bias Add; with the positions in parts it
    falls (to 25,616 B with tiles, set by the join of the keys), and --split auto takes the fewest parts
    whose floor fits, with tiles when it must."""
    from poet_edge import planning
    from poet_edge.compiler import Training, batch_choices, parts_floor
    from poet_edge.profiles import load_profile

    path = Path(__file__).parent.parent / "examples" / "zoo" / "bert_tiny.onnx"
    opts = replace(_opts(path, tmp_path / "o", 0), batch=1, train="bias", input=planning.InputPlace.STORAGE)
    training = Training(frontend.load(path, 1), opts)
    assert (training.extent, training.noun, training.max_parts()) == (32, "sequence", 32)
    m4 = load_profile("cortex-m4")
    floors = {k: parts_floor(training, 8192, m4, opts, k) for k in (1, 2, 4, 32)}
    assert floors == {1: 58384, 2: 33808, 4: 33808, 32: 33808}  # 2 parts: the attention sets it
    choices = batch_choices(training, 8192, m4, replace(opts, ram_bytes=36 * 1024))
    assert {parts for _, _, parts in choices} == {2}
    # below every floor without tiles: the fewest parts (of 2, 4, ... 32) whose tiles fit, not 32
    choices = batch_choices(training, 8192, m4, replace(opts, ram_bytes=28 * 1024))
    assert {parts for _, _, parts in choices} == {2} and all(tile is not None for _, tile, _ in choices)
    r = json.loads(poet("inspect", path, "--train", "bias", "--input", "storage", "--json").stdout)
    assert (r["floor_parts"], r["floor_parts_bytes"]) == (32, 25616)  # with tiles too: the keys' join
    assert r["floor_split_bytes"] == 42512 and r["floor_parts_node"] == "join/transpose_3"


def embedded(path: Path) -> Path:
    """x[1,8,6] + a position embedding pos[1,8,6] -> LayerNormalization -> MatMul 6->6 -> ReduceMean over
    the positions -> Gemm 6->5."""
    param = Params(19, 0.4)
    nodes = [
        helper.make_node("Add", ["x", param("pos", 1, 8, 6)], ["e"]),
        helper.make_node("LayerNormalization", ["e", param("g0", 6), param("b0", 6)], ["h"], axis=-1),
        helper.make_node("MatMul", ["h", param("w1", 6, 6)], ["m"]),
        helper.make_node("ReduceMean", ["m"], ["p"], axes=[1], keepdims=0),
        helper.make_node("Gemm", ["p", param("w2", 5, 6), param("b2", 5)], ["y"], transB=1),
    ]
    return save_model(path, "embedded", nodes, param.inits, [1, 8, 6], [1, 5])


def test_a_frozen_position_embedding_is_sliced(tmp_path):
    """Not trained, the position embedding is cut into the positions' parts with x; trained, its Add runs
    whole (x's parts begin after it). Either way the parameters after 3 steps are within 1e-6."""
    g = frontend.load(embedded(tmp_path / "m.onnx"), 1)
    frozen = batch_split.split_tokens(g, 2, frozenset({"pos"}))
    slices = [n.outputs[0] for n in frozen.graph.nodes if n.op == "Slice"]
    assert slices == ["x/n0", "x/n1", "pos/n0", "pos/n1"] and "node_0" not in frozen.joined
    trained = batch_split.split_tokens(g, 2)
    assert [n.outputs[0] for n in trained.graph.nodes if n.op == "Slice"] == ["e/n0", "e/n1"]
    tg = _training(g)
    la, a = reference.train(tg, _data(tg), LR)
    lb, b = reference.train(_training(trained.graph), _data(tg), LR)
    for k in a:
        assert max_rel_err(b[k], a[k]) <= 1e-6, k


def test_sequence_split_is_the_same_under_any_hash_seed(tmp_path):
    """The positions' rewrite gives the same nodes in the same order in processes with different string
    hash seeds (no set order leaks into the graph: here two inputs of one node are sliced at once)."""
    import os
    import subprocess
    import sys

    path = embedded(tmp_path / "m.onnx")
    code = (
        "import sys; from pathlib import Path; from poet_edge import batch_split, frontend; "
        "g = frontend.load(Path(sys.argv[1]), 1); s = batch_split.split_tokens(g, 3, frozenset({'pos'})); "
        "print([(n.name, n.inputs, n.outputs) for n in s.graph.nodes])"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code, str(path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(outs) == 1 and "pos/n2" in outs.pop()


def test_bad_parts_of_a_sequence(tmp_path):
    """--batch-parts on a sequence model at batch 1 counts its positions, and the errors say so."""
    path = encoder(tmp_path / "m.onnx")
    with pytest.raises(PoetError, match="a sequence of 8 positions splits into 1 to 8 parts"):
        compile_model(replace(_opts(path, tmp_path / "o", 1 << 20, batch_parts=9), batch=1))
    with pytest.raises(PoetError, match="--batch-parts 2 splits the sequence, --split off splits nothing"):
        compile_model(replace(_opts(path, tmp_path / "o", 1 << 20, batch_parts=2), batch=1, split="off"))
    assert not (tmp_path / "o").exists()
