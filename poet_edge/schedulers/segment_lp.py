"""The segment cover (:mod:`poet_edge.schedulers.segment_cover`) as a MILP for HiGHS: scheduler
"scale"'s bound model and primal model.

Bound model (a relaxation, O(|E|) variables, one row per stage). Binaries p_s (restore segment s by
paging), r_s (by recomputation: one per DROP option), z_i (i is paged out once): p_s + r_s <= 1,
p_s <= z_i; for every stage t, RAM while t runs = fixed + out(t) + workspace(t) + inputs(t) + every
segment spanning t that is not evicted must fit the budget, i.e. sum of bytes(s) (p_s + r_s) >=
excess(t). Storage capacity and the runtime budget are rows too. A value with several consumers
restored by the options of several segments is charged there by fractions; since any one of those
restorations is a whole one, a top-up column makes the charge at least one restoration
(:func:`add_topups`). Inputs of a recomputed value that are not dead get cuts (:func:`add_input_cuts`): when
the input's own segment is evicted as well, it is restored twice, or held from the recomputation to
its next use, or kept until the recomputation (RAM in the budget rows or cost). Ignored on purpose
(it only adds cost): the transient RAM of deeper restorations. Its optimum bounds the cost of every
schedule in which node t is first computed in stage t (the problem's order), hence also POET's stage
model; checked against the exact POET MILP optimum on tiny DAGs and chains (tests). On large graphs
(more than ``DENSE_NONZEROS`` budget-row entries) the budget rows are written as running sums over
the stages (:func:`_running_sums`): the same points, a fraction of the entries, and HiGHS keeps to its
time limit.

Primal model. The same rows over the primal options, and a row r_s + p_s' + r_s' <= 1 for every
segment s' whose value a recompute closure needs resident.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, Analysis
from poet_edge.schedulers.lp_model import LpModel, node_costs
from poet_edge.schedulers.segment_cover import Cover, Option, Term, restore_kinds


def _term_cost(terms: tuple[Term, ...], comp: list[float], pin: list[float]) -> float:
    arr = {"c": comp, "k": comp, "i": pin, "j": pin}
    return sum(w * min(arr[k][v] for k in kinds) for v, kinds, w in terms)


def option_columns(problem: SchedulingProblem, opts: list[Option], latency: bool, norm: float) -> LpModel:
    """A model with one column per option (its restoration cost / ``norm``), one page-out column per value
    an option pages in (each such option <= it) and, for a segment with several options, a row choosing
    at most one of them. The bound, primal and strict models start from it."""
    comp, pin, pout = node_costs(problem, latency)
    lp = LpModel(opts=list(opts))
    for j, o in enumerate(opts):
        lp.col(_term_cost(o.terms, comp, pin) / norm)
        lp.by_seg.setdefault(o.seg, []).append(j)
    for j, o in enumerate(opts):  # a page-in (of the value or of an input) needs the page-out, once per value
        for i in sorted({v for v, kinds, _ in o.terms if kinds == "i"}):
            if i not in lp.z:
                lp.z[i] = lp.col(pout[i] / norm)
            lp.rows.append((-math.inf, 0.0, [j, lp.z[i]], [1.0, -1.0]))
    for cols in lp.by_seg.values():
        if len(cols) > 1:
            lp.rows.append((-math.inf, 1.0, cols, [1.0] * len(cols)))
    return lp


def add_topups(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: LpModel, latency: bool, norm: float
) -> None:
    """One restoration of an ancestor at least. The bound options charge a shared ancestor's
    restoration by fractions (w each); when any chosen option restores ancestor v, v is restored at
    least once after its last first computation (a different event from its segments'
    restorations), so the charge for v is at least one restoration: continuous T_v >= E_v - the
    options' fractions of v (in units of c_v, v's cheapest restoration, its cost), binary E_v >=
    every option that restores v. Sound only with :class:`_Prune`'s rule that an alternative never
    beats (or is merged into) one that restores fewer values."""
    comp, pin, _ = node_costs(problem, latency)
    users: dict[int, dict[int, float]] = {}  # v -> option column -> its charge for v (all its terms of v)
    for j, o in enumerate(lp.opts):
        own = cover.segs[o.seg].value
        for v, kinds, w in o.terms:
            if v != own and len(an.succs[v]) > 1:
                charge = users.setdefault(v, {})
                charge[j] = charge.get(j, 0.0) + w * _term_cost(((v, kinds, 1.0),), comp, pin)
    for v, charges in sorted(users.items()):
        uses = sorted(charges.items())
        cv = min(comp[v], pin[v])
        if sum(c for _, c in uses) <= 0 or all(c >= cv * (1 - 1e-12) for _, c in uses):
            continue
        e, top = lp.col(0.0), lp.col(cv / norm, continuous=True)
        for j, _ in uses:
            lp.rows.append((-math.inf, 0.0, [j, e], [1.0, -1.0]))
        lp.rows.append(
            (0.0, math.inf, [top, e, *(j for j, _ in uses)], [1.0, -1.0, *(c / cv for _, c in uses)])
        )


PAIR_NONZEROS = 200_000  # at most this many budget-row entries of the restoration-input cuts


def pair_counts(
    cover: Cover, lp: LpModel, pairs: list[tuple[int, int]]
) -> tuple[dict[tuple[int, int], int], dict[int, int]]:
    """For pairs (option column, segment s' of an input): (s', stage) -> the segments pairing with s'
    whose B range covers the stage, and option column -> its number of pairs."""
    users: dict[int, set[int]] = {}
    inputs: dict[int, int] = {}
    for j, k in pairs:
        users.setdefault(k, set()).add(lp.opts[j].seg)
        inputs[j] = inputs.get(j, 0) + 1
    near: dict[tuple[int, int], int] = {}
    for k, segs in users.items():
        for seg in segs:
            for t in range(max(cover.segs[seg].start, cover.segs[k].start) + 1, cover.segs[seg].end):
                near[(k, t)] = near.get((k, t), 0) + 1
    return near, inputs


def add_input_cuts(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: LpModel, latency: bool, norm: float
) -> None:
    """Cuts for the inputs a recomputation needs that are not dead (the bound model's columns must be
    ``cover.bound_opts``). DROP option o of segment s = (i, a, b) recomputes i at some moment tau in
    (a, b] (the last restoration of i before b; i is in RAM from then to b); an input q of i whose
    segment s' = (q, a', b') spans b (a' < b < b') is in RAM at tau. If s' is evicted too (q absent
    at some stage of s'), then: tau is before stage a' runs (i in RAM at every stage of [a', b): D,
    only when a < a'); or q is absent before and after tau (restored twice in s': one restoration
    more, cost C); or absent only before tau (restored by tau, in RAM at every stage of [b, b'): A);
    or only after tau (in RAM at every stage of (a', tau], i at every stage of [tau, b): the smaller
    of the two at every stage of (max(a, a'), b): B). Row x_A + x_B + x_C + x_D >= x_o + (s' evicted)
    - 1; x_A adds q's bytes to the budget rows of [b, b') (once for all pairs of s': from the
    earliest b of a pair with x_A on), x_B the smaller of q's bytes and o's freed bytes to those of
    (max(a, a'), b), x_D o's freed bytes to those of [a', b), x_C costs a restoration of q (once for
    all pairs of s'). For B q's bytes at a stage are divided by the number of segments pairing with s'
    whose B range covers it; o's freed bytes by the inputs paired with it. At the stages where i is
    counted as held itself (s is some pair's s' with x_A on, the column of :func:`_held`: i is in RAM
    from that pair's b on, restored before it), B and D add nothing: after tau only i can be their
    bytes, and i is counted once (a column w >= x_B - held replaces x_B there)."""
    nodes = problem.nodes
    comp, pin, _ = node_costs(problem, latency)
    span = {
        (g.value, t): k for k, g in enumerate(cover.segs) if k in lp.by_seg for t in range(g.start + 1, g.end)
    }
    pairs: list[tuple[int, int, int]] = []  # (option column, input, segment s')
    for j, o in enumerate(lp.opts):
        if o.mode != DROP:
            continue
        g = cover.segs[o.seg]
        for q in an.preds[g.value]:
            k = span.get((q, g.end))
            if k is not None and g.end not in an.succs[q]:
                pairs.append((j, q, k))
    near, inputs = pair_counts(cover, lp, [(j, k) for j, _, k in pairs])
    budget = PAIR_NONZEROS
    held: dict[int, dict[int, list[int]]] = {}  # s' -> b -> A columns of the pairs ending at b
    again: dict[int, int] = {}  # s' -> column: q is restored once more in s'
    claims: list[tuple[int, int, int, float]] = []  # (B or D column, segment of i, stage, bytes)
    for j, q, k in pairs:
        o, g, h = lp.opts[j], cover.segs[lp.opts[j].seg], cover.segs[k]
        bq = float(nodes[q].out_bytes)
        part = [o.credit_at(t) / inputs[j] for t in range(g.start, g.end)]  # share at stage t: part[t - a]
        budget -= h.end - min(g.start, h.start)
        if budget < 0:
            break
        cols = [lp.col(0.0), lp.col(0.0)]
        held.setdefault(k, {}).setdefault(g.end, []).append(cols[0])
        for t in range(max(g.start, h.start) + 1, g.end):
            claims.append((cols[1], o.seg, t, min(bq / near[(k, t)], part[t - g.start])))
        if g.start < h.start:  # D: i recomputed before a' and in RAM from a' on
            cols.append(lp.col(0.0))
            claims += [(cols[-1], o.seg, t, part[t - g.start]) for t in range(h.start, g.end)]
        kinds = restore_kinds(problem, an, q, h.start)
        if kinds:  # C: one restoration more of q in s', paid once for all pairs of s' (column y)
            if k not in again:
                again[k] = lp.col(min((comp[q] if c == "c" else pin[q]) for c in kinds) / norm)
            cols.append(lp.col(0.0))
            lp.rows.append((0.0, math.inf, [again[k], cols[-1]], [1.0, -1.0]))
        evict = lp.by_seg[k]
        lp.rows.append((-1.0, math.inf, [*cols, j, *evict], [1.0] * len(cols) + [-1.0] * (1 + len(evict))))
    steps = _held(problem, cover, lp, held)
    late: dict[tuple[int, int], int] = {}  # (B or D column, held column) -> w
    for col, seg, t, byte in claims:
        on = steps.get(seg)
        if on is None or on[0][0] > t:  # i not held as an input at stage t
            lp.ram.setdefault(t, []).append((col, byte))
            continue
        key = (col, on[bisect_right(on, t, key=lambda step: step[0]) - 1][1])  # the last held step <= t
        if key not in late:
            late[key] = w = lp.col(0.0, continuous=True)
            lp.rows.append((0.0, math.inf, [w, col, key[1]], [1.0, -1.0, 1.0]))
        lp.ram.setdefault(t, []).append((late[key], byte))


def _held(
    problem: SchedulingProblem, cover: Cover, lp: LpModel, held: dict[int, dict[int, list[int]]]
) -> dict[int, list[tuple[int, int]]]:
    """Case A of :func:`add_input_cuts`: q (segment s') in RAM from the earliest b of a pair with x_A on
    to b', counted once, not per pair. Returns s' -> (b, column: q in RAM from b on), b ascending."""
    steps: dict[int, list[tuple[int, int]]] = {}
    for k, by_end in held.items():
        h, bq = cover.segs[k], float(problem.nodes[cover.segs[k].value].out_bytes)
        ends = sorted(by_end)
        prev = None
        for r, b in enumerate(ends):
            col = lp.col(0.0)
            for a_col in by_end[b]:
                lp.rows.append((0.0, math.inf, [col, a_col], [1.0, -1.0]))
            if prev is not None:
                lp.rows.append((0.0, math.inf, [col, prev], [1.0, -1.0]))
            for t in range(b, ends[r + 1] if r + 1 < len(ends) else h.end):
                lp.ram.setdefault(t, []).append((col, bq))
            steps.setdefault(k, []).append((b, col))
            prev = col
    return steps


def add_model_rows(
    problem: SchedulingProblem,
    cover: Cover,
    lp: LpModel,
    budget: np.ndarray,
    dense_nonzeros: int | None = None,
) -> bool:
    """Adds the budget, keep, storage and runtime rows; False when a stage cannot fit at all. The
    budget rows are running sums where they have more than ``dense_nonzeros`` entries (default
    ``DENSE_NONZEROS``)."""
    nodes = problem.nodes
    stages: list[tuple[int, float, dict[int, float]]] = []  # (stage, excess, column -> bytes it frees)
    for t, segs in enumerate(cover.spans):
        excess = float(cover.need[t] + sum(nodes[cover.segs[s].value].out_bytes for s in segs) - budget[t])
        if excess <= 0:
            continue
        credits = [(j, lp.opts[j].credit_at(t)) for s in segs for j in lp.by_seg.get(s, ())]
        frees = {j: c for j, c in credits if c > 0}
        if sum(frees.values()) < excess:
            return False
        for j, byte in lp.ram.get(t, ()):
            frees[j] = frees.get(j, 0.0) - byte
        stages.append((t, excess, frees))
    dense = DENSE_NONZEROS if dense_nonzeros is None else dense_nonzeros
    if sum(len(frees) for _, _, frees in stages) <= dense:
        for _, excess, frees in stages:
            lp.rows.append((1.0, math.inf, list(frees), [v / excess for v in frees.values()]))
    else:
        _running_sums(lp, stages)
    for j, o in enumerate(lp.opts):
        for k in o.keep:
            cols = lp.by_seg.get(k, [])
            if cols:
                lp.rows.append((-math.inf, 1.0, [j, *cols], [1.0] * (1 + len(cols))))
    cap = problem.storage_bytes
    if cap is not None and lp.z:
        total = sum(nodes[i].out_bytes for i in lp.z)
        if total > cap:
            sc = float(max(cap, 1))
            lp.rows.append(
                (-math.inf, cap / sc, list(lp.z.values()), [nodes[i].out_bytes / sc for i in lp.z])
            )
    if problem.max_latency_s is not None:
        comp, pin, pout = node_costs(problem, True)
        room = problem.max_latency_s - sum(comp)
        if room < 0:
            return False
        idx = list(range(len(lp.opts))) + list(lp.z.values())
        val = [_term_cost(o.terms, comp, pin) for o in lp.opts] + [pout[i] for i in lp.z]
        sc = max(room, 1e-300)
        lp.rows.append((-math.inf, room / sc, idx, [v / sc for v in val]))
    return True


def bound_model(
    problem: SchedulingProblem,
    an: Analysis,
    cover: Cover,
    latency: bool,
    norm: float,
    budget: np.ndarray,
    dense_nonzeros: int | None = None,
) -> LpModel | None:
    """The bound model (columns of ``cover.bound_opts``, input cuts, top-ups, rows), ready for
    :func:`solve_lp`; None when a stage cannot fit at all. ``dense_nonzeros``: in place of
    ``DENSE_NONZEROS`` (:func:`add_model_rows`)."""
    lp = option_columns(problem, cover.bound_opts, latency, norm)
    add_input_cuts(problem, an, cover, lp, latency, norm)
    add_topups(problem, an, cover, lp, latency, norm)
    return lp if add_model_rows(problem, cover, lp, budget, dense_nonzeros) else None


DENSE_NONZEROS = 100_000  # more budget-row entries than this: the rows as running sums (_running_sums)


def _running_sums(lp: LpModel, stages: list[tuple[int, float, dict[int, float]]]) -> None:
    """The budget rows in a sparse form with the same points: over each run of consecutive stages, a
    continuous column F_t = the bytes freed at stage t (>= its excess), F_t = F_(t-1) + the columns whose
    bytes change at t (a segment starts or ends, an input is held from then on). A column enters the
    rows of the stages where its bytes change, not every stage it spans: a thousand-node graph's rows
    had 650 thousand entries, which HiGHS's presolve took seconds to read, past its time limit."""
    scale = max(excess for _, excess, _ in stages)  # F in these units
    prev: tuple[int, int, dict[int, float]] | None = None  # (stage, F column, bytes)
    for t, excess, frees in stages:
        f = lp.col(0.0, continuous=True, bounds=(excess / scale, math.inf))
        if prev is None or prev[0] != t - 1:
            delta, idx, val = frees, [f], [-1.0]
        else:
            delta = {j: frees.get(j, 0.0) - prev[2].get(j, 0.0) for j in {*frees, *prev[2]}}
            idx, val = [f, prev[1]], [-1.0, 1.0]
        changed = sorted(j for j, d in delta.items() if d != 0.0)
        lp.rows.append((0.0, 0.0, idx + changed, val + [delta[j] / scale for j in changed]))
        prev = (t, f, frees)
