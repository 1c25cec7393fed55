"""A model exported the way users export it, with the ops of YOLOv3-tiny's darknet layers: LeakyReLU(0.1),
nearest Upsample x2 and ZeroPad2d (examples/user_models/models.py TinyUpNet, exported by the TorchScript
exporter at opset 17 as examples/zoo/tiny_upnet.onnx). That exporter computes Pad's pads at run time from
constants (ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast), which the frontend folds; the model
trains in C as the numpy reference does, and qemu-cortex-m4 gives the host's bits. (bench/user_models.py
also checks it against PyTorch with both exporters: bench/results/user_models.md.)"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import onnx
import pytest
from conftest import EXAMPLES, need_tools, poet
from oputil import max_rel_err

from poet_edge import autodiff, frontend, planning, reference, runner, trainable
from poet_edge.compiler import CompileOptions, compile_model

MODEL = EXAMPLES / "zoo" / "tiny_upnet.onnx"
STEPS, BATCH, LR, RAM = 3, 2, 0.05, 512 * 1024


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    need_tools("gcc")
    out = tmp_path_factory.mktemp("upnet") / "p"
    return compile_model(CompileOptions(MODEL, "cortex-m4", RAM, out, BATCH, lr=LR)), out


@pytest.fixture(scope="module")
def host_run(project):
    return runner.run_project(project[1], "host", STEPS)


def test_the_file_computes_its_pads_at_run_time():
    m = onnx.load(str(MODEL))
    ops = Counter(n.op_type for n in m.graph.node)
    assert ops["LeakyRelu"] == 3 and ops["Resize"] == 1 and ops["Pad"] == 1
    assert ops["Transpose"] == 1 and ops["ConstantOfShape"] == 1  # the pads, reversed and transposed


def test_leaky_relus_and_their_gradients_run_in_place():
    """LeakyRelu(0.1) overwrites the value it reads (its backward reads its output, as ReluGrad), and
    LeakyReluGrad overwrites dY where it fuses: the trainings below run on these shared buffers."""
    g = frontend.load(MODEL, BATCH)
    tg = autodiff.training_graph(g, autodiff.Loss.CROSS_ENTROPY, trainable.select(g, "all"))
    ops = {n.name: n.op for n in tg.nodes}
    fused = Counter(ops[e] for s in planning.spec_from_graph(tg, 0).nodes for e in s.epilogue)
    assert fused["LeakyRelu"] == 3 and fused["LeakyReluGrad"] >= 1


def test_the_spatial_mean_runs_in_channel_tiles(tmp_path):
    """torch's ``x.mean((2, 3))`` (ReduceMean without keepdims) is loaded as the mean with keepdims and a
    Reshape to [N, C], so operator splitting runs it per channel tile: the decoder's map is not joined and
    the split floor falls to about half (53,296 B when the map was joined)."""
    g = frontend.load(MODEL, 1)
    mean = next(n for n in g.nodes if n.op == "ReduceMean")
    assert mean.attrs["keepdims"] == 1 and g.shape(mean.outputs[0]) == (1, 16, 1, 1)
    assert [n.op for n in g.nodes if mean.outputs[0] in n.inputs] == ["Reshape"]
    r = poet("compile", str(MODEL), "--device", "cortex-m4", "--ram", "16KB", "-o", str(tmp_path / "p"))
    split = re.search(r"with operator splitting .* the floor is (\d+) B .*, set by node (\S+)", r.stderr)
    assert r.returncode != 0 and split, r.stderr
    assert int(split.group(1)) <= 24624 and not split.group(2).startswith("join//decoder")


def test_training_matches_the_numpy_reference(project, host_run):
    c, out = project
    ref_losses, ref_params = reference.train(c.training, runner.batches(runner.load_plan(out), STEPS), LR)
    assert np.allclose([s.loss for s in host_run.steps], ref_losses, rtol=1e-5)
    assert host_run.params.keys() == ref_params.keys() == c.training.trainable
    for k, p0 in c.training.params.items():
        if k in ref_params:
            got, want = host_run.params[k].reshape(-1), ref_params[k].reshape(-1)
            start = np.asarray(p0, np.float32).reshape(-1)
            assert max_rel_err(got, want) <= 1e-6 and max_rel_err(got - start, want - start) <= 1e-3, k


def test_qemu_cortex_m4_gives_the_host_bits(project, host_run):
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    qemu = runner.run_project(project[1], "qemu-cortex-m4", STEPS)
    bits = [np.ascontiguousarray(s.loss, np.float32).view(np.uint32) for s in (*qemu.steps, *host_run.steps)]
    assert bits[:STEPS] == bits[STEPS:]
    for k in host_run.params:
        assert np.array_equal(qemu.params[k].view(np.uint32), host_run.params[k].view(np.uint32)), k
    assert qemu.measured_ram_bytes <= RAM
