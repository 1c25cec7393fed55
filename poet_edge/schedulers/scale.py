"""Scheduler "scale": a compact segment-cover model that gives a proven lower bound in seconds and
schedules near it, for training graphs of a thousand nodes.

The pieces: the segment cover (:mod:`~poet_edge.schedulers.segment_cover`), its bound and primal
models for HiGHS (:mod:`~poet_edge.schedulers.segment_lp`, written in and solved by
:mod:`~poet_edge.schedulers.lp_model`), plans and their exact replay
(:mod:`~poet_edge.schedulers.plan_replay`), the local search over plans
(:mod:`~poet_edge.schedulers.plan_search`), POET's stage model without its RAM between stages
(:mod:`~poet_edge.schedulers.stage_model`), that model kept exact at a few bottleneck stages
(:mod:`~poet_edge.schedulers.interval_bound`), the strict and split bound models
(:mod:`~poet_edge.schedulers.segment_strict`), and child processes for the interval model's
refinement and the split model's cutoff proof (:mod:`~poet_edge.schedulers.proof_process`).

Work, not time. Every phase's budget is a count from the run's levels
(:mod:`~poet_edge.schedulers.effort`, ``--effort``): HiGHS's branch-and-bound nodes per solve, the
local search's perturbations and stall (replays), large-neighbourhood windows, refinement rounds. A
child's result is used only at a fixed point of the run, after waiting for it; the split proof is sent
one cutoff, at the first window where it is due, and collected at the end. So the same problem and
options give the same schedule on any load; the wall-clock ``time_limit_s`` is a safety stop, and a
run it cuts says so (``cut_by_time_limit``, ``cut_phase``). Levels run in turn on one incumbent and
bound: a larger effort repeats the smaller one's run first, so it is never worse.

Phases of the first level: the baselines (a first valid schedule), the bound model's LP relaxation
and MIP (the segment cover's bound; its plans and held plan replayed and offered), primal rounds
(solve, replay, tighten overflowing stages). Then, per level: on graphs of at most ``STAGE_PAIRS``
value-stage pairs, a short local search, the stage model from the incumbent (its dual bound, its point
decoded, with cut rounds where the decode needs repairs), the local search again. On mid-size graphs
(at most ``LNS_PAIRS``): the local search until it stalls; near windows while the interval model is
refined in a child; the interval model's bound and point (decoded, windows around its repaired gaps);
near windows again; the strict bound model when the gap stays wide; the stage model's cutoff proof
(``PROVE_PAIRS``); stage and value windows (and, with the split proof, windows from a second start);
the split proof's result; the local search. Larger graphs: the local search only.

``Schedule.info``: status (``optimal``: the gap is closed; else ``feasible``), objective, bound,
bound_from, gap ((cost - bound) / cost), effort, cut_by_time_limit, cut_phase, schedule_from, the
primal rounds' status, model sizes, search_replays; and timings (seconds, first_valid_s,
within_1pct_s), which plan.json leaves out (``compiler.DETERMINISTIC_INFO``).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers import interval_bound, proof_process, stage_model
from poet_edge.schedulers.effort import SAFETY_S, Budget, levels, sized
from poet_edge.schedulers.engine import DROP, Analysis, analyse
from poet_edge.schedulers.highs_run import TIME_LIMIT
from poet_edge.schedulers.lp_model import node_costs, solve_lp
from poet_edge.schedulers.milp import MilpOptions, ProgressCallback, pinned_check
from poet_edge.schedulers.milp_decode import stages
from poet_edge.schedulers.plan_replay import (
    FREE_TEMPS,
    NAME,
    Plan,
    decode,
    held_plan,
    replay_entries,
    replay_plan,
    segment_plan,
)
from poet_edge.schedulers.plan_search import PlanSearch, plan_modes, plan_with
from poet_edge.schedulers.segment_cover import Cover, build_cover
from poet_edge.schedulers.segment_lp import add_input_cuts, add_model_rows, bound_model, option_columns
from poet_edge.schedulers.segment_strict import split_model, strict_model
from poet_edge.simulator import SimResult, simulate

__all__ = ["NAME", "ScaleOptions", "schedule_scale"]


GAP_REL = 1e-4  # ScaleOptions.gap_rel's default


@dataclass(frozen=True)
class ScaleOptions:
    """``time_limit_s``: the run's wall-clock safety stop; ``effort``: quick | default | max, the
    levels of work (:mod:`~poet_edge.schedulers.effort`), or ``levels`` given as the policy itself;
    ``kicks``: in place of every level's local-search perturbations; ``gap_rel``: stop once
    (cost - bound) / cost is at most this; ``rounds``: primal re-solves; ``prove_gap``: the gap the
    cutoff proofs try to establish; ``paging`` / ``remat`` False (--no-paging / --no-remat): no value
    is paged out / recomputed; ``on_progress(elapsed_s, incumbent, bound, None)``: told every cheaper
    schedule and higher bound (it only observes)."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float = SAFETY_S
    threads: int | None = None
    gap_rel: float = GAP_REL
    rounds: int = 4
    kicks: int | None = None
    prove_gap: float = 0.01
    msg: bool = False
    paging: bool = True
    remat: bool = True
    effort: str = "default"
    levels: tuple[Budget, ...] | None = None
    on_progress: ProgressCallback | None = field(default=None, compare=False, repr=False)  # see _Best

    @property
    def inner_gap(self) -> float:
        """HiGHS's relative gap on the solves inside a run: a quarter of ``gap_rel``, at most a quarter
        of the default's (a wider ``gap_rel`` ends the run sooner, each solve stays as exact)."""
        return min(self.gap_rel, GAP_REL) / 4

    def with_gap(self, gap: float | None) -> ScaleOptions:
        """These options stopping at ``gap`` (--gap; None: unchanged); the cutoff proof then tries to
        prove that gap where it is the wider one."""
        return self if gap is None else replace(self, gap_rel=gap, prove_gap=max(self.prove_gap, gap))

    def budgets(self) -> tuple[Budget, ...]:
        """The levels the run does (PoetError on an unknown effort)."""
        try:
            out = self.levels if self.levels is not None else levels(self.effort)
        except ValueError as e:
            raise PoetError(str(e)) from None
        return out if self.kicks is None else tuple(replace(b, kicks=self.kicks) for b in out)


@dataclass
class _Best:
    schedule: Schedule | None = None
    cost: float = math.inf
    origin: str = ""
    first_valid_s: float | None = None
    began: float = field(default_factory=time.perf_counter)
    improvements: list[tuple[float, float]] = field(default_factory=list)  # (seconds into the run, cost)
    plans: list[tuple[float, int, Plan]] = field(default_factory=list)  # (replay cost, order, plan)
    primal: set[int] = field(default_factory=set)  # the orders of the plans the primal model gave
    phase: str = "baselines"  # the phase running (named by a cut)
    cut: str | None = None  # the phase the safety time limit cut first (None: none; the run is then
    # deterministic)
    on_progress: ProgressCallback | None = None  # told of every cheaper schedule and higher bound
    proven: tuple[float, str] | None = None  # the highest lower bound so far, and what proved it

    def offer(self, schedule: Schedule, sim: SimResult, cost: float, origin: str) -> None:
        if self.first_valid_s is None:
            self.first_valid_s = time.perf_counter() - self.began
        if cost < self.cost * (1 - 1e-12):
            self.schedule, self.cost, self.origin = schedule, cost, origin
            self.improvements.append((time.perf_counter() - self.began, cost))
            self._tell()

    def proved(self, new: tuple[float, str]) -> tuple[float, str]:
        """The highest (bound, what proved it) so far, ``new`` included (the one held on a tie)."""
        if self.proven is None or new[0] > self.proven[0]:
            self.proven = new
            self._tell()
        return self.proven

    def _tell(self) -> None:
        if self.on_progress is not None:
            cost = self.cost if math.isfinite(self.cost) else None
            bound = None if self.proven is None else self.proven[0]
            bound = bound if bound is None or cost is None else min(bound, cost)
            self.on_progress(time.perf_counter() - self.began, cost, bound, None)

    def clock(self, status: str) -> None:
        """Notes a HiGHS solve that stopped at its (safety) time limit."""
        self.late(status == TIME_LIMIT)

    def late(self, late: bool) -> bool:
        """Notes a phase the safety time limit stops (``late``); returns it."""
        if late and self.cut is None:
            self.cut = self.phase
        return late


NEAR_GAP = 0.01  # info within_1pct_s: when the schedule first came within this of the reported bound
REPAIRS = 400  # at most this many replays when repairing a held plan by one more eviction


def _offer_held(run: _Run, plan: Plan) -> None:
    """Offers a held plan (:func:`held_plan`); when it does not fit, the cheapest plan with one more
    segment evicted (DROP or PAGE) that fits (at most ``REPAIRS`` replays). A plan that fits is
    recorded as a start of the local search."""
    problem, an, cover, best = run.problem, run.an, run.cover, run.best
    costs = node_costs(problem, run.latency)
    modes = plan_modes(problem, an, cover)
    found: list[tuple[float, Plan]] = []

    def fits(x: Plan) -> bool:
        schedule, _ = replay_plan(problem, an, replay_entries(cover, x), costs, strict=True)
        if schedule is not None:
            found.append((float(dict(schedule.info)["cost"]), x))  # type: ignore[arg-type]
        return schedule is not None

    if not fits(plan):
        tries = [{**plan, k: m} for k, ms in modes.items() if k >= 0 and k not in plan for m in ms]
        for x in tries[: REPAIRS // 2]:
            if best.late(_left(best, run.options) <= 0.0):
                break
            if not fits(x):
                fits({**x, FREE_TEMPS: DROP})
    if found:
        cost, x = min(found, key=lambda f: f[0])
        best.plans.append((cost, len(best.plans), x))
        schedule, _ = replay_plan(problem, an, replay_entries(cover, x), costs)
        if schedule is not None:
            _try(problem, best, run.options, lambda: schedule, "held bound-model plan")  # type: ignore[misc]


# -- the entry point ---------------------------------------------------------------------------------------


def _metric(sim: SimResult, options: ScaleOptions) -> float:
    return sim.latency_s if options.objective == "latency" else sim.energy_j


def _admissible(problem: SchedulingProblem, sim: SimResult) -> bool:
    limit = problem.max_latency_s
    return limit is None or sim.latency_s <= limit * (1 + 1e-9)


def _try(
    problem: SchedulingProblem, best: _Best, options: ScaleOptions, make: Callable[[], Schedule], origin: str
) -> SimResult | None:
    try:
        schedule = make()
        sim = simulate(problem, schedule)
    except PoetError:
        return None
    if _admissible(problem, sim):
        best.offer(schedule, sim, _metric(sim, options), origin)
    return sim


def _baselines(problem: SchedulingProblem, best: _Best, options: ScaleOptions) -> None:
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
        _try(problem, best, options, lambda fn=fn: fn(problem), name)  # type: ignore[misc]


def _tighten(budget: np.ndarray, overflow: dict[int, int]) -> np.ndarray:
    out = budget.copy()
    for t, over in overflow.items():
        if 0 <= t < len(out) and over < 1 << 61:  # not the "cannot be followed" marker
            out[t] -= over
    return out


def _left(best: _Best, options: ScaleOptions) -> float:
    """Seconds left before the safety stop."""
    return options.time_limit_s - (time.perf_counter() - best.began)


@dataclass(frozen=True)
class _Run:
    """What the phases of one level share: the problem and its analysis, the segment cover, the
    options, the incumbent (mutable), the objective's kind and normalisation (costs in the models are
    / norm), the level's budget and index."""

    problem: SchedulingProblem
    an: Analysis
    cover: Cover
    best: _Best
    options: ScaleOptions
    latency: bool
    norm: float
    budget: Budget
    level: int = 0
    split: _Split | None = None  # the mid-size path's split model, in a child process


def _closed(cost: float, bound: float, gap: float) -> bool:
    """Whether ``cost`` is proven within ``gap`` of the lower bound: (cost - bound) / cost at most
    that, the gap ``Schedule.info`` reports (the run stops at ``ScaleOptions.gap_rel``). Never without
    a schedule (cost inf)."""
    return math.isfinite(cost) and cost - bound <= gap * cost


def _gap_abs(run: _Run, cost: float) -> float:
    """The stage model's absolute gap for HiGHS, in its scaled units: ``ScaleOptions.inner_gap`` of
    ``cost`` (HiGHS stops there; the run's own gap test is on the whole cost)."""
    return run.options.inner_gap * cost / run.norm


def schedule_scale(problem: SchedulingProblem, options: ScaleOptions | None = None) -> Schedule:
    """See the module docstring. Raises PoetError (saying why) when no schedule exists or none is found."""
    options = options or ScaleOptions()
    if options.objective not in ("energy", "latency"):
        raise PoetError(f"unknown objective '{options.objective}'; use energy or latency")
    budgets = options.budgets()
    best = _Best(on_progress=options.on_progress)
    if not problem.nodes:
        return Schedule((), NAME, (("status", "empty problem"),))
    check_budget(problem)
    restrictions = MilpOptions(paging=options.paging, remat=options.remat)
    pinned_check(problem, stages(problem, options.paging, options.remat), restrictions)  # says which values
    problem = _restricted(problem, options)
    an = analyse(problem, True)
    latency = options.objective == "latency"
    plain = sum(node_costs(problem, latency)[0])
    norm = plain if plain > 0 else 1.0
    _baselines(problem, best, options)  # a first valid schedule before anything else
    pairs = stage_model.pairs(problem, an)
    cover = build_cover(problem, an, latency)
    bound, status, evals = 0.0, "not run", 0
    for k, budget in enumerate(budgets):
        run = _Run(problem, an, cover, best, options, latency, norm, sized(budget, pairs, k), k)
        mid = STAGE_PAIRS < pairs <= LNS_PAIRS
        job = _interval_start(run) if mid else None  # on the second core while this process searches
        try:
            if k == 0:
                bound = best.proved((plain + _bound(run) * norm, "segment cover"))[0]
                best.phase = "primal rounds"
                status = _improve(run, bound)
            evals += _level(run, plain, pairs, _proven(run, bound), job)
        finally:
            if job is not None:
                job.stop()
        if _closed(best.cost, _proven(run, bound), options.gap_rel) or best.cut is not None:
            break
    if best.schedule is None:
        raise PoetError(f"scheduler '{NAME}' found no schedule within the budget ({status})")
    return _finish(best, plain, status, cover, evals, options.effort)


def _level(run: _Run, plain: float, pairs: int, bound: float, job: proof_process.Job | None) -> int:
    """One level's phases after the first's bound and primal rounds (the module docstring); returns
    the local search's replays."""
    best, options, norm, budget = run.best, run.options, run.norm, run.budget
    if _closed(best.cost, bound, options.gap_rel):
        return 0
    best.phase = "local search"
    if pairs <= STAGE_PAIRS:  # a short search first: the stage model's start
        evals = _search(run, bound, kicks=budget.kicks // 10)
        best.phase = "stage model"
        bound = best.proved((plain + _stages(run, plain) * norm, "stage model"))[0]
        best.phase = "local search"
        return evals + _search(run, bound)
    if pairs > LNS_PAIRS:
        return _search(run, bound)
    evals = _search(run, bound)
    if _closed(best.cost, bound, options.gap_rel):  # else no model to build
        return evals
    if budget.split:
        run = _split_start(run, plain)
    try:
        return evals + _mid_size(run, bound, plain, pairs, job)
    finally:
        if run.split is not None:
            run.split.job.stop()


def _mid_size(run: _Run, bound: float, plain: float, pairs: int, job: proof_process.Job | None) -> int:
    """The phases of the mid-size path after its first local search (the module docstring); returns
    the last local search's replays."""
    problem, best, options, norm, count = run.problem, run.best, run.options, run.norm, run.budget.windows
    model = stage_model.build(problem, run.an, node_costs(problem, run.latency), norm)
    windows = stage_model.windows(model, options.threads, 0.0) if model.feasible else None
    cover = bound  # the segment cover's
    near = _near_sweep()
    best.phase = "near windows"
    _lns(run, model, windows, bound, near, count)  # while the child refines the interval model
    best.phase = "interval model"
    bound = best.proved((plain + _interval(run, job, model, plain) * norm, "interval model"))[0]
    best.phase = "near windows"
    _lns(run, model, windows, bound, near, count)
    best.phase = "strict segment cover"
    bound = best.proved((plain + _strict(run, _proven(run, bound), cover) * norm, "strict segment cover"))[0]
    if pairs <= PROVE_PAIRS:
        best.phase = "stage model cutoff"
        bound = best.proved(
            (plain + _prove(run, model, _proven(run, bound), plain) * norm, "stage model cutoff")
        )[0]
    best.phase = "stage windows"
    sweeps = _sweeps()
    if run.split is not None:  # windows from a second start where they stall while the split proof is not due
        _lns(run, model, windows, bound, sweeps, count)
        if not _split_due(run, _proven(run, bound)):
            second = _second_start(run, _proven(run, bound))
            if second is not None:
                _lns(run, model, windows, bound, _sweeps(), count, start=second)
    _lns(run, model, windows, bound, sweeps, count)
    if run.split is not None:
        best.phase = "split segment cover"
        _split_collect(run)  # waits for its relaxation, and for the proof if one was sent
    best.phase = "local search"
    return _search(run, _proven(run, bound))


def _proven(run: _Run, bound: float) -> float:
    """``bound`` or, where higher, the highest bound proven so far in the run (the split proof's
    child reports its bound between windows)."""
    proven = run.best.proven
    return bound if proven is None else max(bound, proven[0])


def _second_start(run: _Run, bound: float) -> Schedule | None:
    """A second start for the windows where those from the first stall while the split proof is not
    due: the local optimum (a descent stopped after ``Budget.stall`` replays without improvement) from
    the cheapest plan of the other model than the first local search started from (primal or bound
    model); None when there is none or it does not replay. The first start is a trap on some graphs
    (bert_tiny with every parameter trained, 70%: the windows stall at 41.53% from the bound model's
    plan, reach 32.18% from the primal model's)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    ranked = sorted(best.plans, key=lambda x: (x[0], x[1]))
    if not ranked or _closed(best.cost, bound, options.gap_rel):
        return None
    other = [plan for _, k, plan in ranked if (k in best.primal) != (ranked[0][1] in best.primal)]
    if not other:
        return None
    costs = node_costs(problem, run.latency)
    search = PlanSearch(problem, an, cover, costs, plan_modes(problem, an, cover))
    improved = [0]  # replays when the descent last improved

    def better(plan: Plan) -> None:
        improved[0] = search.evals

    stall = run.budget.stall
    found = search.run(
        other[0], _deadline(best, options), better, lambda: _stalled(search.evals, improved[0], stall)
    )
    best.late(_left(best, options) <= 0.0)
    schedule, _ = replay_plan(problem, an, replay_entries(cover, found), costs)
    if schedule is not None:
        _try(problem, best, options, lambda: schedule, "local search, second start")
    return schedule


def _deadline(best: _Best, options: ScaleOptions) -> float:
    """The safety stop as a ``time.perf_counter()`` instant."""
    return best.began + options.time_limit_s


def _restricted(problem: SchedulingProblem, options: ScaleOptions) -> SchedulingProblem:
    """The problem with --no-paging / --no-remat written into its nodes (a schedule of the restricted
    problem is one of the original's)."""
    if options.paging and options.remat:
        return problem
    nodes = tuple(
        replace(n, pageable=n.pageable and options.paging, recomputable=n.recomputable and options.remat)
        for n in problem.nodes
    )
    return replace(problem, nodes=nodes)


def _full(problem: SchedulingProblem) -> np.ndarray:
    """Every stage's RAM budget (the models' budget rows before any tightening)."""
    return np.full(len(problem.nodes), problem.budget_bytes, dtype=np.int64)


def _bound(run: _Run) -> float:
    """The bound model: its LP relaxation (a bound even when the MIP's root does not end), then its MIP
    (``Budget.nodes``); its plan and held plan are offered. Returns the (scaled) bound."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    best.phase = "segment cover"
    lp = bound_model(problem, run.an, cover, run.latency, run.norm, _full(problem))
    if lp is None:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order: "
            f"values that can be neither paged out nor recomputed must stay resident"
        )
    relaxed = solve_lp(lp, _left(best, options), options, integer=False)
    best.clock(relaxed.status)
    solved = solve_lp(lp, _left(best, options), options, nodes=run.budget.nodes)
    best.clock(solved.status)
    if not solved.feasible:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order "
            f"(the segment relaxation is infeasible)"
        )
    if solved.values is not None:
        _offer_plan(run, segment_plan(run.an, cover, lp, solved.values), "bound-model plan")
        _offer_held(run, held_plan(problem, run.an, cover, lp, solved.values))
    return max(solved.bound, relaxed.bound)


STAGE_PAIRS = 2000  # the stage model runs on graphs of at most this many value-stage pairs


def _stages(run: _Run, plain: float) -> float:
    """The stage model (:mod:`~poet_edge.schedulers.stage_model`) on graphs of at most ``STAGE_PAIRS``
    value-stage pairs, started from the incumbent (``Budget.nodes``): its point decoded and offered;
    returns its (scaled) dual bound, 0 when it does not run. Cut rounds (``Budget.cut_rounds``): while
    the decode needs a repair in some gap, or does not fit there, that gap's configuration is cut off
    (:func:`stage_model.gap_cut`) and the model solved again below the incumbent; the bound returned
    is the first solve's (resnet8, every parameter trained, at 70%: one cut round finds 86.97%
    against the bound 86.26%, where the first point decodes to 98.74%)."""
    problem, an, best, options, nodes = run.problem, run.an, run.best, run.options, run.budget.nodes
    model = stage_model.build(problem, an, node_costs(problem, run.latency), run.norm)
    if not model.feasible:
        return 0.0
    start = stage_model.encode(problem, an, model, best.schedule) if best.schedule is not None else None
    # stop when the gap relative to the whole cost (plain pass + the model's objective) is closed
    gap = _gap_abs(run, best.cost if math.isfinite(best.cost) else plain)
    solved = stage_model.solve(model, _left(best, options), options.threads, gap, start, nodes=nodes)
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
        _try(problem, best, options, decoded, origin)
        if not gaps or _closed(best.cost, proven, options.gap_rel) or k == run.budget.cut_rounds:
            break
        if best.late(_left(best, options) <= 0.0):
            break
        model.rows += [stage_model.gap_cut(model, an, values, t) for t in gaps]
        cutoff = (best.cost - plain) / run.norm if math.isfinite(best.cost) else None
        solved = stage_model.solve(
            model, _left(best, options), options.threads, gap, cutoff=cutoff, nodes=nodes
        )
        best.clock(solved.status)
    return bound


def _interval_start(run: _Run) -> proof_process.Job:
    """The interval model's refinement (:mod:`~poet_edge.schedulers.interval_bound`, ``Budget.rounds``
    rounds of ``Budget.nodes`` nodes at most) started in a child process
    (:func:`proof_process.start_refine`) on the machine's second core; :func:`_interval` waits for it.
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
    return proof_process.start_refine(refine, run.options, _left(run.best, run.options))


def _interval(run: _Run, job: proof_process.Job | None, model: stage_model.StageModel, plain: float) -> float:
    """The interval model's bound from its refinement ``job`` (:func:`_interval_start`; waited for
    until its deadline), scaled; 0 when it did not run. Where the refinement ended at a point that
    overfills no stage, that point, as one of the stage ``model``'s (:func:`interval_bound.stage_point`),
    is decoded and offered: where the RAM of its restorations fits, a schedule at the bound (bert_tiny
    with every parameter trained at 1.1x its floor: 31.08%, optimal in 1.3 s; the windows had reached
    51.52%)."""
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
        _repair(run, model, point, plain + refined.bound * run.norm)
    return refined.bound


REPAIR_ROUNDS = 4  # at most this many rounds of windows around the gaps the interval point's decode repairs
REPAIR_WIDTH = 6  # a window: the gap's stage and this many on either side


def _repair(run: _Run, model: stage_model.StageModel, point: np.ndarray, bound: float) -> None:
    """Offers the stage ``model``'s ``point`` decoded (:func:`stage_model.decode`); while the decode
    needs a repair in some gap (or does not fit there), the stages around each such gap are
    re-optimized with the rest fixed (:func:`stage_model.window`, ``Budget.window_nodes``; from the
    second round on, with the configurations of the gaps the last decode could not fit cut off, in a
    copy of the model), and the new point decoded, for at most ``REPAIR_ROUNDS`` rounds and
    ``Budget.cut_rounds`` windows in all (a window's root node alone can take seconds), or until the
    incumbent is within ``gap_rel`` of ``bound`` (mobilenetv1_025 with every parameter trained at
    60%: the interval point decodes to 45.45%, after two rounds to 39.99%, optimal)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    cut = replace(model, rows=list(model.rows))
    wins: stage_model.Windows | None = None
    left = run.budget.cut_rounds  # windows
    for k in range(REPAIR_ROUNDS + 1):
        gaps: list[int] = []
        origin = f"interval model, repair round {k}" if k else "interval model"
        _try(problem, best, options, partial(stage_model.decode, problem, an, cut, point, gaps, gaps), origin)
        if not gaps or _closed(best.cost, bound, options.gap_rel) or k == REPAIR_ROUNDS:
            return
        bad = sorted(set(gaps))
        if k:
            cut.rows += [stage_model.gap_cut(cut, an, point, t) for t in bad]
        if k or wins is None:
            wins = stage_model.windows(cut, options.threads, 0.0)
        for t in bad:
            if left <= 0 or best.late(_left(best, options) <= 0.0):
                return
            left -= 1
            nodes = run.budget.window_nodes
            solved = stage_model.window(
                wins, point, t - REPAIR_WIDTH, t + REPAIR_WIDTH, _left(best, options), nodes=nodes
            )
            best.clock(solved.status)
            if solved.values is not None:
                point = solved.values


STRICT_GAP = 0.05  # the strict bound model runs when the gap is wider than this
STRICT_ABOVE = 0.05  # ... and the bound is at most this above the segment cover's (relative to it)


def _strict(run: _Run, bound: float, cover: float) -> float:
    """The strict bound model (:mod:`~poet_edge.schedulers.segment_strict`) without its gap rows
    (``Budget.nodes``), when the incumbent is still more than ``STRICT_GAP`` above ``bound`` and
    ``bound`` is not more than ``STRICT_ABOVE`` above the segment cover's (``cover``): returns its
    (scaled) MIP dual bound, 0 when it does not run."""
    best, options = run.best, run.options
    if not run.budget.strict or best.schedule is None or _closed(best.cost, bound, STRICT_GAP):
        return 0.0
    if not _closed(bound, cover, STRICT_ABOVE):  # the interval model raised it well above the segment cover
        return 0.0
    lp = strict_model(run.problem, run.an, run.cover, run.latency, run.norm, _full(run.problem), gaps=False)
    if lp is None:
        return 0.0
    solved = solve_lp(lp, _left(best, options), options, nodes=run.budget.nodes)
    best.clock(solved.status)
    return solved.bound


def _split_due(run: _Run, bound: float) -> bool:
    """Whether the incumbent is above ``bound`` by more than ``ScaleOptions.prove_gap`` and at most
    ``STRICT_GAP``: the gaps :func:`_split_proof` takes."""
    best = run.best
    wide = not _closed(best.cost, bound, run.options.prove_gap)
    return best.schedule is not None and wide and _closed(best.cost, bound, STRICT_GAP)


@dataclass
class _Split:
    """The split model's child process (:func:`_split_start`) and what became of its proof."""

    job: proof_process.Job
    plain: float  # the cost of the plain pass
    sent: float | None = None  # the cutoff it was told to prove (scaled)
    collected: bool = False  # its result taken


def _split_start(run: _Run, plain: float) -> _Run:
    """The split model (:func:`~poet_edge.schedulers.segment_strict.split_model`: the strict model with
    gap rows and the split ends its LP relaxation asks for) built, and that relaxation solved, in a
    child process (:func:`proof_process.start_split`, proofs of ``Budget.nodes`` nodes); returns
    ``run`` with that child."""
    problem, options = run.problem, run.options
    build = partial(split_model, problem, run.an, run.cover, run.latency, run.norm, _full(problem))
    job = proof_process.start_split(build, options, _left(run.best, options), run.budget.nodes)
    return replace(run, split=_Split(job, plain))


def _split_poll(run: _Run, bound: float) -> float:
    """Asked between windows: at the first window where the gap is one the split proof takes
    (:func:`_split_due`), waits for the split model's LP relaxation (a bound too) and, where it is
    within ``STRICT_GAP`` of the cutoff (1 - prove_gap) x the incumbent, sends the child that cutoff
    to prove while the windows search on (once: its result is taken at the end, :func:`_split_collect`,
    so it does not depend on when it ends). Returns ``bound``, raised by what is proven."""
    split, best = run.split, run.best
    bound = _proven(run, bound)
    if split is None or split.sent is not None or split.collected or not _split_due(run, bound):
        return bound
    relaxed = proof_process.split_relaxed(split.job, wait=True)
    if relaxed is None:
        return bound
    norm, plain = run.norm, split.plain
    bound = best.proved((plain + relaxed * norm, "split segment cover"))[0]
    cutoff = _cutoff(run, plain)
    if _split_due(run, bound) and _closed(plain + cutoff * norm, plain + relaxed * norm, STRICT_GAP):
        proof_process.send(split.job, cutoff)
        split.sent = cutoff
    return bound


def _split_collect(run: _Run) -> float:
    """The split model's relaxation bound and, once its cutoff was sent, its proof's result (each
    waited for; the safety stop kills the child); the run's highest bound."""
    split, best = run.split, run.best
    assert split is not None
    if not split.collected:
        split.collected = True
        relaxed = proof_process.split_relaxed(split.job, wait=True)
        if relaxed is not None:
            best.proved((split.plain + relaxed * run.norm, "split segment cover"))
        if split.sent is not None:
            solved = proof_process.split_proved(split.job)
            best.clock(solved.status)
            best.proved((split.plain + solved.bound * run.norm, "split segment cover"))
    assert best.proven is not None
    return best.proven[0]


PROVE_PAIRS = 5000  # the cutoff proof runs on graphs of at most this many pairs (bert_tiny's 6,568: the
# root LP of its stage model takes too long)


def _cutoff(run: _Run, plain: float, gap: float | None = None) -> float:
    """(1 - gap) x the incumbent, scaled (``gap`` by default ``ScaleOptions.prove_gap``): a bound there
    puts the gap at most that."""
    gap = run.options.prove_gap if gap is None else gap
    return ((1 - gap) * run.best.cost - plain) / run.norm + 1e-12


def _prove(run: _Run, model: stage_model.StageModel, bound: float, plain: float) -> float:
    """When the incumbent is more than ``ScaleOptions.prove_gap`` above ``bound``: is any point of the
    stage model cheaper than (1 - prove_gap) x the incumbent (HiGHS with that cutoff, ``Budget.nodes``,
    prunes far more than when it proves optimality from the incumbent)? When it finds none, the cutoff
    is a lower bound. A cheaper point found is decoded and offered. Where the gap is already within
    prove_gap but not closed, the cutoff is (1 - gap_rel) x the incumbent. Returns the (scaled) bound,
    0 when it does not run."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    if best.schedule is None or not model.feasible or _closed(best.cost, bound, options.gap_rel):
        return 0.0
    within = _closed(best.cost, bound, options.prove_gap)  # then any cheaper point
    cutoff = _cutoff(run, plain, options.gap_rel if within else None)
    gap = _gap_abs(run, best.cost)
    nodes = run.budget.nodes
    solved = stage_model.solve(model, _left(best, options), options.threads, gap, cutoff=cutoff, nodes=nodes)
    best.clock(solved.status)
    if solved.values is not None:
        values = solved.values
        _try(problem, best, options, lambda: stage_model.decode(problem, an, model, values), "stage cutoff")
    return solved.bound


LNS_PAIRS = 25000  # larger graphs: the local search only
STALL_FIRST = 4  # a local search's stall before its first improvement: this many times Budget.stall
LNS_WIDTH, LNS_STEP = 20, 10  # stage windows: stages, step between windows
LNS_VALUES, LNS_VALUE_STEP = 3, 2  # value windows: values (+1), step between windows
LNS_VALUE_SHARE = 0.5  # share of the windows' HiGHS work the value windows get
NEAR_VALUES, NEAR_STEP, NEAR_STAGES = 6, 3, 16  # near windows: values (+1), step, restorations' lead


@dataclass
class _Sweep:
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


def _sweeps() -> list[_Sweep]:
    """The windows of the LNS after the cutoff proof: stages, and values at every stage (value windows
    first on a tie)."""
    return [
        _Sweep(False, LNS_WIDTH, LNS_STEP, 1 - LNS_VALUE_SHARE),
        _Sweep(True, LNS_VALUES, LNS_VALUE_STEP, LNS_VALUE_SHARE),
    ]


def _near_sweep() -> list[_Sweep]:
    """The near windows: ``NEAR_VALUES`` values at every stage, their restorations at most
    ``NEAR_STAGES`` stages before a consumer (:func:`stage_model.window`), while they improve. They
    change where early activations are held through the forward pass, which a stage window cannot
    (mobilenetv1_025 at 1.1x the floor: 19.96% -> 18.57%)."""
    return [_Sweep(True, NEAR_VALUES, NEAR_STEP, 1.0, NEAR_STAGES, widen=False)]


def _lns(
    run: _Run,
    model: stage_model.StageModel,
    windows: stage_model.Windows | None,
    bound: float,
    sweeps: list[_Sweep],
    count: int,
    start: Schedule | None = None,
    stall: int | None = None,
) -> None:
    """Large-neighbourhood search with the stage model: the incumbent as a point of the model, every
    column outside a window fixed, the window re-optimized by HiGHS (``Budget.window_nodes``); a
    cheaper solution is decoded, checked by the simulator and becomes the incumbent. At most ``count``
    windows. The kinds (``sweeps``) share HiGHS's work: the next window is of the kind furthest below
    its share. Each kind sweeps its range; after a whole sweep without improvement its windows and
    steps double (once they span everything, or unless ``widen``, that kind stops). Between windows
    the split model's child may be sent its cutoff (:func:`_split_poll`). ``windows``: the model's
    arrays, None when the model is infeasible. ``start``: start from this schedule instead of the
    incumbent, keeping an own incumbent (a cheaper schedule than the run's becomes that too).
    ``stall``: stop after this many windows without improving the own incumbent (default: the level's
    ``window_stall``; before, only the second start's windows stopped so, and bert_tiny bias at 80KB
    with --effort quick ran 144 windows, 52 of its 97 s, for no gain)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    if best.schedule is None:
        return
    own = best.cost if start is None else _metric(simulate(problem, start), options)  # its incumbent's
    x = stage_model.encode(problem, an, model, start or best.schedule)
    if windows is None or x is None:
        return
    h = replace(windows, gap_abs=_gap_abs(run, own))  # the model's arrays, built once per level
    n = len(problem.nodes)
    stall = run.budget.window_stall if stall is None else stall
    since = 0  # windows since the own incumbent improved
    for _ in range(count):
        if not sweeps or since >= stall:
            return
        bound = _split_poll(run, bound)
        if _closed(best.cost, bound, options.gap_rel) or best.late(_left(best, options) <= 0.0):
            return
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
            _left(best, options),
            by_value=sw.by_value,
            near=sw.near,
            nodes=run.budget.window_nodes,
        )
        sw.spent += max(1, solved.work)
        best.clock(solved.status)
        sw.first = sw.first + sw.step if sw.first + sw.step < n else 0
        sw.stale += sw.step
        since += 1
        if solved.values is None:
            continue
        try:
            found = _window_schedule(run, model, solved, own)
        except PoetError:  # a repair hides more than the point gains
            continue
        origin = "stage LNS" if start is None else "stage LNS, second start"
        # the run's incumbent too when it is cheaper than that
        sim = _try(problem, best, options, lambda found=found: found, origin)  # type: ignore[misc]
        if sim is None or not _admissible(problem, sim) or _metric(sim, options) >= own * (1 - 1e-12):
            continue
        y = stage_model.encode(problem, an, model, found)
        if y is not None:
            x, own, since = y, _metric(sim, options), 0
            for other in sweeps:
                other.stale = 0


def _window_schedule(
    run: _Run, model: stage_model.StageModel, solved: stage_model.Result, own: float
) -> Schedule:
    """A window's point decoded. Where a gap fits in no order the decode repairs it
    (:mod:`~poet_edge.schedulers.gap_repair`), and the schedule costs more than the point; it is taken
    only when it beats the windows' incumbent (cost ``own``) by at least that much more (else
    PoetError). The windows search below the model's cost of the incumbent, so an incumbent that costs
    more than its point hides the schedules between the two: bert_tiny at 50%, 30 s, every repair
    taken, a point at 27.00% (in the model) became the incumbent at 29.63% and the windows stopped
    there (29.24%, gap 1.00%, without repairs); with this rule 29.35%, gap 0.66%, and at 1.1x the
    floor 130.69% (136.65% without repairs, 130.58-130.69% with every repair taken)."""
    problem = run.problem
    assert solved.values is not None and solved.objective is not None
    gaps: list[int] = []
    schedule = stage_model.decode(problem, run.an, model, solved.values, gaps)
    if gaps:
        cost = _metric(simulate(problem, schedule), run.options)
        extra = cost - (sum(node_costs(problem, run.latency)[0]) + solved.objective * run.norm)
        if cost + extra > own:
            raise PoetError(f"the repair of gaps {gaps} hides {extra / run.norm:.2%} of the plain pass")
    return schedule


def _offer_plan(run: _Run, segplan: Plan, origin: str, primal: bool = False) -> dict[int, int]:
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
            cost = float(dict(schedule.info)["cost"])  # type: ignore[arg-type]
            if primal:
                best.primal.add(len(best.plans))
            best.plans.append((cost, len(best.plans), variant))
            _try(problem, best, options, lambda schedule=schedule: schedule, origin)  # type: ignore[misc]
        else:
            _try(problem, best, options, lambda plan=plan: decode(problem, plan)[0], origin + " (engine)")  # type: ignore[misc]
        overflows.append(overflow)
    return min(overflows, key=lambda o: sum(o.values()))


def _improve(run: _Run, bound: float) -> str:
    """Primal rounds on both models (``Budget.nodes`` each): solve, replay, tighten the budget rows of
    overflowing stages."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    status = "not run"
    for name, opts, rounds in (
        ("primal", cover.primal_opts, options.rounds),
        ("bound-model", cover.bound_opts, 3 * options.rounds),
    ):
        budget = _full(problem)
        for k in range(rounds):
            if _closed(best.cost, bound, options.gap_rel) or best.late(_left(best, options) <= 0.0):
                break
            lp = option_columns(problem, opts, run.latency, run.norm)
            if opts is cover.bound_opts:
                add_input_cuts(problem, run.an, cover, lp, run.latency, run.norm)
            if not add_model_rows(problem, cover, lp, budget):
                status = f"{name} round {k}: a tightened stage cannot fit"
                break
            solved = solve_lp(lp, _left(best, options), options, nodes=run.budget.nodes)
            best.clock(solved.status)
            if name == "primal":
                status = f"primal round {k}: {solved.status}"
            if solved.values is None:
                break
            segplan = segment_plan(run.an, cover, lp, solved.values)
            overflow = _offer_plan(run, segplan, f"{name} plan, round {k}", name == "primal")
            if not overflow:
                break
            budget = _tighten(budget, overflow)
    return status


def _search(run: _Run, bound: float, kicks: int | None = None) -> int:
    """Local search (:class:`PlanSearch`) from the three cheapest recorded plans (or from no eviction at
    all), then iterated: perturb 1-3 random segments of the best plan (seeded by the level) and
    descend again, at most ``kicks`` (else ``Budget.kicks``) times, while the gap is open, until the
    incumbent has not improved for ``Budget.stall`` replays (``STALL_FIRST`` x as many before its
    first improvement; checked within a descent too); returns the number of replays."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = node_costs(problem, run.latency)
    search = PlanSearch(problem, an, cover, costs, plan_modes(problem, an, cover))
    starts = [plan for _, _, plan in sorted(best.plans, key=lambda x: (x[0], x[1]))] or [{}]
    done: set[tuple[tuple[int, str], ...]] = set()
    deadline = _deadline(best, options)
    improved = 0  # replays of this search when it last improved the incumbent

    def offer(plan: Plan) -> None:
        nonlocal improved
        schedule, _ = replay_plan(problem, an, replay_entries(cover, plan), costs)
        if schedule is not None:
            before = best.cost
            _try(problem, best, options, lambda: schedule, "local search")
            if best.cost < before:
                improved = search.evals

    def stalled() -> bool:
        return _stalled(search.evals, improved, run.budget.stall)

    def more() -> bool:
        if stalled() or _closed(best.cost, bound, options.gap_rel):
            return False
        return not best.late(time.perf_counter() >= deadline)

    def descend(plan: Plan) -> Plan:
        found = search.run(plan, deadline, offer, stalled)
        best.late(time.perf_counter() >= deadline)
        return found

    incumbent: Plan | None = None
    for plan in starts[:3]:
        key = tuple(sorted(plan.items()))
        if key in done or not more():
            continue
        done.add(key)
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
    return search.evals


def _stalled(evals: int, improved: int, stall: int) -> bool:
    """Whether a local search with ``evals`` replays, the last improvement at ``improved`` (0: none
    yet), has stalled: ``stall`` replays since that improvement, ``STALL_FIRST`` x as many before the
    first."""
    return evals - improved > (stall if improved else STALL_FIRST * stall)


def _finish(best: _Best, plain: float, status: str, cover: Cover, evals: int, effort: str) -> Schedule:
    assert best.schedule is not None
    bound, bound_from = best.proved((plain, "plain pass"))
    if bound > best.cost:  # only within the solver's tolerances (the bound is a relaxation)
        bound = best.cost if bound <= best.cost * (1 + 1e-7) else bound
    gap = max(0.0, best.cost - bound) / max(abs(best.cost), 1e-300)
    info = (
        ("status", "optimal" if gap <= 1e-9 else "feasible"),
        ("objective", best.cost),
        ("bound", bound),
        ("bound_from", bound_from),
        ("gap", gap),
        ("effort", effort),
        ("cut_by_time_limit", best.cut is not None),
        ("cut_phase", best.cut),
        ("seconds", round(time.perf_counter() - best.began, 3)),
        ("first_valid_s", best.first_valid_s),
        ("within_1pct_s", next((t for t, c in best.improvements if _closed(c, bound, NEAR_GAP)), None)),
        ("schedule_from", best.origin),
        ("primal", status),
        ("segments", len(cover.segs)),
        ("options", (len(cover.bound_opts), len(cover.primal_opts))),
        ("search_replays", evals),
    )
    return Schedule(tuple(best.schedule.steps), NAME, info)
