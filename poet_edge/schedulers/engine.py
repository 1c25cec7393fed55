"""The shared engine of the baseline schedulers: walk the nodes in the problem's order, bring each
node's inputs into RAM (page in, or recompute missing ancestors in topological order), make room by
evicting values under a policy, and free values as soon as nothing can need them any more.

Liveness with recomputation. Target ``t`` (the t-th node in problem order) is computed for the first
time in round t; recomputations only happen in round t, before target t, for ancestors of t.
``req[u]`` is the last round in which value u may be requested: directly by a consumer's first
computation, or by the recomputation of a consumer w (possible until w's invalidator runs)::

    req[u] = max over consumers w of max(w, min(req[w], recomp_until[w]) if w can be recomputed)

A value is *droppable* (may leave RAM without a storage copy) when it can be recomputed in every
round up to ``req[u]``. Non-droppable values stay in RAM (or storage) until round ``req[u]`` is over,
which keeps every later recomputation possible. Droppable values are freed after their last direct
consumer.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

from poet_edge.errors import PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step

DROP = "drop"
PAGE = "page"
RECOMPUTE_VISITS = 16  # recompute_cost looks at most this many missing ancestors; beyond, it says inf


@dataclass(frozen=True)
class Analysis:
    """Static facts about a problem that the engine and the policies use."""

    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]  # sorted
    last_use: tuple[int, ...]  # last direct consumer (own index when none)
    req: tuple[int, ...]
    recomp_until: tuple[int, ...]  # last round in which the node may run (n: no invalidator)
    droppable: tuple[bool, ...]
    dying: tuple[tuple[int, ...], ...]  # per stage: its inputs and itself that no later stage reads, sorted


def analyse(problem: SchedulingProblem, allow_recompute: bool) -> Analysis:
    n = len(problem.nodes)
    preds = tuple(tuple(sorted(set(p))) for p in problem.preds())
    succs = tuple(tuple(sorted(set(s))) for s in problem.succs())
    until = [n] * n
    for a, b in problem.invalidated_by:
        if b <= a:
            raise PoetError(
                f"node {problem.nodes[a].name} is invalidated by {problem.nodes[b].name}, which "
                f"comes before it in the problem's order; no schedule exists in this order"
            )
        until[a] = min(until[a], b)
    can = [allow_recompute and node.recomputable for node in problem.nodes]
    req = [-1] * n
    for u in range(n - 1, -1, -1):
        for w in succs[u]:
            later = min(req[w], until[w]) if can[w] else w
            req[u] = max(req[u], w, later)
    last_use = tuple(max(s, default=u) for u, s in enumerate(succs))
    droppable = tuple(can[u] and req[u] <= until[u] for u in range(n))
    dying = tuple(tuple(u for u in sorted({*preds[t], t}) if last_use[u] <= t) for t in range(n))
    return Analysis(preds, succs, last_use, tuple(req), tuple(until), droppable, dying)


Policy = Callable[["Engine", list[int]], tuple[int, str]]
Hook = Callable[["Engine", int], None]


@dataclass
class Engine:
    """Mutable state of one scheduler run; ``run`` returns the finished schedule."""

    problem: SchedulingProblem
    name: str
    policy: Policy | None
    allow_recompute: bool = False
    allow_paging: bool = False
    after_target: Hook | None = None
    steps: list[Step] = field(default_factory=list)
    in_ram: set[int] = field(default_factory=set)
    in_storage: set[int] = field(default_factory=set)
    live: int = 0
    stored: int = 0
    round: int = 0
    last_access: dict[int, int] = field(default_factory=dict)
    protect: dict[int, int] = field(default_factory=dict)
    work: int = 0  # nodes looked at by the policies' questions and the rounds (a count, not seconds)

    def __post_init__(self) -> None:
        self.an = analyse(self.problem, self.allow_recompute)

    # -- primitive steps -------------------------------------------------------------------------
    def _touch(self, v: int) -> None:
        self.last_access[v] = len(self.steps)

    def compute(self, v: int) -> None:
        self.steps.append(Compute(self.problem.nodes[v].name))
        for u in self.an.preds[v]:
            self._touch(u)
        self._touch(v)
        self.in_ram.add(v)
        self.live += self.problem.nodes[v].out_bytes

    def free(self, v: int) -> None:
        self.steps.append(Free(self.problem.nodes[v].name))
        self.in_ram.discard(v)
        self.live -= self.problem.nodes[v].out_bytes

    def page_out(self, v: int) -> None:
        self.steps.append(PageOut(self.problem.nodes[v].name))
        self.in_storage.add(v)
        self.stored += self.problem.nodes[v].out_bytes

    def page_in(self, v: int) -> None:
        self.steps.append(PageIn(self.problem.nodes[v].name))
        self._touch(v)
        self.in_ram.add(v)
        self.live += self.problem.nodes[v].out_bytes

    # -- questions policies ask --------------------------------------------------------------------
    def can_page(self, v: int) -> bool:
        """True if v can leave RAM with a storage copy (it has one, or may get one now)."""
        if v in self.in_storage:
            return True
        cap = self.problem.storage_bytes
        node = self.problem.nodes[v]
        fits = cap is None or self.stored + node.out_bytes <= cap
        return self.allow_paging and node.pageable and fits

    def next_use(self, v: int) -> int:
        """Round of v's next direct use (first computation of a consumer); a large number if none."""
        succs = self.an.succs[v]
        k = bisect.bisect_left(succs, self.round)
        return succs[k] if k < len(succs) else 2 * len(self.problem.nodes) + 1

    def staleness(self, v: int) -> int:
        return len(self.steps) - self.last_access.get(v, 0) + 1

    def recompute_cost(self, v: int) -> float:
        """Energy to bring v back by recomputation, including its missing ancestors; inf when more than
        ``RECOMPUTE_VISITS`` of them would have to run (bounded work per question, and a value that
        deep is as good as lost)."""
        nodes = self.problem.nodes
        total, stack, seen = 0.0, [v], {v}
        while stack:
            if len(seen) > RECOMPUTE_VISITS:
                self.work += len(seen)
                return float("inf")
            u = stack.pop()
            if u != v and u in self.in_ram:
                continue
            if u != v and u in self.in_storage:
                total += nodes[u].page_in_j
                continue
            total += nodes[u].compute_j
            for p in self.an.preds[u]:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        self.work += len(seen)
        return total

    def evictable(self, v: int) -> bool:
        if self.protect.get(v, 0) > 0 or self.problem.nodes[v].out_bytes == 0:
            return False
        return self.an.droppable[v] or self.can_page(v)

    # -- making room -------------------------------------------------------------------------------
    def _fail(self, v: int, extra: int, what: str) -> PoetError:
        p = self.problem
        need = p.fixed_bytes + self.live + extra
        held = sorted(self.in_ram, key=lambda u: -p.nodes[u].out_bytes)[:5]
        shown = ", ".join(f"{p.nodes[u].name} ({p.nodes[u].out_bytes} B)" for u in held)
        return PoetError(
            f"scheduler '{self.name}' found no schedule: {what} node {p.nodes[v].name} needs {need} bytes "
            f"(fixed {p.fixed_bytes} + resident {self.live} + {extra}) > budget {p.budget_bytes} by "
            f"{need - p.budget_bytes} bytes, and no resident value can be evicted"
            + (f" (largest resident: {shown})" if shown else "")
        )

    def make_room(self, v: int, extra: int, what: str) -> None:
        p = self.problem
        while p.fixed_bytes + self.live + extra > p.budget_bytes:
            candidates = sorted(u for u in self.in_ram if self.evictable(u))
            if self.policy is None or not candidates:
                raise self._fail(v, extra, what)
            victim, mode = self.policy(self, candidates)
            if mode == PAGE and victim not in self.in_storage:
                self.page_out(victim)
            self.free(victim)

    # -- one round ---------------------------------------------------------------------------------
    def _missing(self, t: int) -> list[int]:
        """Values to page in or recompute before target t, in topological order."""
        out: set[int] = set()
        stack = [u for u in self.an.preds[t] if u not in self.in_ram]
        while stack:
            u = stack.pop()
            if u in out:
                continue
            out.add(u)
            if u not in self.in_storage:
                self._check_recomputable(u, t)
                stack.extend(p for p in self.an.preds[u] if p not in self.in_ram and p not in out)
        return sorted(out)

    def _check_recomputable(self, u: int, t: int) -> None:
        node = self.problem.nodes[u]
        if not (self.allow_recompute and node.recomputable and t <= self.an.recomp_until[u]):
            raise PoetError(
                f"scheduler '{self.name}' internal error: value {node.name} is needed by "
                f"{self.problem.nodes[t].name} but is neither resident nor recomputable"
            )

    def _materialize(self, v: int) -> None:
        """Page v in if storage has it, otherwise recompute it (its inputs are resident by now)."""
        node = self.problem.nodes[v]
        if v in self.in_storage:
            self.make_room(v, node.out_bytes, "paging in")
            self.page_in(v)
            return
        self.make_room(v, node.out_bytes + node.workspace_bytes, "recomputing")
        self.compute(v)

    def _release(self, t: int, touched: list[int]) -> None:
        an = self.an
        for u in sorted(set(touched)):
            if u not in self.in_ram or an.last_use[u] > t:
                continue
            if an.droppable[u] or u in self.in_storage or an.req[u] <= t:
                self.free(u)

    def run_round(self, t: int, release_at: list[list[int]]) -> None:
        self.round = t
        items = self._missing(t)
        users = [u for x in items if x not in self.in_storage for u in self.an.preds[x]]
        users += list(self.an.preds[t])
        for u in users:
            self.protect[u] = self.protect.get(u, 0) + 1
        for x in items:
            recomputed = x not in self.in_storage
            self._materialize(x)
            for u in self.an.preds[x] if recomputed else ():
                self.protect[u] -= 1
        node = self.problem.nodes[t]
        self.make_room(t, node.out_bytes + node.workspace_bytes, "computing")
        self.compute(t)
        for u in self.an.preds[t]:
            self.protect[u] -= 1
        self.protect = {u: c for u, c in self.protect.items() if c > 0}
        touched = items + users + [t] + release_at[t]
        self._release(t, touched)

    def run(self) -> Schedule:
        check_budget(self.problem)
        n = len(self.problem.nodes)
        release_at: list[list[int]] = [[] for _ in range(n)]
        for u in range(n):
            for r in {self.an.last_use[u], self.an.req[u]}:
                if 0 <= r < n:
                    release_at[r].append(u)
        for t in range(n):
            self.run_round(t, release_at)
            if self.after_target is not None:
                self.after_target(self, t)
        return Schedule(tuple(self.steps), self.name)
