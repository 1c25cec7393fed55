"""Recomputation on demand along a list of targets (issue 55): a compute sequence that fits the budget
where inserting recomputations gets stuck (dense graphs near their floor).

The targets (the problem's order, or a sequence with recomputations to finish) run in turn. Before a
target runs, its missing ancestors (its *cone*) are recomputed depth first, the input whose missing
ancestors weigh the most bytes first (what is held meanwhile is then least); every value a node of the
cone still has to read stays resident (pinned), so each cone node runs once. When a compute would
exceed the budget, an unpinned resident value is evicted: the one with the least estimated cost per
byte and per step until its next read, the cost being its recomputation there, with the inputs that
will be gone by then, recursively (at most ``CONE_VISITS`` nodes; beyond, a prohibitive cost). A value
nothing reads any more is freed at once; one that a later target recomputes, after its last read
before that. An eviction means later reads take a new instance, so the sequence's RAM curve
(:class:`~poet_edge.schedulers.ordering.Sequences`: an instance is freed after its last read) never
exceeds what the run accounted; the caller checks it anyway.

Work is counted in computes (``work``), the choices are deterministic: the same problem gives the same
sequence on any machine. None when the pinned values alone exceed the budget or the work is spent.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from poet_edge.problem import SchedulingProblem

CONE_VISITS = 64  # the byte weight of an input's missing ancestors looks at most this many nodes


class _Run:
    def __init__(
        self, problem: SchedulingProblem, budget: int, costs: np.ndarray, work: int, targets: np.ndarray
    ) -> None:
        self.preds = [sorted(set(p)) for p in problem.preds()]
        self.reads: list[list[int]] = [[] for _ in problem.nodes]  # the positions of each value's readers
        self.runs: list[list[int]] = [[] for _ in problem.nodes]  # the positions of each node's targets
        for i, v in enumerate(targets.tolist()):
            self.runs[v].append(i)
            for u in self.preds[v]:
                self.reads[u].append(i)
        self.never = 4 * len(targets)
        self.out = [node.out_bytes for node in problem.nodes]
        self.ws = [node.workspace_bytes for node in problem.nodes]
        self.allowed = [node.recomputable for node in problem.nodes]
        for a, _ in problem.invalidated_by:
            self.allowed[a] = False
        self.room = budget - problem.fixed_bytes
        self.costs = costs
        self.work = work
        self.resident: set[int] = set()
        self.pins: dict[int, int] = {}
        self.live = 0
        self.seq: list[int] = []
        self.made: set[int] = set()  # nodes run at least once
        self.t = 0

    def next_use(self, u: int) -> int:
        """The position of the next target after the current one that reads ``u`` (``never`` if none, or
        if ``u`` is a target again before it: it is recomputed there)."""
        s, again = self.reads[u], self.runs[u]
        k, j = bisect.bisect_right(s, self.t), bisect.bisect_right(again, self.t)
        if k == len(s) or (j < len(again) and again[j] < s[k]):
            return self.never
        return s[k]

    def cone(self, u: int) -> int:
        """Bytes of ``u`` and its missing ancestors (at most ``CONE_VISITS`` looked at)."""
        total, todo, seen = 0, [u], {u}
        while todo and len(seen) <= CONE_VISITS:
            x = todo.pop()
            total += self.out[x]
            for p in self.preds[x]:
                if p not in seen and p not in self.resident:
                    seen.add(p)
                    todo.append(p)
        return total

    def last_read(self, u: int) -> int:
        """The position of the last target that reads ``u`` (-1 when none)."""
        s = self.reads[u]
        return s[-1] if s else -1

    def score(self, u: int) -> float:
        """``u``'s eviction score (the module docstring): lower is evicted first."""
        if not self.allowed[u]:
            return float("inf")
        at = self.next_use(u)
        cost, todo, seen = 0.0, [u], {u}
        while todo:
            if len(seen) > CONE_VISITS:
                cost += 1e6 * float(self.costs[u] + 1)
                break
            x = todo.pop()
            cost += float(self.costs[x])
            for p in self.preds[x]:
                if p not in seen and not (p in self.resident and self.last_read(p) >= at):
                    seen.add(p)
                    todo.append(p)
        return cost / (self.out[u] * max(1, at - self.t))

    def make_room(self, need: int) -> bool:
        while self.live + need > self.room:
            free = [u for u in self.resident if not self.pins.get(u)]
            if not free:
                return False
            score, _, victim = min((self.score(u), -self.out[u], u) for u in free)
            if score == float("inf"):
                return False
            self.resident.discard(victim)
            self.live -= self.out[victim]
        return True

    def target(self, node: int) -> bool:
        """Computes target ``node`` after its cone (the module docstring); False when it cannot."""
        cone, todo = set(), [node]
        while todo:
            for p in self.preds[todo.pop()]:
                if p not in self.resident and p not in cone:
                    cone.add(p)
                    todo.append(p)
        self.pins = {}
        for x in (*cone, node):
            for p in self.preds[x]:
                self.pins[p] = self.pins.get(p, 0) + 1
        stack = [(node, False)]  # depth first, without recursion: (node, its inputs already made)
        while stack:
            v, ready = stack.pop()
            if v in self.resident:
                continue
            if ready:
                if not self.compute(v):
                    return False
                continue
            stack.append((v, True))
            missing = [u for u in self.preds[v] if u not in self.resident]
            stack.extend((u, False) for u in sorted(missing, key=lambda u: (self.cone(u), -u)))
        return True

    def compute(self, v: int) -> bool:
        """Runs ``v`` (its inputs are resident), making room first; frees inputs nothing reads any more."""
        if (
            self.work <= 0
            or (v in self.made and not self.allowed[v])
            or not self.make_room(self.out[v] + self.ws[v])
        ):
            return False
        self.seq.append(v)
        self.made.add(v)
        self.work -= 1
        self.resident.add(v)
        self.live += self.out[v]
        for u in self.preds[v]:
            self.pins[u] -= 1
            if not self.pins[u] and self.next_use(u) == self.never and u in self.resident:
                self.resident.discard(u)
                self.live -= self.out[u]
        return True


def on_demand_sequence(
    problem: SchedulingProblem,
    budget: int,
    cost: Sequence[float] | np.ndarray,
    work: int,
    targets: np.ndarray | None = None,
) -> np.ndarray | None:
    """The module docstring's sequence for ``problem`` within ``budget`` (bytes, with the fixed bytes),
    at most ``work`` computes; None when it does not find one. ``targets``: the nodes to run in this
    order (a node listed again is run again unless it is still resident; default: the problem's order)."""
    order = np.arange(len(problem.nodes), dtype=np.int64) if targets is None else np.asarray(targets)
    run = _Run(problem, budget, np.asarray(cost, dtype=float), work, order)
    for i, v in enumerate(order.tolist()):
        run.t = i
        if v in run.resident:
            continue
        if not run.target(v):
            return None
        if run.next_use(v) == run.never:
            run.resident.discard(v)
            run.live -= run.out[v]
    return np.asarray(run.seq, dtype=np.int64)
