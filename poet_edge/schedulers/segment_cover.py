"""The segment cover of scheduler "scale" (:mod:`poet_edge.schedulers.scale`): segments, and the ways
to have a segment's value absent (options) in its bound model and in its primal model. The models
built on them: :mod:`poet_edge.schedulers.segment_lp`.

Order. Like POET's stage model, node t is computed for the first time in stage t (the problem's
order); recomputations and paging happen between first computations. All bounds below hold for
every schedule with that order of first computations, so they are bounds for the POET MILP too.

Segments. Value i is used (first computations) at stages i < j1 < ... < jm. Between two
consecutive use points a < b, at every stage t with a < t < b, value i is either in RAM while t is
computed or it is absent then and must be restored before b: by a page-in (which needs one page-out
of i, at most once per value: storage is written once) or by a recomputation. The restorations of
different segments are different events, so a schedule that has i absent somewhere in segment s pays
at least ``page_in(i)`` (+ ``page_out(i)`` once per value) or ``compute(i)`` for s.

Options of the bound model (a relaxation). PAGE: the value paged in. DROP: a recomputation of i,
which needs each input q that no first computation uses after the segment's start ("dead") in RAM at
that moment; each DROP option picks, per dead q: held (q's bytes, shared by q's consumers, lower the
bytes the option frees), paged in (cost shared by q's consumers; the page-out of q is then required,
once per value), or recomputed (compute cost shared likewise), which in turn needs q's own dead
inputs held or restored, recursively (``DEPTH`` levels, ``EXPAND`` ancestors per segment; beyond, the
cheaper of page-in and compute is charged). An input (or ancestor) whose last first computation d is
inside the segment is gone by its end: held from d on (the option frees that much less from stage
d + 1 on: ``Option.cuts``) or restored; a recomputation before d frees nothing after d, which the
first case covers. A held ancestor counts the smallest shared bytes on its path to i (it is in RAM
until the recomputation it feeds, then the value recomputed from it is). Only the Pareto-best options
(bytes freed vs cost) are kept; a surplus is merged into relaxations; an option never prunes or
absorbs one that restores fewer values with several consumers (the model's top-up columns charge
those one whole restoration), so no schedule loses its point of the model.

Options of the primal model. DROP comes with its recompute closure: i is recomputed just before b,
every input that is dead then is recomputed too, transitively (at most ``CLOSURE`` nodes, priced in
the objective), and every other input reached must be resident there (``Option.keep``).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, PAGE, Analysis

CLOSURE = 12  # most nodes one primal recomputation may recompute (the value and dead ancestors)


@dataclass(frozen=True)
class Segment:
    """Value ``value`` is not used by a first computation strictly between stages ``start``/``end``."""

    value: int
    start: int
    end: int


Term = tuple[int, str, float]  # (node, kinds "c" compute / "i" page-in: the cheaper one, weight)
# ("j": page-in whose page-out the model does not require, "k": a recomputation that implies no input
# cuts: merged options of the bound model)


@dataclass(frozen=True)
class Option:
    """One way to have segment ``seg``'s value absent: PAGE (page-in, plus one page-out of the value)
    or DROP (recompute it, and the inputs in the terms); ``credit`` bytes it frees at the stages the
    segment spans; ``keep``: segments that must then stay resident (primal model only); ``cuts``:
    (stage, bytes) pairs, the credit is that much lower from that stage on (bound model: an input
    held from its last use, or a recomputation done before then)."""

    seg: int
    mode: str
    terms: tuple[Term, ...]
    credit: float
    keep: tuple[int, ...] = ()
    cuts: tuple[tuple[int, float], ...] = ()
    end: int = -1  # a variant's: the last restoration is before stage ``end`` (-1: the segment's end)

    def credit_at(self, t: int) -> float:
        """Bytes the option frees at stage t (of the segment's span)."""
        return max(0.0, self.credit - sum(b for s, b in self.cuts if s <= t))


@dataclass
class Cover:
    """The segment-cover model data (shared by the bound and the primal model)."""

    segs: list[Segment]
    bound_opts: list[Option]
    primal_opts: list[Option]
    need: np.ndarray  # bytes each stage needs besides optional segments (fixed, out, ws, inputs, pinned)
    spans: list[list[int]]  # optional segments spanning each stage
    ancestors: dict[int, tuple[int, ...]] = field(default_factory=dict)  # droppable segment: dead ancestors

    @classmethod
    def empty(cls) -> Cover:
        """No segments (a run the safety stop cut before its cover was built)."""
        return cls([], [], [], np.zeros(0, dtype=np.int64), [])


# -- the model -------------------------------------------------------------------------------------------


def _segments(problem: SchedulingProblem, an: Analysis) -> list[Segment]:
    out = []
    for i, node in enumerate(problem.nodes):
        if node.out_bytes == 0 or not an.succs[i]:
            continue
        pts = [i, *an.succs[i]]
        out += [Segment(i, a, b) for a, b in zip(pts, pts[1:], strict=False) if b - a >= 2]
    return out


def restore_kinds(problem: SchedulingProblem, an: Analysis, q: int, stage: int) -> str:
    """How value q can be restored after ``stage`` (for the bound: generous)."""
    node = problem.nodes[q]
    cap = problem.storage_bytes
    page = node.pageable and (cap is None or node.out_bytes <= cap)
    return ("i" if page else "") + ("c" if node.recomputable and stage < an.recomp_until[q] else "")


def restore_by(an: Analysis, g: Segment) -> int:
    """The stage before which a recomputation restores g.value: its use, or the last stage it may run
    (``Analysis.recomp_until``: an in-place update of a parameter it reads runs before its use)."""
    return min(g.end, an.recomp_until[g.value])


def dead_inputs(problem: SchedulingProblem, an: Analysis, v: int, a: int) -> list[int]:
    """Inputs of v that no first computation uses after stage a."""
    return [q for q in an.preds[v] if problem.nodes[q].out_bytes > 0 and max(an.succs[q]) <= a]


# a way to have an input in RAM: (bytes held, energy, energy with the page-outs its page-ins need,
# latency, latency with page-outs, its restoration terms, (stage, bytes): more bytes held from then on)
Alt = tuple[float, float, float, float, float, tuple[Term, ...], tuple[tuple[int, float], ...]]
DEPTH = 8  # ancestor levels a DROP option of the bound model charges
ALTS = 24  # at most this many (Pareto-best) ways per input
EXPAND = 32  # at most this many ancestors expanded per segment


def _term(problem: SchedulingProblem, v: int, kinds: str, w: float) -> Alt:
    """One restoration term (the cheaper of its kinds) as an alternative that holds no bytes."""
    node, page = problem.nodes[v], kinds == "i"
    e = w * min(node.compute_j if k in "ck" else node.page_in_j for k in kinds)  # "i" or "j": page-in
    t = w * min(node.compute_s if k in "ck" else node.page_in_s for k in kinds)
    return 0.0, e, e + node.page_out_j * page, t, t + node.page_out_s * page, ((v, kinds, w),), ()


def _priced(problem: SchedulingProblem, byte: float, terms: tuple[Term, ...]) -> Alt:
    out: Alt = (byte, 0.0, 0.0, 0.0, 0.0, (), ())
    for v, kinds, w in terms:
        one = _term(problem, v, kinds, w)
        out = _join(out, one)
    return out


def _join(x: Alt, y: Alt) -> Alt:
    return x[0] + y[0], x[1] + y[1], x[2] + y[2], x[3] + y[3], x[4] + y[4], x[5] + y[5], x[6] + y[6]


def _most(alt: Alt) -> float:
    """The most bytes the alternative holds at any stage."""
    return alt[0] + sum(b for _, b in alt[6])


def _pages(alt: Alt) -> set[int]:
    return {v for v, kinds, _ in alt[5] if kinds == "i"}


@dataclass(frozen=True)
class _Prune:
    """How alternatives compare: by the objective's cost; ``tight``: the model has a runtime row or a
    storage row that can bind, so an alternative beats another only when it is cheaper in energy and
    latency and pages in no other values. An alternative never beats one that restores fewer of the
    ``shared`` values (inputs of several nodes: :func:`add_topups` charges them one whole restoration).
    ``strict`` (the options of :func:`strict_bound_options`): nor one that recomputes fewer values,
    whose inputs the strict bound model's cuts then need; a dying input's page-in and recomputation
    are separate alternatives."""

    problem: SchedulingProblem
    latency: bool
    tight: bool
    shared: frozenset[int] = frozenset()
    strict: bool = False

    def restores(self, alt: Alt) -> frozenset[int]:
        return frozenset(v for v, _, _ in alt[5] if v in self.shared)

    def recomputes(self, alt: Alt) -> frozenset[int]:
        return frozenset(v for v, kinds, _ in alt[5] if kinds == "c") if self.strict else frozenset()

    def cost(self, alt: Alt) -> float:
        return alt[3] if self.latency else alt[1]

    def paid(self, alt: Alt) -> float:
        """The cost with the page-outs its page-ins need."""
        return alt[4] if self.latency else alt[2]

    def beats(self, f: Alt, alt: Alt) -> bool:
        if _most(f) > alt[0] + 1e-9 or self.paid(f) > self.cost(alt) * (1 + 1e-12):
            return False
        if not self.restores(f) <= self.restores(alt):  # it would trigger a top-up the other does not
            return False
        if not self.recomputes(f) <= self.recomputes(alt):  # it would need inputs the other does not
            return False
        if not self.tight:
            return True
        return f[2] <= alt[1] * (1 + 1e-12) and f[4] <= alt[3] * (1 + 1e-12) and _pages(f) <= _pages(alt)

    def front(self, alts: list[Alt], keep: int) -> list[Alt]:
        """The alternatives no other one beats (an alternative that pages a value in beats another
        only when it is cheaper even with that page-out); more than ``keep`` are merged in runs of
        neighbours (fewest bytes of the run, the terms of its cheapest, whose page-ins need a
        page-out only when every alternative of the run pages that value in, else "j": a relaxation
        of each; when ``tight``, no terms at all)."""
        front: list[Alt] = []
        # per set of shared values restored: (cost with page-outs, bytes) of kept alternatives waiting
        # to count, and the fewest bytes of a kept alternative that is cheaper, page-outs included
        groups: dict[frozenset[int], tuple[list[tuple[float, float]], list[float]]] = {}
        for alt in sorted(alts, key=lambda x: (self.cost(x), x[0])):
            if self.tight:
                if not any(self.beats(f, alt) for f in front):
                    front.append(alt)
                continue
            mine = self.restores(alt)
            beaten = False
            for key, (waiting, fewest) in groups.items():
                if not key <= mine:
                    continue
                while waiting and waiting[0][0] <= self.cost(alt) * (1 + 1e-12):
                    fewest[0] = min(fewest[0], heapq.heappop(waiting)[1])
                if fewest[0] <= alt[0] + 1e-9:
                    beaten = True
                    break
            if beaten:
                continue
            front.append(alt)
            heapq.heappush(groups.setdefault(mine, ([], [math.inf]))[0], (self.paid(alt), _most(alt)))
        front.sort(key=lambda x: (x[0], self.cost(x)))
        if len(front) <= keep:
            return front
        size = math.ceil(len(front) / keep)
        out: list[Alt] = []
        for j in range(0, len(front), size):
            run = front[j : j + size]
            if self.tight:
                out.append((run[0][0], 0.0, 0.0, 0.0, 0.0, (), ()))
                continue
            low = min(run, key=self.cost)
            common = set.intersection(*(_pages(x) for x in run))
            every = frozenset.intersection(*(self.restores(x) for x in run))
            recs = frozenset.intersection(*(self.recomputes(x) for x in run))
            terms = tuple(  # shared values only where every alternative of the run restores them
                (v, _merged(kinds, v in common, v in recs, self.strict), w)
                for v, kinds, w in low[5]
                if v not in self.shared or v in every
            )
            out.append(_priced(self.problem, run[0][0], terms))
        return out

    def combine(self, first: Alt, per: list[list[Alt]]) -> list[Alt]:
        """``first`` joined with every choice of one alternative per list (the front after each list)."""
        acc = [first]
        for alts in per:
            acc = self.front([_join(x, y) for x in acc for y in alts], ALTS)
        return acc


def _merged(kinds: str, paged_by_all: bool, recomputed_by_all: bool, strict: bool) -> str:
    """A term's kinds in a merged run: a page-in whose page-out the model does not require ("j")
    unless every alternative of the run pages the value in; when ``strict``, a recomputation that
    implies no input cuts ("k") unless every alternative recomputes the value."""
    if kinds == "i" and not paged_by_all:
        return "j"
    if strict and kinds == "c" and not recomputed_by_all:
        return "k"
    return kinds


def _input_alts(
    problem: SchedulingProblem,
    an: Analysis,
    q: int,
    g: Segment,
    w: float,
    cap: float,
    seen: set[int],
    depth: int,
    prune: _Prune,
    budget: list[int],
) -> list[Alt]:
    """Ways to have dead input q in RAM (share ``w`` of it) for a recomputation in segment g: held,
    paged in, or recomputed, which needs each of q's own dead inputs p (not ``seen``) in turn (share
    w / consumers of p), recursively up to ``DEPTH`` levels and ``EXPAND`` ancestors per segment
    (beyond, the cheaper of page-in and compute is charged and nothing else), and each input that
    dies inside the segment (:func:`_dying_alts`). Held bytes: a value held since before the segment
    is in RAM until the recomputation it feeds, and from then on the recomputed value on the path to
    the segment's value is, so an ancestor held counts the smallest (shared) bytes on its path
    (``cap``)."""
    held = min(cap, problem.nodes[q].out_bytes * w)
    kinds = restore_kinds(problem, an, q, g.start)
    alts: list[Alt] = [(held, 0.0, 0.0, 0.0, 0.0, (), ())]
    if "i" in kinds:
        alts.append(_term(problem, q, "i", w))
    if "c" in kinds:
        dead = [p for p in dead_inputs(problem, an, q, g.start) if p not in seen]
        dying = [p for p in dying_inputs(problem, an, q, g) if p not in seen]
        budget[0] -= len(dead) + len(dying)
        if depth >= DEPTH or len(dead) > 3 or budget[0] < 0:
            alts.append(_term(problem, q, kinds, w))
        else:
            inner = seen | set(dead) | set(dying)
            per = [
                _input_alts(problem, an, p, g, w / len(an.succs[p]), held, inner, depth + 1, prune, budget)
                for p in dead
            ]
            per += [_dying_alts(problem, an, p, g, w / len(an.succs[p]), held, prune.strict) for p in dying]
            alts += prune.combine(_term(problem, q, "c", w), per)
    return prune.front(alts, ALTS)


def dying_inputs(problem: SchedulingProblem, an: Analysis, v: int, g: Segment) -> list[int]:
    """Inputs of v whose last first-computation use is strictly inside segment g."""
    return [q for q in an.preds[v] if problem.nodes[q].out_bytes > 0 and g.start < max(an.succs[q]) < g.end]


def _dying_alts(
    problem: SchedulingProblem, an: Analysis, p: int, g: Segment, w: float, cap: float, split: bool
) -> list[Alt]:
    """Ways to have input p, whose last first-computation use d is inside segment g, in RAM at a
    recomputation for g: either the recomputation comes by stage d (then the value recomputed for g
    is in RAM from there on, which frees nothing after d: covered by the next case), or p is held
    from d until the recomputation (then at every stage after d p or the recomputed value on the path
    is in RAM: the smaller share, ``cap``, from stage d + 1 on), or p is restored (the cheaper of
    page-in and compute, share w; with ``split``, each of them as an alternative of its own)."""
    held = min(cap, problem.nodes[p].out_bytes * w)
    alts: list[Alt] = [(0.0, 0.0, 0.0, 0.0, 0.0, (), ((max(an.succs[p]) + 1, held),))]
    kinds = restore_kinds(problem, an, p, g.start)
    if kinds:
        alts += [_term(problem, p, k, w) for k in kinds] if split else [_term(problem, p, kinds, w)]
    return alts


def _bound_drops(problem: SchedulingProblem, an: Analysis, s: int, g: Segment, prune: _Prune) -> list[Option]:
    """DROP options of the bound model: recomputing g.value needs each input q that no first
    computation uses during the segment in RAM: held (its bytes count where g.value is absent),
    paged in, or recomputed, which needs q's own dead inputs held or restored in turn, recursively
    (:func:`_input_alts`); all shared by the consumers (divided by their number, per level). Each
    ancestor is charged once per option (on its first path). An input that dies inside the segment
    is held from its death on or restored (:func:`_dying_alts`): the option's credit is then lower
    from that stage on (``Option.cuts``)."""
    nodes, i, a = problem.nodes, g.value, g.start
    if not (nodes[i].recomputable and a < an.recomp_until[i]):
        return []
    dead = dead_inputs(problem, an, i, a)
    if len(dead) > 3:
        return [Option(s, DROP, ((i, "c", 1.0),), float(nodes[i].out_bytes))]
    dying = dying_inputs(problem, an, i, g)
    seen = {i, *dead, *dying}
    bi = float(nodes[i].out_bytes)
    budget = [EXPAND]
    per = [_input_alts(problem, an, q, g, 1.0 / len(an.succs[q]), bi, seen, 2, prune, budget) for q in dead]
    per += [_dying_alts(problem, an, q, g, 1.0 / len(an.succs[q]), bi, prune.strict) for q in dying]
    best = prune.combine(_term(problem, i, "c", 1.0), per)
    return [Option(s, DROP, alt[5], bi - alt[0], cuts=alt[6]) for alt in best if bi - alt[0] > 0]


def _present(an: Analysis, at: dict[tuple[int, int], int], optional: set[int], q: int, b: int) -> int | None:
    """-1: q is in RAM at stage b anyway; a segment index: it is if that segment is kept; None: q is dead."""
    if b in an.succs[q]:
        return -1
    seg = at.get((q, b))
    if seg is None:
        return None
    return seg if seg in optional else -1


def _primal_drop(
    problem: SchedulingProblem,
    an: Analysis,
    s: int,
    g: Segment,
    at: dict[tuple[int, int], int],
    optional: set[int],
    limit: int = CLOSURE,
) -> Option | None:
    """The DROP option of the primal model: g.value is recomputed just before g.end, and with it the
    recompute closure: every input that is dead then is recomputed too, transitively (at most
    ``limit`` nodes); every other input reached must be resident there (kept segments). Where g.value
    may no longer be recomputed at g.end (``Analysis.recomp_until``), it is recomputed just before the
    last stage b it may, and held from there on (the option frees nothing from b on: ``end`` = b)."""
    nodes, i, b = problem.nodes, g.value, restore_by(an, g)

    def can(v: int) -> bool:
        return nodes[v].recomputable and b <= an.recomp_until[v]

    if not can(i) or b <= g.start + 1:
        return None
    keep: set[int] = set()
    closure: list[int] = [i]
    seen = {i}
    stack = [i]
    while stack:
        v = stack.pop()
        for q in an.preds[v]:
            if nodes[q].out_bytes == 0 or q in seen:
                continue
            seen.add(q)
            where = _present(an, at, optional, q, b)
            if where is not None:
                if where >= 0:
                    keep.add(where)
                continue
            if not can(q) or len(closure) >= limit:
                return None
            closure.append(q)
            stack.append(q)
    terms = tuple((v, "c", 1.0) for v in closure)
    freed = float(nodes[i].out_bytes)
    early = ((b, freed),) if b < g.end else ()
    return Option(s, DROP, terms, freed, tuple(sorted(keep - {s})), early, b if early else -1)


class OutOfTime(Exception):
    """:func:`build_cover` passed its deadline (the scheduler's safety stop)."""


def build_cover(
    problem: SchedulingProblem, an: Analysis, latency: bool = False, deadline: float = math.inf
) -> Cover:
    """Segments, the options of both models, and the per-stage needs. Raises :class:`OutOfTime` once
    ``time.perf_counter()`` passes ``deadline`` (checked every segment)."""
    nodes, n = problem.nodes, len(problem.nodes)
    segs = _segments(problem, an)
    pages, drops = _bound_options(problem, an, segs, latency, False, deadline)
    need = np.zeros(n + 1, dtype=np.int64)
    for t in range(n):
        need[t] += problem.fixed_bytes + nodes[t].out_bytes + nodes[t].workspace_bytes
        need[t] += sum(nodes[q].out_bytes for q in an.preds[t])
    spans: list[list[int]] = [[] for _ in range(n)]
    pinned = np.zeros(n + 1, dtype=np.int64)
    at: dict[tuple[int, int], int] = {}
    optional: set[int] = set()
    for s, g in enumerate(segs):
        for t in range(g.start + 1, g.end):
            at[(g.value, t)] = s
        if pages[s] or drops[s]:
            optional.add(s)
            for t in range(g.start + 1, g.end):
                spans[t].append(s)
        else:
            pinned[g.start + 1] += nodes[g.value].out_bytes
            pinned[g.end] -= nodes[g.value].out_bytes
    need[:n] += np.cumsum(pinned)[:n]
    primal = [
        o
        for s, g in enumerate(segs)
        if not _late(deadline) and (o := _primal_drop(problem, an, s, g, at, optional))
    ]
    _late(deadline)
    page_opts = [o for ps in pages for o in ps]
    bound = page_opts + [o for ds in drops for o in ds]
    ancestors = {s: _dead_ancestors(problem, an, g) for s, g in enumerate(segs) if drops[s]}
    return Cover(segs, bound, page_opts + primal, need[:n], spans, ancestors)


def _late(deadline: float) -> bool:
    """Raises :class:`OutOfTime` past ``deadline``; False otherwise."""
    if deadline < math.inf and time.perf_counter() > deadline:
        raise OutOfTime
    return False


def _bound_options(
    problem: SchedulingProblem,
    an: Analysis,
    segs: list[Segment],
    latency: bool,
    strict: bool,
    deadline: float = math.inf,
) -> tuple[list[list[Option]], list[list[Option]]]:
    """The PAGE and the DROP options of the bound model, per segment."""
    nodes = problem.nodes
    pages = [
        [Option(s, PAGE, ((g.value, "i", 1.0),), float(nodes[g.value].out_bytes))]
        if "i" in restore_kinds(problem, an, g.value, g.start)
        else []
        for s, g in enumerate(segs)
    ]
    cap = problem.storage_bytes
    tight = problem.max_latency_s is not None or (
        cap is not None and sum(n.out_bytes for n in nodes if n.pageable) > cap
    )
    shared = frozenset(v for v in range(len(nodes)) if len(an.succs[v]) > 1)
    prune = _Prune(problem, latency, tight, shared, strict)
    return pages, [_bound_drops(problem, an, s, g, prune) for s, g in enumerate(segs) if not _late(deadline)]


def strict_bound_options(
    problem: SchedulingProblem, an: Analysis, cover: Cover, latency: bool
) -> list[Option] | None:
    """The bound options pruned strictly (:class:`_Prune`), for the strict bound model
    (:func:`poet_edge.schedulers.segment_strict.strict_model`); None if a segment with options in the
    cover has none here (it does not happen: a front's fewest-bytes alternative survives merging)."""
    pages, drops = _bound_options(problem, an, cover.segs, latency, True)
    opts = [o for ps in pages for o in ps] + [o for ds in drops for o in ds]
    return opts if {o.seg for o in opts} == {o.seg for o in cover.bound_opts} else None


def _dead_ancestors(problem: SchedulingProblem, an: Analysis, g: Segment) -> tuple[int, ...]:
    """Ancestors of g.value reached through inputs dead at g.start (``DEPTH`` levels, at most
    ``EXPAND``), and the inputs of those that die inside the segment: the values a recomputation of
    g.value may need."""
    out: list[int] = []
    level, seen = [g.value], {g.value}
    for _ in range(DEPTH):
        dying = [q for v in level for q in dying_inputs(problem, an, v, g) if q not in seen]
        nxt = [q for v in level for q in dead_inputs(problem, an, v, g.start) if q not in seen]
        nxt = list(dict.fromkeys(nxt))[: max(0, EXPAND - len(out))]
        dying = [q for q in dict.fromkeys(dying) if q not in nxt]
        seen.update(nxt + dying)
        out += nxt + dying
        level = nxt
    return tuple(sorted(out))
