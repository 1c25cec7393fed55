"""Scheduler "scale"'s heuristics (:class:`~poet_edge.schedulers.board.Heuristic`): the local search over
plans (:func:`local_search`, iterated with seeded perturbations; :func:`second_start`) and the
large-neighbourhood windows of the stage model (:func:`lns`: stage, value and near windows,
:class:`Sweep`)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace

from poet_edge.errors import PoetError
from poet_edge.schedule import Schedule
from poet_edge.schedulers import stage_model
from poet_edge.schedulers.board import (
    Run,
    admissible,
    gap_abs,
    may_stop,
    metric,
    seconds_left,
    stop_at,
    try_schedule,
)
from poet_edge.schedulers.lp_model import node_costs
from poet_edge.schedulers.plan_replay import (
    Plan,
    replay_entries,
    replay_plan,
)
from poet_edge.schedulers.plan_search import PlanSearch, plan_key, plan_modes, plan_with
from poet_edge.schedulers.scale_options import Policy
from poet_edge.schedulers.scale_split import split_poll
from poet_edge.simulator import simulate


def local_search(run: Run, bound: float, kicks: int | None = None) -> int:
    """Local search (:class:`PlanSearch`) from the three cheapest recorded plans no earlier search started
    from (from no eviction at all when there are none and no earlier search ran), then iterated from the
    best plan of those descents and of the last search's end (the next search goes on from there
    instead of descending from the same starts again): perturb 1-3 random segments of the best plan
    (seeded by the level) and descend again, at most ``kicks`` (else ``Budget.kicks``) times, while the
    gap is open, until the incumbent has not improved for ``Budget.stall`` of replay work
    (:attr:`PlanSearch.work`: a replay that recomputes the whole graph over costs as much as several;
    ``Policy.stall_first`` x as much before its first improvement; checked within a descent too);
    returns the number of replays."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = node_costs(problem, run.latency)
    search = PlanSearch(problem, an, cover, costs, plan_modes(problem, an, cover))
    ranked = [plan for _, _, plan in sorted(best.plans, key=lambda x: (x[0], x[1]))]
    starts = [plan for plan in ranked if plan_key(plan) not in best.descended]
    if not ranked and best.searched is None:
        starts = [{}]
    deadline = stop_at(best, options)
    improved = 0  # the search's work when it last improved the incumbent

    def offer(plan: Plan) -> None:
        nonlocal improved
        schedule, _ = replay_plan(problem, an, replay_entries(cover, plan), costs)
        if schedule is not None:
            before = best.cost
            try_schedule(problem, best, options, lambda: schedule, "local search")
            if best.cost < before:
                improved = search.work

    def stalled() -> bool:
        return search_stalled(search.work, improved, run.budget.stall, run.options.policy.stall_first)

    def more() -> bool:
        if stalled() or may_stop(options, best.cost, bound):
            return False
        return not best.late(time.perf_counter() >= deadline)

    def descend(plan: Plan) -> Plan:
        found = search.run(plan, deadline, offer, stalled)
        best.late(time.perf_counter() >= deadline)
        return found

    incumbent: Plan | None = best.searched
    for plan in starts[:3]:
        if plan_key(plan) in best.descended or not more():
            continue
        best.descended.add(plan_key(plan))
        found = descend(plan)
        if incumbent is None or search.score(found, False) < search.score(incumbent, False):
            incumbent = found
    rng = random.Random(run.level)
    movable = [k for k, m in search.modes.items() if m]
    for _ in range(run.budget.kicks if kicks is None else kicks):
        if incumbent is None or not movable or not more():
            break
        plan = incumbent
        for k in rng.sample(movable, min(len(movable), rng.randint(1, 3))):
            plan = plan_with(plan, k, rng.choice((None, *search.modes[k])))
        found = descend(plan)
        if search.score(found, False) < search.score(incumbent, False):
            incumbent = found
    best.searched = incumbent
    return search.evals


def search_stalled(work: int, improved: int, stall: int, first: int) -> bool:
    """Whether a local search with ``work`` done (:attr:`PlanSearch.work`), the last improvement at
    ``improved`` (0: none yet), has stalled: ``stall`` of work since that improvement, ``first``
    (``Policy.stall_first``) x as much before the first."""
    return work - improved > (stall if improved else first * stall)


def second_start(run: Run, bound: float) -> Schedule | None:
    """A second start for the windows where those from the first stall while the split proof is not
    due: the local optimum (a descent stopped after ``Budget.stall`` of work without improvement) from
    the cheapest plan of the other model than the first local search started from (primal or bound
    model); None when there is none or it does not replay. The first start is a trap on some graphs
    (bert_tiny with every parameter trained, 70%: the windows stall from the bound model's plan, well
    above where they get from the primal model's)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    ranked = sorted(best.plans, key=lambda x: (x[0], x[1]))
    if not ranked or may_stop(options, best.cost, bound):
        return None
    other = [plan for _, k, plan in ranked if (k in best.primal) != (ranked[0][1] in best.primal)]
    if not other:
        return None
    costs = node_costs(problem, run.latency)
    search = PlanSearch(problem, an, cover, costs, plan_modes(problem, an, cover))
    improved = [0]  # the work when the descent last improved

    def better(plan: Plan) -> None:
        improved[0] = search.work

    stall = run.budget.stall
    found = search.run(
        other[0],
        stop_at(best, options),
        better,
        lambda: search_stalled(search.work, improved[0], stall, run.options.policy.stall_first),
    )
    best.late(seconds_left(best, options) <= 0.0)
    schedule, _ = replay_plan(problem, an, replay_entries(cover, found), costs)
    if schedule is not None:
        try_schedule(problem, best, options, lambda: schedule, "local search, second start")
    return schedule


@dataclass
class Sweep:
    """One kind of LNS window (stages; values at every stage; values at every stage with restorations
    at most ``near`` stages before a consumer) and where its sweep is."""

    by_value: bool
    width: int
    step: int
    share: float  # of the windows' work
    near: int | None = None
    widen: bool = True  # after a sweep without improvement: wider windows (else this kind stops)
    first: int = 0
    stale: int = 0  # stages (values) swept since the incumbent last improved
    spent: int = 0  # HiGHS work (simplex iterations + nodes) its windows took: a count


def stage_sweeps(policy: Policy) -> list[Sweep]:
    """The windows of the LNS after the cutoff proof: stages, and values at every stage (value windows
    first on a tie)."""
    return [
        Sweep(False, policy.lns_width, policy.lns_step, 1 - policy.lns_value_share),
        Sweep(True, policy.lns_values, policy.lns_value_step, policy.lns_value_share),
    ]


def near_sweeps(policy: Policy) -> list[Sweep]:
    """The near windows: ``Policy.near_values`` values at every stage, their restorations at most
    ``Policy.near_stages`` stages before a consumer (:func:`stage_model.window`), while they improve. They
    change where early activations are held through the forward pass, which a stage window cannot
    (mobilenetv1_025 at 1.1x the floor is a graph where they find cheaper schedules)."""
    return [Sweep(True, policy.near_values, policy.near_step, 1.0, policy.near_stages, widen=False)]


def lns(
    run: Run,
    bound: float,
    model: stage_model.StageModel,
    windows: stage_model.Windows | None,
    sweeps: list[Sweep],
    count: int,
    start: Schedule | None = None,
    stall: int | None = None,
) -> int:
    """Large-neighbourhood search with the stage model: the incumbent as a point of the model, every
    column outside a window fixed, the window re-optimized by HiGHS (``Budget.window_nodes``); a
    cheaper solution is decoded, checked by the simulator and becomes the incumbent. At most ``count``
    windows. The kinds (``sweeps``) share HiGHS's work: the next window is of the kind furthest below
    its share. Each kind sweeps its range; after a whole sweep without improvement its windows and
    steps double (once they span everything, or unless ``widen``, that kind stops). Between windows
    the split model's child may be sent its cutoff (:func:`split_poll`). ``windows``: the model's
    arrays, None when the model is infeasible. ``start``: start from this schedule instead of the
    incumbent, keeping an own incumbent (a cheaper schedule than the run's becomes that too).
    ``stall``: stop after this many windows without improving the own incumbent (default: the level's
    ``window_stall``; before, only the second start's windows stopped so, and bert_tiny bias at 80KB
    with --effort quick spent much of its run on windows that gained nothing). Returns the windows solved (a
    :class:`~poet_edge.schedulers.board.Heuristic`'s work)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    if best.schedule is None:
        return 0
    own = best.cost if start is None else metric(simulate(problem, start), options)  # its incumbent's
    x = stage_model.encode(problem, an, model, start or best.schedule)
    if windows is None or x is None:
        return 0
    h = replace(windows, gap_abs=gap_abs(run, own))  # the model's arrays, built once per level
    n = len(problem.nodes)
    stall = run.budget.window_stall if stall is None else stall
    since = 0  # windows since the own incumbent improved
    tried = 0  # windows solved
    for _ in range(count):
        if not sweeps or since >= stall:
            return tried
        bound = split_poll(run, bound)
        if may_stop(options, best.cost, bound) or best.late(seconds_left(best, options) <= 0.0):
            return tried
        sw = min(sweeps, key=lambda k: (k.spent / k.share, not k.by_value))
        if sw.stale >= n:  # a whole sweep without improvement: wider windows
            if not sw.widen or sw.width >= n:
                sweeps.remove(sw)
                continue
            sw.width, sw.step, sw.stale = 2 * sw.width, 2 * sw.step, 0
        last = sw.first + sw.width
        solved = stage_model.window(
            h,
            x,
            sw.first,
            last,
            seconds_left(best, options),
            by_value=sw.by_value,
            near=sw.near,
            nodes=run.budget.window_nodes,
        )
        sw.spent += max(1, solved.work)
        best.clock(solved.status)
        sw.first = sw.first + sw.step if sw.first + sw.step < n else 0
        sw.stale += sw.step
        since += 1
        tried += 1
        if solved.values is None:
            continue
        try:
            found = window_schedule(run, model, solved, own)
        except PoetError:  # a repair hides more than the point gains
            continue
        origin = "stage LNS" if start is None else "stage LNS, second start"
        # the run's incumbent too when it is cheaper than that
        sim = try_schedule(problem, best, options, lambda found=found: found, origin)  # type: ignore[misc]
        if sim is None or not admissible(problem, sim) or metric(sim, options) >= own * (1 - 1e-12):
            continue
        y = stage_model.encode(problem, an, model, found)
        if y is not None:
            x, own, since = y, metric(sim, options), 0
            for other in sweeps:
                other.stale = 0
    return tried


def window_schedule(
    run: Run, model: stage_model.StageModel, solved: stage_model.Result, own: float
) -> Schedule:
    """A window's point decoded. Where a gap fits in no order the decode repairs it
    (:mod:`~poet_edge.schedulers.gap_repair`), and the schedule costs more than the point; it is taken
    only when it beats the windows' incumbent (cost ``own``) by at least that much more (else
    PoetError). The windows search below the model's cost of the incumbent, so an incumbent that costs
    more than its point hides the schedules between the two (bert_tiny at 50%, every repair taken: a
    repaired point became the incumbent and the windows stopped there, above where they end without
    repairs). With this rule they end near the cheaper of the two, at 50% and at 1.1x the floor (where
    the windows without repairs end much higher)."""
    problem = run.problem
    assert solved.values is not None and solved.objective is not None
    gaps: list[int] = []
    schedule = stage_model.decode(problem, run.an, model, solved.values, gaps)
    if gaps:
        cost = metric(simulate(problem, schedule), run.options)
        extra = cost - (sum(node_costs(problem, run.latency)[0]) + solved.objective * run.norm)
        if cost + extra > own:
            raise PoetError(f"the repair of gaps {gaps} hides {extra / run.norm:.2%} of the plain pass")
    return schedule
