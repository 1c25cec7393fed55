"""Scheduler "scale": a compact segment-cover model that gives a proven lower bound in seconds and
schedules near it, for training graphs of a thousand nodes. This module is the orchestrator: it runs
the phases in a fixed order on one incumbent board; the phases live in their own modules.

* :mod:`~poet_edge.schedulers.scale_options`: :class:`ScaleOptions` and the :class:`Policy` (size
  thresholds, window shapes) passed in with them;
* :mod:`~poet_edge.schedulers.board`: the incumbent board (:class:`~poet_edge.schedulers.board.Board`),
  what a level's phases share (:class:`~poet_edge.schedulers.board.Run`), the two interfaces
  (:class:`~poet_edge.schedulers.board.BoundProvider`, :class:`~poet_edge.schedulers.board.Heuristic`)
  and the solve report (:func:`~poet_edge.schedulers.board.finish`);
* :mod:`~poet_edge.schedulers.scale_primal`: the baselines, the segment cover's plans, primal rounds;
* :mod:`~poet_edge.schedulers.scale_bounds`: the bound providers (segment cover, stage model, interval
  model, strict model, cutoff proof);
* :mod:`~poet_edge.schedulers.scale_split`: the split model's cutoff proof in a child process;
* :mod:`~poet_edge.schedulers.scale_search`: the heuristics (local search over plans, windows).

The models underneath: the segment cover (:mod:`~poet_edge.schedulers.segment_cover`), its bound and
primal models for HiGHS (:mod:`~poet_edge.schedulers.segment_lp`, written in and solved by
:mod:`~poet_edge.schedulers.lp_model`), plans and their exact replay
(:mod:`~poet_edge.schedulers.plan_replay`), the local search over plans
(:mod:`~poet_edge.schedulers.plan_search`), POET's stage model without its RAM between stages
(:mod:`~poet_edge.schedulers.stage_model`), that model kept exact at a few bottleneck stages
(:mod:`~poet_edge.schedulers.interval_bound`), the strict and split bound models
(:mod:`~poet_edge.schedulers.segment_strict`), and child processes for the interval model's
refinement and the split model's cutoff proof (:mod:`~poet_edge.schedulers.proof_process`).

Work, not time. Every phase's budget is a count from the run's levels
(:mod:`~poet_edge.schedulers.effort`, ``--effort``): HiGHS's branch-and-bound nodes per solve, the
local search's perturbations and stall (replay work), large-neighbourhood windows, refinement rounds. A
child's result is used only at a fixed point of the run, after waiting for it; the split proof is sent
one cutoff, at the first window where it is due, and collected at the end. So the same problem and
options give the same schedule on any load; the wall-clock ``time_limit_s`` is a safety stop, and a
run it cuts says so (``cut_by_time_limit``, ``cut_phase``). Levels run in turn on one incumbent and
bound: a larger effort repeats the smaller one's run first, so it is never worse. A run that is to
beat a schedule found before it (``ScaleOptions.stop_above``: the fitting sequences' cost, or a
cheaper compared choice's) and whose first level found no schedule of its own does not go on to the
next: those levels search on around the first level's plans for a cheaper one, and with none they
would spend their work (on the 2,000-node dense graph at 80%, over a minute) where the schedule to
beat already stands.

Phases of the first level: the baselines (a first valid schedule), the bound model's LP relaxation
and MIP (the segment cover's bound; its plans and held plan replayed and offered), primal rounds
(solve, replay, tighten overflowing stages). Then, per level: on graphs of at most ``Policy.stage_pairs``
value-stage pairs, a short local search, the stage model from the incumbent (its dual bound, its point
decoded, with cut rounds where the decode needs repairs), the local search again. On mid-size graphs
(at most ``Policy.lns_pairs``): the local search until it stalls (the interval model is refined in a
child meanwhile); the interval model's bound and point (decoded, windows around its repaired gaps);
near windows, twice; the strict bound model when the gap stays wide; the stage model's cutoff
proof (``Policy.prove_pairs``); stage and value windows (and, with the split proof, windows from a
second start); the split proof's result; the local search. Larger graphs: the local search only.

``Schedule.report`` (:class:`~poet_edge.schedule.SolveReport`): status (``optimal``: the gap is closed;
else ``feasible``), objective, bound, bound_from, gap ((cost - bound) / cost), effort,
cut_by_time_limit, cut_phase, schedule_from, the primal rounds' status, model sizes, search_replays; and
timings (seconds, first_valid_s, within_1pct_s), which plan.json leaves out
(``compiler.DETERMINISTIC_INFO``).
"""

from __future__ import annotations

from functools import partial

from poet_edge.errors import CutError, PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule, SolveReport
from poet_edge.schedulers import proof_process, stage_model
from poet_edge.schedulers.board import (
    Board,
    BoundProvider,
    Heuristic,
    Run,
    finish,
    may_stop,
    proven_bound,
    restricted,
    stop_at,
)
from poet_edge.schedulers.effort import sized
from poet_edge.schedulers.engine import analyse
from poet_edge.schedulers.lp_model import node_costs
from poet_edge.schedulers.milp import MilpOptions, pinned_check
from poet_edge.schedulers.milp_decode import stages
from poet_edge.schedulers.plan_replay import NAME
from poet_edge.schedulers.scale_bounds import (
    cover_bound,
    cutoff_proof,
    interval_refined,
    interval_start,
    stage_bound,
    strict_bound,
)
from poet_edge.schedulers.scale_options import GAP_REL, Policy, ScaleOptions
from poet_edge.schedulers.scale_primal import baselines, primal_rounds
from poet_edge.schedulers.scale_search import lns, local_search, near_sweeps, second_start, stage_sweeps
from poet_edge.schedulers.scale_split import split_collect, split_due, split_start
from poet_edge.schedulers.segment_cover import Cover, OutOfTime, build_cover

__all__ = ["GAP_REL", "NAME", "Policy", "ScaleOptions", "schedule_scale"]


def _bounded(run: Run, phase: str, provider: BoundProvider, bound: float) -> float:
    """Runs ``provider`` as ``phase`` from ``bound``; the run's highest bound after it."""
    run.best.phase = phase
    return run.best.proved((run.plain + provider(run, bound) * run.norm, phase))[0]


def _improved(run: Run, phase: str, heuristic: Heuristic, bound: float) -> int:
    """Runs ``heuristic`` as ``phase`` from ``bound``; its work."""
    run.best.phase = phase
    return heuristic(run, bound)


def schedule_scale(problem: SchedulingProblem, options: ScaleOptions | None = None) -> Schedule:
    """See the module docstring. Raises PoetError (saying why) when no schedule exists or none is found."""
    options = options or ScaleOptions()
    if options.objective not in ("energy", "latency"):
        raise PoetError(f"unknown objective '{options.objective}'; use energy or latency")
    budgets = options.budgets()
    best = Board(on_progress=options.on_progress)
    if not problem.nodes:
        return Schedule((), NAME, SolveReport.of(status="empty problem"))
    check_budget(problem)
    restrictions = MilpOptions(paging=options.paging, remat=options.remat)
    pinned_check(problem, stages(problem, options.paging, options.remat), restrictions)  # says which values
    problem = restricted(problem, options)
    an = analyse(problem, True)
    latency = options.objective == "latency"
    plain = sum(node_costs(problem, latency)[0])
    norm = plain if plain > 0 else 1.0
    baselines(problem, best, options)  # a first valid schedule before anything else
    pairs = stage_model.pairs(problem, an)
    best.phase = "segment cover"
    try:
        cover = build_cover(problem, an, latency, stop_at(best, options))
    except OutOfTime:  # the safety stop: the baselines' schedule, said to be cut
        best.late(True)
        if best.schedule is None:
            raise CutError(
                f"scheduler '{NAME}' found no schedule before its time limit cut it (in segment cover)"
            ) from None
        return finish(best, plain, "cut by the time limit", Cover.empty(), 0, options.effort)
    policy = options.policy
    bound, status, evals, ran = 0.0, "not run", 0, 0
    for k, budget in enumerate(budgets):
        ran = k + 1
        run = Run(problem, an, cover, best, options, latency, norm, plain, sized(budget, pairs, k), k)
        mid = policy.stage_pairs < pairs <= policy.lns_pairs
        job = interval_start(run) if mid else None  # on the second core while this process searches
        try:
            if k == 0:
                bound = _bounded(run, "segment cover", cover_bound, bound)
                best.phase = "primal rounds"
                status = primal_rounds(run, bound)
            evals += _level(run, pairs, proven_bound(run, bound), job)
        finally:
            if job is not None:
                job.stop()
        if may_stop(options, best.cost, proven_bound(run, bound)) or best.cut is not None:
            break
        if best.schedule is None and options.stop_above is not None:  # the module docstring
            break
    if best.schedule is None:
        if best.cut is not None:
            raise CutError(
                f"scheduler '{NAME}' found no schedule within the budget before its time limit cut it "
                f"(in {best.cut}; {status})"
            )
        beaten = (
            ""
            if options.stop_above is None
            else f"; it had a schedule to beat: {ran} of {len(budgets)} levels ran"
        )
        raise PoetError(f"scheduler '{NAME}' found no schedule within the budget ({status}{beaten})")
    return finish(best, plain, status, cover, evals, options.effort)


def _level(run: Run, pairs: int, bound: float, job: proof_process.Job | None) -> int:
    """One level's phases after the first's bound and primal rounds (the module docstring); returns
    the local search's replays."""
    best, options, budget, policy = run.best, run.options, run.budget, run.options.policy
    if may_stop(options, best.cost, bound):
        return 0
    if pairs <= policy.stage_pairs:  # a short search first: the stage model's start
        evals = _improved(run, "local search", partial(local_search, kicks=budget.kicks // 10), bound)
        bound = _bounded(run, "stage model", stage_bound, bound)
        return evals + _improved(run, "local search", local_search, bound)
    evals = _improved(run, "local search", local_search, bound)
    if pairs > policy.lns_pairs:
        return evals
    if may_stop(options, best.cost, bound):  # else no model to build
        return evals
    if budget.split:
        run = split_start(run, run.plain)
    try:
        return evals + _mid_size(run, bound, pairs, job)
    finally:
        if run.split is not None:
            run.split.job.stop()


def _mid_size(run: Run, bound: float, pairs: int, job: proof_process.Job | None) -> int:
    """The phases of the mid-size path after its first local search (the module docstring); returns
    the last local search's replays."""
    problem, best, options, count = run.problem, run.best, run.options, run.budget.windows
    model = stage_model.build(problem, run.an, node_costs(problem, run.latency), run.norm)
    windows = stage_model.windows(model, options.threads, 0.0) if model.feasible else None
    cover = bound  # the segment cover's
    near = near_sweeps(options.policy)
    near_windows = partial(lns, model=model, windows=windows, sweeps=near, count=count)
    # the interval model first: its point, decoded, is often a schedule at the bound, and the windows
    # then start from it (or are not needed); it was refined in the child since the level began
    bound = _bounded(run, "interval model", partial(interval_refined, job=job, model=model), bound)
    _improved(run, "near windows", near_windows, bound)
    _improved(run, "near windows", near_windows, proven_bound(run, bound))
    bound = _bounded(
        run, "strict segment cover", partial(strict_bound, cover=cover), proven_bound(run, bound)
    )
    if pairs <= options.policy.prove_pairs:
        bound = _bounded(
            run, "stage model cutoff", partial(cutoff_proof, model=model), proven_bound(run, bound)
        )
    best.phase = "stage windows"
    sweeps = stage_sweeps(options.policy)
    stage_windows = partial(lns, model=model, windows=windows, sweeps=sweeps, count=count)
    if run.split is not None:  # windows from a second start where they stall while the split proof is not due
        stage_windows(run, bound)
        if not split_due(run, proven_bound(run, bound)):
            second = second_start(run, proven_bound(run, bound))
            if second is not None:
                lns(run, bound, model, windows, stage_sweeps(options.policy), count, start=second)
    stage_windows(run, bound)
    if run.split is not None:
        best.phase = "split segment cover"
        split_collect(run)  # waits for its relaxation, and for the proof if one was sent
    return _improved(run, "local search", local_search, proven_bound(run, bound))
