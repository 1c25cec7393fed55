"""The stage model of scheduler "scale": an exact-order relaxation of POET's MILP without its
within-stage memory, for graphs small enough (a few thousand value-stage pairs).

Order. As in POET's stage model (and scale's segment cover), node t is computed for the first time in
stage t; between first computations (in "gap t", before node t runs) values may be recomputed or
paged in. Variables, for every value i (bytes > 0) and stage t up to the last stage that may need i
(``Analysis.req``):

* K[t,i] (i <= t): i stays in RAM across the end of stage t (it is in RAM while node t runs and is
  carried into gap t+1);
* R[t,i] (i < t, i recomputable and t before its invalidator): i is recomputed in gap t;
* M[t,i] (i < t, pageable): i is paged in during gap t; out[i] (O): i is paged out (once).

Rows: an input q of node t is available in stage t: K[t-1,q] + R[t,q] + M[t,q] >= 1 (q = t-1 carried
by K[t-1,t-1]); keep: K[t,i] <= K[t-1,i] + R[t,i] + M[t,i]; a recomputation has its inputs:
R[t,v] <= K[t-1,u] + R[t,u] + M[t,u] for every edge u -> v; M[t,i] <= O[i]; RAM while node t runs:
fixed + out(t) + workspace(t) + inputs(t) + sum of bytes(i) K[t,i] over the other values <= budget;
storage capacity (sum of bytes(i) O[i]) and the runtime budget as rows. Objective: recomputations,
page-ins and page-outs (the plain pass is a constant).

Every schedule whose first computations follow the problem's order gives a point of this model (K:
what is in RAM when node t runs and still there after it; R, M: what the schedule restores between
t-1 and t; a value restored twice in one gap only costs more), so its optimum, and HiGHS's dual
bound, is a lower bound for every such schedule and for POET's stage model. Left out (so it is a
relaxation): the RAM of restorations between stages, and when the page-out happens. A solution is
also decoded into a schedule (:func:`decode`: the restorations of gap t that something needs (not of
values already in RAM, nor of values neither gap t nor a later stage uses), in the order, topological
or depth first, that holds the least RAM, freeing every value as soon as gap t and node t no longer
need it and it is not kept); the simulator decides whether it fits (transient RAM of the
restorations may not). A gap that fits in no such order is repaired where possible
(:mod:`poet_edge.schedulers.gap_repair`: a value freed and restored again within the gap); scale can
also cut that gap's configuration off (:func:`gap_cut`) and solve again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from poet_edge import highs
from poet_edge.highs import Row, broken_rows, rows_csr
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step
from poet_edge.schedulers.engine import Analysis
from poet_edge.schedulers.gap_repair import restore_evicting


@dataclass
class StageModel:
    """Columns (cost, kind, stage, value) and rows of the stage model."""

    cost: list[float] = field(default_factory=list)
    K: dict[tuple[int, int], int] = field(default_factory=dict)
    R: dict[tuple[int, int], int] = field(default_factory=dict)
    M: dict[tuple[int, int], int] = field(default_factory=dict)
    out: dict[int, int] = field(default_factory=dict)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    feasible: bool = True  # False: a stage cannot fit whatever is evicted
    cont: set[int] = field(default_factory=set)  # continuous columns (the others are binary)
    defs: list[tuple[int, float, list[tuple[int, float]]]] = field(
        default_factory=list
    )  # W = max(0, low + terms)

    stage: list[int] = field(default_factory=list)  # per column: its stage (-1: O and W columns)
    lead: list[int] = field(default_factory=list)  # per R, M column: stages to the value's next consumer

    def col(self, cost: float, stage: int = -1, lead: int = 0) -> int:
        self.cost.append(cost)
        self.stage.append(stage)
        self.lead.append(lead)
        return len(self.cost) - 1

    def avail(self, t: int, i: int) -> list[int]:
        """Columns that make i available in stage t (i < t)."""
        return [c for c in (self.K.get((t - 1, i)), self.R.get((t, i)), self.M.get((t, i))) if c is not None]


def pairs(problem: SchedulingProblem, an: Analysis) -> int:
    """How many (value, stage) pairs the model has (its size is about 3x this)."""
    return sum(max(0, an.req[i] - i) for i, node in enumerate(problem.nodes) if node.out_bytes > 0)


def build(
    problem: SchedulingProblem,
    an: Analysis,
    costs: tuple[list[float], list[float], list[float]],
    norm: float,
) -> StageModel:
    """The model with costs divided by ``norm`` and RAM rows by the room each stage has."""
    nodes, n = problem.nodes, len(problem.nodes)
    comp, pin, pout = costs
    cap = problem.storage_bytes
    m = StageModel()
    for i, node in enumerate(nodes):
        if node.out_bytes == 0 or not an.succs[i]:
            continue
        page = node.pageable and (cap is None or node.out_bytes <= cap)
        for t in range(i, an.req[i]):
            m.K[(t, i)] = m.col(0.0, t)
        consumers = sorted(an.succs[i])
        for t in range(i + 1, an.req[i] + 1):
            lead = next((s - t for s in consumers if s >= t), n)
            if node.recomputable and t <= an.recomp_until[i]:
                m.R[(t, i)] = m.col(comp[i] / norm, t, lead)
            if page:
                m.M[(t, i)] = m.col(pin[i] / norm, t, lead)
        if any((t, i) in m.M for t in range(i + 1, an.req[i] + 1)):
            m.out[i] = m.col(pout[i] / norm)
    for (t, i), c in m.K.items():
        if t > i:
            m.rows.append((-math.inf, 0.0, [c, *m.avail(t, i)], [1.0] + [-1.0] * len(m.avail(t, i))))
    for (_, i), c in m.M.items():
        m.rows.append((-math.inf, 0.0, [c, m.out[i]], [1.0, -1.0]))
    for t in range(n):
        for q in an.preds[t]:
            if nodes[q].out_bytes == 0:
                continue
            cols = m.avail(t, q)
            if not cols:
                m.feasible = False
                return m
            m.rows.append((1.0, math.inf, cols, [1.0] * len(cols)))
    for (t, v), c in m.R.items():
        for u in an.preds[v]:
            if nodes[u].out_bytes == 0:
                continue
            cols = m.avail(t, u)
            m.rows.append((-math.inf, 0.0, [c, *cols], [1.0] + [-1.0] * len(cols)))
    kept: list[list[int]] = [[] for _ in range(n)]
    for t, i in m.K:
        kept[t].append(i)
    for t in range(n):
        node = nodes[t]
        ins = {q for q in an.preds[t] if nodes[q].out_bytes > 0}
        need = (
            problem.fixed_bytes + node.out_bytes + node.workspace_bytes + sum(nodes[q].out_bytes for q in ins)
        )
        room = problem.budget_bytes - need
        if room < 0:
            m.feasible = False
            return m
        others = [i for i in kept[t] if i not in ins and i != t]
        idx = [m.K[(t, i)] for i in others]
        val = [float(nodes[i].out_bytes) for i in others]
        if sum(val) > room:
            sc = float(max(room, 1))
            m.rows.append((-math.inf, room / sc, idx, [v / sc for v in val]))
    add_gap_rows(problem, an, m)
    if cap is not None and m.out and sum(nodes[i].out_bytes for i in m.out) > cap:
        sc = float(max(cap, 1))
        m.rows.append((-math.inf, cap / sc, list(m.out.values()), [nodes[i].out_bytes / sc for i in m.out]))
    if problem.max_latency_s is not None:
        cs = [x.compute_s for x in nodes]
        room_s = problem.max_latency_s - sum(cs)
        if room_s < 0:
            m.feasible = False
            return m
        idx, val = [], []
        for (_, i), c in m.R.items():
            idx.append(c)
            val.append(nodes[i].compute_s)
        for (_, i), c in m.M.items():
            idx.append(c)
            val.append(nodes[i].page_in_s)
        for i, c in m.out.items():
            idx.append(c)
            val.append(nodes[i].page_out_s)
        sc = max(room_s, 1e-300)
        m.rows.append((-math.inf, room_s / sc, idx, [v / sc for v in val]))
    return m


def add_gap_rows(problem: SchedulingProblem, an: Analysis, m: StageModel) -> None:
    """RAM while v is recomputed in gap t: v, its inputs and every other value that stays in RAM
    through the whole gap. A value i is there when it was kept after stage t-1 and after stage t and
    not restored in gap t (it cannot leave and come back without a restoration): W[t,i] >=
    K[t-1,i] + K[t,i] - R[t,i] - M[t,i] - 1 (continuous, >= 0); an input q of node t that was kept
    after stage t-1 and not restored in gap t is there too: W[t,q] >= K[t-1,q] - R[t,q] - M[t,q].
    Two inputs q1, q2 of node t both recomputed and not paged in during gap t: at the later of their
    last recomputations the other one is in RAM (it stays until node t), so q1, q2 and the inputs of
    one of them (the smaller) are in RAM with the W values: a row with that coefficient times
    (R[t,q1] + R[t,q2] - M[t,q1] - M[t,q2] - 1)."""
    nodes, n = problem.nodes, len(problem.nodes)
    by_gap: list[list[int]] = [[] for _ in range(n)]
    for t, v in m.R:
        by_gap[t].append(v)
    room = problem.budget_bytes - problem.fixed_bytes
    for t in range(1, n):
        if not by_gap[t]:
            continue
        ins = {q for q in an.preds[t] if nodes[q].out_bytes > 0}
        w: dict[int, int] = {}
        for (s, i), c in m.K.items():
            if s != t - 1 or i == t:
                continue
            restore = [x for x in (m.R.get((t, i)), m.M.get((t, i))) if x is not None]
            if i in ins:
                col = m.col(0.0)
                m.rows.append((0.0, math.inf, [col, c, *restore], [1.0, -1.0] + [1.0] * len(restore)))
                m.defs.append((col, 0.0, [(c, 1.0)] + [(x, -1.0) for x in restore]))
            elif (t, i) in m.K:
                col = m.col(0.0)
                m.rows.append(
                    (
                        -1.0,
                        math.inf,
                        [col, c, m.K[(t, i)], *restore],
                        [1.0, -1.0, -1.0] + [1.0] * len(restore),
                    )
                )
                m.defs.append((col, -1.0, [(c, 1.0), (m.K[(t, i)], 1.0)] + [(x, -1.0) for x in restore]))
            else:
                continue
            m.cont.add(col)
            w[i] = col
        both = sorted(q for q in ins if (t, q) in m.R)
        for a, q1 in enumerate(both):  # two inputs of node t both recomputed (never paged in) in gap t
            for q2 in both[a + 1 :]:
                own = {q1, q2, *an.preds[q1], *an.preds[q2]}
                inb = [sum(nodes[u].out_bytes for u in an.preds[q] if u not in (q1, q2)) for q in (q1, q2)]
                coef = float(nodes[q1].out_bytes + nodes[q2].out_bytes + min(inb))
                idx = [m.R[(t, q1)], m.R[(t, q2)]] + [
                    x for x in (m.M.get((t, q1)), m.M.get((t, q2))) if x is not None
                ]
                val = [coef, coef] + [-coef] * (len(idx) - 2)
                idx += [col for i, col in w.items() if i not in own]
                val += [float(nodes[i].out_bytes) for i in w if i not in own]
                if sum(x for x in val if x > 0) - coef > room:
                    sc = float(max(room, 1))
                    m.rows.append((-math.inf, (room + coef) / sc, idx, [x / sc for x in val]))
        for v in by_gap[t]:
            own = {v, *an.preds[v]}
            need = (
                nodes[v].out_bytes + nodes[v].workspace_bytes + sum(nodes[u].out_bytes for u in an.preds[v])
            )
            idx = [m.R[(t, v)]] + [c for i, c in w.items() if i not in own]
            val = [float(need)] + [float(nodes[i].out_bytes) for i in w if i not in own]
            if sum(val) > room:
                sc = float(max(room, 1))
                m.rows.append((-math.inf, room / sc, idx, [x / sc for x in val]))


@dataclass(frozen=True)
class Result:
    status: str
    infeasible: bool
    optimal: bool
    objective: float | None  # scaled
    bound: float  # scaled dual bound (0 when unknown)
    values: np.ndarray | None
    work: int = 0  # HiGHS's simplex iterations and nodes (a window's: plus its free columns), a count


def solve(
    m: StageModel,
    time_limit: float,
    threads: int | None,
    gap_abs: float,
    start: np.ndarray | None = None,
    cutoff: float | None = None,
    nodes: int | None = None,
) -> Result:
    """HiGHS on the model; stops at an absolute gap of ``gap_abs`` (scaled units), after ``nodes``
    branch-and-bound nodes (deterministic) or at the time limit (a safety stop).
    With ``cutoff`` (scaled), HiGHS looks only for points cheaper than it (its ``objective_bound``:
    every node whose LP bound reaches it is pruned, with ``CUTOFF_TOL`` to spare); the bound returned
    is then at most ``cutoff``, and ``cutoff`` itself when the search ends with no cheaper point."""
    solver = highs.Solver(_options(threads, gap_abs, cutoff, nodes))
    if len(m.cost):
        integer = np.array([j not in m.cont for j in range(len(m.cost))], dtype=bool)
        solver.load(highs.Model.of(m.cost, m.rows, integer=integer))
    return _run(solver, time_limit, start, cutoff)


def _options(
    threads: int | None, gap_abs: float, cutoff: float | None = None, nodes: int | None = None
) -> highs.Options:
    """The stage model's HiGHS options: an absolute gap only (a negative one, as a run whose gap never
    closes gives, is one HiGHS refuses: its default stays), a node limit (deterministic)."""
    return highs.Options(
        threads=threads or None,
        mip_rel_gap=0.0,
        mip_abs_gap=gap_abs if gap_abs >= 0 else None,
        cutoff=cutoff,
        node_limit=nodes,
    )


def _run(
    solver: highs.Solver, time_limit: float, start: np.ndarray | None = None, cutoff: float | None = None
) -> Result:
    """Solves the loaded model (from ``start``, a MIP start, if given; ``cutoff``: see :func:`solve`)."""
    solver.set_time_limit(max(0.05, time_limit))
    if solver.num_cols == 0:
        return Result("empty", False, True, 0.0, 0.0, np.zeros(0))
    r = solver.run(start)
    ok = r.trusted  # else neither the values nor the bound count
    has = r.values is not None and ok
    obj = r.objective if has else None
    bound = r.bound
    done = r.code in ("kOptimal", "kInfeasible")  # the search ended: no point below the limit is left
    if cutoff is not None and ok:
        # HiGHS reports a point above the cutoff as optimal when it finds no cheaper one; the proof only
        # covers points below the cutoff
        bound = min(bound, cutoff) if math.isfinite(bound) else (cutoff if done else 0.0)
    if not math.isfinite(bound) or not ok:
        bound = 0.0
    below = cutoff is None or (obj is not None and obj < cutoff)
    return Result(
        r.status,
        cutoff is None and r.infeasible,
        r.optimal and ok and below,
        obj,
        max(0.0, bound),
        r.values if has else None,
        r.iterations + r.nodes,
    )


def decode(
    problem: SchedulingProblem,
    an: Analysis,
    m: StageModel,
    values: np.ndarray,
    repaired: list[int] | None = None,
    unfit: list[int] | None = None,
) -> Schedule:
    """The schedule of a solution (see the module docstring); the simulator checks it. A gap that no
    order fits is restored by :func:`~poet_edge.schedulers.gap_repair.restore_evicting` where that
    fits (the schedule then costs more than the point); the stages of such gaps are appended to
    ``repaired``, those of gaps no repair fits either (the schedule overflows there) to ``unfit``."""
    nodes, n = problem.nodes, len(problem.nodes)
    kept: list[set[int]] = [set() for _ in range(n)]  # values in RAM across the end of stage t
    for (t, v), c in m.K.items():
        if values[c] > 0.5:
            kept[t].add(v)
    gap: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    for (t, i), c in m.R.items():
        if values[c] > 0.5:
            gap[t].append((i, "c"))
    for (t, i), c in m.M.items():
        if values[c] > 0.5 and not any(x == i for x, _ in gap[t]):
            gap[t].append((i, "i"))
    paged = {i for i, c in m.out.items() if values[c] > 0.5}
    steps: list[Step] = []
    ram: set[int] = set()
    stored: set[int] = set()
    room = problem.budget_bytes - problem.fixed_bytes

    def free(v: int) -> None:
        steps.append(Free(nodes[v].name))
        ram.discard(v)

    for t in range(n):
        ins = {q for q in an.preds[t] if nodes[q].out_bytes > 0}
        keep = ins | kept[t]
        orders = restoration_orders(nodes, an, needed_restorations(an, gap[t], ram, keep))
        tried = [restore_gap(nodes, an, order, ram, stored, keep) for order in orders]
        gap_steps, after, peak = min(tried, key=lambda r: r[2])
        if peak > room:  # no order fits: free and restore again what does not (gap_repair)
            fixed = [
                restore_evicting(nodes, an, t, o, ram, stored, keep, room, paged)
                for paged in (False, True)
                for o in orders
            ]
            fits = [r for r in fixed if r is not None]
            if fits:
                gap_steps, after, _, _ = min(fits, key=lambda r: r[3])  # the cheapest repair
                if repaired is not None:
                    repaired.append(t)
            elif unfit is not None:
                unfit.append(t)
        ram = after
        steps += gap_steps
        steps.append(Compute(nodes[t].name))
        ram.add(t)
        if t in paged and t not in stored:
            steps.append(PageOut(nodes[t].name))
            stored.add(t)
        for v in sorted(ram):
            if v in paged and v not in stored and v in kept[t]:
                steps.append(PageOut(nodes[v].name))
                stored.add(v)
        for v in sorted(ram):
            if v not in kept[t]:
                free(v)
    return Schedule(tuple(steps), "scale")


def gap_cut(m: StageModel, an: Analysis, values: np.ndarray, t: int) -> Row:
    """A row that ``values`` breaks: not every column of gap t's configuration at 1 again (its
    restorations R[t,.] and M[t,.], and K[t-1,i], K[t,i] of each value i held through the gap: kept
    across both stages, or kept across t-1 as an input of node t). A no-good cut for a gap the decode
    could not fit without a repair: it removes points that some schedule may realise, so it serves the
    primal side only (a model with it gives no lower bound)."""
    on = [c for (s, _), c in (*m.R.items(), *m.M.items()) if s == t and values[c] > 0.5]
    for (s, i), c in m.K.items():
        if s != t - 1 or values[c] <= 0.5:
            continue
        after = m.K.get((t, i), -1)
        if after >= 0 and values[after] > 0.5:
            on += [c, after]
        elif i in an.preds[t]:
            on.append(c)
    return (-math.inf, len(on) - 1.0, on, [1.0] * len(on))


def needed_restorations(
    an: Analysis, todo: list[tuple[int, str]], ram: set[int], keep: set[int]
) -> list[tuple[int, str]]:
    """The restorations of a gap that are needed: of the values in ``keep`` that are not in RAM, and of
    the inputs their recomputations need that are not in RAM either, transitively. A solution of the
    model may also restore a value that is in RAM already, or one that nothing uses (a HiGHS point
    at its time limit often does); those restorations would only cost energy and hold RAM."""
    missing = {i: k for i, k in todo if i not in ram}
    seen = {i for i, _ in _depth_first(an, missing, [i for i in sorted(keep) if i in missing])}
    return [(i, k) for i, k in todo if i in seen]


def restoration_orders(
    nodes: tuple[ProblemNode, ...], an: Analysis, todo: list[tuple[int, str]]
) -> list[list[tuple[int, str]]]:
    """Orders in which a gap may restore ``todo`` (each recomputation after the restorations of its
    inputs): topological, and depth first (each value restored just before the first restoration
    that needs it) from the values no other restoration needs (the sinks), taken in ascending and in
    descending order, each also with the sinks that are page-ins last (they need nothing and only
    hold RAM); the depth-first orders visit the inputs of a recomputation by index and, again, by
    :func:`_labels` (the input whose restoration needs the most RAM beyond its own bytes first)."""
    first = sorted(todo)
    if len(first) < 2:
        return [first]
    kind = dict(first)
    users = {u for i, k in first if k == "c" for u in an.preds[i]}
    up = [i for i, _ in first if i not in users]
    out = [first]
    for priority in (None, _labels(nodes, an, kind)):
        for sinks in (up, up[::-1]):
            last = [i for i in sinks if kind[i] == "c"] + [i for i in sinks if kind[i] != "c"]
            for order in (_depth_first(an, kind, sinks, priority), _depth_first(an, kind, last, priority)):
                if order not in out:
                    out.append(order)
    return out


def _labels(nodes: tuple[ProblemNode, ...], an: Analysis, kind: dict[int, str]) -> dict[int, int]:
    """Sethi-Ullman priorities of the restorations of a gap: the bytes a restoration and those of its
    inputs (transitively, a shared input counted for every user; values in RAM not counted) need when
    the inputs are restored depth first by priority, less its own bytes."""
    need: dict[int, int] = {}
    for i in sorted(kind):  # inputs have lower indices
        own = nodes[i].out_bytes
        held, peak = 0, 0
        if kind[i] == "c":
            kids = {u for u in an.preds[i] if u in kind}
            for u in sorted(kids, key=lambda u: (nodes[u].out_bytes - need[u], u)):
                peak = max(peak, held + need[u])
                held += nodes[u].out_bytes
            peak = max(peak, held + own + nodes[i].workspace_bytes)
        need[i] = max(peak, own)
    return {i: need[i] - nodes[i].out_bytes for i in kind}


def _depth_first(
    an: Analysis, kind: dict[int, str], sinks: list[int], priority: dict[int, int] | None = None
) -> list[tuple[int, str]]:
    """Postorder from ``sinks`` through the inputs of recomputations (values in ``kind`` only); the
    inputs of a recomputation by index, or with ``priority`` the highest first."""
    order: list[tuple[int, str]] = []
    seen: set[int] = set()
    for sink in sinks:
        stack = [(sink, False)]
        while stack:
            i, done = stack.pop()
            if done:
                order.append((i, kind[i]))
                continue
            if i in seen:
                continue
            seen.add(i)
            stack.append((i, True))
            if kind[i] == "c":
                us = sorted(u for u in an.preds[i] if u in kind and u not in seen)
                if priority is not None:
                    us.sort(key=lambda u: -priority[u])
                stack += [(u, False) for u in reversed(us)]  # the first to visit pushed last
    return order


def restore_gap(
    nodes: tuple[ProblemNode, ...],
    an: Analysis,
    order: list[tuple[int, str]],
    ram: set[int],
    stored: set[int],
    keep: set[int],
) -> tuple[list[Step], set[int], int]:
    """The steps of one gap restoring ``order``: every value leaves RAM as soon as no later restoration
    needs it and it is not in ``keep`` (node t's inputs and the values kept across it). Returns the
    steps, the RAM after them and the most bytes of values in RAM while a restoration runs."""
    ram = set(ram)
    steps: list[Step] = []
    peak = 0
    byte = sum(nodes[v].out_bytes for v in ram)  # bytes of the values in RAM
    needs: list[set[int]] = [set()]  # needs[-1 - k]: inputs of the recomputations from order[k] on
    for j, kind in reversed(order):
        needs.append(needs[-1] | set(an.preds[j]) if kind == "c" else needs[-1])
    for k in range(len(order) + 1):
        later = needs[-1 - k]
        for v in sorted(ram):
            if v not in keep and v not in later:
                steps.append(Free(nodes[v].name))
                ram.discard(v)
                byte -= nodes[v].out_bytes
        if k == len(order):
            break
        i, kind = order[k]
        held = byte + nodes[i].out_bytes
        if kind == "i" and i in stored:
            steps.append(PageIn(nodes[i].name))
        else:
            steps.append(Compute(nodes[i].name))
            held += nodes[i].workspace_bytes
        peak = max(peak, held)
        ram.add(i)
        byte += nodes[i].out_bytes
    return steps, ram, peak


def encode(problem: SchedulingProblem, an: Analysis, m: StageModel, schedule: Schedule) -> np.ndarray | None:
    """The model's point of a schedule whose first computations follow the problem's order (None
    otherwise): K[t,i] = i in RAM while node t first runs; R, M: what runs / is paged in between the
    first computations of t-1 and t; O: paged out; the continuous columns at their smallest values.
    A MIP start, and a check of the model (every such schedule must satisfy every row)."""
    index = problem.index()
    x = np.zeros(len(m.cost))
    ram: set[int] = set()
    done: set[int] = set()
    t = 0
    for step in schedule.steps:
        v = index[step.node]
        if isinstance(step, Compute):
            if v not in done:
                if v != t:
                    return None
                for i in ram:
                    if (t, i) in m.K:
                        x[m.K[(t, i)]] = 1.0
                if (t, t) in m.K:
                    x[m.K[(t, t)]] = 1.0
                done.add(v)
                t += 1
            elif (t, v) in m.R:
                x[m.R[(t, v)]] = 1.0
            ram.add(v)
        elif isinstance(step, PageIn):
            if (t, v) in m.M:
                x[m.M[(t, v)]] = 1.0
            ram.add(v)
        elif isinstance(step, PageOut):
            if v in m.out:
                x[m.out[v]] = 1.0
        else:
            ram.discard(v)
    for col, low, terms in m.defs:
        x[col] = max(low + sum(a * x[c] for c, a in terms), 0.0)
    return x


def violated(m: StageModel, x: np.ndarray, tol: float = 1e-7) -> list[int]:
    """Rows the point breaks."""
    return broken_rows(m.rows, x, tol)


@dataclass
class Windows:
    """What :func:`window` needs, computed once per model, as arrays: the rows by row (CSR) and by
    column, each column's stage and value, which page-out column each M column needs and which
    columns define each W column, HiGHS options."""

    threads: int | None
    gap_abs: float
    low: np.ndarray  # per row
    up: np.ndarray
    row_start: np.ndarray  # CSR: row r's entries are [row_start[r], row_start[r + 1])
    row_col: np.ndarray
    row_val: np.ndarray
    col_start: np.ndarray  # by column: column j's rows are col_row[col_start[j]:col_start[j + 1]]
    col_row: np.ndarray
    stage: np.ndarray
    value: np.ndarray  # per column: its value (-1: W columns)
    m_out: tuple[np.ndarray, np.ndarray]  # (M column, the page-out column it needs)
    w_def: tuple[np.ndarray, np.ndarray]  # (W column, a column of its definition)
    cost: np.ndarray
    integer: np.ndarray  # per column: binary (else continuous)
    lead: np.ndarray  # per column: StageModel.lead


def windows(m: StageModel, threads: int | None, gap_abs: float) -> Windows:
    ncol = len(m.cost)
    low, up, row_start, row_col, row_val = rows_csr(m.rows)
    row_of = np.repeat(np.arange(len(m.rows)), np.diff(row_start))
    order = np.argsort(row_col, kind="stable")
    col_start = np.concatenate(([0], np.cumsum(np.bincount(row_col, minlength=ncol)))).astype(np.int64)
    value = np.full(ncol, -1)
    for cols in (m.K, m.R, m.M):
        for (_, i), c in cols.items():
            value[c] = i
    for i, c in m.out.items():
        value[c] = i
    m_out = [(c, m.out[i]) for (_, i), c in m.M.items()]
    w_def = [(c, j) for c, _, t in m.defs for j, _ in t]
    return Windows(
        threads,
        gap_abs,
        low,
        up,
        row_start,
        row_col,
        row_val,
        col_start,
        row_of[order],
        np.array(m.stage),
        value,
        (np.array([a for a, _ in m_out], dtype=np.int64), np.array([o for _, o in m_out], dtype=np.int64)),
        (np.array([c for c, _ in w_def], dtype=np.int64), np.array([j for _, j in w_def], dtype=np.int64)),
        np.array(m.cost, dtype=np.float64),
        np.array([j not in m.cont for j in range(ncol)], dtype=bool),
        np.array(m.lead, dtype=np.int64),
    )


def _ranges(start: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The indices [start[k], start[k + 1]) for every k in ``sel``, concatenated."""
    lo, size = start[sel], start[sel + 1] - start[sel]
    offsets = np.repeat(np.cumsum(size) - size, size)
    return np.repeat(lo, size) + np.arange(int(size.sum())) - offsets


def window(
    w: Windows,
    x: np.ndarray,
    first: int,
    last: int,
    time_limit: float,
    by_value: bool = False,
    near: int | None = None,
    nodes: int | None = None,
) -> Result:
    """Large-neighbourhood step: every K, R, M column outside stages [first, last] (``by_value``:
    outside values [first, last], at every stage) fixed at its value in ``x`` (a point of the model),
    the rest re-optimized by HiGHS from x. With ``near``, the R and M columns more than ``near``
    stages before the value's next consumer stay fixed too (a restoration long before its use only
    holds the value longer; leaving those out makes a wide value window much easier for HiGHS).
    HiGHS gets only the free columns and the rows that touch them (the fixed columns' contributions
    moved into the row bounds): a window costs HiGHS time in its size, not in the whole model's;
    ``time_limit`` includes building it. Free: the K, R, M columns of the window, the page-out columns
    of values with a free M column, the W columns defined by a free column. Returns the whole point
    (``x`` outside the window) and its objective."""
    import time

    began = time.perf_counter()
    key = w.value if by_value else w.stage
    free = (key >= first) & (key <= last)
    if near is not None:
        free &= w.lead <= near
    free[w.m_out[1][free[w.m_out[0]]]] = True
    free[w.w_def[0][free[w.w_def[1]]]] = True
    cols = np.flatnonzero(free)
    pos = np.full(len(free), -1)
    pos[cols] = np.arange(len(cols))
    rows = np.unique(w.col_row[_ranges(w.col_start, cols)])
    entries = _ranges(w.row_start, rows)
    sizes = w.row_start[rows + 1] - w.row_start[rows]
    row = np.repeat(np.arange(len(rows)), sizes)
    col, val = w.row_col[entries], w.row_val[entries]
    inside = pos[col] >= 0
    fixed = np.bincount(row[~inside], weights=val[~inside] * x[col[~inside]], minlength=len(rows))
    row, col, val = row[inside], pos[col[inside]], val[inside]
    solver = highs.Solver(_options(w.threads, w.gap_abs, nodes=nodes))
    if len(cols):
        start = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=len(rows))))).astype(np.int64)
        csr = (w.low[rows] - fixed, w.up[rows] - fixed, start, col, val)
        solver.load(highs.Model.of(w.cost[cols], csr, integer=w.integer[cols]))
    sub = _run(solver, time_limit - (time.perf_counter() - began), x[cols])  # the build counts too
    if sub.values is None:
        return sub
    out = x.copy()
    out[cols] = sub.values
    obj = float(np.dot(w.cost, out))
    return Result(sub.status, sub.infeasible, sub.optimal, obj, 0.0, out, len(cols) + sub.work)
