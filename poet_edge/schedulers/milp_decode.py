"""The stage model shared by the MILP (:mod:`poet_edge.schedulers.milp`): which decisions exist, how a
0/1 solution becomes a schedule, and how a baseline schedule becomes a solution (the MIP start).

Stage model (Checkmate / POET). Stage t (t = 0..T-1, nodes in the problem's order) computes node t,
possibly after recomputing earlier nodes. A solution is four sets of (stage, node) pairs:

* ``compute``   R[t,i]: i is computed in stage t (always (t, t); i <= t);
* ``resident``  S_RAM[t,i]: i is in RAM at the start of stage t (i < t);
* ``page_in``   M_in[t,i]: i is read back from storage at the start of stage t;
* ``page_out``  M_out[t,i]: i is written to storage in stage t, right after it is available.

Decoding stage t: page-outs of values resident at the start, then page-ins (ascending), then the
computes in node order, each compute followed by the page-out of its value (if chosen) and by the
frees of every value whose last use in the stage it was and that is not resident at the start of
stage t+1. A value used by nobody in the stage and not kept is freed as soon as it is available.
Storage is written once per value and never freed (the simulator's rule), so storage holds value i
from its page-out to the end of the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step

Pair = tuple[int, int]


@dataclass(frozen=True)
class StageSolution:
    """A 0/1 point of the stage model, as sets of (stage, node) pairs (see the module docstring)."""

    compute: frozenset[Pair]
    resident: frozenset[Pair]
    page_in: frozenset[Pair]
    page_out: frozenset[Pair]


@dataclass(frozen=True)
class Stages:
    """Static facts of the stage model for one problem and option set.

    ``last_run[i]``: the last stage in which node i may be computed (i itself when it cannot be
    recomputed, else the stage of its first invalidator, else T-1). ``need[i]``: the last stage in
    which some consumer of i may run (-1 when nothing consumes i); i is never useful after it.
    """

    n: int
    preds: tuple[tuple[int, ...], ...]
    users: tuple[tuple[int, ...], ...]
    last_run: tuple[int, ...]
    need: tuple[int, ...]
    pageable: tuple[bool, ...]


def stages(problem: SchedulingProblem, paging: bool = True, remat: bool = True) -> Stages:
    n = len(problem.nodes)
    preds = tuple(tuple(sorted(set(p))) for p in problem.preds())
    users = tuple(tuple(sorted(set(s))) for s in problem.succs())
    until = [n - 1] * n
    for a, b in problem.invalidated_by:
        if b <= a:
            names = problem.nodes[a].name, problem.nodes[b].name
            raise PoetError(
                f"node {names[0]} is invalidated by {names[1]}, which comes before it in the "
                f"problem's order: stage {a} would run after stage {b}; no schedule exists"
            )
        until[a] = min(until[a], b)
    last_run = tuple(until[i] if remat and node.recomputable else i for i, node in enumerate(problem.nodes))
    need = tuple(max((last_run[j] for j in users[i]), default=-1) for i in range(n))
    cap = problem.storage_bytes
    fits = [cap is None or node.out_bytes <= cap for node in problem.nodes]
    pageable = tuple(
        paging and node.pageable and node.out_bytes > 0 and ok
        for node, ok in zip(problem.nodes, fits, strict=True)
    )
    return Stages(n, preds, users, last_run, need, pageable)


def _stage_steps(st: Stages, sol: StageSolution, t: int) -> list[tuple[str, int]]:
    comps = sorted(i for (s, i) in sol.compute if s == t)
    start = sorted(i for (s, i) in sol.resident | sol.page_in if s == t)
    ins = sorted(i for (s, i) in sol.page_in if s == t)
    outs = {i for (s, i) in sol.page_out if s == t}
    kept = {i for (s, i) in sol.resident if s == t + 1}
    last: dict[int, int] = {}
    for k in comps:
        for u in st.preds[k]:
            last[u] = k
    steps: list[tuple[str, int]] = [("page_out", i) for i in start if i in outs]
    steps += [("free", i) for i in start if i not in ins and i not in last and i not in kept]
    for i in ins:
        steps.append(("page_in", i))
        if i not in last and i not in kept:
            steps.append(("free", i))
    for k in comps:
        steps.append(("compute", k))
        if k in outs:
            steps.append(("page_out", k))
        gone = [u for u in st.preds[k] if last.get(u) == k and u not in kept]
        if k not in last and k not in kept:
            gone.append(k)
        steps += [("free", u) for u in sorted(set(gone))]
    return steps


_STEP: dict[str, Callable[[str], Step]] = {
    "compute": Compute,
    "free": Free,
    "page_in": PageIn,
    "page_out": PageOut,
}


def decode(problem: SchedulingProblem, st: Stages, sol: StageSolution, solver: str = "milp") -> Schedule:
    """The schedule of a stage-model solution (see the module docstring for the order of steps)."""
    names = [node.name for node in problem.nodes]
    steps: list[Step] = []
    for t in range(st.n):
        steps += [_STEP[kind](names[i]) for kind, i in _stage_steps(st, sol, t)]
    return Schedule(tuple(steps), solver)


@dataclass
class _Interval:
    """One stretch of RAM residency of a value while encoding a schedule."""

    node: int
    enter: int  # stage in which the value became resident
    by: str  # "compute" | "page_in"
    last_use: int
    paged_out: bool = False


def _rounds(problem: SchedulingProblem, schedule: Schedule) -> list[int] | None:
    """Stage of every step: the index of the next first computation (steps after the last: T-1)."""
    index = problem.index()
    firsts: list[int] = []
    seen: set[int] = set()
    for pos, step in enumerate(schedule.steps):
        v = index[step.node]
        if isinstance(step, Compute) and v not in seen:
            if v != len(seen):
                return None  # first computations are not in the problem's order
            seen.add(v)
            firsts.append(pos)
    if len(seen) != len(problem.nodes):
        return None
    out, r = [], 0
    for pos in range(len(schedule.steps)):
        while r < len(firsts) - 1 and pos > firsts[r]:
            r += 1
        out.append(r)
    return out


def _intervals(problem: SchedulingProblem, st: Stages, schedule: Schedule) -> list[_Interval] | None:
    rounds = _rounds(problem, schedule)
    if rounds is None:
        return None
    index = problem.index()
    open_: dict[int, _Interval] = {}
    done: list[_Interval] = []
    stored: set[int] = set()
    for step, r in zip(schedule.steps, rounds, strict=True):
        v = index[step.node]
        if isinstance(step, (Compute, PageIn)):
            if isinstance(step, Compute):
                for u in st.preds[v]:
                    if u in open_:
                        open_[u].last_use = r
            by = "compute" if isinstance(step, Compute) else "page_in"
            open_[v] = _Interval(v, r, by, r)
        elif isinstance(step, PageOut) and v in open_ and v not in stored:
            stored.add(v)
            open_[v].paged_out = True
        elif isinstance(step, Free) and v in open_:
            done.append(open_.pop(v))
    return done + list(open_.values())


def encode(problem: SchedulingProblem, st: Stages, schedule: Schedule) -> StageSolution | None:
    """The stage-model solution closest to ``schedule`` (None when it does not fit the model).

    A value that stays in RAM from stage a to its last use in stage e is resident in stages a+1..e;
    a page-out is moved to the stage the value entered RAM (same cost, no more RAM).
    """
    spans = _intervals(problem, st, schedule)
    if spans is None:
        return None
    sets: dict[str, set[Pair]] = {"compute": set(), "resident": set(), "page_in": set(), "page_out": set()}
    used: set[Pair] = set()
    for iv in spans:
        pairs = [(t, iv.node) for t in range(iv.enter, iv.last_use + 1)]
        if used.intersection(pairs):
            return None  # two copies of one value in one stage
        used.update(pairs)
        sets[iv.by].add(pairs[0])
        sets["resident"].update(pairs[1:])
        if iv.paged_out:
            sets["page_out"].add(pairs[0])
    return StageSolution(*(frozenset(sets[k]) for k in ("compute", "resident", "page_in", "page_out")))
