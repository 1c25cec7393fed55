"""Local search over plans of scheduler "scale" (:mod:`poet_edge.schedulers.plan_replay`).

First-improvement descent over plans judged by the exact replay (fewer overflow bytes, then lower
cost), moves = change one segment (resident / PAGE / DROP; a DROP is restored early where its value
may not be recomputed at its use: :func:`~poet_edge.schedulers.plan_replay.drop_mode`), move one
eviction to another segment overlapping it, flip the replay policy, store / keep / release one dead
ancestor, restore one evicted value earlier (2, 4, ..., 32 stages before its use), evict one later
(1, 2, ..., 32 stages after the segment's start, or 2, ..., 32 before its end), carry one (hold it
until the restoration of a dropped consumer, recomputed from it then; also with one more eviction of
any segment overlapping the stages it is held longer). :func:`poet_edge.schedulers.scale_search.local_search`
iterates it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, Analysis
from poet_edge.schedulers.plan_replay import (
    FREE_TEMPS,
    KEEP,
    STORE,
    Plan,
    Trace,
    format_mode,
    option_mode,
    parse_mode,
    replay_entries,
    store_key,
)
from poet_edge.schedulers.segment_cover import Cover


def plan_key(plan: Plan) -> tuple[tuple[int, str], ...]:
    """``plan`` as a hashable key (the same plan, the same key)."""
    return tuple(sorted(plan.items()))


def plan_with(plan: Plan, k: int, mode: str | None) -> Plan:
    """A copy of ``plan`` with key k set to ``mode`` (left out when None)."""
    out = dict(plan)
    if mode is None:
        out.pop(k, None)
    else:
        out[k] = mode
    return out


@dataclass
class PlanSearch:
    """Local search over plans, judged by the exact replay (:func:`~poet_edge.schedulers.plan_replay.
    replay_plan`, run against the current plan's :class:`~poet_edge.schedulers.plan_replay.Trace`): a
    plan is better when its replay overflows the budget by fewer bytes in total, then when it costs
    less. Moves, in a
    fixed order (first improvement): flip the replay policy; change one segment (resident / PAGE /
    DROP) or dead ancestor (KEEP / STORE); restore one eviction earlier, evict it later, or carry it
    (:meth:`_carry`); move one eviction to another segment of a stage it spans (either mode).
    Deterministic for the same start."""

    problem: SchedulingProblem
    an: Analysis
    cover: Cover
    costs: tuple[list[float], ...]
    modes: dict[int, tuple[str, ...]]  # modes each plan key may take (segments, stores)
    seen: dict[tuple[tuple[int, str], ...], tuple[float, float]] = field(default_factory=dict)
    evals: int = 0  # plans replayed
    work: int = 0  # ... each counted as one, plus one per graph's nodes of recomputations it ran
    base: Trace | None = None  # the replay the plans scored are replayed against (the descent's current)

    def rebase(self, plan: Plan) -> None:
        """Replays the plans scored from now on against ``plan``'s (a neighbour of it replays only
        where it differs: :class:`~poet_edge.schedulers.plan_replay.Trace`)."""
        self.base = Trace(self.problem, self.an, replay_entries(self.cover, plan), self.costs)

    def score(self, plan: Plan, strict: bool) -> tuple[float, float]:
        key = plan_key(plan)
        if key in self.seen:
            return self.seen[key]
        self.evals += 1
        entries = replay_entries(self.cover, plan)
        if self.base is None:
            self.base = Trace(self.problem, self.an, entries, self.costs)
        before = self.base.recomputed
        cost, overflow = self.base.replay(entries, strict)
        self.work += 1 + (self.base.recomputed - before) // len(self.problem.nodes)
        if cost is None:
            out = (float(sum(overflow.values())) if not strict else math.inf, math.inf)
        else:
            out = (0.0, cost)
        if not strict or cost is not None:
            self.seen[key] = out
        return out

    def neighbours(self, plan: Plan) -> Iterator[Plan]:
        """The moves from ``plan``, lazily (a descent takes the first that improves; on a thousand-node
        graph the whole list is millions of plans)."""
        yield plan_with(plan, FREE_TEMPS, None if FREE_TEMPS in plan else DROP)
        for k, modes in self.modes.items():
            for mode in (None, *modes):
                if plan.get(k) != mode:
                    yield plan_with(plan, k, mode)
        for k in sorted(plan):
            if k < 0:
                continue
            g = self.cover.segs[k]
            mode, at, late = parse_mode(plan[k])
            for t in sorted({g.end - (1 << j) for j in range(1, 6)} - {at}):
                if g.start < t < g.end - 1 and (late is None or late < t):  # restore early
                    yield {**plan, k: format_mode(mode, t, late)}
            last = g.end - 1 if at is None else at
            for u in sorted({g.start + (1 << j) for j in range(6)} | {g.end - (1 << j) for j in range(1, 6)}):
                if g.start < u < last and u != late:  # evict late
                    yield {**plan, k: format_mode(mode, at, u)}
            if late is not None:
                yield {**plan, k: format_mode(mode, at, None)}
            yield from self._carry(plan, k)
            for k2, modes in self.modes.items():
                if k2 < 0:
                    continue
                h = self.cover.segs[k2]
                if k2 in plan or h.end - 1 <= g.start or g.end - 1 <= h.start:
                    continue
                for mode in modes:
                    nxt = dict(plan)
                    del nxt[k]
                    nxt[k2] = mode
                    yield nxt

    def _carry(self, plan: Plan, k: int) -> Iterator[Plan]:
        """Segment k's value held until a dropped consumer's restoration, both right after stage r
        (the consumer's early restoration, or its last stage before its use): it is recomputed from k's
        value while that is still in RAM."""
        g = self.cover.segs[k]
        mode, at, _ = parse_mode(plan[k])
        for k2 in sorted(plan):
            if k2 < 0 or k2 == k:
                continue
            h = self.cover.segs[k2]
            mode2, at2, late2 = parse_mode(plan[k2])
            r = h.end - 1 if at2 is None else at2
            if (
                mode2 == DROP
                and g.value in self.an.preds[h.value]
                and g.start < r < (g.end - 1 if at is None else at)
                and (late2 is None or late2 < r)
            ):
                carried = {**plan, k: format_mode(mode, at, r), k2: format_mode(mode2, r, late2)}
                yield carried
                for k3, modes in self.modes.items():  # with one more eviction where k's value stays longer
                    f = self.cover.segs[k3] if k3 >= 0 else None
                    if f is not None and k3 not in plan and f.start < r and f.end - 1 > g.start:
                        for m in modes:
                            yield {**carried, k3: m}

    def run(
        self,
        plan: Plan,
        deadline: float,
        on_better: Callable[[Plan], None],
        stop: Callable[[], bool] | None = None,
    ) -> Plan:
        """Descends from ``plan`` (first improvement) until no neighbour is better, ``deadline``
        (perf_counter seconds) passes or ``stop()`` is true; ``on_better`` gets every fitting plan
        that improves."""
        stop = stop or (lambda: False)
        self.rebase(plan)
        current = self.score(plan, False)
        improved = True
        while improved and time.perf_counter() < deadline and not stop():
            improved = False
            for nxt in self.neighbours(plan):
                if time.perf_counter() >= deadline or stop():
                    break
                sc = self.score(nxt, current[0] == 0.0)
                if sc < (current[0], current[1] * (1 - 1e-12)) and sc != current:
                    plan, current, improved = nxt, sc, True
                    self.rebase(plan)
                    if sc[0] == 0.0:
                        on_better(plan)
                    break
        return plan


def plan_modes(problem: SchedulingProblem, an: Analysis, cover: Cover) -> dict[int, tuple[str, ...]]:
    """The modes of every segment with options (:func:`~poet_edge.schedulers.plan_replay.option_mode`),
    and KEEP / STORE (if pageable) for every dead ancestor a recomputation may need (kept or paged in,
    it spares recomputing its own inputs)."""
    modes: dict[int, set[str]] = {}
    for o in (*cover.bound_opts, *cover.primal_opts):
        modes.setdefault(o.seg, set()).add(option_mode(an, cover, o))
    for v in sorted({v for anc in cover.ancestors.values() for v in anc}):
        modes[store_key(v)] = {KEEP, STORE} if problem.nodes[v].pageable else {KEEP}
    return {
        k: tuple(sorted(modes[k])) for k in sorted(modes, key=lambda k: (k < 0, abs(k)))
    }  # segments first
