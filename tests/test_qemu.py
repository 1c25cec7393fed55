"""Generated programs on emulated Cortex-M boards: fit --ram at link time, run, and match the host
bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import runner
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError

QEMU_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
AE = EXAMPLES / "zoo" / "autoencoder.onnx"


def _compile(tmp_path, name, model, ram, scheduler="none", **kw):
    opts = CompileOptions(model, "cortex-m4", ram, tmp_path / name, scheduler=scheduler, **kw)
    return compile_model(opts)


def _same(a: runner.RunOutcome, b: runner.RunOutcome) -> None:
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]  # float equality: bit for bit
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k


@pytest.mark.parametrize("target", ["qemu-cortex-m4", "qemu-cortex-m7", "qemu-cortex-m33"])
def test_mlp_bit_identical_to_host(tmp_path, target):
    need_tools("gcc", *QEMU_TOOLS)
    _compile(tmp_path, "mlp", EXAMPLES / "mlp.onnx", 256 * 1024, batch=4)
    host = runner.run_project(tmp_path / "mlp", "host", 3)
    qemu = runner.run_project(tmp_path / "mlp", target, 3)
    _same(host, qemu)
    assert qemu.measured_ram_bytes <= 256 * 1024


def test_paging_schedule_fits_and_matches_no_remat(tmp_path):
    """56 KB forces the autoencoder (bias training) to page; the result equals the unconstrained schedule."""
    need_tools("gcc", *QEMU_TOOLS)
    kw = dict(batch=4, loss=Loss.MSE, train="bias")
    _compile(tmp_path, "free", AE, 256 * 1024, **kw)
    c = _compile(tmp_path, "tight", AE, 56 * 1024, scheduler="greedy", **kw)
    assert c.sim.n_page_outs > 0
    ref = runner.run_project(tmp_path / "free", "host", 3)
    tight_host = runner.run_project(tmp_path / "tight", "host", 3)
    tight_qemu = runner.run_project(tmp_path / "tight", "qemu-cortex-m4", 3)
    _same(ref, tight_host)
    _same(ref, tight_qemu)
    assert tight_qemu.steps[0].bytes_written == c.sim.storage_bytes_written
    assert tight_qemu.steps[0].bytes_read == c.sim.storage_bytes_read
    measured, predicted = tight_qemu.measured_ram_bytes, c.predicted_ram_bytes
    assert measured <= 56 * 1024
    assert abs(measured - predicted) <= 0.05 * predicted, (measured, predicted)


def test_instruction_counts_are_deterministic_and_per_kind(tmp_path):
    need_tools("gcc", *QEMU_TOOLS)
    _compile(tmp_path, "mlp", EXAMPLES / "mlp.onnx", 128 * 1024, batch=2)
    a = runner.run_project(tmp_path / "mlp", "qemu-cortex-m4", 2, profile=True)
    b = runner.run_project(tmp_path / "mlp", "qemu-cortex-m4", 2, profile=True)
    assert [s.ticks for s in a.steps] == [s.ticks for s in b.steps]
    assert a.kinds == b.kinds
    assert set(a.kinds) >= {"Gemm", "Relu", "SGDUpdate", "SoftmaxCrossEntropy"}
    assert a.kinds["Gemm"][0] == 2 * 8  # 3 forward + 2 input-gradient + 3 weight-gradient calls per step
    assert sum(t for _, t in a.kinds.values()) <= sum(s.ticks for s in a.steps)


def test_over_budget_plan_fails_at_link_time(tmp_path):
    need_tools(*QEMU_TOOLS)
    _compile(tmp_path, "mlp", EXAMPLES / "mlp.onnx", 64 * 1024, batch=2)
    plan_path = tmp_path / "mlp" / "plan.json"
    plan = json.loads(plan_path.read_text())
    plan["ram_budget_bytes"] = 16 * 1024  # bypass the compiler's check: the linker must catch it
    plan_path.write_text(json.dumps(plan))
    with pytest.raises(PoetError, match=r"region .RAM. overflowed by \d+ bytes"):
        runner.run_project(tmp_path / "mlp", "qemu-cortex-m4", 1)
