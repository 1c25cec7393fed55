"""The strict bound model of scheduler "scale": the segment bound model
(:mod:`poet_edge.schedulers.segment_lp`) with the cuts of every value a recomputation recomputes,
not only of the segment's own value. Larger (bert_tiny: 615 columns become 2,700) and slower to
solve, so scale runs it only where the gap stays wide
(:func:`poet_edge.schedulers.scale_bounds.strict_bound`).

Three additions, each a relaxation of every schedule in the problem's order (for the third, of some
optimal one):

- Variants (:func:`with_variants`). A copy of an option of segment k = (q, a', b') whose last
  restoration is by stage e < b': q is in RAM at every stage of [e, b'), so the copy frees nothing
  there. A schedule's point takes the variant with the least such e, or the option itself.
- Ancestor pairs (:func:`_pairs`, :func:`_cuts`). Every value an option recomputes needs its live
  inputs in RAM when it is recomputed; the cases A, B, C and D of the segment bound model's input
  cuts apply to each such input, A as "some option of q's segment ends by e" (by its first end
  at or after e when it has no variant at e).
- The price of one more restoration (case C, :func:`price_once_more`) is the restoration of the chain
  that an optimal schedule cannot avoid, not only of the value itself.

The options are pruned strictly (:func:`poet_edge.schedulers.segment_cover.strict_bound_options`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, Analysis
from poet_edge.schedulers.lp_model import LpModel, node_costs, solve_lp
from poet_edge.schedulers.segment_cover import (
    DEPTH,
    Cover,
    Option,
    dead_inputs,
    restore_kinds,
    strict_bound_options,
)
from poet_edge.schedulers.segment_gap import gap_rows, option_end, split_ends
from poet_edge.schedulers.segment_lp import (
    PAIR_NONZEROS,
    add_model_rows,
    add_topups,
    option_columns,
    pair_counts,
)

if TYPE_CHECKING:
    from poet_edge.schedulers.scale import ScaleOptions

LEVELS = 3  # variants of variants: a variant's pairs ask for variants of their inputs' segments
# this deep (bert_tiny at 1.1x the floor: the third level raises the bound, a second does not)
VARIANTS = 4000  # at most this many variants per level


def _span(cover: Cover, optional: set[int]) -> dict[tuple[int, int], int]:
    """(value, stage) -> the optional segment of that value spanning the stage."""
    segs = [(k, g) for k, g in enumerate(cover.segs) if k in optional]
    return {(g.value, t): k for k, g in segs for t in range(g.start + 1, g.end)}


@dataclass(frozen=True)
class _Pair:
    """Input q, of segment k, of a value v that an option recomputes; ``share``: the most bytes per
    stage a claim may count for a value on a path from v to the segment's value (inf for v itself
    being the segment's value: then the option's own freed bytes bound the claims)."""

    q: int
    k: int
    share: float


def _pairs(
    problem: SchedulingProblem, an: Analysis, cover: Cover, span: dict[tuple[int, int], int], o: Option
) -> list[_Pair]:
    """The pairs of DROP option o of segment (i, a, b) with end e: i and every value o recomputes
    (terms of kind "c", dead at a or dying inside the segment) need their inputs in RAM when they
    are recomputed, by e; q is such an input that o does not restore, whose segment k spans e.
    From v's recomputation on, a value on a path from v to i is in RAM: v's share is the least share
    (weight x bytes) on those paths. Other options count such a value by their own shares only
    (held ancestors, their own pairs), so none is counted more than once; a dying value's own
    segment ends before it is recomputed."""
    if o.mode != DROP:
        return []
    nodes, g, e = problem.nodes, cover.segs[o.seg], option_end(cover, o)
    rec = {v: w for v, kinds, w in o.terms if kinds == "c" and v != g.value and max(an.succs[v]) < g.end}
    restored = {v for v, _, _ in o.terms}
    share: dict[int, float] = {g.value: math.inf}
    for v in sorted(rec, reverse=True):  # its consumers come later in the order
        share[v] = min([rec[v] * nodes[v].out_bytes, *(share[u] for u in an.succs[v] if u in share)])
    out: dict[tuple[int, int], float] = {}
    for v in sorted(share):
        for q in an.preds[v]:
            k = span.get((q, e))
            if k is not None and nodes[q].out_bytes > 0 and q not in restored:
                out[(q, k)] = max(out.get((q, k), 0.0), share[v])
    return [_Pair(q, k, cap) for (q, k), cap in sorted(out.items())]


def _variant(base: Option, e: int) -> Option:
    """A copy of ``base`` whose last restoration is before stage e: it frees nothing from e on."""
    return replace(base, cuts=(*base.cuts, (e, base.credit)), end=e)


def with_variants(problem: SchedulingProblem, an: Analysis, cover: Cover, opts: list[Option]) -> list[Option]:
    """``opts`` and their variants: for each stage e at which a recomputation of an option (or of a
    variant) needs q (:func:`_pairs`), copies of the options of q's segment k = (q, a', b') that
    free nothing from e on, ``LEVELS`` deep."""
    out = list(opts)
    span = _span(cover, {o.seg for o in opts})
    by_seg: dict[int, list[Option]] = {}
    for o in opts:
        by_seg.setdefault(o.seg, []).append(o)
    have = {(o.seg, option_end(cover, o)) for o in opts}
    level = list(opts)
    for _ in range(LEVELS):
        nxt: list[Option] = []
        for o in level:
            e = option_end(cover, o)
            for pair in _pairs(problem, an, cover, span, o):
                if (pair.k, e) in have or len(nxt) + len(by_seg[pair.k]) > VARIANTS:
                    continue
                have.add((pair.k, e))
                nxt += [_variant(base, e) for base in by_seg[pair.k]]
        out += nxt
        level = nxt
    return out


def price_once_more(
    problem: SchedulingProblem, an: Analysis, q: int, a: int, comp: list[float], pin: list[float]
) -> float:
    """The least cost of restoring q (segment from stage a) once more, in some optimal schedule
    (inf: never). Exchange: if that restoration recomputes q from a value x kept in RAM since the
    previous one, where x and every value on its path to q have one consumer and x is no smaller
    than q, then keeping q instead of x over that time holds no more bytes at any moment and saves
    the recomputation. So an optimal schedule with the fewest recomputations restores such an x too
    (its page-in, or its computation and the same for its inputs dead at a); any other input dead at
    a may be held (0), and a live one is in RAM anyway."""
    nodes, bq = problem.nodes, problem.nodes[q].out_bytes

    def again(v: int, depth: int) -> float:
        kinds = restore_kinds(problem, an, v, a)
        best = pin[v] if "i" in kinds else math.inf
        if "c" in kinds:
            dead = [
                x
                for x in dead_inputs(problem, an, v, a)
                if len(an.succs[x]) == 1 and nodes[x].out_bytes >= bq
            ]
            best = min(best, comp[v] + (sum(again(x, depth + 1) for x in dead) if depth < DEPTH else 0.0))
        return best

    return again(q, 0)


def _cuts(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: LpModel, latency: bool, norm: float
) -> dict[int, list[tuple[int, int]]]:
    """The input cuts of every pair (:func:`_pairs`). DROP option o of segment s = (i, a, b) with end
    e restores i last at some moment tau in (a, e] (i is in RAM from then to b) and recomputes value
    v of a pair at some tau_v <= tau (from then to tau, a value on a path from v to i is in RAM).
    Input q of v, whose segment s' = (q, a', b') spans e, is in RAM at tau_v. If s' is evicted too (q
    absent at some stage of s'), then: tau_v is before stage a' runs (D: only when a < a' for v = i;
    a path value at every stage of [a', e)); or q is absent before and after tau_v (C: restored twice
    in s', one restoration more, paid once for all pairs of s'); or only before (A: q restored last
    by tau_v <= e; a schedule's point takes the option of s' with the least end at or after q's last
    restoration, so one that ends by e+, the first end of s' at or after e: e itself when s' has a
    variant there); or only after (B: q in RAM at every stage of (a', tau_v], a path value at
    every stage of [tau_v, e): the smaller of the two at every stage of (max(a, a'), e)). Row x_A +
    x_B + x_C + x_D >= x_o + (s' evicted) - 1. A path value's bytes at stage t: o's freed bytes at t
    (i in RAM) and at most the pair's share, divided by o's pairs; q's bytes are divided by the
    segments pairing with s' whose B range covers t. The claims stop at e, from where o frees
    nothing, so i is never counted twice. Returns option column -> (s', column of case A) of its pairs."""
    nodes = problem.nodes
    comp, pin, _ = node_costs(problem, latency)
    span = _span(cover, set(lp.by_seg))
    pairs = [(j, p) for j, o in enumerate(lp.opts) for p in _pairs(problem, an, cover, span, o)]
    near, inputs = pair_counts(cover, lp, [(j, p.k) for j, p in pairs])
    ends: dict[int, list[tuple[int, int]]] = {}  # segment -> (end, column) of its options
    for j, o in enumerate(lp.opts):
        ends.setdefault(o.seg, []).append((option_end(cover, o), j))
    budget = PAIR_NONZEROS
    again: dict[int, int] = {}  # s' -> column: q is restored once more in s' (-1: it cannot be)
    acols: dict[int, list[tuple[int, int]]] = {}
    for j, p in pairs:
        o, g, h = lp.opts[j], cover.segs[lp.opts[j].seg], cover.segs[p.k]
        e, bq = option_end(cover, o), float(nodes[p.q].out_bytes)
        budget -= e - min(g.start, h.start)
        if budget < 0:
            break
        part = [min(o.credit_at(t), p.share) / inputs[j] for t in range(g.start, e)]  # stage t: part[t - a]
        cols = [lp.col(0.0), lp.col(0.0)]  # A, B
        acols.setdefault(j, []).append((p.k, cols[0]))
        e_plus = min(end for end, _ in ends[p.k] if end >= e)  # s' spans e: its own end is later
        by_e = [c for end, c in ends[p.k] if end <= e_plus]
        lp.rows.append((0.0, math.inf, [*by_e, cols[0]], [1.0] * len(by_e) + [-1.0]))
        for t in range(max(g.start, h.start) + 1, e):
            lp.ram.setdefault(t, []).append((cols[1], min(bq / near[(p.k, t)], part[t - g.start])))
        if g.start < h.start or math.isfinite(p.share):  # D
            cols.append(lp.col(0.0))
            for t in range(max(h.start, g.start + 1), e):
                lp.ram.setdefault(t, []).append((cols[-1], part[t - g.start]))
        if p.k not in again:  # C
            price = price_once_more(problem, an, p.q, h.start, comp, pin)
            again[p.k] = lp.col(price / norm) if math.isfinite(price) else -1
        if again[p.k] >= 0:
            cols.append(lp.col(0.0))
            lp.rows.append((0.0, math.inf, [again[p.k], cols[-1]], [1.0, -1.0]))
        evict = lp.by_seg[p.k]
        lp.rows.append((-1.0, math.inf, [*cols, j, *evict], [1.0] * len(cols) + [-1.0] * (1 + len(evict))))
    return acols


def strict_model(
    problem: SchedulingProblem,
    an: Analysis,
    cover: Cover,
    latency: bool,
    norm: float,
    budget: np.ndarray,
    splits: Mapping[int, set[int]] | None = None,
    gaps: bool = True,
) -> LpModel | None:
    """The strict bound model with its gap rows (:mod:`poet_edge.schedulers.segment_gap`), ready for
    :func:`poet_edge.schedulers.lp_model.solve_lp`; ``splits``: segment -> more ends, at each a
    variant of every option of the segment (:func:`poet_edge.schedulers.segment_gap.split_ends`);
    ``gaps``: False leaves the gap rows out (to measure what they add).
    None when a stage cannot fit at all (the segment bound model says why) or the strict options miss
    a segment."""
    opts = strict_bound_options(problem, an, cover, latency)
    if opts is None:
        return None
    allv = with_variants(problem, an, cover, opts)
    if splits:
        have: dict[int, set[int]] = {}  # segment -> ends it has
        for o in allv:
            have.setdefault(o.seg, set()).add(option_end(cover, o))
        bases: dict[int, list[Option]] = {}  # segment -> its options, in order
        for b in opts:
            bases.setdefault(b.seg, []).append(b)
        for seg, ends in sorted(splits.items()):
            for e in sorted(set(ends) - have.get(seg, set())):
                allv += [_variant(b, e) for b in bases.get(seg, [])]
    lp = option_columns(problem, allv, latency, norm)
    acols = _cuts(problem, an, cover, lp, latency, norm)
    add_topups(problem, an, cover, lp, latency, norm)
    if gaps:
        comp, pin, _ = node_costs(problem, latency)
        gap_rows(
            problem,
            an,
            cover,
            lp,
            budget,
            acols,
            lambda y, a: price_once_more(problem, an, y, a, comp, pin) / norm,
        )
    return lp if add_model_rows(problem, cover, lp, budget) else None


@dataclass(frozen=True)
class SplitModels:
    """What :func:`split_model` gives: the strict model (None when it or its relaxation has no
    solution), its LP relaxation's (scaled) bound, that relaxation's
    :meth:`~poet_edge.highs.Solver.safe_bound` and reduced costs (a proof on the strict model
    need not solve its LP again), and the split model's build from that relaxation (:meth:`split`)."""

    strict: LpModel | None
    bound: float
    reduced: tuple[float, np.ndarray] | None = None
    make_split: Callable[[], LpModel] | None = None  # _split_of, its arguments bound

    def split(self) -> LpModel | None:
        """The split model (None without a strict model)."""
        return None if self.make_split is None else self.make_split()


def split_model(
    problem: SchedulingProblem,
    an: Analysis,
    cover: Cover,
    latency: bool,
    norm: float,
    budget: np.ndarray,
    time_limit: float,
    options: ScaleOptions,
) -> SplitModels:
    """The strict model (gap rows included) and its LP relaxation (``time_limit`` seconds), from which
    :meth:`SplitModels.split` builds the split model."""
    lp = strict_model(problem, an, cover, latency, norm, budget)
    if lp is None:
        return SplitModels(None, 0.0)
    relaxed = solve_lp(lp, time_limit, options, integer=False, with_reduced=True)
    if relaxed.values is None:
        return SplitModels(None, relaxed.bound)
    build = partial(strict_model, problem, an, cover, latency, norm, budget)
    make = partial(_split_of, build, cover, lp, relaxed.values)
    return SplitModels(lp, relaxed.bound, relaxed.reduced, make)


def _split_of(
    build: Callable[[Mapping[int, set[int]]], LpModel | None], cover: Cover, lp: LpModel, values: np.ndarray
) -> LpModel:
    """The strict model ``lp`` rebuilt (``build``: :func:`strict_model` with the problem's arguments
    bound) with the split ends its relaxation's point ``values`` asks for
    (:func:`poet_edge.schedulers.segment_gap.split_ends`; ``lp`` itself when that model is None)."""
    return build(split_ends(cover, lp, values)) or lp
