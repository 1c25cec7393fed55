"""Plans of scheduler "scale" and their replay as schedules.

A plan says which segments (:mod:`poet_edge.schedulers.segment_cover`) are evicted: after stage a,
value i is paged out (once) and freed, or dropped; a dead ancestor of a dropped value may also be
stored (paged out when computed, so restorations page it in) or kept (held past its last use until
the restoration that needs it; the bound model's plans store the inputs its options page in). A plan
is replayed exactly (:func:`replay_plan`: restore just before the next use, or right after a planned
earlier stage, by page-in or recomputation of the value and its missing ancestors; a plan-level
policy says whether inputs recomputed only for a restoration are freed at once or held to their last
use); the replay reports the stages where it overflows the budget (transient RAM). Plans that do not
fit can also be run through the baseline engine (:func:`decode`, :mod:`poet_edge.schedulers.engine`),
which repairs overflows by the DTR rule. A bound-model solution can also be read as a held plan
(:func:`held_plan`: the ancestors its options hold rather than restore are kept past their last use).
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
from functools import reduce
from itertools import chain, filterfalse
from operator import add

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, SolveReport, Step
from poet_edge.schedulers.engine import DROP, PAGE, Analysis, Engine
from poet_edge.schedulers.greedy import dtr_policy
from poet_edge.schedulers.lp_model import LpModel, node_costs
from poet_edge.schedulers.segment_cover import Cover, Option, Segment, dead_inputs, dying_inputs, restore_by

NAME = "scale"  # the scheduler these plans belong to: its schedules carry the name


Plan = dict[int, str]  # segment -> PAGE or DROP (segments not in it stay resident); FREE_TEMPS: policy
FREE_TEMPS = -1  # plan key: free inputs recomputed for a restoration right after it
STORE = "store"  # plan key -2 - v: page v out right after computing it (restorations then page it in)
FETCH = "fetch"  # replay entry: restore the value after this stage (an early restoration, see parse_mode)
KEEP = "keep"  # plan key -2 - v: hold v after its last use until the last DROP that may need it is restored
LATE = "late "  # replay entry prefix: evict after this stage's early restorations (see parse_mode)


def store_key(v: int) -> int:
    """The plan key of value v's STORE / KEEP entry (-2 - v: negative, apart from FREE_TEMPS); the map is
    its own inverse, so it also gives the value of such a key."""
    return -2 - v


def parse_mode(mode: str) -> tuple[str, int | None, int | None]:
    """A segment's plan mode: "drop" / "page"; with ">t": restored early, right after stage t (and
    held to its use), instead of just before its use; with "<u" (before any ">t"): evicted late,
    after stage u instead of the segment's start (after the early restorations of stage u, which may
    use it). Returns (base, t, u)."""
    head, _, at = mode.partition(">")
    base, _, late = head.partition("<")
    return base, int(at) if at else None, int(late) if late else None


def format_mode(base: str, at: int | None, late: int | None) -> str:
    """A segment's plan mode from (base, t, u), the inverse of :func:`parse_mode`."""
    return base + (f"<{late}" if late is not None else "") + (f">{at}" if at is not None else "")


def drop_mode(an: Analysis, g: Segment) -> str:
    """The plan mode of dropping segment g: recomputed just before its use, or, where its value may no
    longer be recomputed then (an in-place update of a parameter it reads runs first:
    :func:`~poet_edge.schedulers.segment_cover.restore_by`), right after the stage before the last one
    it may (restored early, held to its use), as the primal model's DROP option. mobilenetv2_035,
    every parameter trained, 1.1x the floor: the input gradient of a convolution may be recomputed
    only until its weight's update, three stages before its use; dropped to that stage instead of paged
    out, it lets the local search find far cheaper plans."""
    e = restore_by(an, g)
    return DROP if e >= g.end or e - 1 <= g.start else format_mode(DROP, e - 1, None)


def option_mode(an: Analysis, cover: Cover, o: Option) -> str:
    """The plan mode of option o (a DROP as :func:`drop_mode`)."""
    return drop_mode(an, cover.segs[o.seg]) if o.mode == DROP else o.mode


# -- decoding a plan into a schedule ------------------------------------------------------------------------


class _Planned(Engine):
    """The baseline engine with planned evictions; records stages where it had to evict by DTR."""

    plan: dict[int, list[tuple[int, str]]]
    overflow: dict[int, int]

    def make_room(self, v: int, extra: int, what: str) -> None:
        p = self.problem
        over = p.fixed_bytes + self.live + extra - p.budget_bytes
        if over > 0:
            self.overflow[self.round] = max(self.overflow.get(self.round, 0), over)
        super().make_room(v, extra, what)


def _evict(engine: Engine, t: int) -> None:
    assert isinstance(engine, _Planned)
    for u, mode in engine.plan.get(t, ()):
        if u not in engine.in_ram or mode not in (DROP, PAGE):
            continue
        if mode == DROP and engine.an.droppable[u]:
            engine.free(u)
        elif engine.can_page(u):
            if u not in engine.in_storage:
                engine.page_out(u)
            engine.free(u)


def decode(
    problem: SchedulingProblem, plan: dict[int, list[tuple[int, str]]]
) -> tuple[Schedule, dict[int, int]]:
    """Runs the plan through the engine; returns the schedule and the stages that overflowed (bytes)."""
    engine = _Planned(
        problem, NAME, policy=dtr_policy, allow_recompute=True, allow_paging=True, after_target=_evict
    )
    engine.plan, engine.overflow = plan, {}
    return engine.run(), engine.overflow


@dataclass(frozen=True)
class _Table:
    """Per node, what a replay reads (once per problem, analysis and costs; a :class:`Trace` shares it)."""

    out: tuple[int, ...]  # bytes of the value
    run: tuple[int, ...]  # bytes while it runs: the value and the workspace
    until: tuple[int, ...]  # the last stage it may be recomputed at (-1: not recomputable)
    pred_sets: tuple[frozenset[int], ...]
    costs: tuple[list[float], ...]  # compute, page-in, page-out

    @staticmethod
    def of(problem: SchedulingProblem, an: Analysis, costs: tuple[list[float], ...]) -> _Table:
        nodes = problem.nodes
        return _Table(
            tuple(node.out_bytes for node in nodes),
            tuple(node.out_bytes + node.workspace_bytes for node in nodes),
            tuple(u if node.recomputable else -1 for node, u in zip(nodes, an.recomp_until, strict=True)),
            tuple(frozenset(ps) for ps in an.preds),
            costs or node_costs(problem, False),
        )


class _Replay:
    """Direct decoder of a plan (see :func:`replay_plan`). ``h`` hashes the values in RAM and in storage
    (Zobrist: one random word per value and place, XORed in and out), so a replay can tell cheaply
    where it is back in another replay's state (:class:`Trace`)."""

    def __init__(self, problem: SchedulingProblem, an: Analysis, tab: _Table) -> None:
        self.p, self.an = problem, an
        self.tab, self.costs = tab, tab.costs
        self.fixed, self.budget = problem.fixed_bytes, problem.budget_bytes
        self.cost = 0.0
        self.hold = True  # keep inputs recomputed for a restoration until their last use
        self.work = 20 * len(problem.nodes) + 1000  # recomputations a plan may ask for
        self.steps: list[Step] = []
        self.record = True  # append the steps (a scored replay needs only its cost and overflow)
        self.ram: set[int] = set()
        self.storage: set[int] = set()
        self.live = self.stored = 0
        self.h = 0
        self.keys: tuple[list[int], list[int]] = ([], [])  # Zobrist words: RAM, storage (empty: no hash)
        self.overflow: dict[int, int] = {}
        self.events: list[tuple[int, int]] | None = None  # (stage, bytes) of every overflow, when traced
        self.incs: list[float] | None = None  # every cost added, in order, when traced
        self.error = ""
        self.kept: dict[int, int] = {}  # value -> stage after which it is freed (KEEP)
        self.release: dict[int, list[int]] = {}

    def plan_keeps(self, entries: dict[int, list[tuple[int, str]]]) -> None:
        self.hold = FREE_TEMPS not in entries
        self.kept, self.release = {}, {}
        for t, pairs in entries.items():
            for v, mode in pairs:
                if mode == KEEP and t > self.an.last_use[v]:
                    self.kept[v] = t
                    self.release.setdefault(t, []).append(v)

    def _add(self, c: float) -> None:
        self.cost += c
        if self.incs is not None:
            self.incs.append(c)

    def _arrive(self, t: int, v: int, extra: int, cost: float, step: type[Compute | PageIn]) -> None:
        """v comes into RAM before stage t's compute (computed or paged in; ``extra``: the bytes it needs)."""
        over = self.fixed + self.live + extra - self.budget
        if over > 0:
            if over > self.overflow.get(t, 0):
                self.overflow[t] = over
            if self.events is not None:
                self.events.append((t, over))
        self.cost += cost
        if self.incs is not None:
            self.incs.append(cost)
        if self.record:
            self.steps.append(step(self.p.nodes[v].name))
        if v not in self.ram and self.keys[0]:
            self.h ^= self.keys[0][v]
        self.ram.add(v)
        self.live += self.tab.out[v]

    def compute(self, t: int, v: int) -> None:
        self._arrive(t, v, self.tab.run[v], self.costs[0][v], Compute)

    def free(self, v: int) -> None:
        if self.record:
            self.steps.append(Free(self.p.nodes[v].name))
        if v in self.ram and self.keys[0]:
            self.h ^= self.keys[0][v]
        self.ram.discard(v)
        self.live -= self.tab.out[v]

    def page_out(self, v: int) -> bool:
        out, cap = self.tab.out[v], self.p.storage_bytes
        if v not in self.storage:
            if not self.p.nodes[v].pageable or (cap is not None and self.stored + out > cap):
                return False
            self.storage.add(v)
            if self.keys[1]:
                self.h ^= self.keys[1][v]
            self.stored += out
            self._add(self.costs[2][v])
            if self.record:
                self.steps.append(PageOut(self.p.nodes[v].name))
        return True

    def restore(self, t: int, v: int, depth: int = 0) -> bool:
        """Brings v back before stage t's compute: page-in, or recomputation (inputs first)."""
        tab = self.tab
        if v in self.storage:
            self._arrive(t, v, tab.out[v], self.costs[1][v], PageIn)
            return True
        if t > tab.until[v] or depth > 50:
            self.error = f"{self.p.nodes[v].name} can be neither paged in nor recomputed at stage {t}"
            return False
        self.work -= 1
        if self.work < 0:  # freed temporaries of a deep DAG can make restorations exponential
            self.error = "too many recomputations"
            return False
        temp = [*filterfalse(self.ram.__contains__, self.an.preds[v])]
        for q in temp:
            if not self.restore(t, q, depth + 1):
                return False
        self.compute(t, v)
        ram, keep, hold, last_use = self.ram, tab.pred_sets[t], self.hold, self.an.last_use
        for q in temp:
            if q in ram and q not in keep and (not hold or last_use[q] <= t):
                self.free(q)
        return True

    def stage(self, t: int, plan: dict[int, list[tuple[int, str]]]) -> bool:
        ram = self.ram
        for u in self.an.preds[t]:
            if u not in ram and not self.restore(t, u):
                return False
        self.compute(t, t)
        dying = self.an.dying[t]
        if t in self.release:
            dying = tuple(sorted({*dying, *self.release[t]}))
        last_use, kept = self.an.last_use, self.kept
        for u in dying:
            if u in ram and last_use[u] <= t and kept.get(u, -1) <= t:
                self.free(u)
        entries = plan.get(t, ())
        for u, mode in entries:
            if u not in ram or mode in (KEEP, FETCH) or mode.startswith(LATE):
                continue
            if mode == STORE:
                self.page_out(u)
            elif mode == DROP or self.page_out(u):
                self.free(u)
        for u, mode in entries:
            if mode == FETCH and u not in ram and t + 1 < len(self.p.nodes) and not self.restore(t + 1, u):
                return False
        for u, mode in entries:
            if u in ram and mode.startswith(LATE) and (mode == LATE + DROP or self.page_out(u)):
                self.free(u)
        return True


def replay_plan(
    problem: SchedulingProblem,
    an: Analysis,
    plan: dict[int, list[tuple[int, str]]],
    costs: tuple[list[float], ...] = (),
    strict: bool = False,
) -> tuple[Schedule | None, dict[int, int]]:
    """Follows the plan exactly: value i leaves RAM after stage a as planned (page-out once, or drop),
    comes back just before its next use (page-in, or recomputation of it and of its missing inputs);
    values are freed after their last use. Returns (schedule, {}) or (None, bytes over the budget by
    stage) when the plan does not fit (transient RAM of restorations) or cannot be followed.
    ``costs``: (compute, page-in, page-out) per node; the schedule's cost is then in its report (``cost``).
    ``strict``: stop at the first overflow (the returned overflow is then partial). With the entry
    ``plan[FREE_TEMPS]``, inputs recomputed only for a restoration are freed right after it (else
    they stay until their last use). An entry (v, STORE) pages v out and keeps it (a restoration of
    a value in storage pages it in, of any other recomputes it); an entry (v, KEEP) at stage t holds
    v in RAM until stage t (past its last use). A plan needing more than 20 n + 1000
    recomputations is refused (None, as if it did not fit)."""
    r = _Replay(problem, an, _Table.of(problem, an, costs))
    r.plan_keeps(plan)
    for t in range(len(problem.nodes)):
        if not r.stage(t, plan):
            return None, {**r.overflow, t: 1 << 62}  # cannot be followed: worse than any overflow
        if strict and r.overflow:
            return None, r.overflow
    if r.overflow:
        return None, r.overflow
    return Schedule(tuple(r.steps), NAME, SolveReport.of(cost=r.cost)), {}


TRACE_EVERY = 32  # a trace keeps the replay's state before every this many stages


class Trace:
    """The replay of one plan (:func:`replay_plan`), kept so that the replays of plans that differ from
    it in a few entries (a local search's neighbours) run only where they differ: from the last state
    kept before the first stage whose entries differ, until a stage after the last one whose entries
    differ at which the replay is back in the traced one's state (the same values in RAM and in storage,
    by their Zobrist hash, and the same bytes); from there on the traced replay's costs and overflows
    are taken as they are. The result is the full replay's, bit for bit: the costs still to come are
    added one by one in the traced order. Only the cost and the overflow are replayed, not the steps."""

    def __init__(
        self,
        problem: SchedulingProblem,
        an: Analysis,
        entries: dict[int, list[tuple[int, str]]],
        costs: tuple[list[float], ...] = (),
    ) -> None:
        n = len(problem.nodes)
        rng = random.Random(n)
        self.keys = ([rng.getrandbits(63) for _ in range(n)], [rng.getrandbits(63) for _ in range(n)])
        self.problem, self.an, self.entries, self.costs = problem, an, entries, costs
        self.tab = _Table.of(problem, an, costs)
        r = self._fresh()
        r.plan_keeps(entries)
        r.events, r.incs = [], []
        self.hold = r.hold
        self.state: list[tuple[int, int, int]] = []  # before stage t: (hash, live bytes, stored bytes)
        self.work: list[int] = []
        self.at: list[tuple[int, int]] = []  # before stage t: (costs added, overflow events) so far
        self.kept_states: dict[int, _State] = {}
        self.complete = True
        self.joins = 0  # replays that took the traced rest
        self.recomputed = 0  # recomputations the replays against this trace ran (not the trace's own)
        for t in range(n + 1):
            self.state.append((r.h, r.live, r.stored))
            self.work.append(r.work)
            self.at.append((len(r.incs), len(r.events)))
            if t % TRACE_EVERY == 0:
                self.kept_states[t] = _snapshot(r)
            if t == n:
                break
            if not r.stage(t, entries):
                self.complete = False
                break
        self.incs, self.events = r.incs, r.events
        self.run_ends, self.runs = _runs(r.events)
        self.cost = r.cost if self.complete and not r.overflow else None  # the plan's, when it fits

    def _fresh(self) -> _Replay:
        r = _Replay(self.problem, self.an, self.tab)
        r.record, r.keys = False, self.keys
        return r

    def _differ(self, entries: dict[int, list[tuple[int, str]]]) -> tuple[int, int] | None:
        """The first stage the replays may differ at and the last stage whose entries differ (None:
        the same entries)."""
        stages = [t for t in {*entries, *self.entries} if entries.get(t) != self.entries.get(t)]
        if not stages:
            return None
        first = min(stages)
        for t in stages:  # a value kept longer or shorter is freed differently from its last use on
            for v, mode in {*entries.get(t, ()), *self.entries.get(t, ())}:
                if mode == KEEP:
                    first = min(first, self.an.last_use[v])
        return max(first, 0), max(stages)

    def replay(
        self, entries: dict[int, list[tuple[int, str]]], strict: bool = False
    ) -> tuple[float | None, dict[int, int]]:
        """(cost, {}) of the plan whose replay entries are ``entries``, or (None, bytes over the budget by
        stage) as :func:`replay_plan` returns them (a strict replay's overflow may be partial)."""
        differ = self._differ(entries) if (FREE_TEMPS not in entries) == self.hold else (0, len(self.state))
        if differ is None and self.complete:
            return (self.cost, {}) if self.cost is not None else (None, self._overflow_from(0, {}))
        first, last = differ or (0, len(self.state))
        start = max(t for t in self.kept_states if t <= first)
        r = self._fresh()
        _restore(r, self.kept_states[start])
        r.plan_keeps(entries)
        try:
            return self._from(r, start, last, entries, strict)
        finally:
            self.recomputed += self.kept_states[start].work - r.work

    def _from(
        self, r: _Replay, start: int, last: int, entries: dict[int, list[tuple[int, str]]], strict: bool
    ) -> tuple[float | None, dict[int, int]]:
        """:meth:`replay` from the state ``r`` before stage ``start``."""
        n = len(self.problem.nodes)
        for t in range(start, n):
            if t > last and self.complete and (r.h, r.live, r.stored) == self.state[t]:
                if r.work - (self.work[t] - self.work[n]) >= 0:
                    return self._join(r, t, strict)
            if not r.stage(t, entries):
                return None, {**r.overflow, t: 1 << 62}
            if strict and r.overflow:
                return None, r.overflow
        return (None, r.overflow) if r.overflow else (r.cost, {})

    def _overflow_from(self, t: int, overflow: dict[int, int]) -> dict[int, int]:
        """``overflow`` with the traced events from stage t on: the rest of the run of events that stage
        t starts in, then whole runs (:func:`_runs`); per stage the most bytes, in the events' order."""
        out, e = dict(overflow), self.at[t][1]
        b = bisect_right(self.run_ends, e)  # the run events[e] is in
        head = self.events[e : self.run_ends[b]] if b < len(self.runs) else ()
        for stage, over in chain(head, self.runs[b + 1 :]):
            out[stage] = max(out.get(stage, 0), over)
        return out

    def _join(self, r: _Replay, t: int, strict: bool) -> tuple[float | None, dict[int, int]]:
        """The replay r, back in the traced state before stage t: the traced replay's rest."""
        self.joins += 1
        incs, events = self.at[t]
        if len(self.events) > events:
            return None, (r.overflow if strict else self._overflow_from(t, r.overflow))
        if r.overflow:
            return None, r.overflow
        return reduce(add, self.incs[incs:], r.cost), {}  # one by one, in order


def _runs(events: list[tuple[int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
    """The overflow events in runs of one stage: where each run ends, and its (stage, most bytes)."""
    ends: list[int] = []
    runs: list[tuple[int, int]] = []
    for i, (stage, over) in enumerate(events, 1):
        if runs and runs[-1][0] == stage:
            runs[-1], ends[-1] = (stage, max(runs[-1][1], over)), i
        else:
            runs.append((stage, over))
            ends.append(i)
    return ends, runs


@dataclass(frozen=True)
class _State:
    """What a replay carries from one stage to the next (a :class:`Trace` keeps some)."""

    ram: frozenset[int]
    storage: frozenset[int]
    live: int
    stored: int
    h: int
    cost: float
    work: int
    overflow: tuple[tuple[int, int], ...]


def _snapshot(r: _Replay) -> _State:
    return _State(
        frozenset(r.ram),
        frozenset(r.storage),
        r.live,
        r.stored,
        r.h,
        r.cost,
        r.work,
        tuple(r.overflow.items()),
    )


def _restore(r: _Replay, state: _State) -> None:
    r.ram, r.storage, r.overflow = set(state.ram), set(state.storage), dict(state.overflow)
    r.live, r.stored, r.h, r.cost, r.work = state.live, state.stored, state.h, state.cost, state.work


def replay_entries(cover: Cover, plan: Plan) -> dict[int, list[tuple[int, str]]]:
    """A plan as :func:`replay_plan` takes it: stage -> (value, what happens to it after that stage):
    evicted (mode, LATE + mode when evicted late), restored early (FETCH), stored when computed (STORE),
    held until then (KEEP, at the end of the last planned DROP that may need it); FREE_TEMPS kept."""
    out: dict[int, list[tuple[int, str]]] = {}
    for k in sorted(plan):
        if k == FREE_TEMPS:
            out[FREE_TEMPS] = []
            continue
        if k < 0:
            v = store_key(k)  # the map is its own inverse
            if plan[k] == STORE:
                out.setdefault(v, []).append((v, STORE))
            else:  # until the last planned DROP whose recomputation may need v is restored
                ends = [
                    cover.segs[j].end
                    for j, m in plan.items()
                    if j >= 0 and parse_mode(m)[0] == DROP and v in cover.ancestors.get(j, ())
                ]
                if ends:
                    out.setdefault(max(ends), []).append((v, KEEP))
            continue
        g = cover.segs[k]
        mode, at, late = parse_mode(plan[k])
        if late is None:
            out.setdefault(g.start, []).append((g.value, mode))
        else:
            out.setdefault(late, []).append((g.value, LATE + mode))
        if at is not None:
            out.setdefault(at, []).append((g.value, FETCH))
    return out


def held_plan(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: LpModel, values: np.ndarray
) -> Plan:
    """A bound-model solution as a plan that holds, past their last use, the ancestors its DROP
    options neither restore nor pass by (the "held" alternatives), kept until the recomputations that
    may need them."""
    plan = segment_plan(an, cover, lp, values)
    for j, o in enumerate(lp.opts):
        if values[j] > 0.5 and o.mode == DROP:
            g, restored = cover.segs[o.seg], {v for v, _, _ in o.terms}
            level, seen = [g.value], {g.value}
            while level:  # the needed ancestors the option does not restore, and nothing behind them
                v = level.pop()
                for q in dead_inputs(problem, an, v, g.start) + dying_inputs(problem, an, v, g):
                    if q not in seen:
                        seen.add(q)
                        if q in restored:
                            level.append(q)
                        else:
                            plan.setdefault(store_key(q), KEEP)
    return plan


def segment_plan(an: Analysis, cover: Cover, lp: LpModel, values: np.ndarray) -> Plan:
    """The chosen evictions (a DROP as :func:`drop_mode`); an input an option pages in is stored when
    computed."""
    plan: Plan = {}
    for j, o in enumerate(lp.opts):
        if values[j] > 0.5:
            plan[o.seg] = option_mode(an, cover, o)
            own = cover.segs[o.seg].value
            for v, kinds, _ in o.terms:
                if v != own and kinds in ("i", "j"):
                    plan[store_key(v)] = STORE
    return plan
