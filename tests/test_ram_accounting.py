"""Every byte the program needs is in the plan's RAM accounting: a compile whose budget is exactly its
predicted RAM links for the emulated Cortex-M4 and runs within it (issue 57 follow-up: with --input storage
the harness's staging buffer for the batch was outside the plan, and a budget the compile accepted failed at
the link with "stack reserve does not fit")."""

from __future__ import annotations

import subprocess

import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import autodiff, frontend, planning, runner, trainable
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.planning import InputPlace

MLP = EXAMPLES / "mlp.onnx"
BATCH = 4  # x: 4 x 64 floats, a full staging buffer (planning.INPUT_STAGING_FLOATS)


def _training(batch: int):
    g = frontend.load(MLP, batch)
    return autodiff.training_graph(g, autodiff.Loss.CROSS_ENTROPY, trainable.select(g, "all"))


@pytest.mark.parametrize("batch", [1, BATCH, 16])
def test_storage_input_counts_the_staging_buffer_instead_of_the_batch(batch):
    tg = _training(batch)
    x = tg.tensor(tg.inputs[0])
    ram = planning.fixed_ram(tg, 0, InputPlace.RAM)
    sto = planning.fixed_ram(tg, 0, InputPlace.STORAGE)
    staging = 4 * min(batch * 64, planning.INPUT_STAGING_FLOATS)
    assert planning.input_staging_bytes(tg) == staging
    assert ram.inputs - sto.inputs == x.nbytes - staging
    assert sto.total == planning.spec_from_graph(tg, 0, InputPlace.STORAGE).fixed.total


def _symbol_size(elf, name: str) -> int:
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True, check=True)
    sizes = [int(p[1], 16) for p in (line.split() for line in out.stdout.splitlines()) if p[-1] == name]
    assert len(sizes) == 1, name
    return sizes[0]


@pytest.mark.parametrize("place", [InputPlace.STORAGE, InputPlace.RAM])
def test_budget_at_the_predicted_ram_links_and_runs_on_cortex_m4(tmp_path, place):
    need_tools("arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-system-arm")
    kw = dict(batch=BATCH, input=place)
    predicted = compile_model(CompileOptions(MLP, "cortex-m4", 256 * 1024, tmp_path / "free", **kw))
    ram = predicted.predicted_ram_bytes
    c = compile_model(CompileOptions(MLP, "cortex-m4", ram, tmp_path / "tight", **kw))
    assert c.predicted_ram_bytes == ram  # the budget is exactly the plan's RAM: no byte to spare
    qemu = runner.run_project(tmp_path / "tight", "qemu-cortex-m4", 2)  # links into exactly `ram`
    assert len(qemu.steps) == 2 and qemu.measured_ram_bytes <= ram
    # the program's RAM outside the plan (newlib, heap, the platform's buffers) and the stack the link
    # demands fit in the plan's reserve: the plan holds every other byte
    reserve = c.fixed.reserve
    outside = qemu.build.ram_static_bytes - (ram - reserve)
    assert 0 < outside and outside + qemu.build.stack_reserve_bytes <= reserve, (outside, reserve)
    assert outside + qemu.stack_used <= reserve
    if place == InputPlace.STORAGE:  # the harness's staging buffer is the one the plan counts
        staging = _symbol_size(qemu.build.elf, "poet_x")
        assert staging == planning.input_staging_bytes(c.training) == 4 * planning.INPUT_STAGING_FLOATS
