"""Scheduling on a chosen topological order (issue 55): the order's own schedules first, then scale
(``inner``) on it, and on the given order; which orders each answer's bound covers.

The order comes from :func:`~poet_edge.schedulers.ordering.choose_order`. Where its no-recomputation
pass does not fit, recomputations make a first fitting sequence (:mod:`~poet_edge.schedulers.fit`), each
improved by the sequence search (:mod:`~poet_edge.schedulers.seq_search`), the cheapest then annealed
(:mod:`~poet_edge.schedulers.anneal`). All of it is counted in
work, never timed; only scale's runs take the wall-clock safety stop.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from poet_edge.errors import CutError, PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule, SolveReport
from poet_edge.schedulers.anneal import SEED, anneal_sequence
from poet_edge.schedulers.board import closed
from poet_edge.schedulers.effort import anneal_moves, sequence_work
from poet_edge.schedulers.fit import Unfit, capped, fit_sequences
from poet_edge.schedulers.lp_model import node_costs
from poet_edge.schedulers.milp import ProgressCallback
from poet_edge.schedulers.ordering import (
    ALL_ORDERS,
    ORDER_WORK,
    THIS_ORDER,
    Deadline,
    OrderChoice,
    candidates,
    choose_order,
    forced,
    levels,
    precedence,
    sequence_schedule,
)
from poet_edge.schedulers.seq_search import improve_sequence
from poet_edge.simulator import simulate

SEQUENCE_WORK = sequence_work("default")  # the sequence search's evaluations, per fitting sequence
ANNEAL = anneal_moves("default")  # then the annealing's moves per node, one anneal per level
FALLBACK_ORDERS = ("given", "min-net")  # tried, in turn, where no sequence fits the chosen order
LEVEL_ORDERS = ("asap", "mid-level")  # then these, where each order's lowered insertion is not capped


@dataclass(frozen=True)
class Attempt:
    """One schedule of the original problem and its simulated objective (inf: none)."""

    schedule: Schedule | None
    cost: float
    at_s: float  # seconds from the start of schedule_ordered (the first valid one)
    origin: str = ""
    closest: str = ""  # none from the sequences: the lowest peak they reached, and where


def _measure(problem: SchedulingProblem, schedule: Schedule, latency: bool, at_s: float) -> Attempt:
    sim = simulate(problem, schedule)
    limit = problem.max_latency_s
    if limit is not None and sim.latency_s > limit * (1 + 1e-9):
        return Attempt(None, math.inf, at_s)
    return Attempt(schedule, sim.latency_s if latency else sim.energy_j, at_s)


def _plain(problem: SchedulingProblem, latency: bool) -> float:
    return sum(node_costs(problem, latency)[0])


def _order_info(report: SolveReport, choice: OrderChoice, seconds: float) -> SolveReport:
    return report.with_(
        order=choice.origin,
        orders_compared=[list(c) for c in choice.compared],
        order_evaluations=choice.evaluations,
        order_s=round(seconds, 3),
    )


Inner = Callable[[SchedulingProblem, float, float | None], Schedule]
"""scale on a problem, with its time limit (s) and a cost its run may stop above (None: none)."""

Outcome = tuple[Schedule | None, PoetError | None, bool]  # a run's schedule or error; stopped unfinished


@dataclass(frozen=True)
class Started:
    """A run started in a child process: ``wait()`` for its outcome (a schedule, or the error; stopped:
    the child did not end by its time limit), or ``stop()`` it (its outcome is not needed)."""

    wait: Callable[[], Outcome]
    stop: Callable[[], None]


Beside = Callable[[SchedulingProblem, float, float | None], Started]
"""``inner``'s run with the same arguments, started in a child process at once."""

LATER_S = 2.0  # the given order's run starts beside the chosen order's once that has run this long


class _Given:
    """The given order's run, started beside the chosen order's (``beside``) when that has run
    ``later_s`` seconds (a child's start-up, about a second, costs more than a short run). The clock
    only decides where the run happens, never what it returns: it gets the same problem, and the cost
    it may stop above differs only by the chosen order's cost, which a run that is kept never reaches
    (its bound stays below its own cost)."""

    def __init__(
        self, beside: Beside, problem: SchedulingProblem, ends: float, above: float | None, later_s: float
    ) -> None:
        self.started: Started | None = None
        self.closed = False
        self.lock = threading.Lock()
        self.timer = threading.Timer(later_s, self._start, (beside, problem, ends, above))
        self.timer.daemon = True
        self.timer.start()

    def _start(self, beside: Beside, problem: SchedulingProblem, ends: float, above: float | None) -> None:
        with self.lock:
            if not self.closed:
                self.started = beside(problem, max(0.0, ends - time.perf_counter()), above)

    def close(self) -> Started | None:
        """The started run, None when it did not start (it never will now)."""
        self.timer.cancel()
        with self.lock:
            self.closed = True
            return self.started


def schedule_ordered(
    problem: SchedulingProblem,
    inner: Inner,
    time_limit_s: float,
    latency: bool = False,
    remat: bool = True,
    work: int = ORDER_WORK,
    sequences: int = SEQUENCE_WORK,
    anneal: tuple[int, ...] = ANNEAL,
    on_progress: ProgressCallback | None = None,
    beside: Beside | None = None,
    later_s: float = LATER_S,
    gap_rel: float = 0.0,
) -> Schedule:
    """``inner`` (scale) on the order :func:`choose_order` picks, with the order's own answers:

    * where the chosen order's no-recomputation pass fits the budget, that pass is returned: every node
      once is the least any schedule in any order costs ("optimal", the bound covers all orders);
    * otherwise (not with ``remat`` False) the fitting sequences of :func:`~poet_edge.schedulers.fit.
      fit_sequences` in the chosen order (else in the ``FALLBACK_ORDERS``), a first schedule in seconds,
      each improved by the sequence search (``sequences`` evaluations each: ``--effort``'s), the cheapest
      then annealed (:mod:`~poet_edge.schedulers.anneal`; ``anneal``: moves per node, one anneal per
      level of ``--effort``, each from the last one's best); then ``inner``
      runs on the chosen order for the time left, and, when that is not the given order, on the given
      order too (unless the safety stop cut the first run, or the time left is shorter than the first run
      took: then the run is marked cut, in phase "the given order's schedule"); the cheapest schedule is
      kept (``inner``'s on ties, the chosen order's before the given one's), ``inner``'s error only raised
      when there is no other schedule. Each ``inner`` run may stop once its lower bound is above the
      cheapest schedule found before it (the sequences', then the chosen order's): it could not be kept,
      and a run that would be kept never gets there (its bound stays below its own cost), so the result
      is the same. Where the sequences' schedule is already proven within ``gap_rel`` (--gap) of the
      plain pass, a bound for all orders, it is returned without ``inner``'s runs.

    ``on_progress``: told each cheaper sequence's cost as it is found (``inner`` reports its own runs'
    progress, and this the given order's cost when a run beside the chosen one's wins).

    ``beside``: the fitting sequences' fallback orders are tried two at a time, one in a child
    process (the same result, sooner); and where the chosen order's run takes longer than ``later_s``
    seconds, the given order's run starts then in a child process (one more core) instead of after it;
    the schedule is the same, only sooner (:class:`_Given`). Its safety stop is the same time limit. A
    run that the safety stop cut and that is not kept (the chosen order's, the given order's) marks the
    result cut, in phase "the chosen order's schedule" or "the given order's schedule": had it run to
    its end, it could have won.

    ``Schedule.report`` gains ``order`` (the candidate chosen), ``orders_compared``, ``order_evaluations``,
    ``order_s`` and ``bound_covers``: "all orders" where the bound is the plain pass (every node once) or
    the problem's order is forced, else "this order" (``inner``'s bound covers only schedules that
    first compute the nodes in the chosen order), and an "optimal" status says "optimal for this order"
    when the bound covers only that. When a sequence wins, the bound is the plain pass and ``inner``'s
    bound is kept as ``order_bound``. A budget below the memory floor is refused first, before any order
    or sequence is looked for (:func:`~poet_edge.memory_floor.check_budget`)."""
    check_budget(problem)
    began = time.perf_counter()
    deadline = Deadline(began + time_limit_s)  # the safety stop of the counted order and sequence work
    choice = choose_order(problem, problem.budget_bytes, work, deadline)
    first_cut = "order search" if deadline.hit else "sequences"  # the phase a cut run names
    ordered = choice.problem
    plain = _plain(problem, latency)
    if choice.peak <= problem.budget_bytes:
        at = time.perf_counter() - began
        attempt = _measure(
            problem, sequence_schedule(ordered, np.arange(len(ordered.nodes)), "scale"), latency, at
        )
        if attempt.schedule is not None:
            report = _against_plain(
                "optimal",
                attempt.cost,
                plain,
                {},
                seconds=round(at, 3),
                first_valid_s=round(at, 3),
                schedule_from="no-recomputation pass in the chosen order",
            )
            return replace(attempt.schedule, report=_order_info(report, choice, at))
    ours = (
        _sequences(
            problem, choice, latency, sequences, anneal, began, deadline, on_progress, beside is not None
        )
        if remat
        else Attempt(None, math.inf, 0.0)
    )
    order_s = time.perf_counter() - began
    if closed(ours.cost, plain, gap_rel):  # proven within --gap already: no run can matter
        return _marked(_ours(ours, None, plain, choice, order_s, began), deadline, first_cut, False)
    pending = None
    if beside is not None and choice.origin != "given":
        pending = _Given(beside, problem, began + time_limit_s, _finite(ours.cost), later_s)
    try:
        theirs, error = _run(inner, ordered, time_limit_s - order_s, _finite(ours.cost))
    except BaseException:
        if pending is not None and (orphan := pending.close()) is not None:
            orphan.stop()
        raise
    cost = _measure(problem, theirs, latency, 0.0).cost if theirs is not None else math.inf
    first_s = time.perf_counter() - began - order_s
    # a run the safety stop cut (with or without a schedule) that is not returned could have been, had
    # it run to its end; so could the given order's run, had it been run
    chosen, given = theirs, None
    chosen_cut, given_cut = _cut(theirs) or isinstance(error, CutError), False
    beside_run = pending.close() if pending is not None else None
    if choice.origin != "given" and (beside_run is not None or not _cut(theirs)):
        left = time_limit_s - (time.perf_counter() - began)
        if beside_run is not None:
            given, given_error, stopped = beside_run.wait()
            given_cut = stopped or _cut(given) or isinstance(given_error, CutError)
        elif left < first_s:
            given_cut = True  # not run
        else:
            given, given_error = _run(inner, problem, left, _finite(min(cost, ours.cost)))
            given_cut = _cut(given) or isinstance(given_error, CutError)
        if given is not None:
            # the (overflow, peak) key only estimates what recomputation and paging must make up, and
            # an exporter's order is often good: the given order's schedule wins when it is cheaper
            given_cost = _measure(problem, given, latency, 0.0).cost
            if given_cost < cost or theirs is None:
                order = tuple(range(len(problem.nodes)))
                choice = replace(choice, problem=problem, order=order, origin="given")
                ordered, theirs, cost = problem, given, given_cost
                if beside_run is not None and on_progress is not None:
                    on_progress(time.perf_counter() - began, cost, None, None)
    if theirs is None:
        if ours.schedule is None:
            assert error is not None
            if not remat:
                raise error
            if deadline.hit:
                raise PoetError(
                    f"{error}; the time limit ({time_limit_s:g} s) stopped the search for a sequence of "
                    f"recomputations within {problem.budget_bytes} B before one was found: a longer "
                    "--time-limit may find one"
                ) from error
            raise PoetError(
                f"{error}; recomputation inserted into, or run on demand along, the chosen order and the "
                f"{', '.join(FALLBACK_ORDERS + ((), LEVEL_ORDERS)[not capped(len(problem.nodes))])} orders "
                f"found no sequence within "
                f"{problem.budget_bytes} B either (the chosen order's peak without recomputation is "
                f"{choice.peak} B"
                + (f"; the lowest peak with recomputations: {ours.closest}" if ours.closest else "")
                + ")"
            ) from error
        result = _ours(ours, None, plain, choice, order_s, began)
        return _marked(result, deadline, first_cut, chosen_cut or given_cut, chosen_cut)
    if ours.cost < cost:
        result = _ours(ours, theirs.report.bound, plain, choice, order_s, began)
        return _marked(result, deadline, first_cut, chosen_cut or given_cut, chosen_cut)
    chosen_lost = chosen_cut and theirs is not chosen  # a returned run's own report says it was cut
    lost = chosen_lost or (given_cut and theirs is not given)
    result = _labelled(theirs, choice, ordered, order_s, ours)
    return _marked(result, deadline, first_cut, lost, chosen_lost)


def _sequences(
    problem: SchedulingProblem,
    choice: OrderChoice,
    latency: bool,
    work: int,
    anneal: tuple[int, ...],
    began: float,
    deadline: Deadline,
    on_progress: ProgressCallback | None = None,
    pair: bool = False,
) -> Attempt:
    """The cheapest of the fitting sequences (:func:`~poet_edge.schedulers.fit.fit_sequences`; ``pair``:
    the fallback orders two at a time, one in a child process), each improved by ``work`` evaluations
    of the sequence search, the cheapest of those then annealed (``anneal``: moves per node, one anneal
    per level, each from the last one's best; all stop at ``deadline``); at_s: when the first fitting
    one was found. ``on_progress``: told each cheaper one."""
    budget = problem.budget_bytes

    def better(attempt: Attempt, origin: str) -> Attempt:
        if on_progress is not None:
            on_progress(time.perf_counter() - began, attempt.cost, None, None)
        return replace(attempt, origin=origin)

    costs = np.array(node_costs(problem, latency)[0], dtype=float)
    named = {choice.order: "the chosen order"}
    for name, order in candidates(problem):
        if name in FALLBACK_ORDERS:
            named.setdefault(tuple(order), f"the {name} order")
    if not capped(len(problem.nodes)):  # beyond, each order's insertion costs the cap's work again
        for name, order in levels(precedence(problem)):
            named.setdefault(tuple(order), f"the {name} order")
    fitted = fit_sequences(problem, budget, costs, list(named), deadline, beside=pair)
    if isinstance(fitted, Unfit):
        if fitted.peak is None:
            return Attempt(None, math.inf, 0.0)
        over = 100.0 * (fitted.peak - budget) / budget
        return Attempt(
            None, math.inf, 0.0, closest=f"{fitted.peak} B in {named[fitted.order]}, {over:.1f}% above"
        )
    at = time.perf_counter() - began
    where = named[fitted.order]
    mine = costs[list(fitted.order)]
    best = Attempt(None, math.inf, at)
    start, start_cost, start_label = fitted.sequences[0][0], math.inf, ""  # the cheapest, annealed below
    for seq, origin in fitted.sequences:
        for searched, label in ((False, origin), (True, f"{origin}, then the sequence search")):
            s = improve_sequence(fitted.problem, budget, seq, mine, work, deadline).seq if searched else seq
            attempt = _measure(problem, sequence_schedule(fitted.problem, s, "scale"), latency, at)
            if attempt.cost < best.cost:
                best = better(attempt, f"{label} ({where})")
            if float(mine[s].sum()) < start_cost:
                start, start_cost, start_label = s, float(mine[s].sum()), label
    seq = start
    for level, per_node in enumerate(anneal):
        if deadline.passed():
            break
        moves = per_node * len(problem.nodes)
        annealed = anneal_sequence(fitted.problem, budget, seq, mine, moves, SEED + level, deadline)
        if annealed.seq is None:
            break
        seq = annealed.seq
        attempt = _measure(problem, sequence_schedule(fitted.problem, seq, "scale"), latency, at)
        if attempt.cost < best.cost:
            best = better(attempt, f"{start_label}, then annealed ({where})")
    return best


def _run(
    inner: Inner, problem: SchedulingProblem, limit_s: float, above: float | None
) -> tuple[Schedule | None, PoetError | None]:
    """``inner``'s schedule (allowed to stop once its bound is ``above`` that cost), or its error."""
    try:
        return inner(problem, max(0.0, limit_s), above), None
    except PoetError as e:
        return None, e


def _finite(cost: float) -> float | None:
    """A cost to stop above, None for no schedule yet (inf)."""
    return cost if math.isfinite(cost) else None


def _marked(
    schedule: Schedule, deadline: Deadline, first_cut: str, lost: bool, chosen: bool = False
) -> Schedule:
    """``schedule``, its report saying the safety stop cut the run: in ``first_cut`` where it cut the
    order search or the sequences (the first phase it cut); else, where a run it cut was not returned
    or the given order's run was left out (``lost``), in "the chosen order's schedule" (``chosen``:
    that run was one of them) or "the given order's schedule"."""
    if deadline.hit:
        phase = first_cut
    elif lost:
        phase = "the chosen order's schedule" if chosen else "the given order's schedule"
    else:
        return schedule
    return replace(schedule, report=schedule.report.cut_at(phase))


def _cut(schedule: Schedule | None) -> bool:
    return schedule is not None and bool(schedule.report.cut_by_time_limit)


def _against_plain(
    status: str, cost: float, plain: float, before_gap: Mapping[str, object], **fields: object
) -> SolveReport:
    """A report whose bound is the plain pass (every node once: a bound for all orders), keys in the order
    plan.json lists them: ``before_gap``'s between the bound's and the gap, ``fields`` after it."""
    report = SolveReport.of(
        status=status, objective=cost, bound=plain, bound_from="plain pass", bound_covers=ALL_ORDERS
    )
    report = report.with_(**before_gap)
    return report.with_(gap=max(0.0, cost - plain) / max(abs(cost), 1e-300), **fields)


def _ours(
    ours: Attempt, order_bound: float | None, plain: float, choice: OrderChoice, order_s: float, began: float
) -> Schedule:
    assert ours.schedule is not None
    report = _against_plain(
        "feasible",
        ours.cost,
        plain,
        {"order_bound": order_bound},
        seconds=round(time.perf_counter() - began, 3),
        first_valid_s=round(ours.at_s, 3),
        schedule_from=ours.origin,
    )
    return replace(ours.schedule, report=_order_info(report, choice, order_s))


def _labelled(
    schedule: Schedule, choice: OrderChoice, ordered: SchedulingProblem, order_s: float, ours: Attempt
) -> Schedule:
    report = schedule.report
    covers = ALL_ORDERS if report.bound_from == "plain pass" or forced(ordered) else THIS_ORDER
    if report.status == "optimal" and covers == THIS_ORDER:
        report = report.with_(status="optimal for this order")
    report = report.with_(bound_covers=covers)
    first = report.first_valid_s
    if first is not None:
        report = report.with_(
            first_valid_s=round(min(first + order_s, ours.at_s if ours.schedule else math.inf), 3)
        )
    if report.seconds is not None:
        report = report.with_(seconds=round(report.seconds + order_s, 3))
    return replace(schedule, report=_order_info(report, choice, order_s))
