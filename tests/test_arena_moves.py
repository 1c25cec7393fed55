"""Values moved within the arena (--arena-moves, arena.plan_moves). The unrolled GRU's greedy schedule at
100 KB fits in live bytes, but no static placement of its values does (2,912 B over): the compile keeps
that schedule and moves values where it would otherwise reschedule with more paging; the moved step trains
bit for bit like the unconstrained one, on the host and on qemu-cortex-m4. With two RAM banks (84 KB + 16 KB)
the values also get banks whose live bytes fit, and the step runs on qemu-stm32f405 within each bank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import arena, runner
from poet_edge.compiler import Compiled, CompileOptions, compile_model
from poet_edge.schedule import Move

GRU = EXAMPLES / "zoo" / "gru_unrolled.onnx"
RAM = 100 * 1024
BANKS = (84 * 1024, 16 * 1024)
QEMU_TOOLS = ("gcc", "arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-system-arm")
Built = tuple[Compiled, list[str], Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """The step at 100 KB with moves and without (--no-arena-moves), in two banks with moves and without,
    and at 1 MB (nothing recomputed)."""
    root = tmp_path_factory.mktemp("moves")
    out = {}
    for name, ram, moves in (
        ("moved", RAM, True),
        ("static", RAM, False),
        ("banked", BANKS, True),
        ("banked-static", BANKS, False),
        ("free", (1024 * 1024,), True),
    ):
        logs: list[str] = []
        size, banks = (ram, ()) if isinstance(ram, int) else (sum(ram), ram if len(ram) > 1 else ())
        opts = CompileOptions(
            GRU, "cortex-m4", size, root / name, scheduler="greedy", arena_moves=moves, ram_banks=banks
        )
        out[name] = (compile_model(opts, logs.append), logs, root / name)
    return out


def test_moves_keep_the_schedule_that_fits_in_live_bytes(built: dict[str, Built]) -> None:
    (moved, logs, _), (static, static_logs, _) = built["moved"], built["static"]
    assert not any("rescheduling" in line for line in logs)
    assert sum("values moved within the arena instead" in line for line in logs) == 1
    assert any("rescheduling with a tighter budget" in line for line in static_logs)  # --no-arena-moves
    assert moved.sim.n_moves == sum(isinstance(s, Move) for s in moved.schedule.steps) > 0
    assert moved.sim.moved_bytes > 0 and 0 < moved.sim.energy_move_j < 0.02 * moved.sim.energy_j
    arena.verify(moved.arena)
    assert moved.arena.arena_bytes <= RAM - moved.fixed.total
    assert moved.sim.energy_j < static.sim.energy_j  # no recomputation or paging added for the fragmentation
    assert (
        moved.sim.n_recomputations + moved.sim.n_page_outs
        < static.sim.n_recomputations + static.sim.n_page_outs
    )


def test_plan_records_the_moves(built: dict[str, Built]) -> None:
    moved, _, out = built["moved"]
    plan = json.loads((out / "plan.json").read_text())
    assert sum(action == "move" for action, _ in plan["schedule"]["steps"]) == moved.sim.n_moves
    assert plan["simulation"]["n_moves"] == moved.sim.n_moves
    assert plan["arena"]["planner"].endswith(f"+ {moved.sim.n_moves} moves")
    assert (out / "poet_model.c").read_text().count("    memmove(") == moved.sim.n_moves


def test_moves_fit_two_banks(built: dict[str, Built]) -> None:
    """84 KB + 16 KB: the first schedule's live bytes split into the banks, with 224 moves: 8.572 mJ a step;
    without moves the compile reschedules once, with more paging: 11.207 mJ."""
    (banked, logs, out), (static, static_logs, _) = built["banked"], built["banked-static"]
    assert not any("rescheduling" in line for line in logs)
    assert sum("values moved within the arena instead" in line for line in logs) == 1
    assert sum("rescheduling" in line for line in static_logs) == 1
    arena.verify(banked.arena)
    rooms = arena.bank_rooms(BANKS, RAM, banked.fixed.total)
    assert arena.excess(banked.arena, rooms) <= 0 and set(banked.arena.banks) == {0, 1}
    assert banked.sim.n_moves == sum(isinstance(s, Move) for s in banked.schedule.steps) > 0
    assert banked.sim.energy_j < static.sim.energy_j
    assert (out / "poet_model.c").read_text().count("    memmove(") == banked.sim.n_moves


@pytest.mark.parametrize(
    "name, target",
    [("moved", "host"), ("moved", "qemu-cortex-m4"), ("banked", "host"), ("banked", "qemu-stm32f405")],
)
def test_moved_step_trains_like_the_unconstrained_step(
    built: dict[str, Built], name: str, target: str
) -> None:
    """3 steps against the 1 MB project, bit for bit: the one-bank moved project on the host and on
    qemu-cortex-m4, the two-bank one on the host and on qemu-stm32f405 (the second bank at 0x20020000),
    each bank's measured RAM within its budget."""
    need_tools(*QEMU_TOOLS)
    free = runner.run_project(built["free"][2], "host", 3)
    run = runner.run_project(built[name][2], target, 3)
    assert [s.loss for s in run.steps] == [s.loss for s in free.steps]
    for k, v in free.params.items():
        assert np.array_equal(run.params[k].view(np.uint32), v.view(np.uint32)), k
    if target == "qemu-stm32f405":
        assert all(m <= b for m, b in zip(run.measured_bank_bytes, BANKS, strict=True))
