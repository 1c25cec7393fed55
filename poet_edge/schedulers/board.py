"""The incumbent board of scheduler "scale" and what its phases share.

:class:`Board`: the one incumbent (the cheapest valid schedule offered so far, where it came from),
the highest lower bound proven so far (and what proved it), the plans recorded for the local search,
the phase running and the phase the safety time limit cut. Every phase offers its schedules through
:func:`try_schedule` (replayed by the simulator first) and its bounds through :meth:`Board.proved`.
:class:`Run`: what the phases of one level share (problem, analysis, segment cover, options, board,
budget). The two interfaces of the phases: a :class:`BoundProvider` returns a lower bound (and may
offer the schedules it finds on the way), a :class:`Heuristic` improves the incumbent and returns its
work. :func:`finish` turns the board into the run's :class:`~poet_edge.schedule.SolveReport`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.highs import TIME_LIMIT
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule, SolveReport
from poet_edge.schedulers.effort import Budget
from poet_edge.schedulers.engine import Analysis
from poet_edge.schedulers.milp import ProgressCallback
from poet_edge.schedulers.plan_replay import NAME, Plan
from poet_edge.schedulers.scale_options import ScaleOptions
from poet_edge.schedulers.segment_cover import Cover
from poet_edge.simulator import SimResult, simulate

if TYPE_CHECKING:
    from poet_edge.schedulers.scale_split import SplitProof

NEAR_GAP = 0.01  # the report's within_1pct_s: when the schedule first came within this of the reported bound


@dataclass
class Board:
    """The run's one incumbent and its highest lower bound (the module docstring)."""

    schedule: Schedule | None = None
    cost: float = math.inf
    origin: str = ""
    first_valid_s: float | None = None
    began: float = field(default_factory=time.perf_counter)
    improvements: list[tuple[float, float]] = field(default_factory=list)  # (seconds into the run, cost)
    plans: list[tuple[float, int, Plan]] = field(default_factory=list)  # (replay cost, order, plan)
    primal: set[int] = field(default_factory=set)  # the orders of the plans the primal model gave
    searched: Plan | None = None  # the last local search's incumbent plan (the next one goes on from it)
    descended: set[tuple[tuple[int, str], ...]] = field(default_factory=set)  # plans a search started from
    phase: str = "baselines"  # the phase running (named by a cut)
    cut: str | None = None  # the phase the safety time limit cut first (None: none; the run is then
    # deterministic)
    on_progress: ProgressCallback | None = None  # told of every cheaper schedule and higher bound
    proven: tuple[float, str] | None = None  # the highest lower bound so far, and what proved it

    def offer(self, schedule: Schedule, sim: SimResult, cost: float, origin: str) -> None:
        """Takes ``schedule`` (valid, costing ``cost``) as the incumbent when it is cheaper."""
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


def metric(sim: SimResult, options: ScaleOptions) -> float:
    """The objective of a simulated schedule: its latency or its energy."""
    return sim.latency_s if options.objective == "latency" else sim.energy_j


def admissible(problem: SchedulingProblem, sim: SimResult) -> bool:
    """Whether a simulated schedule keeps the problem's runtime budget (``max_latency_s``), if any."""
    limit = problem.max_latency_s
    return limit is None or sim.latency_s <= limit * (1 + 1e-9)


def try_schedule(
    problem: SchedulingProblem, best: Board, options: ScaleOptions, make: Callable[[], Schedule], origin: str
) -> SimResult | None:
    """Makes a schedule (``make``), replays it in the simulator and, when it is valid and admissible,
    offers it to the board as coming from ``origin``; returns its simulation (None when ``make`` or the
    replay raised)."""
    try:
        schedule = make()
        sim = simulate(problem, schedule)
    except PoetError:
        return None
    if admissible(problem, sim):
        best.offer(schedule, sim, metric(sim, options), origin)
    return sim


def seconds_left(best: Board, options: ScaleOptions) -> float:
    """Seconds left before the safety stop."""
    return options.time_limit_s - (time.perf_counter() - best.began)


def stop_at(best: Board, options: ScaleOptions) -> float:
    """The safety stop as a ``time.perf_counter()`` instant."""
    return best.began + options.time_limit_s


@dataclass(frozen=True)
class Run:
    """What the phases of one level share: the problem and its analysis, the segment cover, the
    options, the incumbent (mutable), the objective's kind and normalisation (costs in the models are
    / norm, above the plain pass ``plain``), the level's budget and index."""

    problem: SchedulingProblem
    an: Analysis
    cover: Cover
    best: Board
    options: ScaleOptions
    latency: bool
    norm: float
    plain: float  # the plain pass's cost (every node once): the models' costs are above it
    budget: Budget
    level: int = 0
    split: SplitProof | None = None  # the mid-size path's split model, in a child process


def closed(cost: float, bound: float, gap: float) -> bool:
    """Whether ``cost`` is proven within ``gap`` of the lower bound: (cost - bound) / cost at most
    that, the gap ``Schedule.report`` reports (the run stops at ``ScaleOptions.gap_rel``). Never without
    a schedule (cost inf)."""
    return math.isfinite(cost) and cost - bound <= gap * cost


def may_stop(options: ScaleOptions, cost: float, bound: float) -> bool:
    """Whether the run may stop: ``cost`` proven within ``ScaleOptions.gap_rel`` of ``bound``
    (:func:`closed`), or ``bound`` above ``ScaleOptions.stop_above``; never with ``Policy.every_phase``
    (then every phase runs)."""
    above = options.stop_above is not None and bound > options.stop_above
    return not options.policy.every_phase and (closed(cost, bound, options.gap_rel) or above)


def gap_abs(run: Run, cost: float) -> float:
    """The stage model's absolute gap for HiGHS, in its scaled units: ``ScaleOptions.inner_gap`` of
    ``cost`` (HiGHS stops there; the run's own gap test is on the whole cost)."""
    return run.options.inner_gap * cost / run.norm


def proven_bound(run: Run, bound: float) -> float:
    """``bound`` or, where higher, the highest bound proven so far in the run (the split proof's
    child reports its bound between windows)."""
    proven = run.best.proven
    return bound if proven is None else max(bound, proven[0])


def cutoff_of(run: Run, plain: float, gap: float | None = None) -> float:
    """(1 - gap) x the incumbent, scaled (``gap`` by default ``ScaleOptions.prove_gap``): a bound there
    puts the gap at most that."""
    gap = run.options.prove_gap if gap is None else gap
    return ((1 - gap) * run.best.cost - plain) / run.norm + 1e-12


def restricted(problem: SchedulingProblem, options: ScaleOptions) -> SchedulingProblem:
    """The problem with --no-paging / --no-remat written into its nodes (a schedule of the restricted
    problem is one of the original's)."""
    if options.paging and options.remat:
        return problem
    nodes = tuple(
        replace(n, pageable=n.pageable and options.paging, recomputable=n.recomputable and options.remat)
        for n in problem.nodes
    )
    return replace(problem, nodes=nodes)


def full_budget(problem: SchedulingProblem) -> np.ndarray:
    """Every stage's RAM budget (the models' budget rows before any tightening)."""
    return np.full(len(problem.nodes), problem.budget_bytes, dtype=np.int64)


def finish(best: Board, plain: float, status: str, cover: Cover, evals: int, effort: str) -> Schedule:
    """The board at the run's end as its schedule and :class:`~poet_edge.schedule.SolveReport`."""
    assert best.schedule is not None
    bound, bound_from = best.proved((plain, "plain pass"))
    if bound > best.cost:  # only within the solver's tolerances (the bound is a relaxation)
        bound = best.cost if bound <= best.cost * (1 + 1e-7) else bound
    gap = max(0.0, best.cost - bound) / max(abs(best.cost), 1e-300)
    report = SolveReport.of(
        status="optimal" if gap <= 1e-9 else "feasible",
        objective=best.cost,
        bound=bound,
        bound_from=bound_from,
        gap=gap,
        effort=effort,
        cut_by_time_limit=best.cut is not None,
        cut_phase=best.cut,
        seconds=round(time.perf_counter() - best.began, 3),
        first_valid_s=best.first_valid_s,
        within_1pct_s=next((t for t, c in best.improvements if closed(c, bound, NEAR_GAP)), None),
        schedule_from=best.origin,
        primal=status,
        segments=len(cover.segs),
        options=(len(cover.bound_opts), len(cover.primal_opts)),
        search_replays=evals,
    )
    return Schedule(tuple(best.schedule.steps), NAME, report)


class BoundProvider(Protocol):
    """A lower-bound phase: given the run and the bound so far, returns its own bound on the cost above
    the plain pass, scaled by ``Run.norm`` (0 when it does not run); it may offer the schedules it
    decodes on the way (:func:`try_schedule`)."""

    def __call__(self, run: Run, bound: float) -> float: ...


class Heuristic(Protocol):
    """An improvement phase: given the run and the bound so far (it stops once the gap is closed),
    offers cheaper schedules to the board; returns its work (replays), 0 where it counts none."""

    def __call__(self, run: Run, bound: float) -> int: ...
