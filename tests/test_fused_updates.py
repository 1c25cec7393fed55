"""Fused weight-gradient updates (autodiff.TrainingOptions.fused_updates): the parameters are bit-identical
to the unfused step in the numpy reference and in the generated C (reference and fast kernels, host and
qemu-cortex-m4), the whole weight gradient never exists, and the fused node runs after every other reader
of its weight."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import need_tools, poet
from oputil import chain_model, max_rel_err

from poet_edge import autodiff, frontend, planning, reference, runner
from poet_edge.autodiff import Loss, TrainingOptions
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.ir import Phase
from poet_edge.optimizer import PLAIN_SGD, Optimizer

PLAIN = TrainingOptions()
FUSED = TrainingOptions(fused_updates=True)
BOTH = TrainingOptions(fused_updates=True, relu_masks=True)
FUSED_OPS = ("ConvGradWeightUpdate", "GemmGradUpdate")


def cnn(path: Path, batch: int = 2) -> Path:
    """Conv 2->8 (+bias) -> Relu -> depthwise 3x3 stride 2 -> Clip(0, 6) -> Conv 8->12 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm(transB) 12->5: every layer has more than one tile. At batch 2 only
    the last conv and the Gemm fuse (a tile's dY channels are copied per sample: that workspace must stay
    below the gradient; depthwise at batch > 1 never fuses)."""
    steps = [
        ("Conv", [(8, 2, 3, 3), (8,)], {"pads": [1, 1, 1, 1]}),
        ("Relu", [], {}),
        ("Conv", [(8, 1, 3, 3)], {"pads": [1, 1, 1, 1], "strides": [2, 2], "group": 8}),
        ("Clip", [np.array(0.0, np.float32), np.array(6.0, np.float32)], {}),
        ("Conv", [(12, 8, 3, 3)], {"pads": [1, 1, 1, 1]}),
        ("Relu", [], {}),
        ("GlobalAveragePool", [], {}),
        ("Flatten", [], {}),
        ("Gemm", [(5, 12), (5,)], {"transB": 1}),
    ]
    onnx.save(chain_model(steps, (batch, 2, 8, 8)), path)
    return path


def mlp3d(path: Path, batch: int = 2) -> Path:
    """x [B, 6, 16] -> MatMul W1 [16, 24] -> Relu -> MatMul W2 [24, 5] -> ReduceMean over the sequence: the
    weight gradients are batched products that ReduceSumTo sums over the batch."""
    steps = [
        ("MatMul", [(16, 24)], {}),
        ("Relu", [], {}),
        ("MatMul", [(24, 5)], {}),
        ("ReduceMean", [], {"axes": [1], "keepdims": 0}),
    ]
    onnx.save(chain_model(steps, (batch, 6, 16)), path)
    return path


def graph(path: Path, options: TrainingOptions, optimizer: Optimizer = PLAIN_SGD):
    g = frontend.load(path)  # the batch the model was built with
    return autodiff.training_graph(g, Loss.CROSS_ENTROPY, None, optimizer, options)


def test_rewrite_structure(tmp_path):
    tg = graph(cnn(tmp_path / "cnn.onnx", batch=1), FUSED)
    fused = [n for n in tg.nodes if n.op in ("ConvGradWeightUpdate", "GemmGradUpdate")]
    assert sorted(n.inputs[0] for n in fused) == ["conv0_0", "conv2_0", "conv4_0", "gemm8_0"]
    assert all(n.phase == Phase.UPDATE and not n.outputs for n in fused)
    assert not any(n.op in ("ConvGradWeight",) for n in tg.nodes)  # no weight gradient exists whole
    pos = {n.name: i for i, n in enumerate(tg.nodes)}
    spec = planning.spec_from_graph(tg, 8192)
    names = [s.name for s in spec.nodes]
    invalid = {(names[a], names[b]) for a, b in spec.invalidated_by}
    for u in fused:
        readers = [n for n in tg.nodes if u.inputs[0] in n.inputs and n is not u]
        assert readers and all(pos[r.name] < pos[u.name] for r in readers)
        # every other reader of W (forward, input gradient) must run before the update: invalidated_by
        heads = {s.name for s in spec.nodes for m in (s.name, *s.epilogue) if m in {r.name for r in readers}}
        assert {(h, u.name) for h in heads} <= invalid
        s = next(s for s in spec.nodes if s.name == u.name)
        assert not s.recomputable and s.work.workspace_bytes > 0 and s.work.update_elements > 0
    # the biases' gradients are reductions (ChannelSum, ReduceSumTo): plain updates
    assert {n.inputs[0] for n in tg.nodes if n.op == "SGDUpdate"} == {"conv0_1", "gemm8_1"}


@pytest.mark.parametrize(
    "make, batch, opt, n_fused",
    [
        (cnn, 1, Optimizer(), 4),
        (cnn, 2, Optimizer("momentum", weight_decay=1e-3, nesterov=True), 2),
        (cnn, 1, Optimizer("adamw"), 4),
        (mlp3d, 2, Optimizer("sgd", weight_decay=1e-2), 2),
        (mlp3d, 1, Optimizer("adam"), 2),
    ],
)
def test_reference_bit_identical(tmp_path, make, batch, opt, n_fused):
    path = make(tmp_path / "m.onnx", batch)
    plain, fused = graph(path, PLAIN, opt), graph(path, BOTH, opt)
    assert sum(n.op in FUSED_OPS for n in fused.nodes) == n_fused
    rng = np.random.default_rng(1)
    x = rng.standard_normal(plain.shape(plain.inputs[0])).astype(np.float32)
    y = rng.integers(0, 5, plain.shape(plain.inputs[1])).astype(np.int32)
    _, a = reference.train(plain, [(x, y)] * 3, 0.05)
    _, b = reference.train(fused, [(x, y)] * 3, 0.05)
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def _compile(path: Path, out: Path, options: TrainingOptions, batch: int, kernels: str, **kw) -> None:
    opts = CompileOptions(path, "host", 4 << 20, out, batch, Loss.CROSS_ENTROPY, 0.05, 8192, "none", "all")
    compile_model(replace(opts, kernels=kernels, training=options, **kw))


@pytest.mark.parametrize(
    "make, batch, kernels, opt",
    [
        (cnn, 1, "fast", Optimizer()),
        (cnn, 2, "reference", Optimizer("momentum")),
        (mlp3d, 2, "fast", Optimizer()),
    ],
)
def test_c_on_host_bit_identical(tmp_path, make, batch, kernels, opt):
    need_tools("gcc")
    path = make(tmp_path / "m.onnx", batch)
    runs = {}
    for label, o in (("plain", PLAIN), ("fused", BOTH)):
        _compile(path, tmp_path / label, o, batch, kernels, optimizer=opt)
        runs[label] = runner.run_project(tmp_path / label, "host", 3)
    plan = json.loads((tmp_path / "fused" / "plan.json").read_text())
    assert plan["training_options"] == {"fused_updates": True, "relu_masks": True}
    fused_nodes = [n for n in plan["training_graph"]["nodes"] if n["op"].endswith("GradUpdate")]
    assert fused_nodes
    assert [s.loss for s in runs["plain"].steps] == [s.loss for s in runs["fused"].steps]
    for k, v in runs["plain"].params.items():
        assert np.array_equal(v, runs["fused"].params[k]), k
    # and within 1e-5 of the numpy reference on the same data
    c = runner.load_plan(tmp_path / "fused")
    tg = graph(path, BOTH, opt)
    _, ref = reference.train(tg, runner.batches(c, 3), 0.05)
    for k, v in ref.items():
        assert max_rel_err(runs["fused"].params[k], v.reshape(-1)) <= 1e-5, k


def test_qemu_bit_identical_to_host(tmp_path):
    """qemu-cortex-m4, 3 steps: the fused, masked program gives the host's bits and the unfused ones."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = cnn(tmp_path / "cnn.onnx", batch=1)
    ram = 64 * 1024
    opts = CompileOptions(path, "cortex-m4", ram, tmp_path / "m4", 1, Loss.CROSS_ENTROPY, 0.05, None, "none")
    c = compile_model(replace(opts, training=BOTH))
    compile_model(replace(opts, out=tmp_path / "plain"))
    host = runner.run_project(tmp_path / "m4", "host", 3)
    qemu = runner.run_project(tmp_path / "m4", "qemu-cortex-m4", 3)
    plain = runner.run_project(tmp_path / "plain", "host", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k
        assert np.array_equal(host.params[k], plain.params[k]), k
    assert qemu.measured_ram_bytes <= ram
    assert c.predicted_ram_bytes <= ram


def test_floor_never_grows_and_cli_switches(tmp_path):
    path = cnn(tmp_path / "cnn.onnx", batch=1)
    out = poet("inspect", path, "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["training_options"] == {"fused_updates": True, "relu_masks": True}  # the CLI's default
    f = r["floor_by_options"]
    assert f["fused-updates"] < f["plain"] and f["both"] <= min(f.values())
    assert r["floor_bytes"] == f["both"]
    off = json.loads(poet("inspect", path, "--json", "--no-fused-updates", "--no-relu-masks").stdout)
    assert off["floor_bytes"] == f["plain"] and off["training_options"] == {
        "fused_updates": False,
        "relu_masks": False,
    }
