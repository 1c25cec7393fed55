"""Values moved within the arena (--arena-moves, arena.plan_moves). The unrolled GRU's greedy schedule at
100 KB fits in live bytes, but no static placement of its values does (10,928 B over): the compile keeps
that schedule and moves values where it would otherwise reschedule with recomputation; the moved step trains
bit for bit like the unconstrained one, on the host and on qemu-cortex-m4."""

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
QEMU_TOOLS = ("gcc", "arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-system-arm")
Built = tuple[Compiled, list[str], Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """The step at 100 KB with moves and without (--no-arena-moves), and at 1 MB (nothing recomputed)."""
    root = tmp_path_factory.mktemp("moves")
    out = {}
    for name, ram, moves in (("moved", RAM, True), ("static", RAM, False), ("free", 1024 * 1024, True)):
        logs: list[str] = []
        opts = CompileOptions(GRU, "cortex-m4", ram, root / name, scheduler="greedy", arena_moves=moves)
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
    assert moved.sim.energy_j < static.sim.energy_j  # no recomputation added for the fragmentation
    assert moved.sim.n_recomputations < static.sim.n_recomputations


def test_plan_records_the_moves(built: dict[str, Built]) -> None:
    moved, _, out = built["moved"]
    plan = json.loads((out / "plan.json").read_text())
    assert sum(action == "move" for action, _ in plan["schedule"]["steps"]) == moved.sim.n_moves
    assert plan["simulation"]["n_moves"] == moved.sim.n_moves
    assert plan["arena"]["planner"].endswith(f"+ {moved.sim.n_moves} moves")
    assert (out / "poet_model.c").read_text().count("    memmove(") == moved.sim.n_moves


def test_moved_step_trains_like_the_unconstrained_step(built: dict[str, Built]) -> None:
    """3 steps: the moved project on the host and on qemu-cortex-m4 against the 1 MB one, bit for bit."""
    need_tools(*QEMU_TOOLS)
    free = runner.run_project(built["free"][2], "host", 3)
    for target in ("host", "qemu-cortex-m4"):
        run = runner.run_project(built["moved"][2], target, 3)
        assert [s.loss for s in run.steps] == [s.loss for s in free.steps], target
        for k, v in free.params.items():
            assert np.array_equal(run.params[k].view(np.uint32), v.view(np.uint32)), (target, k)
