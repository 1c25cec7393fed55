"""Scheduler "scale"'s bound providers (:class:`~poet_edge.schedulers.board.BoundProvider`): the
segment cover's bound model (:func:`cover_bound`), the stage model from the incumbent with cut rounds
(:func:`stage_bound`), the interval model refined in a child process (:func:`interval_start`,
:func:`interval_refined`, its point decoded and repaired by windows), the strict bound model
(:func:`strict_bound`) and the stage model's cutoff proof (:func:`cutoff_proof`). Each returns its bound
scaled (above the plain pass, / ``Run.norm``) and offers the schedules it decodes."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.schedulers import interval_bound, proof_process, stage_model
from poet_edge.schedulers.board import (
    Run,
    closed,
    cutoff_of,
    full_budget,
    gap_abs,
    may_stop,
    seconds_left,
    try_schedule,
)
from poet_edge.schedulers.lp_model import node_costs, solve_lp
from poet_edge.schedulers.plan_replay import (
    held_plan,
    segment_plan,
)
from poet_edge.schedulers.scale_primal import offer_held, offer_plan
from poet_edge.schedulers.segment_lp import bound_model
from poet_edge.schedulers.segment_strict import strict_model


def cover_bound(run: Run, bound: float = 0.0) -> float:
    """The bound model: its LP relaxation (a bound even when the MIP's root does not end), then its MIP
    (``Budget.nodes``); its plan and held plan are offered. Returns the (scaled) bound."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    best.phase = "segment cover"
    lp = bound_model(problem, run.an, cover, run.latency, run.norm, full_budget(problem))
    if lp is None:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order: "
            f"values that can be neither paged out nor recomputed must stay resident"
        )
    relaxed = solve_lp(lp, seconds_left(best, options), options, integer=False)
    best.clock(relaxed.status)
    if len(lp.cost) > options.policy.mip_cols:  # its root is bounded by no count: the relaxation alone
        if not relaxed.feasible:
            raise PoetError(
                f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's "
                "order (the segment relaxation is infeasible)"
            )
        return relaxed.bound
    solved = solve_lp(
        lp, seconds_left(best, options), options, nodes=run.budget.nodes, checks=run.budget.nodes
    )
    best.clock(solved.status)
    if not solved.feasible:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order "
            f"(the segment relaxation is infeasible)"
        )
    if solved.values is not None:
        offer_plan(run, segment_plan(run.an, cover, lp, solved.values), "bound-model plan")
        offer_held(run, held_plan(problem, run.an, cover, lp, solved.values))
    return max(solved.bound, relaxed.bound)


def stage_bound(run: Run, bound: float = 0.0) -> float:
    """The stage model (:mod:`~poet_edge.schedulers.stage_model`) on graphs of at most ``Policy.stage_pairs``
    value-stage pairs, started from the incumbent (``Budget.nodes``): its point decoded and offered;
    returns its (scaled) dual bound, 0 when it does not run. Cut rounds (``Budget.cut_rounds``): while
    the decode needs a repair in some gap, or does not fit there, that gap's configuration is cut off
    (:func:`stage_model.gap_cut`) and the model solved again below the incumbent; the bound returned
    is the first solve's (the cut rounds find points: on resnet8, every parameter trained, at 70%, one
    cut round finds a point close to the bound where the first point decodes to a much costlier one)."""
    problem, an, best, options, nodes = run.problem, run.an, run.best, run.options, run.budget.nodes
    plain = run.plain
    model = stage_model.build(problem, an, node_costs(problem, run.latency), run.norm)
    if not model.feasible:
        return 0.0
    start = stage_model.encode(problem, an, model, best.schedule) if best.schedule is not None else None
    # stop when the gap relative to the whole cost (plain pass + the model's objective) is closed
    gap = gap_abs(run, best.cost if math.isfinite(best.cost) else plain)
    solved = stage_model.solve(model, seconds_left(best, options), options.threads, gap, start, nodes=nodes)
    best.clock(solved.status)
    bound = solved.bound
    proven = best.proved((plain + bound * run.norm, "stage model"))[0]  # the cut rounds do not change it
    for k in range(run.budget.cut_rounds + 1):
        values = solved.values
        if values is None:
            break
        gaps: list[int] = []  # in stage order: the gaps decode repaired, and those it could not fit
        origin = f"stage model, cut round {k}" if k else "stage model"
        decoded = partial(stage_model.decode, problem, an, model, values, gaps, gaps)
        try_schedule(problem, best, options, decoded, origin)
        if not gaps or may_stop(options, best.cost, proven) or k == run.budget.cut_rounds:
            break
        if best.late(seconds_left(best, options) <= 0.0):
            break
        model.rows += [stage_model.gap_cut(model, an, values, t) for t in gaps]
        cutoff = (best.cost - plain) / run.norm if math.isfinite(best.cost) else None
        solved = stage_model.solve(
            model, seconds_left(best, options), options.threads, gap, cutoff=cutoff, nodes=nodes
        )
        best.clock(solved.status)
    return bound


def interval_start(run: Run) -> proof_process.Job:
    """The interval model's refinement (:mod:`~poet_edge.schedulers.interval_bound`, ``Budget.rounds``
    rounds of ``Budget.nodes`` nodes at most) started in a child process
    (:func:`proof_process.start_refine`) on the machine's second core; :func:`interval_refined` waits for it.
    It is stopped when the level ends before (a gap closed)."""
    budget = run.budget
    refine = partial(
        interval_bound.refine,
        run.problem,
        run.an,
        run.latency,
        run.norm,
        max_rounds=budget.rounds,
        nodes=budget.nodes,
    )
    return proof_process.start_refine(refine, run.options, seconds_left(run.best, run.options))


def interval_refined(
    run: Run, bound: float, job: proof_process.Job | None, model: stage_model.StageModel
) -> float:
    """The interval model's bound from its refinement ``job`` (:func:`interval_start`; waited for
    until its deadline), scaled; 0 when it did not run. Where the refinement ended at a point that
    overfills no stage, that point, as one of the stage ``model``'s (:func:`interval_bound.stage_point`),
    is decoded and offered: where the RAM of its restorations fits, a schedule at the bound (bert_tiny
    with every parameter trained at 1.1x its floor: an optimal schedule, found early and far cheaper
    than what the windows had reached)."""
    if job is None:
        return 0.0
    best, problem, an = run.best, run.problem, run.an
    refined, bound = proof_process.refined(job)
    best.late(refined is None or refined.stopped)
    if refined is None:
        return bound
    best.clock(refined.status)
    if refined.model is not None and refined.point is not None and model.feasible:
        point = interval_bound.stage_point(problem, an, refined.model, refined.point, model)
        repair_point(run, model, point, run.plain + refined.bound * run.norm)
    return refined.bound


def repair_point(run: Run, model: stage_model.StageModel, point: np.ndarray, bound: float) -> None:
    """Offers the stage ``model``'s ``point`` decoded (:func:`stage_model.decode`); while the decode
    needs a repair in some gap (or does not fit there), the stages around each such gap are
    re-optimized with the rest fixed (:func:`stage_model.window`, ``Budget.window_nodes``; from the
    second round on, with the configurations of the gaps the last decode could not fit cut off, in a
    copy of the model), and the new point decoded, for at most ``Policy.repair_rounds`` rounds and
    ``Budget.cut_rounds`` windows in all (a window's root node alone can take seconds), or until the
    incumbent is within ``gap_rel`` of ``bound`` (mobilenetv1_025 with every parameter trained at
    60%: the interval point decodes to a costlier schedule, and two rounds reach the optimum)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    cut = replace(model, rows=list(model.rows))
    wins: stage_model.Windows | None = None
    left = run.budget.cut_rounds  # windows
    for k in range(run.options.policy.repair_rounds + 1):
        gaps: list[int] = []
        origin = f"interval model, repair round {k}" if k else "interval model"
        try_schedule(
            problem, best, options, partial(stage_model.decode, problem, an, cut, point, gaps, gaps), origin
        )
        if not gaps or may_stop(options, best.cost, bound) or k == run.options.policy.repair_rounds:
            return
        bad = sorted(set(gaps))
        if k:
            cut.rows += [stage_model.gap_cut(cut, an, point, t) for t in bad]
        if k or wins is None:
            wins = stage_model.windows(cut, options.threads, 0.0)
        for t in bad:
            if left <= 0 or best.late(seconds_left(best, options) <= 0.0):
                return
            left -= 1
            nodes = run.budget.window_nodes
            solved = stage_model.window(
                wins,
                point,
                t - run.options.policy.repair_width,
                t + run.options.policy.repair_width,
                seconds_left(best, options),
                nodes=nodes,
            )
            best.clock(solved.status)
            if solved.values is not None:
                point = solved.values


def strict_bound(run: Run, bound: float, cover: float) -> float:
    """The strict bound model (:mod:`~poet_edge.schedulers.segment_strict`) without its gap rows
    (``Budget.nodes``), when the incumbent is still more than ``Policy.strict_gap`` above ``bound`` and
    ``bound`` is not more than ``Policy.strict_above`` above the segment cover's (``cover``): returns its
    (scaled) MIP dual bound, 0 when it does not run."""
    best, options = run.best, run.options
    if (
        not run.budget.strict
        or best.schedule is None
        or closed(best.cost, bound, run.options.policy.strict_gap)
    ):
        return 0.0
    if not closed(
        bound, cover, run.options.policy.strict_above
    ):  # the interval model raised it well above the segment cover
        return 0.0
    lp = strict_model(
        run.problem, run.an, run.cover, run.latency, run.norm, full_budget(run.problem), gaps=False
    )
    if lp is None or len(lp.cost) > options.policy.mip_cols:
        return 0.0
    solved = solve_lp(lp, seconds_left(best, options), options, nodes=run.budget.nodes)
    best.clock(solved.status)
    return solved.bound


def cutoff_proof(run: Run, bound: float, model: stage_model.StageModel) -> float:
    """When the incumbent is more than ``ScaleOptions.prove_gap`` above ``bound``: is any point of the
    stage model cheaper than (1 - prove_gap) x the incumbent (HiGHS with that cutoff, ``Budget.nodes``,
    prunes far more than when it proves optimality from the incumbent)? When it finds none, the cutoff
    is a lower bound. A cheaper point found is decoded and offered. Where the gap is already within
    prove_gap but not closed, the cutoff is (1 - gap_rel) x the incumbent. Returns the (scaled) bound,
    0 when it does not run (also on a model of more than ``Policy.mip_cols`` columns)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    if best.schedule is None or not model.feasible or may_stop(options, best.cost, bound):
        return 0.0
    if len(model.cost) > options.policy.mip_cols:  # as the segment models: a root no count bounds
        return 0.0
    within = closed(best.cost, bound, options.prove_gap)  # then any cheaper point
    cutoff = cutoff_of(run, run.plain, options.gap_rel if within else None)
    gap = gap_abs(run, best.cost)
    nodes = run.budget.nodes
    solved = stage_model.solve(
        model, seconds_left(best, options), options.threads, gap, cutoff=cutoff, nodes=nodes
    )
    best.clock(solved.status)
    if solved.values is not None:
        values = solved.values
        try_schedule(
            problem, best, options, lambda: stage_model.decode(problem, an, model, values), "stage cutoff"
        )
    return solved.bound
