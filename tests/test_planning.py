"""Training graph -> scheduling problem: in-place epilogues fused into their producers, and the batch loaded
from storage (--input storage) instead of being held in RAM for the whole step."""

from __future__ import annotations

import numpy as np
from conftest import EXAMPLES, need_tools

from poet_edge import autodiff, frontend, planning, runner, trainable
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.ir import Graph
from poet_edge.memory_floor import memory_floor
from poet_edge.planning import InputPlace
from poet_edge.profiles import load_profile
from poet_edge.schedule import Compute

ZOO = EXAMPLES / "zoo"
KB = 1024


def _training(name: str, train: str, loss: Loss = Loss.CROSS_ENTROPY) -> Graph:
    path = EXAMPLES / f"{name}.onnx" if name == "mlp" else ZOO / f"{name}.onnx"
    g = frontend.load(path, 1)
    return autodiff.training_graph(g, loss, trainable.select(g, train))


def _check_groups(tg: Graph, spec: planning.ProblemSpec) -> int:
    """Every fused epilogue is a forward in-place op whose input nothing else reads; returns their count."""
    nodes, consumers = {n.name: n for n in tg.nodes}, tg.consumers()
    fused = 0
    for s in spec.nodes:
        chain = [nodes[s.name], *(nodes[e] for e in s.epilogue)]
        for before, e in zip(chain, chain[1:], strict=False):
            t = e.inputs[planning.IN_PLACE_EPILOGUES[e.op]]
            assert t == before.outputs[0] and [c.name for c in consumers[t]] == [e.name]
            fused += 1
        assert s.out_bytes == planning.value_bytes(tg)[chain[-1].name]
        assert len(s.epilogue_work) == len(s.epilogue)
    assert all(u < v for u, v in spec.edges)  # still a topological order
    return fused


def test_relu_epilogues_fuse_and_keep_the_graph_topological():
    tg = _training("resnet8", "bias")
    spec = planning.spec_from_graph(tg, 0)
    fused = _check_groups(tg, spec)
    epilogues = {e for s in spec.nodes for e in s.epilogue}
    assert {n.name for n in tg.nodes if n.op == "Relu"} <= epilogues  # each reads a value nobody else reads
    assert len(spec.nodes) == len(tg.nodes) - fused
    names = {s.name for s in spec.nodes} | {e for s in spec.nodes for e in s.epilogue}
    assert names == {n.name for n in tg.nodes}


def test_gradient_epilogues_fuse_only_where_ram_does_not_grow():
    """ReluGrad(Y, dY) may overwrite dY, but fused into dY's producer it also needs Y while that producer
    runs: after a ConvGradInput (one value input) that is no worse; after resnet8's gradient Add of two
    64 KB branches it would need four 64 KB buffers at once instead of three, so it stays separate."""
    tg = _training("resnet8", "bias")
    spec = planning.spec_from_graph(tg, 0)
    nodes = {n.name: n for n in tg.nodes}
    grads = {e: s.name for s in spec.nodes for e in s.epilogue if nodes[e].op == "ReluGrad"}
    assert grads and {nodes[h].op for h in grads.values()} == {"ConvGradInput", "AveragePoolGrad"}
    producer = tg.producers()
    after_add = [n for n in tg.nodes if n.op == "ReluGrad" and producer[n.inputs[1]].op == "Add"]
    assert after_add and not {n.name for n in after_add} & set(grads)


def test_an_epilogue_whose_input_the_backward_reads_is_not_fused():
    """ClipGrad reads Clip's input, so with the whole model trained no Clip (ReLU6) can overwrite it;
    with only the last layer trained there is no ClipGrad and every Clip fuses."""
    for train, expect_fused in (("all", False), ("last:1", True)):
        tg = _training("mobilenetv2_035", train)
        spec = planning.spec_from_graph(tg, 0)
        _check_groups(tg, spec)
        clips = {n.name for n in tg.nodes if n.op == "Clip"}
        fused = {e for s in spec.nodes for e in s.epilogue}
        assert clips and (clips <= fused if expect_fused else not clips & fused)


def test_fusion_lowers_the_floor_to_the_producers_inputs_and_output():
    tg = _training("mobilenetv1_025", "last:1")
    profile = load_profile("cortex-m4")
    spec = planning.spec_from_graph(tg, 8 * KB)
    floor = memory_floor(planning.price(spec, profile, 1 << 30))
    # the largest forward node is a pointwise conv 48x48x8 -> 48x48x16 whose ReLU runs in place
    assert floor.bytes == spec.fixed.total + 48 * 48 * 8 * 4 + 48 * 48 * 16 * 4


def test_input_in_storage_is_a_node_that_loads_the_batch():
    tg = _training("mlp", "all")
    ram = planning.spec_from_graph(tg, 0, InputPlace.RAM)
    sto = planning.spec_from_graph(tg, 0, InputPlace.STORAGE)
    x = tg.inputs[0]
    head = sto.nodes[0]
    assert head.name == f"input:{x}" and head.kind == "input" and head.out_bytes == tg.tensor(x).nbytes
    # the batch leaves the fixed RAM; the caller's staging buffer for it comes in
    assert ram.fixed.inputs - sto.fixed.inputs == tg.tensor(x).nbytes - planning.input_staging_bytes(tg)
    readers = {s.name for s in ram.nodes if any(x in n.inputs for n in tg.nodes if n.name == s.name)}
    assert {sto.nodes[v].name for u, v in sto.edges if u == 0} == readers
    problem = planning.price(sto, load_profile("cortex-m4"), 1 << 30)
    assert not problem.nodes[0].pageable and problem.nodes[0].compute_j == problem.nodes[0].page_in_j


def test_spec_json_round_trip_keeps_epilogues():
    spec = planning.spec_from_graph(_training("mlp", "all"), 0, InputPlace.STORAGE)
    assert any(s.epilogue for s in spec.nodes)
    assert planning.ProblemSpec.from_json(spec.to_json()) == spec


def test_batch_from_storage_trains_bit_identically_on_the_host(tmp_path):
    """recompute-all drops the batch after the forward pass and reloads it for the first layer's weight
    gradient: the C program reads it from storage twice and trains exactly like x held in RAM."""
    need_tools("gcc")
    model = ZOO / "autoencoder.onnx"
    common = dict(device="cortex-m4", ram_bytes=1600 * KB, batch=1, loss=Loss.MSE)
    sto = compile_model(
        CompileOptions(
            model, out=tmp_path / "sto", scheduler="recompute-all", input=InputPlace.STORAGE, **common
        )
    )
    loads = [s for s in sto.schedule.steps if isinstance(s, Compute) and s.node.startswith("input:")]
    assert len(loads) == 2
    # only the targets stay, and the caller's staging buffer for the batch (640 floats: a full one, 1 KiB)
    assert sto.fixed.inputs == sto.training.tensor(sto.training.inputs[1]).nbytes + 1024
    compile_model(CompileOptions(model, out=tmp_path / "ram", **common))
    a, b = runner.run_project(tmp_path / "sto", "host", 3), runner.run_project(tmp_path / "ram", "host", 3)
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]
    assert all(np.array_equal(a.params[k], b.params[k]) for k in b.params)
    x_bytes = sto.training.tensor(sto.training.inputs[0]).nbytes
    assert a.steps[-1].bytes_read == 2 * x_bytes == sto.sim.storage_bytes_read
