"""The interval model of scheduler "scale" (:mod:`poet_edge.schedulers.interval_bound`): every schedule
in the problem's order is a point of it, for any bottleneck stages, that costs at most the schedule
(so it is a relaxation); its refined bound stays below the exact optimum."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from scaleutil import FLAGS, exact_schedules, peak_ram, scale_budgets, valid_schedules

from poet_edge.graphgen import random_layered_dag, training_chain
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Schedule
from poet_edge.schedulers import SCHEDULERS
from poet_edge.schedulers import interval_bound as ib
from poet_edge.schedulers.engine import analyse
from poet_edge.schedulers.scale import Policy, ScaleOptions, schedule_scale
from poet_edge.simulator import simulate

OPTS = ScaleOptions(time_limit_s=60.0, threads=1, kicks=3)


def _stage_sets(problem: SchedulingProblem, seed: int) -> list[tuple[int, ...]]:
    n = len(problem.nodes)
    rng = random.Random(seed)
    return [
        (),
        ib.tightest_stages(problem, analyse(problem, True)),
        tuple(range(0, n, 3)),
        tuple(range(n)),
        tuple(sorted(rng.sample(range(n), n // 4))),
    ]


def _point_checks(problem: SchedulingProblem, schedules: list[Schedule], seed: int) -> int:
    """Checks every schedule against the models of several bottleneck sets; returns how many schedules."""
    an = analyse(problem, True)
    plain = sum(n.compute_j for n in problem.nodes)
    for stages in _stage_sets(problem, seed):
        model = ib.build(problem, an, False, 1.0, stages)
        assert model.feasible
        for schedule in schedules:
            x = ib.encode(problem, an, model, schedule)
            assert x is not None
            assert ib.violated(model, x) == [], (stages, schedule.solver)
            paid = simulate(problem, schedule).energy_j
            assert plain + float(sum(c * v for c, v in zip(model.lp.cost, x, strict=True))) <= paid * (
                1 + 1e-9
            )
    return len(schedules)


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_schedule_is_a_point_of_the_model(
    seed: int, flags: tuple[float, float, int, int | None]
) -> None:
    unrecomputable, unpageable, invalidations, storage = flags
    base = random_layered_dag(
        18 + 4 * seed,
        seed + 30,
        fixed_bytes=7 * seed,
        unrecomputable_prob=unrecomputable,
        unpageable_prob=unpageable,
        n_invalidations=invalidations,
    )
    problems = scale_budgets(replace(base, storage_bytes=storage), (0.9, 0.6, 0.0))
    checked = [_point_checks(p, valid_schedules(p, OPTS), seed) for p in problems]
    assert sum(checked) > 0


@pytest.mark.parametrize("seed", range(4))
def test_exact_optimal_schedules_are_points_and_the_bound_stays_below(seed: int) -> None:
    """The exact POET MILP's optimal schedules (which recompute and page where it pays) are points of
    every model, and the refined bound is at most their cost; at the floor it is above the plain pass."""
    base = training_chain(4 + seed % 2, seed=seed) if seed % 2 else random_layered_dag(9, seed + 50)
    an = analyse(base, True)
    above = []
    for problem, exact in exact_schedules(base):
        assert exact.report.status == "Optimal"
        _point_checks(problem, [exact], seed)
        plain = sum(n.compute_j for n in problem.nodes)
        optimum = simulate(problem, exact).energy_j
        refined = ib.refine(problem, an, False, plain, OPTS, 60.0)
        assert not refined.stopped
        assert plain * (1 + refined.bound) <= optimum * (1 + 1e-7)
        above.append(refined.bound > 0)
    assert any(above)  # some budget needs a restoration, and the bound sees it


def test_refinement_adds_the_overfilled_stages_until_none_is() -> None:
    """A training chain at about half its peak: the tightest stage first, then, each round, the stage
    each interval's point overfills most (where it overfills one); the bound does not fall, and the
    last point overfills no stage."""
    problem = replace(training_chain(8, seed=0), budget_bytes=220)
    an = analyse(problem, True)
    plain = sum(n.compute_j for n in problem.nodes)
    refined = ib.refine(problem, an, False, plain, OPTS, 60.0)
    first = ib.build(problem, an, False, plain, ib.tightest_stages(problem, an))
    assert refined.rounds >= 3 and not refined.stopped
    assert set(first.stages) < set(refined.stages)
    assert len(refined.stages) >= len(first.stages) + refined.rounds - 1
    from poet_edge.schedulers.lp_model import solve_lp

    assert refined.bound >= solve_lp(first.lp, 60.0, OPTS).bound - 1e-9
    last = ib.build(problem, an, False, plain, refined.stages)
    solved = solve_lp(last.lp, 60.0, OPTS)
    assert solved.values is not None
    assert ib.overfilled(problem, an, last, solved.values) == []


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_point_that_overfills_no_stage_is_a_stage_model_point(
    seed: int, flags: tuple[float, float, int, int | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where refinement ends (no stage overfilled), the point lifted to the stage model breaks none of
    that model's rows but those of the RAM of restorations between stages (built without them here),
    and costs what the point costs: RAM inside an interval is what :func:`overfilled` counts (a value
    recomputed for a recomputation is in RAM from then; one recomputed before its invalidator from
    then)."""
    from poet_edge.schedulers import stage_model
    from poet_edge.schedulers.lp_model import node_costs, solve_lp

    unrecomputable, unpageable, invalidations, storage = flags
    base = random_layered_dag(
        24 + 4 * seed,
        seed + 70,
        unrecomputable_prob=unrecomputable,
        unpageable_prob=unpageable,
        n_invalidations=invalidations,
    )
    chain = training_chain(6 + seed, seed=seed)
    monkeypatch.setattr(stage_model, "add_gap_rows", lambda *args: None)
    lifted = 0
    for problem in [
        *scale_budgets(replace(base, storage_bytes=storage), (0.7, 0.5, 0.0)),
        *scale_budgets(chain, (0.6, 0.0)),
    ]:
        an = analyse(problem, True)
        refined = ib.refine(problem, an, False, 1.0, OPTS, 60.0)
        assert not refined.stopped
        if refined.model is None or refined.point is None:  # the model has no point
            continue
        assert ib.overfilled(problem, an, refined.model, refined.point) == []
        assert refined.bound == pytest.approx(solve_lp(refined.model.lp, 60.0, OPTS).bound, abs=1e-6)
        stages = stage_model.build(problem, an, node_costs(problem, False), 1.0)
        x = ib.stage_point(problem, an, refined.model, refined.point, stages)
        assert stage_model.violated(stages, x) == []
        assert float(sum(c * v for c, v in zip(stages.cost, x, strict=True))) == pytest.approx(
            float(sum(c * v for c, v in zip(refined.model.lp.cost, refined.point, strict=True))), abs=1e-9
        )
        lifted += 1
    assert lifted > 0


def test_mobilenet_point_lifts_with_recomputations_before_their_invalidators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mobilenetv1_025 with every parameter trained, at 60% of its peak: the refined point recomputes
    a weight's input gradient that the weight's update invalidates before its use (recomputed before
    the update, held until the use) and restores values only to recompute others; lifted, it breaks
    none of the stage model's rows but those of RAM between stages. Its bound: 39.99% above the
    plain pass (38.27% when a value restored was counted from its first use only)."""
    import sys
    from pathlib import Path

    from poet_edge.schedulers import stage_model
    from poet_edge.schedulers.lp_model import node_costs

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from solver import zoo_graphs

    ((_, base),) = zoo_graphs("cortex-m4", ["mobilenetv1_025"], "all")
    problem = replace(base, budget_bytes=int(0.6 * peak_ram(base)))
    an = analyse(problem, True)
    plain = sum(n.compute_j for n in problem.nodes)
    refined = ib.refine(problem, an, False, plain, OPTS, 120.0)
    assert refined.model is not None and refined.point is not None
    assert refined.bound > 0.395  # 0.3999 with highspy 1.16
    monkeypatch.setattr(stage_model, "add_gap_rows", lambda *args: None)
    stages = stage_model.build(problem, an, node_costs(problem, False), plain)
    x = ib.stage_point(problem, an, refined.model, refined.point, stages)
    assert stage_model.violated(stages, x) == []
    assert float(sum(c * v for c, v in zip(stages.cost, x, strict=True))) == pytest.approx(refined.bound)


def test_encode_refuses_a_schedule_out_of_the_problems_order() -> None:
    problem = random_layered_dag(10, 3)
    schedule = SCHEDULERS["none"](problem)
    steps = list(schedule.steps)
    i, j = [k for k, s in enumerate(steps) if isinstance(s, Compute)][:2]  # the first two computations
    steps[i], steps[j] = steps[j], steps[i]
    swapped = Schedule(tuple(steps), "x")
    an = analyse(problem, True)
    model = ib.build(problem, an, False, 1.0, ())
    assert ib.encode(problem, an, model, swapped) is None


def test_mid_size_path_reports_the_interval_bound_and_proves_below_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mid-size path (forced onto a small chain, the run's own gap never taken as closed: else it
    stops after its first local search) refines the interval model, and the bound it reports is at
    least that model's; where that bound already puts the gap within prove_gap, the cutoff proof
    looks for any cheaper point ((1 - gap_rel) x the incumbent)."""
    from poet_edge.schedulers import proof_process, scale, stage_model
    from poet_edge.schedulers.board import Run

    opts = replace(OPTS, policy=Policy(stage_pairs=0, prove_pairs=10**9, every_phase=True))
    refined: list[float] = []
    real_refined = proof_process.refined

    def spy_refined(job: proof_process.Job) -> tuple[ib.Refined | None, float]:
        out = real_refined(job)  # the child's refinement
        refined.append(out[1])
        return out

    monkeypatch.setattr(proof_process, "refined", spy_refined)
    problem = replace(training_chain(8, seed=0), budget_bytes=220)
    schedule = schedule_scale(problem, opts)
    info = schedule.report.to_json()
    plain = sum(n.compute_j for n in problem.nodes)
    assert refined and max(refined) > 0
    assert float(info["bound"]) >= plain * (1 + max(refined)) * (1 - 1e-9)  # type: ignore[arg-type]

    cutoffs: list[tuple[float, float]] = []  # (cutoff asked, (1 - gap_rel) x incumbent), both scaled
    real_solve = stage_model.solve

    def spy_solve(*args: object, **kwargs: object) -> stage_model.Result:
        if kwargs.get("cutoff") is not None:
            cutoffs.append((float(kwargs["cutoff"]), ((1 - OPTS.gap_rel) * seen[-1] - plain) / plain))  # type: ignore[arg-type]
        return real_solve(*args, **kwargs)  # type: ignore[arg-type]

    seen: list[float] = []
    real_prove = scale.cutoff_proof

    def spy_prove(run: Run, *args: object, **kwargs: object) -> float:
        seen.append(run.best.cost)
        return real_prove(run, *args, **kwargs)  # type: ignore[arg-type]

    def within(run: Run, bound: float, **kwargs: object) -> float:  # 0.5 x prove_gap below
        return ((1 - OPTS.prove_gap / 2) * run.best.cost - run.plain) / run.norm

    monkeypatch.setattr(scale, "interval_refined", within)
    monkeypatch.setattr(scale, "cutoff_proof", spy_prove)
    monkeypatch.setattr(stage_model, "solve", spy_solve)
    schedule_scale(problem, opts)
    assert cutoffs and all(abs(c - want) <= 1e-9 for c, want in cutoffs)


def test_mid_size_path_offers_the_interval_point_decoded_and_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where refinement ends at a point that overfills no stage, the mid-size path decodes it and
    offers the schedule (origin "interval model"); where the decode repairs a gap, windows around it
    give further points ("interval model, repair round k"). Every offer the simulator accepts costs at
    least the reported bound, and the result at most the cheapest of them."""
    from poet_edge.schedulers import scale_bounds

    # every phase: else the first local search ends the run
    opts = replace(OPTS, policy=Policy(stage_pairs=0, every_phase=True))
    offers: list[tuple[str, float]] = []
    real_try = scale_bounds.try_schedule

    def spy_try(
        problem: SchedulingProblem, best: object, options: ScaleOptions, make: object, origin: str
    ) -> object:
        sim = real_try(problem, best, options, make, origin)  # type: ignore[arg-type]
        if origin.startswith("interval model") and sim is not None:
            offers.append((origin, sim.energy_j if sim.peak_ram_bytes <= problem.budget_bytes else math.inf))
        return sim

    monkeypatch.setattr(scale_bounds, "try_schedule", spy_try)  # the interval model's offers
    origins = set()
    for seed in (105, 109):  # graphs whose interval point needs a repair (gap 18, gap 6) at 60%
        base = random_layered_dag(40, seed, n_invalidations=2)
        for problem in scale_budgets(base, (0.6,)):
            offers.clear()
            schedule = schedule_scale(problem, opts)
            info = schedule.report.to_json()
            cost = simulate(problem, schedule).energy_j
            for origin, paid in offers:
                origins.add(origin.split(",")[0] if "repair" not in origin else "repair")
                assert paid >= float(info["bound"]) * (1 - 1e-9)  # type: ignore[arg-type]
                assert cost <= paid * (1 + 1e-12)
    assert {"interval model", "repair"} <= origins


def test_a_round_starts_only_when_twice_the_last_ones_seconds_are_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chain of the test above needs three rounds; with each solve taking one second (a fake clock)
    and 3.5 s given, the third does not start (2 s left, the last round took 1 s: ROUND_GROWTH x 1 s
    are not left) and the refinement reports that it stopped; with 4.5 s all three run."""
    from types import SimpleNamespace

    from poet_edge.schedulers.lp_model import solve_lp

    now = [0.0]

    def solve(*args: object, **kwargs: object) -> object:
        now[0] += 1.0
        return solve_lp(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ib, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(ib, "solve_lp", solve)
    problem = replace(training_chain(8, seed=0), budget_bytes=220)
    an = analyse(problem, True)
    plain = sum(n.compute_j for n in problem.nodes)
    for seconds, rounds, stopped in ((3.5, 2, True), (4.5, 3, False)):
        now[0] = 0.0
        refined = ib.refine(problem, an, False, plain, OPTS, seconds)
        assert (refined.rounds, refined.stopped) == (rounds, stopped)
