"""Regression test for issue 54, finding 1: a 1-D accelerometer CNN (3 x [Conv1d k5 p2, ReLU, MaxPool1d 2],
3->16->32->64 channels, length 128, dense to 6 classes; examples/user_models/models.py AccelCNN1d, exported
by torch.export at opset 18) trained wrongly with the default fast kernels: the fast conv input gradient read
past the end of W for width-5 kernels with more than one input channel. Here it trains 3 steps with
--kernels fast and --kernels reference, on the host and on qemu-cortex-m4: every run must give the same
bits, and match the numpy reference interpreter."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from conftest import EXAMPLES, need_tools
from oputil import max_rel_err

from poet_edge import reference, runner
from poet_edge.compiler import CompileOptions, compile_model

MODEL = EXAMPLES / "zoo" / "accel_cnn1d.onnx"
QEMU_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
STEPS, BATCH, LR, RAM = 3, 2, 0.05, 256 * 1024


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """kernels -> (compiled, project folder), both at the same budget on the cortex-m4 profile."""
    need_tools("gcc")
    base = tmp_path_factory.mktemp("accel")
    out = {}
    for kernels in ("fast", "reference"):
        opts = CompileOptions(MODEL, "cortex-m4", RAM, base / kernels, BATCH, lr=LR, kernels=kernels)
        out[kernels] = (compile_model(opts), base / kernels)
    return out


@pytest.fixture(scope="module")
def host_runs(projects):
    return {k: runner.run_project(p, "host", STEPS) for k, (_, p) in projects.items()}


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _same_bits(a: runner.RunOutcome, b: runner.RunOutcome) -> None:
    assert (
        _bits(np.array([s.loss for s in a.steps])).tolist()
        == _bits(np.array([s.loss for s in b.steps])).tolist()
    )
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert np.array_equal(_bits(a.params[k]), _bits(b.params[k])), k


def test_the_file_is_the_1d_cnn():
    m = onnx.load(str(MODEL))
    ops = Counter(n.op_type for n in m.graph.node)
    assert ops["Conv"] == 3 and ops["Relu"] == 3 and ops["MaxPool"] == 3
    kernels = [
        a.ints for n in m.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "kernel_shape"
    ]
    assert kernels == [[5]] * 3
    weights = {t.name: tuple(t.dims) for t in m.graph.initializer if len(t.dims) == 3}
    assert sorted(weights.values()) == [(16, 3, 5), (32, 16, 5), (64, 32, 5)]
    dims = [d.dim_value or d.dim_param for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims[1:] == [3, 128]


def test_fast_and_reference_kernels_give_the_same_bits_on_the_host(host_runs):
    _same_bits(host_runs["fast"], host_runs["reference"])


def test_training_matches_the_numpy_reference(projects, host_runs):
    c, out = projects["fast"]
    data = runner.batches(runner.load_plan(out), STEPS)
    ref_losses, ref_params = reference.train(c.training, data, LR)
    run = host_runs["fast"]
    assert np.allclose([s.loss for s in run.steps], ref_losses, rtol=1e-5)
    assert run.params.keys() == ref_params.keys() == c.training.trainable
    for k, p0 in c.training.params.items():
        if k not in ref_params:
            continue
        got, want = run.params[k].reshape(-1), ref_params[k].reshape(-1)
        assert max_rel_err(got, want) <= 1e-6, k
        # the update itself (after - before), where the bug showed a 164% error
        start = np.asarray(p0, np.float32).reshape(-1)
        assert max_rel_err(got - start, want - start) <= 1e-3, k


@pytest.mark.parametrize("kernels", ["fast", "reference"])
def test_qemu_cortex_m4_gives_the_host_bits(projects, host_runs, kernels):
    need_tools(*QEMU_TOOLS)
    qemu = runner.run_project(projects[kernels][1], "qemu-cortex-m4", STEPS)
    _same_bits(qemu, host_runs["fast"])
    assert all(np.isfinite(s.loss) for s in qemu.steps)
    assert qemu.measured_ram_bytes <= RAM
