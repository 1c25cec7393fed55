"""A schedule for a graph cut from a scheduled one: ``poet_predict`` and ``poet_eval_step`` from the
training step's schedule, without a scheduler run of their own.

:func:`restrict` keeps the steps of the cut graph's nodes in their order, drops every step whose result
nothing reads (a recomputation only the backward pass needed, a page-out never paged in again) and frees
every value after its last read. What is resident is then at every step a subset of what the training
schedule held there, so it fits wherever that one fits (the simulator replays it all the same).
:func:`widen` then undoes paging and recomputation the cut graph no longer needs: a value paged out and
in again, or computed again, stays resident instead where the RAM it holds over that stretch fits, the
largest saving first. Both are linear passes over the steps: deterministic, no solver."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, SolveReport, Step

_PRODUCE = (Compute, PageIn)  # steps that make a value resident


@dataclass(frozen=True)
class _Event:
    kind: type[Compute] | type[PageOut] | type[PageIn]
    node: int


def _events(problem: SchedulingProblem, schedule: Schedule) -> list[_Event]:
    """The schedule's compute and page steps on ``problem``'s nodes, in order (frees and moves dropped)."""
    index = {n.name: i for i, n in enumerate(problem.nodes)}
    return [
        _Event(type(s), index[s.node])
        for s in schedule.steps
        if isinstance(s, (Compute, PageOut, PageIn)) and s.node in index
    ]


def _needed(problem: SchedulingProblem, events: list[_Event]) -> list[_Event]:
    """The events something reads, scanning backward: a compute whose value a later kept step reads
    before the value is made again (or a sink's first compute, when none later is kept), a page-in
    likewise, a page-out whose copy a kept page-in reads."""
    preds = [sorted(set(p)) for p in problem.preds()]
    n = len(problem.nodes)
    need_ram, need_store, computed = [False] * n, [False] * n, [False] * n
    first = {e.node: k for k, e in reversed(list(enumerate(events))) if e.kind is Compute}
    keep = [False] * len(events)
    for k in range(len(events) - 1, -1, -1):
        e = events[k]
        v = e.node
        if e.kind is Compute:
            if need_ram[v] or (first[v] == k and not computed[v]):
                keep[k], need_ram[v], computed[v] = True, False, True
                for u in preds[v]:
                    need_ram[u] = True
        elif e.kind is PageIn:
            if need_ram[v]:
                keep[k], need_ram[v], need_store[v] = True, False, True
        elif need_store[v]:  # a page-out the kept page-ins read; it reads the RAM copy
            keep[k], need_store[v], need_ram[v] = True, False, True
    return [e for e, k in zip(events, keep, strict=True) if k]


def _instances(problem: SchedulingProblem, events: list[_Event]) -> list[int]:
    """Per event that makes a value resident, the position of the value's last read before it is made
    again (its own position when none); -1 for a page-out. ValueError where a step reads a value that is
    not resident (``events`` are not a schedule's)."""
    preds = [sorted(set(p)) for p in problem.preds()]
    current = [-1] * len(problem.nodes)  # the event whose instance of each node is resident
    last = [-1] * len(events)
    for k, e in enumerate(events):
        reads = preds[e.node] if e.kind is Compute else [e.node] if e.kind is PageOut else []
        for u in reads:
            if current[u] < 0:
                raise ValueError(f"{problem.nodes[e.node].name} reads {problem.nodes[u].name}, never made")
            last[current[u]] = k
        if e.kind in _PRODUCE:
            current[e.node], last[k] = k, max(last[k], k)
    return last


def _steps(problem: SchedulingProblem, events: list[_Event]) -> list[Step]:
    """The events as steps, each value freed after its last read."""
    last = _instances(problem, events)
    frees: list[list[int]] = [[] for _ in events]
    for k, e in enumerate(events):
        if e.kind in _PRODUCE:
            frees[last[k]].append(k)
    names = [n.name for n in problem.nodes]
    steps: list[Step] = []
    for k, e in enumerate(events):
        steps.append(e.kind(names[e.node]))
        steps.extend(Free(names[events[j].node]) for j in sorted(frees[k], key=lambda j: (j != k, j)))
    return steps


def _ram(problem: SchedulingProblem, events: list[_Event]) -> np.ndarray:
    """RAM in use at each event (values resident, with the event's output and workspace)."""
    last = _instances(problem, events)
    size = np.array([n.out_bytes for n in problem.nodes], dtype=np.int64)
    ws = np.array([n.workspace_bytes for n in problem.nodes], dtype=np.int64)
    delta = np.zeros(len(events) + 1, dtype=np.int64)
    for k, e in enumerate(events):
        if e.kind in _PRODUCE:
            delta[k] += size[e.node]
            delta[last[k] + 1] -= size[e.node]
    live = np.cumsum(delta)[:-1]
    extra = np.array([ws[e.node] if e.kind is Compute else 0 for e in events], dtype=np.int64)
    return problem.fixed_bytes + live + extra


def restrict(problem: SchedulingProblem, schedule: Schedule, source: str, widened: bool = True) -> Schedule:
    """``schedule`` (of a graph ``problem``'s nodes were cut from) restricted to ``problem``, then
    :func:`widen`-ed unless ``widened`` is False: see the module docstring. ``source`` names the schedule
    it came from, for the report."""
    events = _needed(problem, _events(problem, schedule))
    events = widen(problem, events) if widened else events
    report = SolveReport.of(status="feasible", schedule_from=f"{source}, restricted to this graph")
    return Schedule(tuple(_steps(problem, events)), schedule.solver, report)


def widen(problem: SchedulingProblem, events: list[_Event]) -> list[_Event]:
    """``events`` with page-out/page-in pairs and recomputations removed where the value, kept resident
    from its previous instance instead, fits ``problem.budget_bytes`` over that stretch: the candidates by
    the energy they save, largest first (ties by position), each checked against the RAM the ones taken
    before left. Then the steps nothing reads any more are dropped again."""
    mem = _ram(problem, events)
    last = _instances(problem, events)
    nodes = problem.nodes
    prev: dict[int, int] = {}  # node -> its last producing event so far
    cands: list[tuple[float, int, int]] = []  # (-saving, the event to drop, the instance to keep)
    for k, e in enumerate(events):
        if e.kind in _PRODUCE:
            v = e.node
            if v in prev:  # a page-out then nothing reads is dropped with the page-ins it fed
                node = nodes[v]
                saving = node.compute_j if e.kind is Compute else node.page_in_j + node.page_out_j
                cands.append((-saving, k, prev[v]))
            prev[v] = k
    room = problem.budget_bytes - mem
    gone: set[int] = set()
    for _, k, p in sorted(cands):
        if p in gone:  # the instance to keep was itself dropped: its stretch is no longer last[p]
            continue
        lo, hi = last[p] + 1, k  # the stretch the earlier instance must now also cover
        size = nodes[events[k].node].out_bytes
        if hi > lo and int(room[lo:hi].min()) < size:
            continue
        room[lo:hi] -= size
        gone.add(k)
    if not gone:
        return events
    kept = [e for j, e in enumerate(events) if j not in gone]
    return _needed(problem, kept)
