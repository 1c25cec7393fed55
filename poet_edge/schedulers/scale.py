"""Scheduler "scale": a compact segment-cover model that gives a proven lower bound in seconds and
schedules near it, for training graphs of a thousand nodes.

The pieces: the segment cover and its options (:mod:`poet_edge.schedulers.segment_cover`), its bound
and primal models for HiGHS (:mod:`poet_edge.schedulers.segment_lp`), plans and their exact replay
(:mod:`poet_edge.schedulers.plan_replay`), the local search over plans
(:mod:`poet_edge.schedulers.plan_search`), POET's stage model without its RAM between stages
(:mod:`poet_edge.schedulers.stage_model`), that model coarsened to a few bottleneck stages
(:mod:`poet_edge.schedulers.interval_bound`), and child processes for that model's refinement and the
split model's cutoff proof (:mod:`poet_edge.schedulers.proof_process`). This module runs them in turn
on one incumbent.

Bound. Reported lower bound = plain pass (every node once) + the larger of the bound model's
LP-relaxation optimum (solved first, so a bound exists even when the MIP root does not finish in
time), HiGHS's MIP dual bound on it and, where they run, the stage model's dual bound (or the cutoff
it proved) and the strict bound model's. It bounds the least cost of the schedules in which node t
is first computed in stage t (the problem's order), hence also POET's MILP.

Primal rounds. The primal model is solved and its plan replayed; when the replay overflows the budget
(transient RAM) the budget rows of those stages are tightened by the overflow and the model is solved
again (a few rounds; the same rounds run on the bound model's options, whose plans are replayed the
same way). Plans that do not fit are also handed to the baseline engine, which repairs overflows by
the DTR rule. The bound model's first solution is also replayed as a held plan; when that does not
fit, the cheapest plan with one more eviction that fits is taken (:func:`_offer_held`).

Stage model. On graphs of at most ``STAGE_PAIRS`` value-stage pairs (the zoo's small models), the
stage model (which values are in RAM at each first computation, what is recomputed or paged in
between) runs after a first, short local search (``ScaleOptions.kicks`` / 10 perturbations, until
``SEARCH_FIRST`` of the time limit), started from the incumbent (a MIP start: it proves optimality
much sooner), for at most ``STAGE_SHARE`` of the time left: its dual bound is a lower bound too (the
larger one is reported) and its solution, decoded as a schedule, is offered (the simulator decides
whether the RAM between stages fits). Where the decode needs a repair, or does not fit, cut rounds
follow within the same time (:func:`_stages`: that gap's configuration cut off, the model solved
again below the incumbent; the bound stays the model's without cuts). The local search then goes on
while the gap is open. On
mid-size graphs (at most ``LNS_PAIRS`` pairs) the local search stops at ``LNS_AFTER`` of the time
limit, once it has not improved the incumbent for ``LNS_STALL`` replays (a count: where it
stops does not depend on the machine's speed), or once the interval model's child is done (its point
is often far cheaper). Then the interval model
(:func:`_interval`, :mod:`poet_edge.schedulers.interval_bound`) is refined in a child process, on the
second core, until ``INTERVAL_UNTIL`` of the time limit at most, while near windows (then stage and
value windows) search here: its bound is a lower bound too, and where its point overfills
no stage that point, as one of the stage model's, is decoded and offered, the windows around the gaps
whose restorations do not fit re-optimized (:func:`_repair`). Then near windows, where they stopped
(:func:`_near_sweep`: a few values over their whole lives, re-optimized by HiGHS with restorations
only shortly before a use; until ``NEAR_UNTIL`` of the time limit at most) move early activations
held through the forward pass. Then, while the gap is wider than ``STRICT_GAP`` and at least
``STRICT_LEFT`` seconds are left, the strict bound model (:func:`_strict`,
:mod:`poet_edge.schedulers.segment_strict`) for ``STRICT_SHARE`` of the time left: its dual bound is
a lower bound too. Then, on graphs of at most ``PROVE_PAIRS`` pairs whose
gap is still open, the cutoff proof (:func:`_prove`): HiGHS on the stage model, told to look only for
points cheaper than (1 - prove_gap) x the incumbent (any cheaper point, where the gap is within
prove_gap already); when there is none, that is a lower bound (the incumbent is proven within
prove_gap). Then a large-neighbourhood
search with the stage model takes over (:func:`_lns`: windows of stages, and windows of a few values
over their whole lives, re-optimized by HiGHS around the incumbent, every other column fixed; the two
kinds take turns by time spent, each wider after a sweep without improvement; a point whose decode
needed a repair is taken only when it gains more than the repair hides: :func:`_window_schedule`). On
time limits of at least ``SPLIT_FROM`` seconds, a second child process builds the strict model with gap rows
(from the start of the run on graphs too large for the stage model's cutoff proof, else after the segment
cover's bound; :func:`_split_start`, :mod:`poet_edge.schedulers.segment_gap`) and solves its LP relaxation;
while the gap is narrow, the windows send it the cutoff (1 - prove_gap) x the incumbent to prove (on the
strict model first, then, where that has a point below it, on the split model: split ends where the relaxation
asks), a new one whenever the incumbent has improved by more than ``SPLIT_AGAIN``, and search on while it
proves (:func:`_split_poll`); its bounds are lower bounds too. While the split proof is not due (the gap wider
than ``STRICT_GAP``, or already within ``prove_gap``), once the windows stall (``SECOND_STALL``) they run from
a second start, the local optimum from the other model's plan (:func:`_second_start`), until those stall too,
then on from the run's incumbent. If the windows stall at full width, the local search gets the time left.
The incumbent is kept across the phases (a later phase only replaces it by a cheaper schedule).

Local search (:func:`_search`). From the cheapest replayed plans: descents of
:class:`~poet_edge.schedulers.plan_search._Search`; then iterated: perturb 1-3 random entries of the
best plan (fixed seed) and descend again, at most ``ScaleOptions.kicks`` times, until the gap closes
or the time limit (less a 5% margin) is reached.

The simulator measures every candidate; the cheapest of the plans and the baselines is returned, so
the result is never worse than the best baseline. The output is deterministic when no time limit
cut anything short and no measured time steered the search: the gap closed, or the kicks ran out, before
any phase's share of the time limit (``SEARCH_FIRST``, ``LNS_AFTER``; the local search's stall is a count
of replays), within every HiGHS solve's limit, and with at most one kind of LNS window (the kinds share
the time by measured seconds); the status says which (``_Best.timed``).

``Schedule.info``: status (``optimal``: the gap is closed; ``feasible, time-dependent``: a time limit
cut a phase or a HiGHS solve short, or measured seconds chose the next LNS window, so another run, on
this machine or a faster one, may return another schedule; ``feasible`` otherwise: the same schedule
every run), objective, bound,
bound_from (what proved it: segment cover, stage model, stage model cutoff, interval model, strict
segment cover, split segment cover, plain pass), gap ((cost - bound) / cost), seconds, first_valid_s
(time to the first valid schedule), within_1pct_s (time to the first schedule within 1% of the
reported bound, which may have been proven later; None when the gap stays wider), the schedule's
origin and model sizes.
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
from poet_edge.schedulers.engine import DROP, Analysis, analyse
from poet_edge.schedulers.highs_run import TIME_LIMIT
from poet_edge.schedulers.milp import MilpOptions, ProgressCallback, pinned_check
from poet_edge.schedulers.milp_decode import stages
from poet_edge.schedulers.plan_replay import (
    FREE_TEMPS,
    NAME,
    Plan,
    _as_plan,
    _held_plan,
    _seg_plan,
    decode,
    replay_plan,
)
from poet_edge.schedulers.plan_search import _modes, _Search, _with
from poet_edge.schedulers.segment_cover import Cover, build_cover
from poet_edge.schedulers.segment_lp import _columns, _costs, _input_cuts, _rows, _solve, bound_model
from poet_edge.schedulers.segment_strict import split_model, strict_model
from poet_edge.simulator import SimResult, simulate

__all__ = ["NAME", "ScaleOptions", "schedule_scale"]


GAP_REL = 1e-4  # ScaleOptions.gap_rel's default


@dataclass(frozen=True)
class ScaleOptions:
    """``time_limit_s``: wall-clock limit of the whole run; ``gap_rel``: stop once (cost - bound) / cost
    is at most this (``Schedule.info``'s gap, :func:`_closed`); ``rounds``: at most this many primal
    re-solves; ``kicks``: at most this many perturb-and-descend rounds of the local search (fixed
    seed); ``prove_gap``: on mid-size graphs, the gap the cutoff proof (:func:`_prove`) tries to
    establish; ``paging`` / ``remat`` False (--no-paging / --no-remat): no value is paged out /
    recomputed, as in the MILP (every node of the problem is made unpageable / computed once, so every
    phase and the bound obey it); ``on_progress(elapsed_s, incumbent, bound, None)``: called at every
    cheaper schedule and every higher lower bound (None until known), as the MILP's (it only
    observes)."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float = 30.0
    threads: int | None = None
    gap_rel: float = GAP_REL
    rounds: int = 4
    kicks: int = 300  # iterated local search: at most this many perturbations of the best plan
    prove_gap: float = 0.01  # mid-size graphs: try to prove the incumbent within this of the optimum
    msg: bool = False
    paging: bool = True
    remat: bool = True
    on_progress: ProgressCallback | None = field(default=None, compare=False, repr=False)  # see _Best

    @property
    def inner_gap(self) -> float:
        """HiGHS's relative gap on the solves inside a run: a quarter of ``gap_rel``, at most a quarter
        of the default's. A wider ``gap_rel`` ends the run sooner, but each solve stays as exact:
        windows solved to a 0.25% gap find less, and a proof against a dearer incumbent takes longer
        (mobilenetv1_025 at 1.1x the floor with 1%: 3.05% after 30 s where 1.00% was proven)."""
        return min(self.gap_rel, GAP_REL) / 4

    def with_gap(self, gap: float | None) -> ScaleOptions:
        """These options stopping at ``gap`` (--gap; None: unchanged); the cutoff proof then tries to
        prove that gap where it is the wider one."""
        return self if gap is None else replace(self, gap_rel=gap, prove_gap=max(self.prove_gap, gap))


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
    timed: bool = False  # a time limit, or a measured time, decided something: another run may differ
    on_progress: ProgressCallback | None = None  # told of every cheaper schedule and higher bound
    proven: tuple[float, str] | None = None  # the highest lower bound so far, and what proved it

    @property
    def improved_at(self) -> float:
        """Seconds into the run of the last improvement (0 before any)."""
        return self.improvements[-1][0] if self.improvements else 0.0

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
        """Notes a HiGHS solve that stopped at its time limit."""
        self.timed = self.timed or status == TIME_LIMIT

    def late(self, late: bool) -> bool:
        """Notes a phase that stops (or does not start) because its time is up (``late``); returns it."""
        self.timed = self.timed or late
        return late


TIMED = "feasible, time-dependent"  # the status when a time decided something (``_Best.timed``)
MARGIN = 0.05  # of the time limit: phases stop this early (HiGHS and the replays may overshoot)
NEAR_GAP = 0.01  # info within_1pct_s: when the schedule first came within this of the reported bound


REPAIRS = 400  # at most this many replays when repairing a held plan by one more eviction


def _offer_held(run: _Run, plan: Plan) -> None:
    """Offers a held plan (:func:`_held_plan`); when it does not fit, the cheapest plan with one more
    segment evicted (DROP or PAGE) that fits (at most ``REPAIRS`` replays). A plan that fits is
    recorded as a start of the local search."""
    problem, an, cover, best = run.problem, run.an, run.cover, run.best
    costs = _costs(problem, run.latency)
    modes = _modes(problem, an, cover)
    found: list[tuple[float, Plan]] = []

    def fits(x: Plan) -> bool:
        schedule, _ = replay_plan(problem, an, _as_plan(cover, x), costs, strict=True)
        if schedule is not None:
            found.append((float(dict(schedule.info)["cost"]), x))  # type: ignore[arg-type]
        return schedule is not None

    if not fits(plan):
        tries = [{**plan, k: m} for k, ms in modes.items() if k >= 0 and k not in plan for m in ms]
        for x in tries[: REPAIRS // 2]:
            if best.late(_left(best, run.options) < 0.1 * run.options.time_limit_s):
                break
            if not fits(x):
                fits({**x, FREE_TEMPS: DROP})
    if found:
        cost, x = min(found, key=lambda f: f[0])
        best.plans.append((cost, len(best.plans), x))
        schedule, _ = replay_plan(problem, an, _as_plan(cover, x), costs)
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
    return options.time_limit_s - (time.perf_counter() - best.began)


@dataclass(frozen=True)
class _Run:
    """What the phases of one run share: the problem and its analysis, the segment cover, the options,
    the incumbent (mutable), and the objective's kind and normalisation (costs in the models are / norm)."""

    problem: SchedulingProblem
    an: Analysis
    cover: Cover
    best: _Best
    options: ScaleOptions
    latency: bool
    norm: float
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
    best = _Best(on_progress=options.on_progress)
    if not problem.nodes:
        return Schedule((), NAME, (("status", "empty problem"),))
    check_budget(problem)
    restrictions = MilpOptions(paging=options.paging, remat=options.remat)
    pinned_check(problem, stages(problem, options.paging, options.remat), restrictions)  # says which values
    problem = _restricted(problem, options)
    an = analyse(problem, True)
    latency = options.objective == "latency"
    plain = sum(_costs(problem, latency)[0])
    norm = plain if plain > 0 else 1.0
    _baselines(problem, best, options)  # a first valid schedule before anything else
    pairs = stage_model.pairs(problem, an)
    run = _Run(problem, an, build_cover(problem, an, latency), best, options, latency, norm)
    job = None  # the mid-size path's interval model, on the second core from here on
    if STAGE_PAIRS < pairs <= LNS_PAIRS:
        job = _interval_start(problem, an, latency, norm, options)
    try:
        return _phases(run, plain, pairs, job)
    finally:
        if job is not None:
            job.stop()


def _phases(run: _Run, plain: float, pairs: int, job: proof_process.Job | None) -> Schedule:
    """The phases of the run (the module docstring), ``plain`` the cost of the plain pass, ``pairs``
    the stage model's value-stage pairs; ``job``: the interval model's refinement, started on the
    mid-size path."""
    problem, best, options, cover = run.problem, run.best, run.options, run.cover
    norm = run.norm
    budget = np.full(len(problem.nodes), problem.budget_bytes, dtype=np.int64)
    mid = STAGE_PAIRS < pairs <= LNS_PAIRS
    split = mid and options.time_limit_s >= SPLIT_FROM  # the split model's child runs (_split_start)
    try:
        if split and pairs > PROVE_PAIRS:
            run = _split_start(run, budget, plain)
        bound = best.proved((plain + _bound(run, budget) * norm, "segment cover"))[0]
        if split and run.split is None and not _closed(best.cost, bound, options.gap_rel):
            run = _split_start(run, budget, plain)
        primal_status = _improve(run, bound)
        evals = 0
        if pairs <= STAGE_PAIRS:  # a short search first: the stage model's start
            evals = _search(run, bound, SEARCH_FIRST * options.time_limit_s, options.kicks // 10)
            bound = best.proved((plain + _stages(run, plain) * norm, "stage model"))[0]
            evals += _search(run, bound)
        elif mid:
            until = LNS_AFTER * options.time_limit_s  # or once the interval model's child is done
            evals = _search(run, bound, until, stall=LNS_STALL, stop=None if job is None else job.done)
            if not _closed(best.cost, bound, options.gap_rel):  # else no model to build
                evals += _mid_size(run, budget, bound, plain, pairs, job)
        else:
            evals = _search(run, bound)
    finally:
        if run.split is not None:
            run.split.job.stop()
    if best.schedule is None:
        raise PoetError(f"scheduler '{NAME}' found no schedule within the budget ({primal_status})")
    return _finish(best, plain, primal_status, cover, evals)


def _mid_size(
    run: _Run, budget: np.ndarray, bound: float, plain: float, pairs: int, job: proof_process.Job | None
) -> int:
    """The phases of the mid-size path after its first local search (the module docstring): the
    interval model, near windows, the strict bound model, the cutoff proof, the windows with the split
    proof, the local search; returns the local search's replays."""
    problem, best, options, norm = run.problem, run.best, run.options, run.norm
    model = stage_model.build(problem, run.an, _costs(problem, run.latency), norm)
    windows = stage_model.windows(model, options.threads, 0.0) if model.feasible else None
    cover = bound  # the segment cover's
    near = _near_sweep()
    if job is not None:  # the windows search while the child refines the interval model
        _lns(run, model, windows, bound, near, NEAR_UNTIL * options.time_limit_s, stop=job.done)
        if not job.done():
            _lns(run, model, windows, bound, _sweeps(), _until(best, job.deadline), stop=job.done)
    interval = plain + _interval(run, job, model, plain) * norm
    bound = best.proved((interval, "interval model"))[0]
    _lns(run, model, windows, bound, near, NEAR_UNTIL * options.time_limit_s)
    strict = plain + _strict(run, budget, _proven(run, bound), cover) * norm
    bound = best.proved((strict, "strict segment cover"))[0]
    if pairs <= PROVE_PAIRS:
        proved = plain + _prove(run, model, _proven(run, bound), plain) * norm
        bound = best.proved((proved, "stage model cutoff"))[0]
    sweeps = _sweeps()
    if run.split is not None:  # windows from a second start where they stall while the split proof is not due
        stall = SECOND_STALL * options.time_limit_s
        _lns(run, model, windows, bound, sweeps, stall=stall)
        if not _split_due(run, _proven(run, bound)):
            second = _second_start(run, _proven(run, bound))
            if second is not None:
                _lns(run, model, windows, bound, _sweeps(), start=second, stall=stall)
    _lns(run, model, windows, bound, sweeps)
    if run.split is not None:
        _split_collect(run)  # waits for the proof, if one was sent
    return _search(run, _proven(run, bound))  # the rest of the time, if the windows stall at full width


def _proven(run: _Run, bound: float) -> float:
    """``bound`` or, where higher, the highest bound proven so far in the run (the split proof's
    child reports its bound between windows)."""
    proven = run.best.proven
    return bound if proven is None else max(bound, proven[0])


SECOND_STALL = 0.1  # share of the time limit: the windows hand over to the second start (and it back)
# once their incumbent has not improved for this long, while the split proof is not due
SECOND_SEARCH = 0.1  # share of the time limit the second start's local search may take at most


def _second_start(run: _Run, bound: float) -> Schedule | None:
    """A second start for the windows where those from the first stall while the split proof is not
    due (:func:`_split_due`: the gap wider than ``STRICT_GAP``, or already within ``prove_gap``): the local
    optimum (a descent of the local search, stopped as the first is by ``LNS_STALL``) from the
    cheapest plan of the other model than the first local search started from (primal or bound
    model); None when there is none or it does not replay. The first start is a trap on some graphs:
    bert_tiny with every parameter trained, 70%, 30 s: the bound model's plan (87.43%) descends to
    63.27% and the windows stall at 41.53% from 8.6 s (37.71% at the end); from the primal model's
    plan (160.64%, 59.89% after its descent) one stage window reaches 32.18%, and the run ends at
    29.65% (gap 9.15% -> 3.50%). Bias-trained bert_tiny at 70%: the windows stall with the gap at
    0.76%, and the second start's give the run's schedule, 16.51% (gap 0.67% -> 0.43%)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    ranked = sorted(best.plans, key=lambda x: (x[0], x[1]))
    if not ranked or _closed(best.cost, bound, options.gap_rel):
        return None
    other = [plan for _, k, plan in ranked if (k in best.primal) != (ranked[0][1] in best.primal)]
    if not other:
        return None
    costs = _costs(problem, run.latency)
    search = _Search(problem, an, cover, costs, _modes(problem, an, cover))
    left = _left(best, options) - MARGIN * options.time_limit_s
    deadline = time.perf_counter() + min(left, SECOND_SEARCH * options.time_limit_s)
    improved = [0]  # replays when the descent last improved

    def better(plan: Plan) -> None:
        improved[0] = search.evals

    found = search.run(other[0], deadline, better, lambda: _stalled(search.evals, improved[0], LNS_STALL))
    schedule, _ = replay_plan(problem, an, _as_plan(cover, found), costs)
    if schedule is not None:
        _try(problem, best, options, lambda: schedule, "local search, second start")
    return schedule


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


def _bound(run: _Run, budget: np.ndarray) -> float:
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    lp = bound_model(problem, run.an, cover, run.latency, run.norm, budget)
    if lp is None:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order: "
            f"values that can be neither paged out nor recomputed must stay resident"
        )
    # the LP relaxation first: its optimum is a bound even when the MIP's root is not done in time
    relaxed = _solve(lp, max(0.5, 0.25 * _left(best, options)), options, integer=False)
    solved = _solve(lp, max(0.5, 0.3 * _left(best, options)), options)
    best.clock(relaxed.status)
    best.clock(solved.status)
    if not solved.feasible:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order "
            f"(the segment relaxation is infeasible)"
        )
    if solved.values is not None:
        _offer_plan(run, _seg_plan(run.an, cover, lp, solved.values), "bound-model plan")
        _offer_held(run, _held_plan(problem, run.an, cover, lp, solved.values))
    return max(solved.bound, relaxed.bound)


STAGE_PAIRS = 2000  # the stage model runs on graphs of at most this many value-stage pairs (was 3,000;
# 30 s, 2 threads: resnet8, every parameter trained, 819 pairs, at 70%: 86.97%, gap 0.38% here, 87.31%, gap
# 1.00% on the mid-size path; mobilenetv1_025, every parameter trained, 2,834 pairs, at 70% / 60% / 1.1x the
# floor: gap 1.14% / 7.51% / 4.41% here, 0.55% / 7.31% / 2.60% on the mid-size path, where the
# stage model's cutoff proof finds the cheaper points)
STAGE_SHARE = 0.85  # of the time left (the local search after it gets the rest)
SEARCH_FIRST = 0.3  # with the stage model, the local search runs first until this share of the time limit
CUT_ROUNDS = 20  # at most this many re-solves of the stage model with no-good cuts (:func:`_stages`)


def _stages(run: _Run, plain: float) -> float:
    """The stage model (:mod:`poet_edge.schedulers.stage_model`) on graphs of at most ``STAGE_PAIRS``
    value-stage pairs, started from the incumbent: its solution decoded and offered as a schedule;
    returns its (scaled) dual bound, 0 when it does not run. Cut rounds: while the decode of the
    model's point needs a repair in some gap, or does not fit there, that gap's configuration is cut
    off (:func:`stage_model.gap_cut`) and the model solved again for a point cheaper than the
    incumbent, at most ``CUT_ROUNDS`` times within the same share of the time. The bound returned
    is the first solve's, of the model without cuts (resnet8, every parameter trained, at 70% of its
    peak: its point decodes to 98.74% with a repaired gap; one cut round, 4.9 s, finds 86.97%
    against the bound 86.26%, a point POET's MILP needs 83 s for)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    model = stage_model.build(problem, an, _costs(problem, run.latency), run.norm)
    if not model.feasible:
        return 0.0
    start = stage_model.encode(problem, an, model, best.schedule) if best.schedule is not None else None
    # stop when the gap relative to the whole cost (plain pass + the model's objective) is closed
    gap = _gap_abs(run, best.cost if math.isfinite(best.cost) else plain)
    until = time.perf_counter() + STAGE_SHARE * _left(best, options)
    solved = stage_model.solve(model, until - time.perf_counter(), options.threads, gap, start)
    best.clock(solved.status)
    bound = solved.bound
    proven = best.proved((plain + bound * run.norm, "stage model"))[0]  # the cut rounds do not change it
    for k in range(CUT_ROUNDS + 1):
        values = solved.values
        if values is None:
            break
        gaps: list[int] = []  # in stage order: the gaps decode repaired, and those it could not fit
        origin = f"stage model, cut round {k}" if k else "stage model"
        decoded = partial(stage_model.decode, problem, an, model, values, gaps, gaps)
        _try(problem, best, options, decoded, origin)
        if not gaps or _closed(best.cost, proven, options.gap_rel) or k == CUT_ROUNDS:
            break
        if best.late(until - time.perf_counter() < MARGIN * options.time_limit_s):
            break
        model.rows += [stage_model.gap_cut(model, an, values, t) for t in gaps]
        cutoff = (best.cost - plain) / run.norm if math.isfinite(best.cost) else None
        solved = stage_model.solve(model, until - time.perf_counter(), options.threads, gap, cutoff=cutoff)
        best.clock(solved.status)
    return bound


INTERVAL_UNTIL = 0.65  # of the time limit: the interval model's refinement ends by then into the run (it
# took 0.35 of the limit from the windows when it ran in this process; mobilenetv1_025 with every
# parameter trained at 60% needs 4-5 s for it, and its point then decodes to the optimum)


def _interval_start(
    problem: SchedulingProblem, an: Analysis, latency: bool, norm: float, options: ScaleOptions
) -> proof_process.Job:
    """The interval model's refinement (:mod:`poet_edge.schedulers.interval_bound`) started in a child
    process (:func:`proof_process.start_refine`), for at most ``INTERVAL_UNTIL`` of the time limit
    (less the margin). It runs on the machine's second core while this process searches: HiGHS's MIP
    search keeps one core busy (bias-trained bert_tiny at 1.1x its floor, 30 s: 28.7 s of CPU in
    29.4 s). It is stopped when the run ends before it does (a gap closed)."""
    limit = options.time_limit_s
    seconds = min(INTERVAL_UNTIL, 1 - MARGIN) * limit
    refine = partial(interval_bound.refine, problem, an, latency, norm)
    return proof_process.start_refine(refine, options, seconds)


def _until(best: _Best, deadline: float) -> float:
    """Seconds into the run at wall-clock ``deadline`` (``time.time()``)."""
    return time.perf_counter() - best.began + deadline - time.time()


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
REPAIR_SECONDS = 2.0  # HiGHS's limit per window
REPAIR_SHARE = 0.1  # of the time limit: the rounds take at most this


def _repair(run: _Run, model: stage_model.StageModel, point: np.ndarray, bound: float) -> None:
    """Offers the stage ``model``'s ``point`` decoded (:func:`stage_model.decode`); while the decode
    needs a repair in some gap (or does not fit there), the stages around each such gap are
    re-optimized with the rest fixed (:func:`stage_model.window`; from the second round on, with the
    configurations of the gaps the last decode could not fit cut off, :func:`stage_model.gap_cut`, in
    a copy of the model), and the new point decoded, for at most ``REPAIR_ROUNDS`` rounds or until the
    incumbent is within ``gap_rel`` of ``bound``. mobilenetv1_025 with every parameter trained at 60%:
    the interval point (39.99%) decodes to 45.45% with gap 122 repaired, after one round to 43.60%
    (gap 128), after two to 39.99%, optimal (the windows had reached 43.35%, gap 3.54%)."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    until = time.perf_counter() + min(REPAIR_SHARE * options.time_limit_s, _left(best, options))
    cut = replace(model, rows=list(model.rows))
    wins: stage_model.Windows | None = None
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
            now = time.perf_counter()
            seconds = min(REPAIR_SECONDS, until - now, _left(best, options) - MARGIN * options.time_limit_s)
            if best.late(seconds <= 0.0):
                return
            solved = stage_model.window(wins, point, t - REPAIR_WIDTH, t + REPAIR_WIDTH, seconds)
            best.clock(solved.status)
            if solved.values is not None:
                point = solved.values


STRICT_GAP = 0.05  # the strict bound model runs when the gap is wider than this
STRICT_LEFT = 8.0  # ... and at least this many seconds are left (its seconds come out of the LNS)
STRICT_SHARE = 0.25  # of the time left
STRICT_ABOVE = 0.05  # ... and the bound is at most this above the segment cover's (relative to it)
SPLIT_FROM = 30.0  # time limits from which the split model's child runs (mid-size path)
SPLIT_AGAIN = 0.0025  # its proof starts again with a new cutoff once the incumbent has improved by more
# than this (relative to its cost) since the cutoff it proves (bert_tiny at 50%, 2 threads, the time to
# prove the cutoff 1% below an incumbent of 29.24%, 29.34%, 29.74% or 30.50%: 9.7 s, 13.9 s, 19.6 s, not
# in 41 s)


def _strict(run: _Run, budget: np.ndarray, bound: float, cover: float) -> float:
    """The strict bound model (:mod:`poet_edge.schedulers.segment_strict`) without its gap rows (larger:
    bert_tiny at 1.1x the floor, 2 threads, 5.5 s: no bound above the segment model's 79.30% with
    them), for ``STRICT_SHARE`` of the time left, when the incumbent is still more than
    ``STRICT_GAP`` above ``bound`` and at least ``STRICT_LEFT`` seconds are left, and ``bound`` is not
    more than ``STRICT_ABOVE`` above the segment cover's (``cover``; the strict model raises that one a few
    points: bias-trained bert_tiny at 1.1x its floor, 79.30% -> 87.25%, where the interval model's is
    116.28%, and its 1-4 s then go to the windows): returns its (scaled) MIP dual bound, 0 when it does
    not run. bert_tiny at 1.1x the floor, 2 threads, 30 s limit (about
    12 s left here): the bound goes from 79.30% to 85.71% above the plain pass and the schedule stays
    at 142.05% (3 runs each); with 0.4 of the time left instead, the seconds it takes from the
    large-neighbourhood search cost the schedule 142.05% -> 172.87%."""
    best, options = run.best, run.options
    if best.schedule is None or _closed(best.cost, bound, STRICT_GAP):
        return 0.0
    if not _closed(bound, cover, STRICT_ABOVE):  # the interval model raised it well above the segment cover
        return 0.0
    if best.late(_left(best, options) < STRICT_LEFT):
        return 0.0
    lp = strict_model(run.problem, run.an, run.cover, run.latency, run.norm, budget, gaps=False)
    if lp is None:
        return 0.0
    solved = _solve(lp, STRICT_SHARE * _left(best, options), options)
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
    collected: bool = False  # its proof's result taken


def _split_start(run: _Run, budget: np.ndarray, plain: float) -> _Run:
    """The split model (:func:`poet_edge.schedulers.segment_strict.split_model`: the strict model with
    gap rows and the split ends its LP relaxation asks for) built, and that relaxation solved, in a
    child process until the margin before the limit: from the start of the run on graphs of more than
    ``PROVE_PAIRS`` pairs (where the stage model's cutoff proof does not run: mobilenetv2_035 with every
    parameter trained at 50%, 30 s, proven within 1% in 2 of 3 runs started so, 1 of 3 started after
    the segment cover's bound, 1.8 s), else after the segment cover's bound where that leaves the gap
    open (starting it sooner costs graphs that close there: layered-100 at 60%, 1.1 s -> 2.0 s)
    (:func:`proof_process.start_split`), beside the interval model's child; :func:`_split_poll` sends
    it cutoffs. Returns ``run`` with that child. mobilenetv2_035 with every parameter trained at 50%,
    30 s, with the relaxation in this process after the windows: 4.6 s (17.6 -> 22.2 s), the proof then
    had 6.3 s (it needs 10.9 s alone, 1 or 2 threads) and stopped at 1.56%; that relaxation takes 4.3 s
    alone on one thread."""
    options = run.options
    seconds = (1 - MARGIN) * options.time_limit_s - (time.perf_counter() - run.best.began)
    build = partial(split_model, run.problem, run.an, run.cover, run.latency, run.norm, budget)
    return replace(run, split=_Split(proof_process.start_split(build, options, seconds), plain))


def _split_poll(run: _Run, bound: float) -> float:
    """Asked between windows: the split model's bounds as its child reports them (its LP relaxation's,
    then its proof's dual bound), and the returned ``bound`` raised by them. While the gap is one it
    takes (:func:`_split_due`), the child is sent (1 - prove_gap) x the incumbent as its cutoff, and a
    new one whenever the incumbent has improved by more than ``SPLIT_AGAIN`` since; not where its LP
    relaxation is more than ``STRICT_GAP`` below the cutoff (bert_tiny with every parameter trained,
    70%: 23.32% against 30.86%, where the interval model's bound is 28.79% and the MIP got to 24.73%
    in 9.6 s; where the proof pays, the relaxation was within 1.8%: bias-trained bert_tiny at 50%,
    mobilenetv2_035 at 50% and 1.1x its floor). The windows search on here while the child proves
    (:mod:`poet_edge.schedulers.proof_process`: one root cut round of HiGHS on mobilenetv2_035's split
    model takes seconds without a time check). mobilenetv2_035 with every parameter trained at 50%,
    30 s: the cutoff 1% below +13.99% is proven at 27.5 s (sent at 13.9 s, 10.9 s alone)."""
    split, best = run.split, run.best
    bound = _proven(run, bound)
    if split is None or split.collected:
        return bound
    relaxed = proof_process.split_relaxed(split.job)
    if relaxed is None:
        return bound
    norm, plain = run.norm, split.plain
    bound = best.proved((plain + relaxed * norm, "split segment cover"))[0]
    if split.sent is not None and split.job.done():
        return _split_collect(run)
    if split.sent is not None:  # its proof's dual bound so far (at most the cutoff: a bound too)
        bound = best.proved((plain + split.job.last * norm, "split segment cover"))[0]
    cutoff = _cutoff(run, plain)
    near = _closed(plain + cutoff * norm, plain + relaxed * norm, STRICT_GAP)
    lower = split.sent is None or split.sent - cutoff > SPLIT_AGAIN * best.cost / norm
    if _split_due(run, bound) and near and lower:
        proof_process.send(split.job, cutoff)
        split.sent = cutoff
        best.timed = True  # its result depends on when the windows found the incumbent
    return bound


def _split_collect(run: _Run) -> float:
    """The split proof's result (waited for until its child's deadline) once its cutoff was sent; the
    run's highest bound."""
    split, best = run.split, run.best
    assert split is not None
    if split.sent is not None and not split.collected:
        split.collected = True
        solved = proof_process.split_proved(split.job)  # stopped at the limit
        best.clock(solved.status)
        best.proved((split.plain + solved.bound * run.norm, "split segment cover"))
    assert best.proven is not None
    return best.proven[0]


PROVE_PAIRS = 5000  # the cutoff proof runs on graphs of at most this many pairs (bert_tiny's 6,568: the
# root LP of its stage model is not done in 30 s on 2 threads)
PROVE_SHARE = 0.95  # of the time left (less the margin): the large-neighbourhood search gets the rest


def _cutoff(run: _Run, plain: float, gap: float | None = None) -> float:
    """(1 - gap) x the incumbent, scaled (``gap`` by default ``ScaleOptions.prove_gap``): a bound there
    puts the gap at most that."""
    gap = run.options.prove_gap if gap is None else gap
    return ((1 - gap) * run.best.cost - plain) / run.norm + 1e-12


def _prove(run: _Run, model: stage_model.StageModel, bound: float, plain: float) -> float:
    """When the incumbent is more than ``ScaleOptions.prove_gap`` above ``bound``: is any point of the
    stage model cheaper than (1 - prove_gap) x the incumbent? HiGHS, given that as a cutoff, prunes
    far more than when it proves optimality from the incumbent (mobilenetv1_025 at 50%: 14 s against
    70 s); when it finds no cheaper point, the cutoff is a lower bound. A cheaper point found is decoded
    and offered. When the gap is already within prove_gap (the interval model's bound), but not closed,
    the cutoff is (1 - gap_rel) x the incumbent: any cheaper point (mobilenetv1_025, every parameter
    trained, 70%: it finds 12.52% from 13.57%, which the interval model's bound proves optimal).
    Returns the (scaled) bound, 0 when it does not run."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    margin = MARGIN * options.time_limit_s
    left = _left(best, options) - margin
    if best.schedule is None or not model.feasible or _closed(best.cost, bound, options.gap_rel):
        return 0.0
    if best.late(left < 1.0):
        return 0.0
    within = _closed(best.cost, bound, options.prove_gap)  # then any cheaper point
    cutoff = _cutoff(run, plain, options.gap_rel if within else None)
    gap = _gap_abs(run, best.cost)
    solved = stage_model.solve(model, PROVE_SHARE * left, options.threads, gap, cutoff=cutoff)
    best.clock(solved.status)
    if solved.values is not None:
        values = solved.values
        _try(problem, best, options, lambda: stage_model.decode(problem, an, model, values), "stage cutoff")
    return solved.bound


LNS_PAIRS = 25000  # larger graphs: after the local search, windows of the stage model re-optimized
# (was 8,000; mobilenetv2_035 has 19,399 pairs with every parameter trained, 22,308 with its biases:
# 30 s, every parameter, 50% / 1.1x the floor: gap 2.78% / 4.11% -> 1.95% / 3.61%; its bias-trained
# rows the same; the layered graphs from n = 250 on, 27,309 pairs, stay on the local search)
LNS_AFTER = 0.25  # share of the time limit after which the large-neighbourhood search takes over (was
# 0.5; mobilenetv2_035, every parameter trained, 1.1x the floor, 30 s: the local search still improves the
# incumbent by about 0.3 points a replay round at 15 s, where the near windows take 24.35% to 19.51% in
# 1.3 s: 18.70% (gap 3.61%) -> 17.55% (gap 1.97%); at 0.15 the same schedule)
LNS_STALL = 1000  # ... or earlier, once the local search has not improved the incumbent in this many
# replays (about 1 s on bert_tiny), STALL_FIRST times as many before its first improvement (bert_tiny at
# 1.1x the floor needs more than 1,000 for its first). bert_tiny, 30 s, stall 500 / 1,000 / 2,000 /
# 4,000: at 1.1x the floor 175.28% / 138.89% / 140.20% / 169.71%; at 50% the windows reach 29.24% at
# 10.5 s / 11.8-13.0 s, and with 1,500 they stop at 29.35%
STALL_FIRST = 4
LNS_WIDTH, LNS_STEP, LNS_SECONDS = 20, 10, 3.0  # window stages, step between windows, seconds per window
LNS_VALUES, LNS_VALUE_STEP = 3, 2  # value windows: values (+1), step between windows
LNS_VALUE_SHARE = 0.5  # share of the LNS time the value windows get
LNS_VALUE_HEAD = 1.0  # seconds of value windows before the first stage window (bert_tiny at 50%, 30 s:
# the 29.35% incumbent at 13.0 s, not 14.4 s)
NEAR_VALUES, NEAR_STEP, NEAR_STAGES = 6, 3, 16  # near windows: values (+1), step, restorations' lead
NEAR_SECONDS = 6.0  # seconds per near window
NEAR_UNTIL = 0.6  # near windows before the cutoff proof: at most until this share of the time limit


@dataclass
class _Sweep:
    """One kind of LNS window (stages; values at every stage; values at every stage with restorations
    at most ``near`` stages before a consumer) and where its sweep is."""

    by_value: bool
    width: int
    step: int
    share: float  # of the LNS time
    near: int | None = None
    seconds: float = LNS_SECONDS  # per window
    widen: bool = True  # after a sweep without improvement: wider windows (else this kind stops)
    first: int = 0
    stale: int = 0  # stages (values) swept since the incumbent last improved
    spent: float = 0.0  # seconds its windows took


def _sweeps() -> list[_Sweep]:
    """The windows of the LNS after the cutoff proof: stages, and values at every stage; the stage
    windows start ``LNS_VALUE_HEAD`` seconds behind, so the value windows (most of them fast) go first."""
    return [
        _Sweep(False, LNS_WIDTH, LNS_STEP, 1 - LNS_VALUE_SHARE, spent=LNS_VALUE_HEAD),
        _Sweep(True, LNS_VALUES, LNS_VALUE_STEP, LNS_VALUE_SHARE),
    ]


def _near_sweep() -> list[_Sweep]:
    """The windows before the cutoff proof: one sweep of ``NEAR_VALUES`` values at every stage, their
    restorations at most ``NEAR_STAGES`` stages before a consumer (:func:`stage_model.window`), again
    while it improves. They change where early activations are held through the forward pass (keep
    two, recompute two others from them instead), which a stage window cannot and a plain value window
    as wide is too slow for (mobilenetv1_025 at 1.1x the floor: 19.96% -> 18.57% in 3.4 s, when the
    plain window takes 30 s to reach 19.07%)."""
    return [_Sweep(True, NEAR_VALUES, NEAR_STEP, 1.0, NEAR_STAGES, NEAR_SECONDS, widen=False)]


def _lns(
    run: _Run,
    model: stage_model.StageModel,
    windows: stage_model.Windows | None,
    bound: float,
    sweeps: list[_Sweep],
    until: float | None = None,
    start: Schedule | None = None,
    stall: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Large-neighbourhood search with the stage model (graphs of at most ``LNS_PAIRS`` value-stage
    pairs): the incumbent as a point of the model, every column outside a window fixed, the window
    re-optimized by HiGHS (at most ``_Sweep.seconds``, from the incumbent); a cheaper solution is
    decoded, checked by the simulator and becomes the incumbent. The kinds of windows (``sweeps``)
    share the time: the next window is of the kind furthest below its share. Value windows change
    where a value is held, dropped and restored over its whole life, which a stage window cannot
    change at once. Each kind sweeps its range; after a whole sweep without improvement its windows
    and steps double (once they span everything, or unless ``widen``, that kind stops), until the gap
    closes, every kind stops, or ``until`` seconds of the run (else the time limit less the margin)
    have passed. Between windows the split model's child is polled (:func:`_split_poll`: it may be
    sent its cutoff, or report a higher bound). ``windows``: the model's
    arrays (:func:`stage_model.windows`), built once per run; None when the model is infeasible.
    ``start``: the windows start from this schedule instead of the run's incumbent, and keep their own
    incumbent (the cheapest schedule they found); a schedule cheaper than the run's incumbent becomes
    that too. ``stall``: stop once their own incumbent has not improved for this many seconds (of
    this call). ``stop``: asked between windows; the search stops once it says True."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    margin = MARGIN * options.time_limit_s
    if until is not None:
        margin = max(margin, options.time_limit_s - until)
    if best.schedule is None:
        return
    if best.late(_left(best, options) < margin + 1.0):
        return
    own = best.cost if start is None else _metric(simulate(problem, start), options)  # its incumbent's
    x = stage_model.encode(problem, an, model, start or best.schedule)
    if windows is None or x is None:
        return
    h = replace(windows, gap_abs=_gap_abs(run, own))  # the model's arrays, built once per run
    n = len(problem.nodes)
    started = time.perf_counter()
    own_at = started  # when its incumbent last improved
    while sweeps:
        if stall is not None and best.late(time.perf_counter() - own_at > stall):
            return
        if stop is not None and stop():
            return
        bound = _split_poll(run, bound)
        sw = min(sweeps, key=lambda k: (k.spent / k.share, k.by_value))
        by_seconds = len(sweeps) > 1 and any(k.spent > 0 for k in sweeps)  # the kinds take turns by
        # the seconds they took (not before any has run)
        if sw.stale >= n:  # a whole sweep without improvement: wider windows
            if not sw.widen or sw.width >= n:
                sweeps.remove(sw)
                continue
            sw.width, sw.step, sw.stale = 2 * sw.width, 2 * sw.step, 0
        left = _left(best, options) - margin
        if _closed(best.cost, bound, options.gap_rel):
            return
        if best.late(left < 0.5):
            return
        best.timed = best.timed or by_seconds
        # HiGHS may overshoot its limit a little on wide windows: at most half of what is left
        began = time.perf_counter()
        solved = stage_model.window(
            h,
            x,
            sw.first,
            sw.first + sw.width,
            min(sw.seconds, left / 2),
            by_value=sw.by_value,
            near=sw.near,
        )
        sw.spent += time.perf_counter() - began
        best.clock(solved.status)
        sw.first = sw.first + sw.step if sw.first + sw.step < n else 0
        sw.stale += sw.step
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
            x, own, own_at = y, _metric(sim, options), time.perf_counter()
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
        extra = cost - (sum(_costs(problem, run.latency)[0]) + solved.objective * run.norm)
        if cost + extra > own:
            raise PoetError(f"the repair of gaps {gaps} hides {extra / run.norm:.2%} of the plain pass")
    return schedule


def _offer_plan(run: _Run, segplan: Plan, origin: str, primal: bool = False) -> dict[int, int]:
    """Offers the plan replayed exactly (and records it for the local search, ``primal``: as a plan of
    the primal model), else through the engine (which repairs overflows by DTR); returns the overflow
    of the exact replay (empty when it fits)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = _costs(problem, run.latency)
    overflows = []
    for variant in (segplan, {**segplan, FREE_TEMPS: DROP}):
        plan = _as_plan(cover, variant)
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
    """Primal rounds on both models: solve, replay, tighten the budget rows of overflowing stages."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    status = "not run"
    n = len(problem.nodes)
    margin = MARGIN * options.time_limit_s
    for name, opts, rounds in (
        ("primal", cover.primal_opts, options.rounds),
        ("bound-model", cover.bound_opts, 3 * options.rounds),
    ):
        budget = np.full(n, problem.budget_bytes, dtype=np.int64)
        spent = 0.0  # seconds the last round took: a round starts only if one more fits the time left
        for k in range(rounds):
            if _closed(best.cost, bound, options.gap_rel):
                break
            if best.late(_left(best, options) < margin + spent):
                break
            began = time.perf_counter()
            lp = _columns(problem, opts, run.latency, run.norm)
            if opts is cover.bound_opts:
                _input_cuts(problem, run.an, cover, lp, run.latency, run.norm)
            if not _rows(problem, cover, lp, budget):
                status = f"{name} round {k}: a tightened stage cannot fit"
                break
            solved = _solve(lp, min(_left(best, options) / 4, 0.1 * options.time_limit_s), options)
            best.clock(solved.status)
            if name == "primal":
                status = f"primal round {k}: {solved.status}"
            if solved.values is None:
                break
            segplan = _seg_plan(run.an, cover, lp, solved.values)
            overflow = _offer_plan(run, segplan, f"{name} plan, round {k}", name == "primal")
            if not overflow:
                break
            budget = _tighten(budget, overflow)
            spent = time.perf_counter() - began
    return status


def _search(
    run: _Run,
    bound: float,
    until: float | None = None,
    kicks: int | None = None,
    stall: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Local search (:class:`_Search`) from the three cheapest recorded plans (or from no eviction at
    all), then iterated: perturb 1-3 random segments of the best plan (fixed seed) and descend again,
    at most ``options.kicks`` times, while time remains and the gap is open; returns the number of
    replays. ``until``: stop once this many seconds of the run have passed; ``kicks``: at most this
    many perturbations instead; ``stall``: stop once the incumbent has not improved for this many
    replays (``STALL_FIRST`` x that many before its first improvement), checked within a descent too;
    ``stop()``: stop once it says True, checked there too (then the result depends on timing). The
    stall is a count, not seconds: bert_tiny at 50%, 30 s, with a stall of 0.9 s the search stopped after
    38.40% in some runs and after 33.53% in others (the next improvement came 0.87 s later), and the
    windows then took different paths (incumbent at the proof's hand-over 29.35% or 32.25%, gap 1.00%
    or 3.97%); at 1.1x the floor it stopped before its first improvement in some runs (221.75%) and
    not in others (138.89%)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = _costs(problem, run.latency)
    search = _Search(problem, an, cover, costs, _modes(problem, an, cover))
    starts = [plan for _, _, plan in sorted(best.plans, key=lambda x: (x[0], x[1]))] or [{}]
    done: set[tuple[tuple[int, str], ...]] = set()
    margin = MARGIN * options.time_limit_s
    if until is not None:  # stop once ``until`` seconds of the run have passed
        margin = max(margin, options.time_limit_s - until)

    improved = 0  # replays of this search when it last improved the incumbent

    def offer(plan: Plan) -> None:
        nonlocal improved
        schedule, _ = replay_plan(problem, an, _as_plan(cover, plan), costs)
        if schedule is not None:
            before = best.cost
            _try(problem, best, options, lambda: schedule, "local search")
            if best.cost < before:
                improved = search.evals

    def stalled() -> bool:
        if stop is not None and stop():
            best.timed = True
            return True
        return _stalled(search.evals, improved, stall)

    def more() -> bool:
        if stalled() or _closed(best.cost, bound, options.gap_rel):
            return False
        return not best.late(_left(best, options) < margin)

    def descend(plan: Plan) -> Plan:
        deadline = time.perf_counter() + _left(best, options) - margin
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
    rng = random.Random(0)
    movable = [k for k, m in search.modes.items() if m]
    for _ in range(options.kicks if kicks is None else kicks):
        if incumbent is None or not movable or not more():
            break
        plan = incumbent
        for k in rng.sample(movable, min(len(movable), rng.randint(1, 3))):
            plan = _with(plan, k, rng.choice((None, *search.modes[k])))
        found = descend(plan)
        if search.score(found, False) < search.score(incumbent, False):
            incumbent = found
    return search.evals


def _stalled(evals: int, improved: int, stall: int | None) -> bool:
    """Whether a local search with ``evals`` replays, the last improvement at ``improved`` (0: none
    yet), has stalled: ``stall`` replays since that improvement, ``STALL_FIRST`` x as many before the
    first; never without a stall."""
    return stall is not None and evals - improved > (stall if improved else STALL_FIRST * stall)


def _finish(best: _Best, plain: float, status: str, cover: Cover, evals: int) -> Schedule:
    assert best.schedule is not None
    bound, bound_from = best.proved((plain, "plain pass"))
    if bound > best.cost:  # only within the solver's tolerances (the bound is a relaxation)
        bound = best.cost if bound <= best.cost * (1 + 1e-7) else bound
    gap = max(0.0, best.cost - bound) / max(abs(best.cost), 1e-300)
    info = (
        ("status", "optimal" if gap <= 1e-9 else TIMED if best.timed else "feasible"),
        ("objective", best.cost),
        ("bound", bound),
        ("bound_from", bound_from),
        ("gap", gap),
        ("seconds", round(time.perf_counter() - best.began, 3)),
        ("first_valid_s", best.first_valid_s),
        ("within_1pct_s", next((t for t, c in best.improvements if _closed(c, bound, NEAR_GAP)), None)),
        ("schedule_from", best.origin),
        ("primal", status),
        ("segments", len(cover.segs)),
        ("options", (len(cover.bound_opts), len(cover.primal_opts))),
        ("search_replays", evals),
    )
    steps = best.schedule.steps
    return Schedule(tuple(steps), NAME, info)
