"""--time-limit bounds every compile phase (a safety stop that names the phase, never a change of result),
and the unrolled GRU keyword spotter (1,817 training-graph nodes) compiles within a small limit."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import EXAMPLES

from poet_edge import arena, autodiff, frontend, inference, planning
from poet_edge.commands.compile import choices_cut_warning
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.profiles import load_profile
from poet_edge.progress import PhaseLimit
from poet_edge.schedulers import get_scheduler
from poet_edge.schedulers.effort import cut_warning

GRU = EXAMPLES / "zoo" / "gru_unrolled.onnx"


class FakeClock:
    """Stands still unless a test moves it: phases take the time the test says, nothing else."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_unrolled_gru_compiles_within_a_small_time_limit(tmp_path: Path) -> None:
    """Paging at 100 KB (the no-remat step needs 111,200 B). The greedy schedule's arena is 2,912 B over the
    budget after fragmentation; with --no-arena-moves (tests/test_arena_moves.py has the moves), one
    reschedule with the budget tightened by exactly that fits. Counts,
    not times: the limit's clock stands still here (wall-clock figures: bench/arena.py)."""
    ram = 100 * 1024
    opts = CompileOptions(
        GRU, "cortex-m4", ram, tmp_path / "gru", scheduler="greedy", time_limit_s=20.0, arena_moves=False
    )
    phases: list[str] = []
    logs: list[str] = []
    c = compile_model(opts, logs.append, phase=phases.append, limit=PhaseLimit(20.0, FakeClock()))
    # they fit at once; poet_eval_step is planned first (poet_predict may take its schedule)
    inference = [f"{p} ({m})" for m in ("eval", "predict") for p in ("schedule", "arena")]
    rounds = (len(phases) - 4 - len(inference)) // 2  # greedy reschedules while the arena is too big
    assert phases == [
        "load",
        "training graph",
        *["schedule", "arena"] * rounds,
        "simulate",
        *inference,
        "codegen",
    ]
    assert 2 <= rounds <= 5
    assert sum("rescheduling with a tighter budget" in line for line in logs) == rounds - 1
    assert len(c.training.nodes) == 1722
    assert c.sim.n_recomputations + c.sim.n_page_outs > 0
    arena.verify(c.arena)
    assert c.arena.peak_live_bytes <= c.arena.arena_bytes
    assert c.predicted_ram_bytes <= ram
    assert (tmp_path / "gru" / "plan.json").exists()


def test_a_phase_over_the_limit_stops_the_compile_and_names_the_phase(tmp_path, monkeypatch) -> None:
    clock = FakeClock()
    real = arena.plan_best

    def slow_plan(insts, check=lambda: None, exact=True):  # the arena phase takes 30 s on the fake clock
        clock.now += 30.0
        return real(insts, check, exact)

    monkeypatch.setattr(arena, "plan_best", slow_plan)
    out = tmp_path / "mlp"
    opts = CompileOptions(
        EXAMPLES / "mlp.onnx", "cortex-m4", 256 * 1024, out, batch=4, time_limit_s=20.0, arena_moves=False
    )
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


def _fragmenting(
    monkeypatch, clock: FakeClock, schedule_s: float, extra: list[int]
) -> list[tuple[int, float]]:
    """Each schedule takes ``schedule_s`` on the fake clock and is recorded as (budget, its solver's time
    limit); the k-th arena plan is ``extra[k]`` bytes larger than planned (fragmentation), 0 past the list."""
    from poet_edge import compiler

    seen: list[tuple[int, float, int]] = []
    real_schedule, real_plan = compiler.schedule_problem, arena.plan_best

    def schedule(problem, opts):
        seen.append((problem.budget_bytes, opts.milp.time_limit_s, 0))
        clock.now += schedule_s
        return real_schedule(problem, opts)

    def plan(insts, check=lambda: None, exact=True):
        p = real_plan(insts, check, exact)
        p = replace(p, arena_bytes=p.arena_bytes + (extra[len(seen) - 1] if len(seen) <= len(extra) else 0))
        seen[-1] = (*seen[-1][:2], p.arena_bytes)
        return p

    monkeypatch.setattr(compiler, "schedule_problem", schedule)
    monkeypatch.setattr(arena, "plan_best", plan)
    return seen


MLP_RAM = 256 * 1024


def _mlp_opts(tmp_path: Path) -> CompileOptions:
    return CompileOptions(
        EXAMPLES / "mlp.onnx",
        "cortex-m4",
        MLP_RAM,
        tmp_path / "mlp",
        batch=4,
        scheduler="greedy",
        time_limit_s=20.0,
        arena_moves=False,  # the fragmentation these tests fake is absorbed by rescheduling, not moves
    )


@pytest.mark.parametrize("took", [3.0, 12.0])
def test_reschedules_share_the_time_limit_and_tighten_by_the_excess(tmp_path, monkeypatch, took) -> None:
    """A schedule that ends before the limit leaves time for a reschedule (also when it used more than half
    of it): the budget tightened by exactly the measured excess, its solver limited to what is left of the
    whole compile's limit."""
    clock = FakeClock()
    seen = _fragmenting(monkeypatch, clock, took, [MLP_RAM])  # the first arena is 256 KB too large
    c = compile_model(_mlp_opts(tmp_path), limit=PhaseLimit(20.0, clock))
    assert len(seen) == 4  # training twice, then poet_predict's and poet_eval_step's schedules once each
    (b1, t1, a1), (b2, t2, a2) = seen[:2]
    assert t1 == pytest.approx(18.0)  # 20 s less the 10% kept for arena, simulation and codegen
    assert t2 == pytest.approx(18.0 - took)  # what is left after the first schedule
    assert b1 - b2 == c.problem.fixed_bytes + a1 - MLP_RAM > 0
    assert a2 == c.arena.arena_bytes and c.predicted_ram_bytes <= MLP_RAM


def test_each_choice_gets_a_share_of_what_the_earlier_ones_left(tmp_path, monkeypatch) -> None:
    """Several choices (here two sets of stored parameters, then the chosen one at the asked effort): each
    schedules its training step within an equal share of what is left of the limit, so a first choice that
    runs long cannot leave the others none; the last planning gets all that is left, and only it plans
    poet_predict and poet_eval_step."""
    clock = FakeClock()
    seen = _fragmenting(monkeypatch, clock, 1.0, [])  # every schedule takes 1 s, no fragmentation
    opts = replace(
        _mlp_opts(tmp_path), ram_bytes=24 * 1024, time_limit_s=30.0, training=autodiff.DEFAULT_OPTIONS
    )
    c = compile_model(opts, limit=PhaseLimit(30.0, clock))
    assert len(c.compared) == 2
    limits = [t for _, t, _ in seen]  # each solver's time limit: what is left of its planning's share
    assert limits == pytest.approx(
        [9.0]  # choice 1 from 0 s: 27 s (30 s less 10% kept) / 3, its training step only
        + [13.0, 12.0, 11.0, 10.0]  # choice 2 from 1 s: 26 / 2 (rescheduled 3 times for fragmentation)
        + [22.0, 21.0, 20.0]  # the chosen one at the asked effort from 5 s: all that is left; predict, eval
    )


def test_at_the_quick_effort_only_the_chosen_choice_plans_inference(tmp_path, monkeypatch) -> None:
    """--effort quick: no planning after the comparison, so the two choices share the limit; poet_predict
    and poet_eval_step are planned once, for the least-energy choice, after both training steps."""
    clock = FakeClock()
    seen = _fragmenting(monkeypatch, clock, 1.0, [])
    opts = replace(
        _mlp_opts(tmp_path), ram_bytes=24 * 1024, time_limit_s=30.0, training=autodiff.DEFAULT_OPTIONS
    )
    opts = replace(opts, milp=replace(opts.milp, effort="quick"))
    c = compile_model(opts, limit=PhaseLimit(30.0, clock))
    assert len(c.compared) == 2 and [m.mode for m in c.inference] == list(inference.MODES)
    best = min(c.compared, key=lambda r: r["energy_j"])
    assert c.sim.energy_j == best["energy_j"]
    assert [t for _, t, _ in seen] == pytest.approx(
        [13.5]  # choice 1 from 0 s: 27 / 2
        + [26.0, 25.0, 24.0, 23.0]  # choice 2 from 1 s: all that is left (rescheduled 3 times)
        + [22.0, 21.0]  # the chosen one's poet_predict and poet_eval_step from 5 s
    )


def test_a_choice_past_a_phase_limit_fails_alone(tmp_path, monkeypatch) -> None:
    """The second of two compared choices runs past the arena phase's limit after the arena planner's own
    checks: that choice fails, marked as cut by the time limit, and the compile goes on with the first
    (before, the next phase's start found the overrun outside the comparison and stopped the compile)."""
    clock = FakeClock()
    real = arena.plan_best
    calls: list[int] = []

    def plan(insts, check=lambda: None, exact=True):
        got = real(insts, check, exact)
        calls.append(len(insts))
        if len(calls) == 5:  # the second choice's last arena (its first three were rescheduled)
            clock.now += 31.0
        return got

    monkeypatch.setattr(arena, "plan_best", plan)
    opts = replace(
        _mlp_opts(tmp_path), ram_bytes=24 * 1024, time_limit_s=30.0, training=autodiff.DEFAULT_OPTIONS
    )
    opts = replace(opts, milp=replace(opts.milp, effort="quick"))
    c = compile_model(opts, limit=PhaseLimit(30.0, clock))
    first, second = c.compared
    assert first["error"] is None and c.sim.energy_j == first["energy_j"]
    assert second["energy_j"] is None and "compile stopped in the arena phase" in str(second["error"])
    assert second["cut_by_time_limit"] is True and second["cut_phase"] == "arena"
    warning = choices_cut_warning(c)
    assert warning is not None and "1 of 2 compared choices" in warning


def test_no_time_for_a_reschedule_stops_in_the_arena_phase(tmp_path, monkeypatch) -> None:
    """A schedule that used the limit leaves no time to absorb fragmentation: the compile stops within the
    limit with an error naming the arena phase and the bytes missing, and writes nothing."""
    clock = FakeClock()
    seen = _fragmenting(monkeypatch, clock, 18.0, [MLP_RAM, MLP_RAM])
    opts = _mlp_opts(tmp_path)
    with pytest.raises(PoetError) as e:
        compile_model(opts, limit=PhaseLimit(20.0, clock))
    assert len(seen) == 1 and clock.now == 18.0
    msg = str(e.value)
    assert msg.startswith("compile stopped in the arena phase: after fragmentation the arena needs ")
    assert "after 1 schedule(s); --time-limit 20 s is spent" in msg
    assert not opts.out.exists()


def test_no_time_for_a_reschedule_evicts_instead(tmp_path, monkeypatch) -> None:
    """The unrolled GRU's greedy schedule, 2,912 B over after fragmentation, with no time left to reschedule:
    the values placed above the budget are evicted between their reads, and the compile fits in one round."""
    clock = FakeClock()
    seen = _fragmenting(monkeypatch, clock, 18.0, [])
    ram = 100 * 1024
    opts = CompileOptions(
        GRU, "cortex-m4", ram, tmp_path / "gru", scheduler="greedy", time_limit_s=20.0, arena_moves=False
    )
    logs: list[str] = []
    c = compile_model(opts, logs.append, limit=PhaseLimit(20.0, clock))
    assert len(seen) == 3  # one training schedule, then poet_predict's and poet_eval_step's
    evicted = [m for m in logs if "evicted" in m]
    assert len(evicted) == 1 and evicted[0].startswith(
        "arena 76624 B > 73712 B after fragmentation; evicted the"
    )
    assert c.arena.arena_bytes <= 73712 and c.predicted_ram_bytes <= ram
    arena.verify(c.arena)
    assert (tmp_path / "gru" / "plan.json").exists()
    # the time limit, not a count, chose the repair: the schedule says it was cut there, as does the warning
    info = json.loads((tmp_path / "gru" / "plan.json").read_text())["schedule"]["info"]
    assert (info["cut_by_time_limit"], info["cut_phase"]) == (True, "arena repair")
    assert "safety stop cut the scheduler in phase 'arena repair'" in str(
        cut_warning(c.schedule.report, 20.0)
    )


def test_a_compared_choice_cut_by_the_time_limit_is_reported() -> None:
    """A compared choice whose planning the safety stop cut is marked in plan.json's compared choices and
    named in the warning (its energy, hence the choice made, may differ between runs); none cut: none."""
    rows = (
        {
            "stored_parameters": 0,
            "tile_bytes": None,
            "energy_j": 1.0,
            "error": None,
            "cut_by_time_limit": False,
        },
        {
            "stored_parameters": 2,
            "tile_bytes": 2048,
            "rows_first": True,
            "energy_j": 2.0,
            "error": None,
            "cut_by_time_limit": True,
            "cut_phase": "arena repair",
        },
    )
    c = SimpleNamespace(compared=rows, inference=())
    assert choices_cut_warning(c) == (
        "poet: warning: the --time-limit safety stop cut the planning of 1 of 2 compared choices (2048 B "
        "(2.0 KiB) tiles, rows first, 2 parameters in storage: 'arena repair'): a longer --time-limit may "
        "give them less energy, and the choice made may differ between runs"
    )
    assert choices_cut_warning(SimpleNamespace(compared=rows[:1], inference=())) is None
