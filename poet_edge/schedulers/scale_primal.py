"""Scheduler "scale"'s first schedules: the baselines (a first valid schedule before anything else),
the segment cover's plans offered (replayed exactly, else through the engine) and the held plan
repaired, and the primal rounds (solve the primal and bound models, replay, tighten the budget rows of
overflowing stages)."""

from __future__ import annotations

from functools import partial

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.board import (
    Board,
    Run,
    full_budget,
    may_stop,
    seconds_left,
    try_schedule,
)
from poet_edge.schedulers.engine import DROP
from poet_edge.schedulers.lp_model import node_costs, solve_lp
from poet_edge.schedulers.plan_replay import (
    FREE_TEMPS,
    Plan,
    decode,
    replay_entries,
    replay_plan,
    segment_plan,
)
from poet_edge.schedulers.plan_search import plan_modes
from poet_edge.schedulers.scale_options import ScaleOptions
from poet_edge.schedulers.segment_lp import add_input_cuts, add_model_rows, option_columns


def baselines(problem: SchedulingProblem, best: Board, options: ScaleOptions) -> None:
    """Offers the baselines' schedules (none, page-all, greedy, recompute-all): a first valid schedule
    before anything else."""
    from poet_edge.schedulers.greedy import schedule_greedy
    from poet_edge.schedulers.none import schedule_none
    from poet_edge.schedulers.page_all import schedule_page_all
    from poet_edge.schedulers.recompute_all import schedule_recompute_all

    for name, fn in (
        ("none", schedule_none),
        ("page-all", schedule_page_all),
        ("greedy", schedule_greedy),
        ("recompute-all", schedule_recompute_all),
    ):
        try_schedule(problem, best, options, lambda fn=fn: fn(problem), name)  # type: ignore[misc]


def tighten(budget: np.ndarray, overflow: dict[int, int]) -> np.ndarray:
    """``budget`` (the models' budget rows) lowered at each overflowing stage by its overflow."""
    out = budget.copy()
    for t, over in overflow.items():
        if 0 <= t < len(out) and over < 1 << 61:  # not the "cannot be followed" marker
            out[t] -= over
    return out


def offer_plan(run: Run, segplan: Plan, origin: str, primal: bool = False) -> dict[int, int]:
    """Offers the plan replayed exactly (and records it for the local search, ``primal``: as a plan of
    the primal model), else through the engine (which repairs overflows by DTR); returns the overflow
    of the exact replay (empty when it fits)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = node_costs(problem, run.latency)
    overflows = []
    for variant in (segplan, {**segplan, FREE_TEMPS: DROP}):
        plan = replay_entries(cover, variant)
        schedule, overflow = replay_plan(problem, an, plan, costs)
        if schedule is not None:
            cost = schedule.report.replayed_cost
            if primal:
                best.primal.add(len(best.plans))
            best.plans.append((cost, len(best.plans), variant))
            try_schedule(problem, best, options, lambda schedule=schedule: schedule, origin)  # type: ignore[misc]
        else:
            engine = partial(_engine_schedule, problem, plan)
            try_schedule(problem, best, options, engine, origin + " (engine)")
        overflows.append(overflow)
    return min(overflows, key=lambda o: sum(o.values()))


def offer_held(run: Run, plan: Plan) -> None:
    """Offers a held plan (:func:`held_plan`); when it does not fit, the cheapest plan with one more
    segment evicted (DROP or PAGE) that fits (at most ``Policy.repairs`` replays). A plan that fits is
    recorded as a start of the local search."""
    problem, an, cover, best = run.problem, run.an, run.cover, run.best
    costs = node_costs(problem, run.latency)
    modes = plan_modes(problem, an, cover)
    found: list[tuple[float, Plan]] = []

    def fits(x: Plan) -> bool:
        schedule, _ = replay_plan(problem, an, replay_entries(cover, x), costs, strict=True)
        if schedule is not None:
            found.append((schedule.report.replayed_cost, x))
        return schedule is not None

    if not fits(plan):
        tries = [{**plan, k: m} for k, ms in modes.items() if k >= 0 and k not in plan for m in ms]
        for x in tries[: run.options.policy.repairs // 2]:
            if best.late(seconds_left(best, run.options) <= 0.0):
                break
            if not fits(x):
                fits({**x, FREE_TEMPS: DROP})
    if found:
        cost, x = min(found, key=lambda f: f[0])
        best.plans.append((cost, len(best.plans), x))
        schedule, _ = replay_plan(problem, an, replay_entries(cover, x), costs)
        if schedule is not None:
            try_schedule(problem, best, run.options, lambda: schedule, "held bound-model plan")  # type: ignore[misc]


def primal_rounds(run: Run, bound: float) -> str:
    """Primal rounds on both models (``Budget.nodes`` each): solve, replay, tighten the budget rows of
    overflowing stages."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    status = "not run"
    for name, opts, rounds in (
        ("primal", cover.primal_opts, options.rounds),
        ("bound-model", cover.bound_opts, 3 * options.rounds),
    ):
        budget = full_budget(problem)
        for k in range(rounds):
            if may_stop(options, best.cost, bound) or best.late(seconds_left(best, options) <= 0.0):
                break
            lp = option_columns(problem, opts, run.latency, run.norm)
            if opts is cover.bound_opts:
                add_input_cuts(problem, run.an, cover, lp, run.latency, run.norm)
            if not add_model_rows(problem, cover, lp, budget):
                status = f"{name} round {k}: a tightened stage cannot fit"
                break
            if len(lp.cost) > options.policy.mip_cols:
                status = (
                    f"{name} rounds: a model of {len(lp.cost):,} columns (above Policy.mip_cols) not solved"
                )
                break
            solved = solve_lp(
                lp, seconds_left(best, options), options, nodes=run.budget.nodes, checks=run.budget.nodes
            )
            best.clock(solved.status)
            if name == "primal":
                status = f"primal round {k}: {solved.status}"
            if solved.values is None:
                break
            segplan = segment_plan(run.an, cover, lp, solved.values)
            overflow = offer_plan(run, segplan, f"{name} plan, round {k}", name == "primal")
            if not overflow:
                break
            budget = tighten(budget, overflow)
    return status


def _engine_schedule(problem: SchedulingProblem, plan: dict[int, list[tuple[int, str]]]) -> Schedule:
    """``plan`` replayed through the engine (which repairs overflows by DTR)."""
    return decode(problem, plan)[0]
