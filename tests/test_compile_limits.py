"""--time-limit bounds every compile phase (a safety stop that names the phase, never a change of result),
and the unrolled GRU keyword spotter (1,817 training-graph nodes) compiles within a small limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from poet_edge import arena, autodiff, frontend, planning
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.profiles import load_profile
from poet_edge.progress import PhaseLimit
from poet_edge.schedulers import get_scheduler

GRU = EXAMPLES / "zoo" / "gru_unrolled.onnx"


class FakeClock:
    """Stands still unless a test moves it: phases take the time the test says, nothing else."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_unrolled_gru_compiles_within_a_small_time_limit(tmp_path: Path) -> None:
    """Recomputation at 100 KB (the no-remat step needs 150 KB): every phase within 20 s, with room."""
    ram = 100 * 1024
    opts = CompileOptions(GRU, "cortex-m4", ram, tmp_path / "gru", scheduler="greedy", time_limit_s=20.0)
    phases: list[str] = []
    c = compile_model(opts, phase=phases.append)
    inference = [f"{p} ({m})" for m in ("predict", "eval") for p in ("schedule", "arena")]  # they fit at once
    rounds = (len(phases) - 4 - len(inference)) // 2  # greedy reschedules while the arena is too big
    training = ["schedule", "arena"] * rounds
    assert phases == ["load", "training graph", *training, "simulate", *inference, "codegen"]
    assert 1 <= rounds <= 5
    assert len(c.training.nodes) == 1817
    assert c.sim.n_recomputations > 0
    arena.verify(c.arena)
    assert c.arena.peak_live_bytes <= c.arena.arena_bytes
    assert c.predicted_ram_bytes <= ram
    assert (tmp_path / "gru" / "plan.json").exists()


def test_a_phase_over_the_limit_stops_the_compile_and_names_the_phase(tmp_path, monkeypatch) -> None:
    clock = FakeClock()
    real = arena.plan_best

    def slow_plan(insts, check=lambda: None):  # the arena phase takes 30 s on the fake clock
        clock.now += 30.0
        return real(insts, check)

    monkeypatch.setattr(arena, "plan_best", slow_plan)
    out = tmp_path / "mlp"
    opts = CompileOptions(EXAMPLES / "mlp.onnx", "cortex-m4", 256 * 1024, out, batch=4, time_limit_s=20.0)
    with pytest.raises(
        PoetError, match=r"compile stopped in the arena phase after 30\.0 s, over its limit of 20 s"
    ):
        compile_model(opts, limit=PhaseLimit(20.0, clock))
    assert not out.exists()  # nothing written
    compile_model(opts, limit=PhaseLimit(40.0, clock))  # the same compile under a limit it keeps
    assert (out / "plan.json").exists()


def test_the_limit_is_checked_inside_the_arena_planner_and_cannot_change_the_plan() -> None:
    insts = _gru_instances()
    calls = []
    plain = arena.plan_best(insts)
    checked = arena.plan_best(insts, lambda: calls.append(1))
    assert checked == plain and len(calls) > 0

    def stop() -> None:
        raise PoetError("stop")

    with pytest.raises(PoetError, match="stop"):
        arena.plan_best(insts, stop)


def test_only_a_scheduler_that_does_not_stop_overruns_the_schedule_phase() -> None:
    clock = FakeClock()
    limit = PhaseLimit(10.0, clock)
    limit.begin("schedule")
    clock.now += 15.0  # the scheduler stops itself at the limit, and may overshoot on a loaded machine
    limit.begin("arena")
    clock.now += 10.5
    with pytest.raises(
        PoetError, match=r"arena phase after 10.5 s.*raise --time-limit, or give a larger --ram"
    ):
        limit.check()
    limit = PhaseLimit(10.0, clock)
    limit.begin("schedule")
    clock.now += 20.5
    with pytest.raises(
        PoetError, match=r"schedule phase after 20.5 s, over its limit of 20 s .*--scheduler greedy"
    ):
        limit.begin("arena")
    PhaseLimit(None, clock).check()  # no limit: never stops


def _gru_instances() -> list[arena.Instance]:
    """The greedy schedule of the unrolled GRU at 100 KB as arena instances."""
    profile = load_profile("cortex-m4")
    tg = autodiff.training_graph(frontend.load(GRU, 1))
    spec = planning.spec_from_graph(tg, profile.mcu.ram_reserve_bytes)
    problem = planning.price(spec, profile, 100 * 1024 - spec.fixed.total)
    schedule = get_scheduler("greedy")(problem)
    ws = {n.name: n.workspace_bytes for n in problem.nodes}
    return arena.instances(schedule, {n.name: n.out_bytes for n in spec.nodes}, ws)
