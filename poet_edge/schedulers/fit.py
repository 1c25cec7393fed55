"""A first compute sequence that fits the budget, for an order whose no-recomputation pass does not
(issue 55): two constructions, each counted in work, never timed.

* *on demand*: the order's nodes run with their missing inputs recomputed depth first and values
  evicted under pressure (:func:`~poet_edge.schedulers.on_demand.on_demand_sequence`);
* *lowered*: recomputations inserted (:func:`~poet_edge.schedulers.ordering.insert_recomputations`)
  while the target is lowered from the order's peak to the budget in ``STEPS`` steps (a step that gets
  stuck is halved, down to ``MIN_STEP`` bytes): each round starts
  from a sequence that fits a slightly higher target, so the greedy insertion rarely gets stuck where
  going straight to the budget does. Where it ends above the budget, that sequence's nodes are run on
  demand at the budget (few evictions are left to make).

Orders are tried in turn until one gets a fitting sequence; the caller improves each sequence of that
order (the cheapest at the start is not always the cheapest after the sequence search). With
``beside``, once the first order gets none, the orders after it are tried two at a time: each second one
in a child process (:func:`~poet_edge.schedulers.proof_process.start_call`) while this process tries
the first. Each order's constructions are counted work of their own, so the result is the one the
orders tried in turn give (the first order in the list that fits), only sooner on two cores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers import proof_process
from poet_edge.schedulers.on_demand import on_demand_sequence
from poet_edge.schedulers.ordering import Deadline, Sequences, insert_recomputations, reorder

STEPS = 20  # lowered: the target goes from the order's peak to the budget in this many steps
MIN_STEP = 32  # ... a stuck step is halved down to this many bytes
ROUND_WORK = 2000  # ... evaluations one round may take
LOWER_WORK = 30000  # ... evaluations in all, or LOWER_WORK_PER_NODE per node of the problem when more,
LOWER_WORK_PER_NODE = 60  # up to LOWER_WORK_MAX (each evaluation is a RAM curve, linear in the nodes: the
LOWER_WORK_MAX = 120000  # work grows quadratically with the graph; the cap is 2,000 nodes' share)
ON_DEMAND_WORK = 20  # on demand: at most this many computes per node of the problem


@dataclass(frozen=True)
class Fitted:
    """The fitting sequences found in one order: ``problem`` with its nodes in ``order`` (indices of the
    input problem's nodes), the sequences (node indices of ``problem``) with where each came from, in
    the order of the module docstring, and the RAM-curve evaluations spent on the way."""

    problem: SchedulingProblem
    order: tuple[int, ...]
    sequences: tuple[tuple[np.ndarray, str], ...]
    evaluations: int


@dataclass(frozen=True)
class Unfit:
    """No order got a fitting sequence: the lowest peak the *lowered* construction reached (bytes, as the
    budget counts them) and the order it reached it in (indices of the input problem's nodes); None
    when no order was tried (the safety stop)."""

    peak: int | None
    order: tuple[int, ...]
    evaluations: int


def lowered_work(n: int) -> int:
    """The lowered construction's evaluations on a problem of ``n`` nodes."""
    return min(LOWER_WORK_MAX, max(LOWER_WORK, LOWER_WORK_PER_NODE * n))


def capped(n: int) -> bool:
    """Whether ``LOWER_WORK_MAX`` caps the lowered construction's work on ``n`` nodes (beyond 2,000 nodes:
    every order tried costs the cap's evaluations, each linear in the nodes, again)."""
    return LOWER_WORK_PER_NODE * n > LOWER_WORK_MAX


def _lowered(
    problem: SchedulingProblem, budget: int, costs: np.ndarray, seqs: Sequences, deadline: Deadline
) -> tuple[np.ndarray, int]:
    """The *lowered* construction: (the last sequence that fit a target, that target)."""
    seq = np.arange(len(problem.nodes), dtype=np.int64)
    top = int(seqs.curve(seq)[0].max())
    step, spent, seed = max(1, (top - budget) // STEPS), 0, 0
    work = lowered_work(len(problem.nodes))
    while top > budget and spent < work and not deadline.passed():
        found, used = insert_recomputations(
            problem, max(budget, top - step), min(ROUND_WORK, work - spent), costs, seq, seed
        )
        spent, seed = spent + used, seed + 1
        if found is None:
            if step <= MIN_STEP:
                break
            step //= 2
            continue
        seq, top = found, int(seqs.curve(found)[0].max())
    seqs.evaluations += spent
    return seq, top


Found = list[tuple[np.ndarray, str]]  # fitting sequences and their origins


def _in_order(
    problem: SchedulingProblem, budget: int, costs: np.ndarray, deadline: Deadline
) -> tuple[Found, int, int]:
    """The fitting sequences of the two constructions in ``problem``'s order, with their origins; the
    evaluations spent; the lowest peak the lowered construction reached."""
    seqs = Sequences(problem)
    found: Found = []
    work = ON_DEMAND_WORK * len(problem.nodes)
    on_demand = on_demand_sequence(problem, budget, costs, work)
    if on_demand is not None:
        found.append((on_demand, "recomputed on demand"))
    lowered, top = _lowered(problem, budget, costs, seqs, deadline)
    if top <= budget:
        found.append((lowered, "recomputations inserted with the target lowered"))
    elif deadline.passed():
        pass
    elif (finished := on_demand_sequence(problem, budget, costs, work, targets=lowered)) is not None:
        found.append((finished, "recomputations inserted with the target lowered, then recomputed on demand"))
    return [f for f in found if int(seqs.curve(f[0])[0].max()) <= budget], seqs.evaluations, top


def in_order_call(
    problem: SchedulingProblem, budget: int, costs: np.ndarray, seconds: float
) -> tuple[Found, int, int, bool]:
    """:func:`_in_order` with a safety stop ``seconds`` from now (run in a child process by
    :func:`fit_sequences`), and whether that stop cut it."""
    deadline = Deadline(time.perf_counter() + seconds)
    found, spent, top = _in_order(problem, budget, costs, deadline)
    return found, spent, top, deadline.hit


ORDER_GRACE = 5.0  # seconds an order's child process may pass the safety stop before it is stopped


def _beside(
    problem: SchedulingProblem, budget: int, costs: np.ndarray, deadline: Deadline
) -> proof_process.Job | None:
    """:func:`in_order_call` started in a child process (None past the safety stop)."""
    left = deadline.at - time.perf_counter()
    if left <= 0:
        return None
    return proof_process.start_call(in_order_call, (problem, budget, costs, left), left, ORDER_GRACE)


def _collect(
    job: proof_process.Job, problem: SchedulingProblem, budget: int, costs: np.ndarray, deadline: Deadline
) -> tuple[Found, int, int]:
    """The child's :func:`_in_order` result; where the child failed, the same work done here."""
    try:
        out, stopped = job.finish()
    except RuntimeError:
        return _in_order(problem, budget, costs, deadline)
    if stopped or out is None:
        deadline.hit = True
        return [], 0, -1
    found, spent, top, hit = out
    deadline.hit = deadline.hit or hit
    return found, spent, top


def fit_sequences(
    problem: SchedulingProblem,
    budget: int,
    cost: Sequence[float] | np.ndarray,
    orders: Sequence[tuple[int, ...]],
    deadline: Deadline | None = None,
    beside: bool = False,
) -> Fitted | Unfit:
    """The module docstring's fitting sequences in the first of ``orders`` (each as indices of
    ``problem``'s nodes, as ``cost`` is) where one fits; :class:`Unfit` when none does. Past
    ``deadline`` (the safety stop) no further round or order is tried (``deadline.hit`` then says so).
    ``beside``: after the first order, every second order in a child process (module docstring)."""
    costs = np.asarray(cost, dtype=float)
    deadline = deadline or Deadline()
    evaluations, peak = 0, None  # peak: the lowest reached, in order ``closest``
    closest: tuple[int, ...] = ()
    job: proof_process.Job | None = None  # the next order's constructions, in a child process
    try:
        for i, order in enumerate(orders):
            if deadline.passed():
                break
            ordered = reorder(problem, order)
            mine = costs[list(order)]
            if job is not None:
                found, spent, top = _collect(job, ordered, budget, mine, deadline)
                job = None
            else:
                if beside and 0 < i < len(orders) - 1:
                    nxt = orders[i + 1]
                    job = _beside(reorder(problem, nxt), budget, costs[list(nxt)], deadline)
                found, spent, top = _in_order(ordered, budget, mine, deadline)
            evaluations += spent
            if found:
                return Fitted(ordered, tuple(order), tuple(found), evaluations)
            if top >= 0 and (peak is None or top < peak):
                peak, closest = top, tuple(order)
    finally:
        if job is not None:
            job.stop()
    return Unfit(peak, closest, evaluations)
