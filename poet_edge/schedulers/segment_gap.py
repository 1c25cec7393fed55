"""Gap rows and split ends of the strict bound model (:mod:`poet_edge.schedulers.segment_strict`):
the RAM at the moment a dropped value is recomputed, which the budget rows (one per first computation)
do not see.

Gap row. DROP options ``js`` of segment s = (i, a, b) that end at e (the last restoration of i is
before stage e, :func:`option_end`); lo: the largest end below e of
an option of s (a when there is none). A schedule's point takes the option of s with the least end at
or after i's last restoration, so when it takes one of ``js`` that restoration, a recomputation of i,
happens at a moment tau after stage lo and before stage e. At tau, RAM holds the fixed bytes, i with
its workspace, i's inputs, every segment value that is not absent and whose segment spans all of
(lo, e] (start <= lo, end >= e), and, when lo = e - 1, every value y used or computed at e - 1 and
used at e (it has no segment there; y absent at tau is one more restoration of y, priced at least
:func:`~poet_edge.schedulers.segment_strict._once_more`: column ``m_y``, one per (y, e)). With
``excess``: those bytes less the budget, ``F_s`` (continuous, at most the options of s that end after
lo: s can be absent at tau only if its last restoration comes after lo), the row is
``sum_s F_s * min(1, bytes_s / excess) >= sum(js)``. A segment k whose value q some option j of ``js``
needs in RAM by tau (case A of the input cuts, column ``A_jk``: q restored last by then) is present
at tau: ``F_k + A_jk <= 1``; one level further, an option j2 of k with case A on its own pair k2 puts
k2's value in RAM by q's restoration: ``F_k2 + A_jk + A_j2k2 <= 2``.

Split ends. The narrower (lo, e], the more segments span it: :func:`split_ends` proposes, for DROP
options a solution (of the LP relaxation) uses, the midpoint of their range as one more end of their
segment (variants of all the segment's options there, :func:`~poet_edge.schedulers.segment_strict
.strict_model`). Every choice of ends gives a relaxation; more ends make a larger model.

Soundness is checked against POET's MILP on small problems with every range split down to one stage
(tests/test_scheduler_scale.py, tests/test_segment_gap.py). bert_tiny at 50% of its peak is the case
that needed split ends: the model with gap rows alone has the segment model's optimum; with the split
ends of its LP relaxation and a cutoff 1% below scale's schedule, HiGHS proves that cutoff (faster on
2 threads with reduced-cost fixing first), while its dual bound without a cutoff stays at the segment
model's optimum. With split ends from MIP solutions instead (a prototype, with slow rounds), that
model's optimum came closer still to scale's schedule.

Limit. The rows see one moment per restoration: i's recomputation, with its direct inputs. They do not
see the order of the restorations within one gap. Each option may take the others of the same gap to
come after it, and so be absent at its moment, while a chain holds its shared ancestors throughout. At
1.1x the floor, bert_tiny's stage 123 holds nothing but its own values, so layer 1's attention is
recomputed before stage 128 for the backward pass. The strict model's plan for that gap needs seven
8 KiB values at once, 1,021 bytes over the budget. The stage model's best point of a long run
overflows by the same 1,021 bytes where it recomputes stage 123's input. Split ends iterated from
each round's LP and MIP solutions (bench/bound_models.py --split-rounds) give models whose best
points all stay far below scale's schedule there, so none of them gives a bound near it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, Analysis
from poet_edge.schedulers.lp_model import LpModel
from poet_edge.schedulers.segment_cover import Cover, Option

SPLIT_SHARE = 0.1  # split_ends: options whose LP value exceeds this


def option_end(cover: Cover, o: Option) -> int:
    """The stage by which option o's last restoration happens (a variant's end, else its segment's)."""
    return o.end if o.end >= 0 else cover.segs[o.seg].end


def option_ranges(cover: Cover, lp: LpModel) -> dict[int, int]:
    """Option column -> lo: the largest end of another option of its segment below its end."""
    ends: dict[int, set[int]] = {}
    for o in lp.opts:
        ends.setdefault(o.seg, set()).add(option_end(cover, o))
    out = {}
    for j, o in enumerate(lp.opts):
        e = option_end(cover, o)
        out[j] = max([x for x in ends[o.seg] if x < e], default=cover.segs[o.seg].start)
    return out


def gap_rows(
    problem: SchedulingProblem,
    an: Analysis,
    cover: Cover,
    lp: LpModel,
    budget: np.ndarray,
    acols: dict[int, list[tuple[int, int]]],
    once_more: Callable[[int, int], float],
) -> int:
    """Adds the gap rows (see the module docstring) to ``lp``; ``acols``: option column -> (segment k,
    column A_jk) of its pairs; ``once_more(y, a)``: the scaled price of one more restoration of y after
    stage a (inf: never). Returns how many groups got a row."""
    nodes = problem.nodes
    lo_of = option_ranges(cover, lp)
    groups: dict[tuple[int, int], list[int]] = {}
    for j, o in enumerate(lp.opts):
        if o.mode == DROP:
            groups.setdefault((o.seg, option_end(cover, o)), []).append(j)
    micro: dict[tuple[int, int], int] = {}  # (y, e) -> column m_y (-1: y cannot be restored)
    rows = 0
    for (seg, e), js in sorted(groups.items()):
        i, lo = cover.segs[seg].value, lo_of[js[0]]
        ex = {i, *an.preds[i]}
        held = problem.fixed_bytes + nodes[i].out_bytes + nodes[i].workspace_bytes
        held += sum(nodes[q].out_bytes for q in ex - {i})
        spanning = [
            s
            for s, h in enumerate(cover.segs)
            if h.start <= lo and h.end >= e and s != seg and h.value not in ex
        ]
        held += sum(nodes[cover.segs[s].value].out_bytes for s in spanning)
        ys = _micro(problem, an, e, ex) if lo == e - 1 else []
        excess = float(held + sum(nodes[y].out_bytes for y in ys) - budget[lo + 1 : e + 1].max())
        if excess <= 0:
            continue
        free: dict[object, tuple[int, float]] = {}  # F column and its bytes, by segment or ("m", y)
        for y in ys:
            if (y, e) not in micro:
                price = once_more(y, e - 1)
                micro[(y, e)] = lp.col(price) if math.isfinite(price) else -1
            f = lp.col(0.0, continuous=True)
            m = micro[(y, e)]
            lp.rows.append((-math.inf, 0.0, [f, m], [1.0, -1.0]) if m >= 0 else (-math.inf, 0.0, [f], [1.0]))
            free[("m", y)] = (f, float(nodes[y].out_bytes))
        for s in spanning:
            absent = [j for j in lp.by_seg.get(s, ()) if option_end(cover, lp.opts[j]) > lo]
            if not absent:
                continue  # never absent at tau (or not optional)
            f = lp.col(0.0, continuous=True)
            lp.rows.append((-math.inf, 0.0, [f, *absent], [1.0] + [-1.0] * len(absent)))
            free[s] = (f, float(nodes[cover.segs[s].value].out_bytes))
        _present(lp, js, acols, free)
        cols = [f for f, _ in free.values()]
        coef = [min(1.0, b / excess) for _, b in free.values()]
        lp.rows.append((0.0, math.inf, cols + js, coef + [-1.0] * len(js)))
        rows += 1
    return rows


def _micro(problem: SchedulingProblem, an: Analysis, e: int, ex: set[int]) -> list[int]:
    """Values (not in ``ex``) used or computed at stage e - 1 and used at e."""
    out = []
    for y in range(e):
        pts = (y, *an.succs[y])
        if problem.nodes[y].out_bytes > 0 and y not in ex and e - 1 in pts and e in pts:
            out.append(y)
    return out


def _present(
    lp: LpModel, js: list[int], acols: dict[int, list[tuple[int, int]]], free: dict[object, tuple[int, float]]
) -> None:
    """Segments the options ``js`` need in RAM by tau (case A, and case A of their options' pairs)."""
    for j in js:
        for k, a in acols.get(j, ()):
            if k in free:
                lp.rows.append((-math.inf, 1.0, [free[k][0], a], [1.0, 1.0]))
            for j2 in lp.by_seg.get(k, ()):
                for k2, a2 in acols.get(j2, ()):
                    if k2 in free and a2 != a:
                        lp.rows.append((-math.inf, 2.0, [free[k2][0], a, a2], [1.0, 1.0, 1.0]))


def split_ends(cover: Cover, lp: LpModel, values: np.ndarray) -> dict[int, set[int]]:
    """Segment -> one more end for each DROP option whose value in ``values`` exceeds ``SPLIT_SHARE``
    and whose range (lo, e] is more than one stage wide: its midpoint."""
    lo_of = option_ranges(cover, lp)
    out: dict[int, set[int]] = {}
    for j, o in enumerate(lp.opts):
        e = option_end(cover, o)
        if o.mode == DROP and values[j] > SPLIT_SHARE and lo_of[j] < e - 1:
            out.setdefault(o.seg, set()).add((lo_of[j] + e) // 2)
    return out
