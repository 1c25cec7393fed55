"""Simulated annealing over compute sequences with recomputations (issue 55), after FastSA (Imanishi
et al., NeurIPS 2023): where the greedy constructions (:mod:`~poet_edge.schedulers.fit`) and the
sequence search (:mod:`~poet_edge.schedulers.seq_search`) stop, moves that may cost more for a while
reorder the steps and trade recomputations.

The sequence's instances sit on a time axis of ``SPACING`` slots per step, so that an instance can be
added or moved between two others without renumbering. An instance is live from its slot to the last
slot that reads it (each read uses the latest earlier instance of its node, as in
:class:`~poet_edge.schedulers.ordering.Sequences`), and the RAM of every slot is kept up to date move by
move (only the instances of the moved node and of its inputs change). A move is one of:

* *split*: a value live over a step above the budget is recomputed right before its next read after
  that step (half the time with those of its inputs the new instance would otherwise keep live);
* *remove*: a recomputation is dropped (the reads it served use the instance before it);
* *shift*: an instance goes to another free slot up to ``MOVE`` steps away (half the time a step near
  one above the budget, taken to its other side), its inputs' instances before it.

A move is judged by cost + weight x (bytes over the budget, summed over the steps) and taken when that
does not grow, else with the Metropolis probability at a temperature cooled geometrically from the mean
node cost to ``COOL`` of it over the moves. The weight starts at ``WEIGHT`` mean node costs per mean
value size and step, and grows by ``RAISE`` each ``CHECK`` moves that end over the budget (so a start
that overflows is pushed to fit). Work is counted in moves from a fixed seed, never timed: the same
problem, start and moves give the same sequence on any machine and load.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.ordering import Deadline

SPACING = 4  # slots per step (the free ones take added or moved instances)
MOVE = 50  # a move takes an instance at most this many steps away
SPLIT, REMOVE = 0.3, 0.3  # the moves' shares (the rest: shift)
WEIGHT = 30.0  # overflow weight: mean node costs per mean value size and step, at the start
RAISE = 1.3  # ... times this each CHECK moves that end over the budget
CHECK = 20000  # moves between weight checks (and re-spacings of the slots)
COOL = 0.002  # the final temperature, as a share of the first (the mean node cost)
SEED = 55


@dataclass(frozen=True)
class Annealed:
    """The cheapest sequence found that fits the budget (node indices; None: none did), its cost, the
    moves made."""

    seq: np.ndarray | None
    cost: float
    moves: int


class Axis:
    """The instances of a sequence on the slotted time axis, with each slot's RAM."""

    def __init__(self, problem: SchedulingProblem, seq: Sequence[int], budget: int) -> None:
        self.n, self.budget = len(problem.nodes), budget
        self.out = [node.out_bytes for node in problem.nodes]
        self.ws = [node.workspace_bytes for node in problem.nodes]
        self.fixed = problem.fixed_bytes
        self.inputs = [sorted(set(p)) for p in problem.preds()]
        self.readers = [sorted(set(s)) for s in problem.succs()]
        self.place(seq)

    def place(self, seq: Sequence[int]) -> None:
        """Puts ``seq`` on a fresh axis, ``SPACING`` slots per step."""
        self.size = SPACING * (len(seq) + 1)
        self.at = [-1] * self.size  # the node computed at each slot
        self.inst: list[list[int]] = [[] for _ in range(self.n)]  # each node's slots, ascending
        for i, v in enumerate(seq):
            s = SPACING * i + SPACING // 2
            self.at[s] = int(v)
            self.inst[int(v)].append(s)
        self.mem = np.full(self.size, self.fixed, dtype=np.int64)
        self.used = np.zeros(self.size, dtype=np.int64)
        for s, v in enumerate(self.at):
            if v >= 0:
                self.used[s] = 1
                self.mem[s] += self.ws[v]
        self._hot: np.ndarray | None = None
        self.ends: list[list[int]] = []
        for u in range(self.n):
            e = self.node_ends(u)
            assert e is not None, "a compute sequence uses a value before any instance of it"
            self.ends.append(e)
            for s, end in zip(self.inst[u], e, strict=True):
                self.mem[s : end + 1] += self.out[u]

    def node_ends(self, u: int) -> list[int] | None:
        """The last slot reading each instance of ``u`` (its own slot when unread); None when a read
        has no earlier instance."""
        slots = self.inst[u]
        if len(slots) == 1:  # the common case: the last read of any reader, none before the instance
            end = slots[0]
            for w in self.readers[u]:
                reads = self.inst[w]
                if reads[0] <= slots[0]:
                    return None
                if reads[-1] > end:
                    end = reads[-1]
            return [end]
        ends = list(slots)
        for w in self.readers[u]:
            for r in self.inst[w]:
                k = bisect.bisect_left(slots, r) - 1
                if k < 0:
                    return None
                if r > ends[k]:
                    ends[k] = r
        return ends

    def sequence(self) -> np.ndarray:
        return np.array([v for v in self.at if v >= 0], dtype=np.int64)

    def overflow(self, lo: int = 0, hi: int | None = None) -> int:
        """Bytes over the budget summed over the computing slots in [lo, hi)."""
        return int(np.maximum(self.mem[lo:hi] - self.budget, 0) @ self.used[lo:hi])

    def hot(self) -> np.ndarray:
        """The computing slots above the budget (kept until the next move that is not undone)."""
        if self._hot is None:
            self._hot = np.flatnonzero((self.mem > self.budget) & (self.used > 0))
        return self._hot

    def free_before(self, s: int, lo: int, taken: set[int]) -> int | None:
        """The latest free slot in (lo, s) not in ``taken``."""
        for t in range(s - 1, lo, -1):
            if self.at[t] < 0 and t not in taken:
                return t
        return None

    def apply(self, changes: dict[int, list[int]]) -> tuple[int, _Undo] | None:
        """Gives the nodes in ``changes`` those slots: (the change in overflow, how to undo it), or None
        (nothing changed) when a read would have no earlier instance."""
        affected = dict.fromkeys(changes)
        for v in changes:
            affected.update(dict.fromkeys(self.inputs[v]))
        previous = {v: self.inst[v] for v in changes}
        for v, slots in changes.items():
            self.inst[v] = slots
        new: dict[int, list[int]] = {}  # the nodes whose instances or ends change
        for u in affected:
            e = self.node_ends(u)
            if e is None:
                for v in changes:
                    self.inst[v] = previous[v]
                return None
            if u in previous or e != self.ends[u]:
                new[u] = e
        old = {u: (previous.get(u, self.inst[u]), self.ends[u]) for u in new}
        spans = [  # the instances that change: the RAM changes within them only
            span
            for u, e in new.items()
            for span in set(zip(*old[u], strict=True)) ^ set(zip(self.inst[u], e, strict=True))
        ]
        lo = min((s for s, _ in spans), default=0)
        hi = max((e for _, e in spans), default=0) + 1
        before = self.overflow(lo, hi)
        hot, self._hot = self._hot, None
        slots_changed: list[tuple[int, int, int]] = []
        for v in changes:
            was, now = set(old[v][0]), set(self.inst[v])
            for s in sorted(was - now):
                self._slot(s, v, -1)
                slots_changed.append((s, v, -1))
            for s in sorted(now - was):
                self._slot(s, v, 1)
                slots_changed.append((s, v, 1))
        for u, e in new.items():
            self._move(u, old[u], (self.inst[u], e))
        return self.overflow(lo, hi) - before, _Undo(old, slots_changed, hot)

    def undo(self, undo: _Undo) -> None:
        for u, was in undo.old.items():
            self._move(u, (self.inst[u], self.ends[u]), was)
        for s, v, sign in reversed(undo.slots):
            self._slot(s, v, -sign)
        self._hot = undo.hot

    def _slot(self, s: int, v: int, sign: int) -> None:
        self.at[s] = v if sign > 0 else -1
        self.used[s] = 1 if sign > 0 else 0
        self.mem[s] += sign * self.ws[v]

    def _move(self, u: int, was: tuple[list[int], list[int]], now: tuple[list[int], list[int]]) -> None:
        """Node ``u``'s instances and ends from ``was`` to ``now``, in the RAM too."""
        if was[0] == now[0] and was[1] == now[1]:
            self.inst[u], self.ends[u] = now
            return
        size = self.out[u]
        if len(was[0]) == len(now[0]) == 1 and was[0] == now[0]:  # one instance, its end moved
            e0, e1 = was[1][0], now[1][0]
            self.mem[min(e0, e1) + 1 : max(e0, e1) + 1] += size if e1 > e0 else -size
        else:
            before, after = set(zip(*was, strict=True)), set(zip(*now, strict=True))
            for s, e in before - after:
                self.mem[s : e + 1] -= size
            for s, e in after - before:
                self.mem[s : e + 1] += size
        self.inst[u], self.ends[u] = now


@dataclass(frozen=True)
class _Undo:
    old: dict[int, tuple[list[int], list[int]]]
    slots: list[tuple[int, int, int]]
    hot: np.ndarray | None  # the slots above the budget before the move


def split(axis: Axis, rng: random.Random, allowed: list[bool]) -> dict[int, list[int]] | None:
    """The *split* move (module docstring) as the new slots of the nodes it changes; None: none found."""
    hot = axis.hot()
    if not len(hot):
        return None
    t = int(hot[rng.randrange(len(hot))])
    for _ in range(40):  # a value live over slot t, computed before it
        u = rng.randrange(axis.n)
        slots, ends = axis.inst[u], axis.ends[u]
        k = bisect.bisect_right(slots, t) - 1
        if allowed[u] and k >= 0 and slots[k] < t < ends[k]:
            break
    else:
        return None
    reads = [r for w in axis.readers[u] for r in axis.inst[w] if t < r <= ends[k]]
    s = axis.free_before(min(reads), t, set()) if reads else None
    if s is None:
        return None
    changes = {u: sorted([*slots, s])}
    taken = {s}
    if rng.random() < 0.5:  # its inputs too, where the new instance would keep them live past t
        for w in axis.inputs[u]:
            ws = axis.inst[w]
            kw = bisect.bisect_left(ws, s) - 1
            if not allowed[w] or kw < 0 or axis.ends[w][kw] >= s or ws[kw] >= t:
                continue
            s2 = axis.free_before(s, t, taken)
            if s2 is not None:
                changes[w] = sorted([*changes.get(w, ws), s2])
                taken.add(s2)
    return changes


def remove(axis: Axis, rng: random.Random, again: list[int]) -> dict[int, list[int]] | None:
    """The *remove* move: one recomputation of a node of ``again`` (nodes with more than one instance)."""
    if not again:
        return None
    v = again[rng.randrange(len(again))]
    slots = axis.inst[v]
    if len(slots) < 2:
        return None
    k = rng.randrange(1, len(slots))
    return {v: slots[:k] + slots[k + 1 :]}


def shift(axis: Axis, rng: random.Random, frozen: list[bool]) -> dict[int, list[int]] | None:
    """The *shift* move: one instance of a node not ``frozen`` to a free slot (module docstring)."""
    reach = MOVE * SPACING
    if rng.random() < 0.5:  # a step near one above the budget, to the other side of it
        hot = axis.hot()
        if not len(hot):
            return None
        t = int(hot[rng.randrange(len(hot))])
        s = t + rng.randint(-reach, reach)
        if not 0 <= s < axis.size or axis.at[s] < 0 or not 1 < t < axis.size - 1:
            return None
        v = axis.at[s]
        if s < t:
            to = rng.randint(t + 1, min(axis.size - 1, t + reach))
        else:
            to = rng.randint(max(1, t - reach), t - 1)
    else:
        v = rng.randrange(axis.n)
        s = axis.inst[v][rng.randrange(len(axis.inst[v]))]
        to = s + rng.randint(-reach, reach)
    if frozen[v] or not 0 < to < axis.size or axis.at[to] >= 0:
        return None
    if any(axis.inst[w][0] >= to for w in axis.inputs[v]):
        return None
    slots = axis.inst[v]
    return {v: sorted([*(x for x in slots if x != s), to])}


def anneal_sequence(
    problem: SchedulingProblem,
    budget: int,
    start: Sequence[int] | np.ndarray,
    cost: Sequence[float] | np.ndarray,
    moves: int,
    seed: int = SEED,
    deadline: Deadline | None = None,
) -> Annealed:
    """The module docstring's annealing from ``start`` (a valid compute sequence of ``problem``'s nodes,
    fitting ``budget`` or not), ``moves`` moves (fewer past ``deadline``, the safety stop). Nodes that
    are not recomputable or invalidate another are not recomputed; nodes in an ``invalidated_by`` pair
    are not moved."""
    deadline = deadline or Deadline()
    costs = [float(c) for c in cost]
    axis = Axis(problem, [int(v) for v in start], budget)
    allowed = [node.recomputable for node in problem.nodes]
    frozen = [False] * len(problem.nodes)
    for a, b in problem.invalidated_by:
        allowed[a] = False
        frozen[a] = frozen[b] = True
    mean_cost = max(sum(costs) / max(1, len(costs)), 1e-300)
    mean_size = max(1.0, sum(axis.out) / max(1, len(axis.out)))
    weight = WEIGHT * mean_cost / mean_size
    temp0 = mean_cost
    rng = random.Random(seed)
    total = float(sum(costs[int(v)] for v in start))
    over = axis.overflow()
    best: np.ndarray | None = axis.sequence() if over == 0 else None
    best_cost = total if over == 0 else math.inf
    again = sorted(v for v in range(axis.n) if len(axis.inst[v]) > 1)
    done = 0
    while done < moves:
        if done % CHECK == 0 and done:
            if deadline.passed():
                break
            if over > 0:
                weight *= RAISE
            axis.place(axis.sequence().tolist())  # fresh free slots around every step
            again = sorted(v for v in range(axis.n) if len(axis.inst[v]) > 1)
        temp = temp0 * COOL ** (done / moves)
        done += 1
        pick = rng.random()
        if pick < SPLIT:
            changes = split(axis, rng, allowed)
        elif pick < SPLIT + REMOVE:
            changes = remove(axis, rng, again)
        else:
            changes = shift(axis, rng, frozen)
        if changes is None:
            continue
        delta_cost = sum((len(slots) - len(axis.inst[v])) * costs[v] for v, slots in changes.items())
        applied = axis.apply(changes)
        if applied is None:
            continue
        delta_over, undo = applied
        delta = weight * delta_over + delta_cost
        if delta > 0 and rng.random() >= math.exp(-delta / temp):
            axis.undo(undo)
            continue
        over += delta_over
        total += delta_cost
        for v, slots in changes.items():
            if len(slots) > 1 and v not in again:
                bisect.insort(again, v)
        if over == 0 and total < best_cost * (1 - 1e-12):
            best, best_cost = axis.sequence(), total
    exact = math.fsum(costs[int(v)] for v in best) if best is not None else math.inf  # no drift
    return Annealed(best, exact, done)
