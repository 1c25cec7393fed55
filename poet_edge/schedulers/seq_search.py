"""Local search over compute sequences with recomputations (issue 55): fewer, cheaper recomputations
for a sequence that already fits.

A compute sequence lists nodes, a node more than once where it is recomputed; each step uses the
latest earlier instance of each input, an instance lives from its step to its last such use
(:class:`~poet_edge.schedulers.ordering.Sequences` gives the RAM curve exactly). Starting from a
sequence that fits the budget (:func:`~poet_edge.schedulers.ordering.insert_recomputations`'s):

* *polish*: every recomputation (an instance that is not its node's first), costliest first, is
  removed where the sequence still fits without it;
* *ruin and recreate* (large-neighbourhood search): ``k`` of the recomputations (1 to ``RUIN``, drawn
  from a fixed seed) are removed, the overflow this leaves is repaired by the same greedy insertion
  (exact gains per unit of cost), the result polished; it replaces the incumbent when it fits and
  costs no more (ties accepted: the search drifts across equal-cost sequences).

Work is counted in evaluations of the RAM curve, never in seconds, and the moves come from a fixed
seed: the same problem and work give the same sequence on any machine and load, and a run with more
work passes through the same incumbents first (its result is never costlier).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.ordering import SEED, Deadline, Sequences, insert_recomputations

RUIN = 3  # at most this many recomputations removed per ruin-and-recreate step
REPAIR_WORK = 200  # evaluations a repair may take


@dataclass(frozen=True)
class Improved:
    """The cheapest fitting sequence found, its cost, the evaluations spent, the steps accepted."""

    seq: np.ndarray
    cost: float
    evaluations: int
    accepted: int


def _recomputations(seq: np.ndarray) -> np.ndarray:
    """Positions of the instances that are not their node's first."""
    _, first = np.unique(seq, return_index=True)
    mark = np.ones(len(seq), dtype=bool)
    mark[first] = False
    return np.flatnonzero(mark)


def polish(seq: np.ndarray, budget: int, seqs: Sequences, costs: np.ndarray, work: int) -> np.ndarray:
    """``seq`` without the recomputations it fits without (costliest first, then earliest), at most
    ``work`` evaluations."""
    extra = _recomputations(seq)
    keep = np.ones(len(seq), dtype=bool)
    for k in sorted(extra.tolist(), key=lambda k: (-float(costs[seq[k]]), k)):
        if seqs.evaluations >= work:
            break
        keep[k] = False
        mem, _ = seqs.curve(seq[keep])
        if (mem > budget).any():
            keep[k] = True
    return seq[keep]


def improve_sequence(
    problem: SchedulingProblem,
    budget: int,
    start: np.ndarray,
    cost: Sequence[float] | np.ndarray,
    work: int,
    deadline: Deadline | None = None,
) -> Improved:
    """Polish, then ruin and recreate (module docstring) from ``start`` (a sequence that fits), at most
    ``work`` evaluations in all; no ruin past ``deadline`` (the safety stop)."""
    deadline = deadline or Deadline()
    costs = np.asarray(cost, dtype=float)
    seqs = Sequences(problem)
    rng = random.Random(SEED)
    best = polish(np.asarray(start, dtype=np.int64), budget, seqs, costs, work)
    best_cost = float(costs[best].sum())
    accepted = 0
    while seqs.evaluations < work and not deadline.passed():
        extra = _recomputations(best)
        if not len(extra):
            break
        k = rng.randint(1, min(RUIN, len(extra)))
        ruined = np.delete(best, sorted(rng.sample(extra.tolist(), k)))
        left = min(REPAIR_WORK, work - seqs.evaluations)
        seed = rng.randrange(1 << 30)
        repaired, spent = insert_recomputations(problem, budget, left, costs, start=ruined, seed=seed)
        seqs.evaluations += spent
        if repaired is None:
            continue
        found = polish(repaired, budget, seqs, costs, work)
        found_cost = float(costs[found].sum())
        if found_cost <= best_cost:
            accepted += 1
            best, best_cost = found, found_cost
    return Improved(best, best_cost, seqs.evaluations, accepted)
