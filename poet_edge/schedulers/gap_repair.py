"""Repair of a gap the stage model's decode cannot fit (:func:`poet_edge.schedulers.stage_model.decode`).

The stage model counts a restoration once per gap and does not see the RAM of the restorations within a
gap, so some of its points (HiGHS's, and the windows' of the large-neighbourhood search) restore a gap
in no order that fits: a value restored for a later stage is in RAM while a long recomputation chain
runs. :func:`restore_evicting` restores the gap in a given order and, where a step would not fit the
room, first frees values the step does not need (the cheapest to bring back per byte first) and brings
them back, by recomputation (with whatever inputs are missing, depth first) or by a page-in of a stored
copy, before the next step that needs them, or at the end of the gap when the stage keeps them. The
repaired gap costs more than the model's point (each value freed this way is restored twice); the
simulator checks the schedule as ever. bert_tiny at 1.1x the floor is the case that needed it: the
windows' points and the stage model's points overflowed there (by 1,021 bytes); repaired, all but one
of them decode to a schedule, each costing a little or much more than its point in the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from poet_edge.problem import ProblemNode
from poet_edge.schedule import Compute, Free, PageIn, Step
from poet_edge.schedulers.engine import Analysis

MAX_STEPS = 4  # x the gap's own restorations (and at least 64): a repair that needs more steps gives up


@dataclass
class _Gap:
    nodes: tuple[ProblemNode, ...]
    an: Analysis
    stage: int
    stored: set[int]
    keep: set[int]
    room: int
    ram: set[int]
    steps: list[Step] = field(default_factory=list)
    byte: int = 0
    peak: int = 0
    spent: float = 0.0  # energy of the steps' recomputations and page-ins
    later: set[int] = field(default_factory=set)  # inputs of the order's restorations still to come
    cap: int = 0
    paged_first: bool = False

    def size(self, v: int) -> int:
        return self.nodes[v].out_bytes

    def can_compute(self, v: int) -> bool:
        return self.nodes[v].recomputable and self.stage <= self.an.recomp_until[v]

    def inputs(self, v: int) -> list[int]:
        return [u for u in self.an.preds[v] if self.size(u) > 0]

    def price(self, v: int) -> float:
        """What bringing v into RAM costs (energy): a page-in of a stored copy, or its recomputation
        with the inputs not in RAM (transitively, a shared input counted for every user); inf when
        neither is possible."""
        missing, stack = set(), [v]
        while stack:  # the values not in RAM that v's recomputation may need
            u = stack.pop()
            if u not in self.ram and u not in missing:
                missing.add(u)
                stack += self.inputs(u) if self.can_compute(u) else []
        cost: dict[int, float] = {}
        for u in sorted(missing):  # inputs have lower indices
            node = self.nodes[u]
            best = node.page_in_j if u in self.stored else math.inf
            if self.can_compute(u):
                best = min(best, node.compute_j + sum(cost.get(w, 0.0) for w in self.inputs(u)))
            cost[u] = best
        return cost[v] if v in cost else 0.0

    def tidy(self, pinned: set[int]) -> None:
        """Frees every value that nothing still needs: not kept, not an input of a restoration to come,
        not pinned by the restoration running."""
        for v in sorted(self.ram):
            if v not in self.keep and v not in self.later and v not in pinned:
                self.free(v)

    def free(self, v: int) -> None:
        self.steps.append(Free(self.nodes[v].name))
        self.ram.discard(v)
        self.byte -= self.size(v)

    def make_room(self, need: int, pinned: set[int]) -> bool:
        """Frees values not in ``pinned`` until ``need`` more bytes fit the room, the cheapest to
        bring back per byte first."""
        while self.byte + need > self.room:
            victims = [v for v in self.ram if v not in pinned]
            if not victims:
                return False
            v = min(victims, key=self.rank)
            if self.price_without(v) == math.inf:
                return False
            self.free(v)
        return True

    def rank(self, v: int) -> tuple[bool, float, int]:
        """Victims first: with ``paged_first``, those with a stored copy (a page-in needs no inputs, so
        it cannot need what is being made room for); then the cheapest to bring back per byte."""
        return (self.paged_first and v not in self.stored, self.price_without(v) / max(self.size(v), 1), v)

    def price_without(self, v: int) -> float:
        """What freeing v now costs: nothing when nothing still needs it, else bringing it back."""
        if v not in self.keep and v not in self.later:
            return 0.0
        self.ram.discard(v)
        try:
            return self.price(v)
        finally:
            self.ram.add(v)

    def bring(self, v: int, pinned: set[int], page: bool) -> bool:
        """Brings v into RAM (``page``: by a page-in of its stored copy); False when it cannot fit."""
        if v in self.ram:
            return True
        if len(self.steps) + len(pinned) > self.cap:  # (pinned: at least the depth of the recursion)
            return False
        node = self.nodes[v]
        by_page = v in self.stored and (page or not self.can_compute(v) or node.page_in_j <= self.price(v))
        held = set(pinned) | {v}
        if not by_page:
            if not self.can_compute(v):
                return False
            for u in self.inputs(v):
                if not self.bring(u, held, False):
                    return False
                held.add(u)
        extra = node.out_bytes + (0 if by_page else node.workspace_bytes)
        if not self.make_room(extra, held):  # (held: v's inputs stay, as they did while brought)
            return False
        self.steps.append(PageIn(node.name) if by_page else Compute(node.name))
        self.spent += node.page_in_j if by_page else node.compute_j
        self.peak = max(self.peak, self.byte + extra)
        self.ram.add(v)
        self.byte += node.out_bytes
        self.tidy(set(pinned) | {v})
        return True


def restore_evicting(
    nodes: tuple[ProblemNode, ...],
    an: Analysis,
    stage: int,
    order: list[tuple[int, str]],
    ram: set[int],
    stored: set[int],
    keep: set[int],
    room: int,
    paged_first: bool = False,
) -> tuple[list[Step], set[int], int, float] | None:
    """The steps of gap ``stage`` restoring ``order`` (``"c"``: recompute, ``"i"``: page in) within
    ``room`` bytes of values, freeing and restoring again what does not fit (see the module
    docstring; ``paged_first``: see :meth:`_Gap.rank`). Returns the steps, the RAM after them
    (``keep``'s values that were in RAM or restored), the most bytes in RAM while a step runs and the
    energy of the steps' recomputations and page-ins; None when the gap cannot be made to fit this
    way."""
    try:
        return _repair(_Gap(nodes, an, stage, stored, keep, room, set(ram), paged_first=paged_first), order)
    except RecursionError:  # a chain of evicted inputs deeper than Python's stack: not repaired
        return None


def _repair(g: _Gap, order: list[tuple[int, str]]) -> tuple[list[Step], set[int], int, float] | None:
    g.byte = sum(g.size(v) for v in g.ram)
    g.cap = max(64, MAX_STEPS * len(order))
    target = (g.ram | {i for i, _ in order}) & g.keep
    needs: list[set[int]] = [set()]
    for j, kind in reversed(order):
        needs.append(needs[-1] | set(g.inputs(j)) if kind == "c" else needs[-1])
    for k, (i, kind) in enumerate(order):
        g.later = needs[-1 - k]
        g.tidy(set())
        if not g.bring(i, set(), kind == "i"):
            return None
    g.later = set()
    while not target <= g.ram:  # what was freed and is kept; one may free another (the cap ends it)
        if not g.bring(min(target - g.ram), set(), False):
            return None
    g.tidy(set())
    if g.peak > g.room or not target <= g.ram:
        return None
    return g.steps, g.ram, g.peak, g.spent
