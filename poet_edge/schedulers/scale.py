"""Scheduler "scale": a compact segment-cover model that gives a proven lower bound in seconds and
schedules near it, for training graphs of a thousand nodes.

Order. Like POET's stage model, node t is computed for the first time in stage t (the problem's
order); recomputations and paging happen between first computations. All bounds below hold for
every schedule with that order of first computations, so they are bounds for the POET MILP too.

Segments. Value i is used (first computations) at stages i < j1 < ... < jm. Between two
consecutive use points a < b, at every stage t with a < t < b, value i is either in RAM while t is
computed or it is absent then and must be restored before b: by a page-in (which needs one page-out
of i, at most once per value: storage is written once) or by a recomputation. The restorations of
different segments are different events, so a schedule that has i absent somewhere in segment s pays
at least ``page_in(i)`` (+ ``page_out(i)`` once per value) or ``compute(i)`` for s.

Bound model (a relaxation, O(|E|) variables, one row per stage). Binaries p_s (restore segment s by
paging), r_s (by recomputation), z_i (i is paged out once): p_s + r_s <= 1, p_s <= z_i; for every
stage t, RAM while t runs = fixed + out(t) + workspace(t) + inputs(t) + every segment spanning t that
is not evicted must fit the budget, i.e. sum of bytes(s) (p_s + r_s) >= excess(t). Storage capacity
and the runtime budget are rows too. A recomputation of i needs each input q that no first
computation uses after the segment's start ("dead") in RAM at that moment; each DROP option of the
bound model picks, per dead q: held (q's bytes, shared by q's consumers, lower the bytes the option
frees), paged in (cost shared by q's consumers; the page-out of q is then required, once per value),
or recomputed (compute cost shared likewise), which in turn needs q's own dead inputs held or
restored, recursively (``DEPTH`` levels, ``EXPAND`` ancestors per segment; beyond, the cheaper of
page-in and compute is charged). An input (or ancestor) whose last first computation d is inside the
segment is gone by its end: held from d on (the option frees that much less from stage d + 1 on:
``Option.cuts``) or restored; a recomputation before d frees nothing after d, which the first case
covers. A held ancestor counts the smallest shared bytes on its path to i
(it is in RAM until the recomputation it feeds, then the value recomputed from it is). Only the
Pareto-best options (bytes freed vs cost) are kept; a surplus is merged into relaxations. A value
with several consumers restored by the options of several segments is charged there by fractions;
since any one of those restorations is a whole one, a top-up column makes the charge at least one
restoration (:func:`_topups`; an option never prunes or absorbs one that restores fewer such values,
so no schedule loses its point of the model). Reported
lower bound = plain pass (every node once) + the larger of the model's LP-relaxation optimum (solved
first, so a bound exists even when the MIP root does not finish in time) and HiGHS's MIP dual bound.
It bounds the cost of every schedule in which node t is first computed in stage t (the problem's
order), hence also POET's stage model. Inputs of a recomputed value that are not dead get cuts
(:func:`_input_cuts`): when the input's own segment is evicted as well, it is restored twice, or held
from the recomputation to its next use, or kept until the recomputation (RAM in the budget rows or
cost). Ignored on purpose (it only adds cost): the transient RAM of deeper restorations. Checked
against the exact POET MILP optimum on tiny DAGs and chains (tests). On large graphs (more than
``DENSE_NONZEROS`` budget-row entries) the budget rows are written as running sums over the stages
(:func:`_running_sums`): the same points, a fraction of the entries, and HiGHS keeps to its time limit.

Primal model. The same model where r_s comes with its recompute closure: i is recomputed just
before b, every input that is dead then is recomputed too, transitively (at most ``CLOSURE`` nodes,
priced in the objective), and every other input reached must be resident there (a row r_s + p_s' +
r_s' <= 1 for its segment s'). Solutions are plans: after stage a, value i is paged out (once) and
freed, or dropped; a dead ancestor of a dropped value may also be stored (paged out when computed,
so restorations page it in) or kept (held past its last use until the restoration that needs it;
the bound model's plans store the inputs its options page in). A plan is replayed exactly
(:func:`replay_plan`: restore just before the next use, or right after a planned earlier stage, by
page-in or recomputation of the value and its missing ancestors; a plan-level policy says whether
inputs recomputed only for a restoration are freed at once or held to their last use); when the
replay overflows the budget (transient RAM) the budget rows of those stages are tightened by the
overflow and the model is solved again (a few rounds; the same rounds run on the bound model's
options, whose plans are replayed the same way). Plans that do not fit are also handed to the
baseline engine (:mod:`poet_edge.schedulers.engine`), which repairs overflows by the DTR rule.
The bound model's first solution is also replayed as a held plan (:func:`_held_plan`: the ancestors
its options hold rather than restore are kept past their last use); when that does not fit, the
cheapest plan with one more eviction that fits is taken (:func:`_offer_held`).

Stage model. On graphs of at most ``STAGE_PAIRS`` value-stage pairs (the zoo's small models), the
stage model of :mod:`poet_edge.schedulers.stage_model` (POET's stage model without its RAM between
stages: which values are in RAM at each first computation, what is recomputed or paged in between)
runs after a first, short local search (``ScaleOptions.kicks`` / 10 perturbations, until
``SEARCH_FIRST`` of the time limit), started from the incumbent (a MIP start: it proves optimality
much sooner), for at most ``STAGE_SHARE`` of the time left: its dual bound is a lower bound too (the
larger one is reported) and its solution, decoded as a schedule, is offered (the simulator decides
whether the RAM between stages fits). The local search then goes on while the gap is open. On
mid-size graphs (at most ``LNS_PAIRS`` pairs) the local search stops at ``LNS_AFTER`` of the time
limit, or once it has not improved the incumbent for ``LNS_STALL`` of it, and a large-neighbourhood
search with the stage model takes over (:func:`_lns`: windows of stages, and windows of a few values
over their whole lives, re-optimized by HiGHS around the incumbent, every other column fixed; the two
kinds take turns by time spent, each wider after a sweep without improvement); if the windows stall at
full width, the local search gets the time left. The incumbent is kept across the
phases (a later phase only replaces it by a cheaper schedule).

Local search. From the cheapest replayed plans: first-improvement descent over plans judged by the
exact replay (fewer overflow bytes, then lower cost), moves = change one segment (resident / PAGE /
DROP), move one eviction to another segment overlapping it, flip the replay policy, store / keep /
release one dead ancestor, restore one evicted value earlier (2, 4, ..., 32 stages before its use),
evict one later (1, 2, ..., 32 stages after the segment's start, or 2, ..., 32 before its end), carry
one (hold it until the restoration of a dropped consumer, recomputed from it then; also with one more
eviction of any segment overlapping the stages it is held longer);
then iterated: perturb 1-3 random entries of the best plan (fixed seed) and descend again, at most
``ScaleOptions.kicks`` times, until the gap closes or the time limit (less a 5% margin) is reached.

The simulator measures every candidate; the cheapest of the plans and the baselines is returned, so
the result is never worse than the best baseline. The output is deterministic when the run ends
before the time limit (gap closed, or kicks exhausted) and the first local search before its share.

``Schedule.info``: status, objective, bound, gap ((cost - bound) / cost), seconds, first_valid_s
(time to the first valid schedule), the schedule's origin and model sizes.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step
from poet_edge.schedulers import stage_model
from poet_edge.schedulers.engine import DROP, PAGE, Analysis, Engine, analyse
from poet_edge.schedulers.greedy import _dtr
from poet_edge.schedulers.highs_run import add_rows, run_highs
from poet_edge.simulator import SimResult, simulate

NAME = "scale"
CLOSURE = 12  # most nodes one primal recomputation may recompute (the value and dead ancestors)


@dataclass(frozen=True)
class ScaleOptions:
    """``time_limit_s``: wall-clock limit of the whole run; ``gap_rel``: stop when the returned cost
    is within this fraction of the bound; ``rounds``: at most this many primal re-solves; ``kicks``:
    at most this many perturb-and-descend rounds of the local search (fixed seed)."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float = 30.0
    threads: int | None = None
    gap_rel: float = 1e-4
    rounds: int = 4
    kicks: int = 300  # iterated local search: at most this many perturbations of the best plan
    msg: bool = False


@dataclass(frozen=True)
class Segment:
    """Value ``value`` is not used by a first computation strictly between stages ``start``/``end``."""

    value: int
    start: int
    end: int


Plan = dict[int, str]  # segment -> PAGE or DROP (segments not in it stay resident); FREE_TEMPS: policy
FREE_TEMPS = -1  # plan key: free inputs recomputed for a restoration right after it
STORE = "store"  # plan key -2 - v: page v out right after computing it (restorations then page it in)
FETCH = "fetch"  # replay entry: restore the value after this stage (an early restoration, see _mode)
KEEP = "keep"  # plan key -2 - v: hold v after its last use until the last DROP that may need it is restored
LATE = "late "  # replay entry prefix: evict after this stage's early restorations (see _mode)


def _store_key(v: int) -> int:
    return -2 - v


def _mode(mode: str) -> tuple[str, int | None, int | None]:
    """A segment's plan mode: "drop" / "page"; with ">t": restored early, right after stage t (and
    held to its use), instead of just before its use; with "<u" (before any ">t"): evicted late,
    after stage u instead of the segment's start (after the early restorations of stage u, which may
    use it). Returns (base, t, u)."""
    head, _, at = mode.partition(">")
    base, _, late = head.partition("<")
    return base, int(at) if at else None, int(late) if late else None


def _fmt(base: str, at: int | None, late: int | None) -> str:
    return base + (f"<{late}" if late is not None else "") + (f">{at}" if at is not None else "")


Term = tuple[int, str, float]  # (node, kinds "c" compute / "i" page-in: the cheaper one, weight)
# ("j": page-in whose page-out the model does not require: merged options of the bound model)


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


@dataclass
class _Best:
    schedule: Schedule | None = None
    cost: float = math.inf
    origin: str = ""
    first_valid_s: float | None = None
    began: float = field(default_factory=time.perf_counter)
    improved_at: float = 0.0  # seconds into the run of the last improvement
    plans: list[tuple[float, int, Plan]] = field(default_factory=list)  # (replay cost, order, plan)

    def offer(self, schedule: Schedule, sim: SimResult, cost: float, origin: str) -> None:
        if self.first_valid_s is None:
            self.first_valid_s = time.perf_counter() - self.began
        if cost < self.cost * (1 - 1e-12):
            self.schedule, self.cost, self.origin = schedule, cost, origin
            self.improved_at = time.perf_counter() - self.began


# -- the model -------------------------------------------------------------------------------------------


def _segments(problem: SchedulingProblem, an: Analysis) -> list[Segment]:
    out = []
    for i, node in enumerate(problem.nodes):
        if node.out_bytes == 0 or not an.succs[i]:
            continue
        pts = [i, *an.succs[i]]
        out += [Segment(i, a, b) for a, b in zip(pts, pts[1:], strict=False) if b - a >= 2]
    return out


def _kinds(problem: SchedulingProblem, an: Analysis, q: int, stage: int) -> str:
    """How value q can be restored after ``stage`` (for the bound: generous)."""
    node = problem.nodes[q]
    cap = problem.storage_bytes
    page = node.pageable and (cap is None or node.out_bytes <= cap)
    return ("i" if page else "") + ("c" if node.recomputable and stage < an.recomp_until[q] else "")


def _dead(problem: SchedulingProblem, an: Analysis, v: int, a: int) -> list[int]:
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
    e = w * min(node.compute_j if k == "c" else node.page_in_j for k in kinds)  # "i" or "j": page-in
    t = w * min(node.compute_s if k == "c" else node.page_in_s for k in kinds)
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
    ``shared`` values (inputs of several nodes: :func:`_topups` charges them one whole restoration)."""

    problem: SchedulingProblem
    latency: bool
    tight: bool
    shared: frozenset[int] = frozenset()

    def restores(self, alt: Alt) -> frozenset[int]:
        return frozenset(v for v, _, _ in alt[5] if v in self.shared)

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
            terms = tuple(  # shared values only where every alternative of the run restores them
                (v, "j" if kinds == "i" and v not in common else kinds, w)
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
    kinds = _kinds(problem, an, q, g.start)
    alts: list[Alt] = [(held, 0.0, 0.0, 0.0, 0.0, (), ())]
    if "i" in kinds:
        alts.append(_term(problem, q, "i", w))
    if "c" in kinds:
        dead = [p for p in _dead(problem, an, q, g.start) if p not in seen]
        dying = [p for p in _dying(problem, an, q, g) if p not in seen]
        budget[0] -= len(dead) + len(dying)
        if depth >= DEPTH or len(dead) > 3 or budget[0] < 0:
            alts.append(_term(problem, q, kinds, w))
        else:
            inner = seen | set(dead) | set(dying)
            per = [
                _input_alts(problem, an, p, g, w / len(an.succs[p]), held, inner, depth + 1, prune, budget)
                for p in dead
            ]
            per += [_dying_alts(problem, an, p, g, w / len(an.succs[p]), held) for p in dying]
            alts += prune.combine(_term(problem, q, "c", w), per)
    return prune.front(alts, ALTS)


def _dying(problem: SchedulingProblem, an: Analysis, v: int, g: Segment) -> list[int]:
    """Inputs of v whose last first-computation use is strictly inside segment g."""
    return [q for q in an.preds[v] if problem.nodes[q].out_bytes > 0 and g.start < max(an.succs[q]) < g.end]


def _dying_alts(
    problem: SchedulingProblem, an: Analysis, p: int, g: Segment, w: float, cap: float
) -> list[Alt]:
    """Ways to have input p, whose last first-computation use d is inside segment g, in RAM at a
    recomputation for g: either the recomputation comes by stage d (then the value recomputed for g
    is in RAM from there on, which frees nothing after d: covered by the next case), or p is held
    from d until the recomputation (then at every stage after d p or the recomputed value on the path
    is in RAM: the smaller share, ``cap``, from stage d + 1 on), or p is restored (the cheaper of
    page-in and compute, share w)."""
    held = min(cap, problem.nodes[p].out_bytes * w)
    alts: list[Alt] = [(0.0, 0.0, 0.0, 0.0, 0.0, (), ((max(an.succs[p]) + 1, held),))]
    kinds = _kinds(problem, an, p, g.start)
    if kinds:
        alts.append(_term(problem, p, kinds, w))
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
    dead = _dead(problem, an, i, a)
    if len(dead) > 3:
        return [Option(s, DROP, ((i, "c", 1.0),), float(nodes[i].out_bytes))]
    dying = _dying(problem, an, i, g)
    seen = {i, *dead, *dying}
    bi = float(nodes[i].out_bytes)
    budget = [EXPAND]
    per = [_input_alts(problem, an, q, g, 1.0 / len(an.succs[q]), bi, seen, 2, prune, budget) for q in dead]
    per += [_dying_alts(problem, an, q, g, 1.0 / len(an.succs[q]), bi) for q in dying]
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
    ``limit`` nodes); every other input reached must be resident there (kept segments)."""
    nodes, i, b = problem.nodes, g.value, g.end

    def can(v: int) -> bool:
        return nodes[v].recomputable and b <= an.recomp_until[v]

    if not can(i):
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
    return Option(s, DROP, terms, float(nodes[i].out_bytes), tuple(sorted(keep - {s})))


def build_cover(problem: SchedulingProblem, an: Analysis, latency: bool = False) -> Cover:
    """Segments, the options of both models, and the per-stage needs."""
    nodes, n = problem.nodes, len(problem.nodes)
    segs = _segments(problem, an)
    pages = [
        [Option(s, PAGE, ((g.value, "i", 1.0),), float(nodes[g.value].out_bytes))]
        if "i" in _kinds(problem, an, g.value, g.start)
        else []
        for s, g in enumerate(segs)
    ]
    cap = problem.storage_bytes
    tight = problem.max_latency_s is not None or (
        cap is not None and sum(n.out_bytes for n in nodes if n.pageable) > cap
    )
    shared = frozenset(v for v in range(n) if len(an.succs[v]) > 1)
    prune = _Prune(problem, latency, tight, shared)
    drops = [_bound_drops(problem, an, s, g, prune) for s, g in enumerate(segs)]
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
    primal = [o for s, g in enumerate(segs) if (o := _primal_drop(problem, an, s, g, at, optional))]
    page_opts = [o for ps in pages for o in ps]
    bound = page_opts + [o for ds in drops for o in ds]
    ancestors = {s: _dead_ancestors(problem, an, g) for s, g in enumerate(segs) if drops[s]}
    return Cover(segs, bound, page_opts + primal, need[:n], spans, ancestors)


def _dead_ancestors(problem: SchedulingProblem, an: Analysis, g: Segment) -> tuple[int, ...]:
    """Ancestors of g.value reached through inputs dead at g.start (``DEPTH`` levels, at most
    ``EXPAND``), and the inputs of those that die inside the segment: the values a recomputation of
    g.value may need."""
    out: list[int] = []
    level, seen = [g.value], {g.value}
    for _ in range(DEPTH):
        dying = [q for v in level for q in _dying(problem, an, v, g) if q not in seen]
        nxt = [q for v in level for q in _dead(problem, an, v, g.start) if q not in seen]
        nxt = list(dict.fromkeys(nxt))[: max(0, EXPAND - len(out))]
        dying = [q for q in dict.fromkeys(dying) if q not in nxt]
        seen.update(nxt + dying)
        out += nxt + dying
        level = nxt
    return tuple(sorted(out))


@dataclass
class _Lp:
    """Columns and rows of one model, ready for highspy."""

    cost: list[float] = field(default_factory=list)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    opts: list[Option] = field(default_factory=list)  # column j < len(opts): option j
    z: dict[int, int] = field(default_factory=dict)
    by_seg: dict[int, list[int]] = field(default_factory=dict)
    ram: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # stage -> (column, bytes it adds)
    cont: set[int] = field(default_factory=set)  # continuous columns (the others are binary)
    bounds: dict[int, tuple[float, float]] = field(default_factory=dict)  # column -> bounds, if not [0, 1]

    def col(self, cost: float, continuous: bool = False, bounds: tuple[float, float] = (0.0, 1.0)) -> int:
        self.cost.append(cost)
        if continuous:
            self.cont.add(len(self.cost) - 1)
        if bounds != (0.0, 1.0):
            self.bounds[len(self.cost) - 1] = bounds
        return len(self.cost) - 1


def _costs(problem: SchedulingProblem, latency: bool) -> tuple[list[float], list[float], list[float]]:
    nodes = problem.nodes
    if latency:
        return [n.compute_s for n in nodes], [n.page_in_s for n in nodes], [n.page_out_s for n in nodes]
    return [n.compute_j for n in nodes], [n.page_in_j for n in nodes], [n.page_out_j for n in nodes]


def _term_cost(terms: tuple[Term, ...], comp: list[float], pin: list[float]) -> float:
    arr = {"c": comp, "i": pin, "j": pin}
    return sum(w * min(arr[k][v] for k in kinds) for v, kinds, w in terms)


def _columns(problem: SchedulingProblem, opts: list[Option], latency: bool, norm: float) -> _Lp:
    comp, pin, pout = _costs(problem, latency)
    lp = _Lp(opts=list(opts))
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


def _topups(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: _Lp, latency: bool, norm: float
) -> None:
    """One restoration of an ancestor at least. The bound options charge a shared ancestor's
    restoration by fractions (w each); when any chosen option restores ancestor v, v is restored at
    least once after its last first computation (a different event from its segments'
    restorations), so the charge for v is at least one restoration: continuous T_v >= E_v - the
    options' fractions of v (in units of c_v, v's cheapest restoration, its cost), binary E_v >=
    every option that restores v. Sound only with :class:`_Prune`'s rule that an alternative never
    beats (or is merged into) one that restores fewer values."""
    comp, pin, _ = _costs(problem, latency)
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


def _input_cuts(
    problem: SchedulingProblem, an: Analysis, cover: Cover, lp: _Lp, latency: bool, norm: float
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
    whose B range covers it; o's freed bytes by the inputs paired with it."""
    nodes = problem.nodes
    comp, pin, _ = _costs(problem, latency)
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
    users: dict[int, set[int]] = {}
    inputs: dict[int, int] = {}
    for j, _, k in pairs:
        users.setdefault(k, set()).add(lp.opts[j].seg)
        inputs[j] = inputs.get(j, 0) + 1
    near: dict[tuple[int, int], int] = {}  # (s', stage) -> segments whose B range covers the stage
    for k, segs in users.items():
        for seg in segs:
            for t in range(max(cover.segs[seg].start, cover.segs[k].start) + 1, cover.segs[seg].end):
                near[(k, t)] = near.get((k, t), 0) + 1
    budget = PAIR_NONZEROS
    held: dict[int, dict[int, list[int]]] = {}  # s' -> b -> A columns of the pairs ending at b
    again: dict[int, int] = {}  # s' -> column: q is restored once more in s'
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
            lp.ram.setdefault(t, []).append((cols[1], min(bq / near[(k, t)], part[t - g.start])))
        if g.start < h.start:  # D: i recomputed before a' and in RAM from a' on
            cols.append(lp.col(0.0))
            for t in range(h.start, g.end):
                lp.ram.setdefault(t, []).append((cols[-1], part[t - g.start]))
        kinds = _kinds(problem, an, q, h.start)
        if kinds:  # C: one restoration more of q in s', paid once for all pairs of s' (column y)
            if k not in again:
                again[k] = lp.col(min((comp[q] if c == "c" else pin[q]) for c in kinds) / norm)
            cols.append(lp.col(0.0))
            lp.rows.append((0.0, math.inf, [again[k], cols[-1]], [1.0, -1.0]))
        evict = lp.by_seg[k]
        lp.rows.append((-1.0, math.inf, [*cols, j, *evict], [1.0] * len(cols) + [-1.0] * (1 + len(evict))))
    for k, by_end in held.items():  # q in RAM from the earliest b of a pair in case A on: once, not per pair
        h, bq = cover.segs[k], float(nodes[cover.segs[k].value].out_bytes)
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
            prev = col


def _rows(problem: SchedulingProblem, cover: Cover, lp: _Lp, budget: np.ndarray) -> bool:
    """Adds the budget, keep, storage and runtime rows; False when a stage cannot fit at all."""
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
    if sum(len(frees) for _, _, frees in stages) <= DENSE_NONZEROS:
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
        comp, pin, pout = _costs(problem, True)
        room = problem.max_latency_s - sum(comp)
        if room < 0:
            return False
        idx = list(range(len(lp.opts))) + list(lp.z.values())
        val = [_term_cost(o.terms, comp, pin) for o in lp.opts] + [pout[i] for i in lp.z]
        sc = max(room, 1e-300)
        lp.rows.append((-math.inf, room / sc, idx, [v / sc for v in val]))
    return True


DENSE_NONZEROS = 100_000  # more budget-row entries than this: the rows as running sums (_running_sums)


def _running_sums(lp: _Lp, stages: list[tuple[int, float, dict[int, float]]]) -> None:
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


@dataclass(frozen=True)
class _Solved:
    status: str
    feasible: bool  # the model has a point (False: proven infeasible)
    optimal: bool
    objective: float | None  # scaled, None without a solution
    bound: float  # scaled dual bound (0 when unknown)
    values: np.ndarray | None


def _solve(lp: _Lp, time_limit: float, options: ScaleOptions, integer: bool = True) -> _Solved:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", options.msg)
    h.setOptionValue("time_limit", max(0.05, time_limit))
    h.setOptionValue("mip_rel_gap", options.gap_rel / 4)
    h.setOptionValue("random_seed", 0)
    if options.threads:
        h.setOptionValue("threads", options.threads)
    ncol = len(lp.cost)
    if ncol == 0:
        return _Solved("empty", True, True, 0.0, 0.0, np.zeros(0))
    h.addCols(
        ncol,
        np.array(lp.cost),
        np.array([lp.bounds.get(j, (0.0, 1.0))[0] for j in range(ncol)]),
        np.array([lp.bounds.get(j, (0.0, 1.0))[1] for j in range(ncol)]),
        0,
        np.array([0]),
        np.array([0]),
        np.array([0.0]),
    )
    if integer:
        ints = np.array([j for j in range(ncol) if j not in lp.cont], dtype=np.int32)
        h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
    added = add_rows(h, lp.rows)
    if added != highspy.HighsStatus.kOk:  # e.g. a row naming a column twice: HiGHS drops the rows
        raise AssertionError(f"HiGHS refused the model's rows ({added})")
    run_highs(h)
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    ms = highspy.HighsModelStatus
    infeasible = h.getModelStatus() in (ms.kInfeasible, ms.kUnboundedOrInfeasible)
    has = info.primal_solution_status == 2
    optimal = h.getModelStatus() == ms.kOptimal
    obj = info.objective_function_value if has else None
    bound = info.mip_dual_bound if integer else (obj if optimal else 0.0)
    if bound is None or not math.isfinite(bound):
        bound = 0.0
    if optimal and obj is not None and not integer:
        bound = obj
    values = np.array(h.getSolution().col_value) if has else None
    return _Solved(status, not infeasible, optimal, obj, max(0.0, bound), values)


# -- decoding a plan into a schedule ------------------------------------------------------------------------


def plan_from(cover: Cover, lp: _Lp, values: np.ndarray) -> dict[int, list[tuple[int, str]]]:
    """After which stage each value leaves RAM, and how (PAGE or DROP)."""
    plan: dict[int, list[tuple[int, str]]] = {}
    for j, o in enumerate(lp.opts):
        if values[j] > 0.5:
            g = cover.segs[o.seg]
            plan.setdefault(g.start, []).append((g.value, o.mode))
    return plan


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
        problem, NAME, policy=_dtr, allow_recompute=True, allow_paging=True, after_target=_evict
    )
    engine.plan, engine.overflow = plan, {}
    return engine.run(), engine.overflow


class _Replay:
    """Direct decoder of a plan (see :func:`replay_plan`)."""

    def __init__(self, problem: SchedulingProblem, an: Analysis, costs: tuple[list[float], ...] = ()) -> None:
        self.p, self.an = problem, an
        self.costs = costs or _costs(problem, False)
        self.cost = 0.0
        self.hold = True  # keep inputs recomputed for a restoration until their last use
        self.work = 20 * len(problem.nodes) + 1000  # recomputations a plan may ask for
        self.steps: list[Step] = []
        self.ram: set[int] = set()
        self.storage: set[int] = set()
        self.live = self.stored = 0
        self.overflow: dict[int, int] = {}
        self.error = ""
        self.kept: dict[int, int] = {}  # value -> stage after which it is freed (KEEP)
        self.release: dict[int, list[int]] = {}

    def _fits(self, t: int, extra: int) -> None:
        over = self.p.fixed_bytes + self.live + extra - self.p.budget_bytes
        if over > 0:
            self.overflow[t] = max(self.overflow.get(t, 0), over)

    def compute(self, t: int, v: int) -> None:
        node = self.p.nodes[v]
        self._fits(t, node.out_bytes + node.workspace_bytes)
        self.cost += self.costs[0][v]
        self.steps.append(Compute(node.name))
        self.ram.add(v)
        self.live += node.out_bytes

    def free(self, v: int) -> None:
        self.steps.append(Free(self.p.nodes[v].name))
        self.ram.discard(v)
        self.live -= self.p.nodes[v].out_bytes

    def page_out(self, v: int) -> bool:
        node, cap = self.p.nodes[v], self.p.storage_bytes
        if v not in self.storage:
            if not node.pageable or (cap is not None and self.stored + node.out_bytes > cap):
                return False
            self.storage.add(v)
            self.stored += node.out_bytes
            self.cost += self.costs[2][v]
            self.steps.append(PageOut(node.name))
        return True

    def restore(self, t: int, v: int, depth: int = 0) -> bool:
        """Brings v back before stage t's compute: page-in, or recomputation (inputs first)."""
        node = self.p.nodes[v]
        if v in self.storage:
            self._fits(t, node.out_bytes)
            self.cost += self.costs[1][v]
            self.steps.append(PageIn(node.name))
            self.ram.add(v)
            self.live += node.out_bytes
            return True
        if not node.recomputable or t > self.an.recomp_until[v] or depth > 50:
            self.error = f"{node.name} can be neither paged in nor recomputed at stage {t}"
            return False
        self.work -= 1
        if self.work < 0:  # freed temporaries of a deep DAG can make restorations exponential
            self.error = "too many recomputations"
            return False
        temp = [q for q in self.an.preds[v] if q not in self.ram]
        for q in temp:
            if not self.restore(t, q, depth + 1):
                return False
        self.compute(t, v)
        for q in temp:
            if q in self.ram and q not in self.an.preds[t] and (not self.hold or self.an.last_use[q] <= t):
                self.free(q)
        return True

    def stage(self, t: int, plan: dict[int, list[tuple[int, str]]]) -> bool:
        for u in self.an.preds[t]:
            if u not in self.ram and not self.restore(t, u):
                return False
        self.compute(t, t)
        for u in sorted({*self.an.preds[t], t, *self.release.get(t, ())}):
            if u in self.ram and max(self.an.last_use[u], self.kept.get(u, -1)) <= t:
                self.free(u)
        for u, mode in plan.get(t, ()):
            if u not in self.ram or mode in (KEEP, FETCH) or mode.startswith(LATE):
                continue
            if mode == STORE:
                self.page_out(u)
            elif mode == DROP or self.page_out(u):
                self.free(u)
        for u, mode in plan.get(t, ()):
            if (
                mode == FETCH
                and u not in self.ram
                and t + 1 < len(self.p.nodes)
                and not self.restore(t + 1, u)
            ):
                return False
        for u, mode in plan.get(t, ()):
            if u in self.ram and mode.startswith(LATE) and (mode == LATE + DROP or self.page_out(u)):
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
    ``costs``: (compute, page-in, page-out) per node; the schedule's cost is then in its info.
    ``strict``: stop at the first overflow (the returned overflow is then partial). With the entry
    ``plan[FREE_TEMPS]``, inputs recomputed only for a restoration are freed right after it (else
    they stay until their last use). An entry (v, STORE) pages v out and keeps it (a restoration of
    a value in storage pages it in, of any other recomputes it); an entry (v, KEEP) at stage t holds
    v in RAM until stage t (past its last use). A plan needing more than 20 n + 1000
    recomputations is refused (None, as if it did not fit)."""
    r = _Replay(problem, an, costs)
    r.hold = FREE_TEMPS not in plan
    for t, entries in plan.items():
        for v, mode in entries:
            if mode == KEEP and t > an.last_use[v]:
                r.kept[v] = t
                r.release.setdefault(t, []).append(v)
    for t in range(len(problem.nodes)):
        if not r.stage(t, plan):
            return None, {**r.overflow, t: 1 << 62}  # cannot be followed: worse than any overflow
        if strict and r.overflow:
            return None, r.overflow
    if r.overflow:
        return None, r.overflow
    return Schedule(tuple(r.steps), NAME, (("cost", r.cost),)), {}


# -- local search over plans -----------------------------------------------------------------------------


def _as_plan(cover: Cover, plan: Plan) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for k in sorted(plan):
        if k == FREE_TEMPS:
            out[FREE_TEMPS] = []
            continue
        if k < 0:
            v = _store_key(k)  # the map is its own inverse
            if plan[k] == STORE:
                out.setdefault(v, []).append((v, STORE))
            else:  # until the last planned DROP whose recomputation may need v is restored
                ends = [
                    cover.segs[j].end
                    for j, m in plan.items()
                    if j >= 0 and _mode(m)[0] == DROP and v in cover.ancestors.get(j, ())
                ]
                if ends:
                    out.setdefault(max(ends), []).append((v, KEEP))
            continue
        g = cover.segs[k]
        mode, at, late = _mode(plan[k])
        if late is None:
            out.setdefault(g.start, []).append((g.value, mode))
        else:
            out.setdefault(late, []).append((g.value, LATE + mode))
        if at is not None:
            out.setdefault(at, []).append((g.value, FETCH))
    return out


def _held_plan(problem: SchedulingProblem, an: Analysis, cover: Cover, lp: _Lp, values: np.ndarray) -> Plan:
    """A bound-model solution as a plan that holds, past their last use, the ancestors its DROP
    options neither restore nor pass by (the "held" alternatives), kept until the recomputations that
    may need them."""
    plan = _seg_plan(cover, lp, values)
    for j, o in enumerate(lp.opts):
        if values[j] > 0.5 and o.mode == DROP:
            g, restored = cover.segs[o.seg], {v for v, _, _ in o.terms}
            level, seen = [g.value], {g.value}
            while level:  # the needed ancestors the option does not restore, and nothing behind them
                v = level.pop()
                for q in _dead(problem, an, v, g.start) + _dying(problem, an, v, g):
                    if q not in seen:
                        seen.add(q)
                        if q in restored:
                            level.append(q)
                        else:
                            plan.setdefault(_store_key(q), KEEP)
    return plan


REPAIRS = 400  # at most this many replays when repairing a held plan by one more eviction


def _offer_held(run: _Run, plan: Plan) -> None:
    """Offers a held plan (:func:`_held_plan`); when it does not fit, the cheapest plan with one more
    segment evicted (DROP or PAGE) that fits (at most ``REPAIRS`` replays). A plan that fits is
    recorded as a start of the local search."""
    problem, an, cover, best = run.problem, run.an, run.cover, run.best
    costs = _costs(problem, run.latency)
    modes = _modes(problem, cover)
    found: list[tuple[float, Plan]] = []

    def fits(x: Plan) -> bool:
        schedule, _ = replay_plan(problem, an, _as_plan(cover, x), costs, strict=True)
        if schedule is not None:
            found.append((float(dict(schedule.info)["cost"]), x))  # type: ignore[arg-type]
        return schedule is not None

    if not fits(plan):
        tries = [{**plan, k: m} for k, ms in modes.items() if k >= 0 and k not in plan for m in ms]
        for x in tries[: REPAIRS // 2]:
            if _left(best, run.options) < 0.1 * run.options.time_limit_s:
                break
            if not fits(x):
                fits({**x, FREE_TEMPS: DROP})
    if found:
        cost, x = min(found, key=lambda f: f[0])
        best.plans.append((cost, len(best.plans), x))
        schedule, _ = replay_plan(problem, an, _as_plan(cover, x), costs)
        if schedule is not None:
            _try(problem, best, run.options, lambda: schedule, "held bound-model plan")  # type: ignore[misc]


def _seg_plan(cover: Cover, lp: _Lp, values: np.ndarray) -> Plan:
    """The chosen evictions; an input an option pages in is stored when computed."""
    plan: Plan = {}
    for j, o in enumerate(lp.opts):
        if values[j] > 0.5:
            plan[o.seg] = o.mode
            own = cover.segs[o.seg].value
            for v, kinds, _ in o.terms:
                if v != own and kinds in ("i", "j"):
                    plan[_store_key(v)] = STORE
    return plan


@dataclass
class _Search:
    """Local search over plans, judged by the exact replay (:func:`replay_plan`): a plan is better
    when its replay overflows the budget by fewer bytes in total, then when it costs less. Moves, in a
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
    evals: int = 0

    def score(self, plan: Plan, strict: bool) -> tuple[float, float]:
        key = tuple(sorted(plan.items()))
        if key in self.seen:
            return self.seen[key]
        self.evals += 1
        schedule, overflow = replay_plan(
            self.problem, self.an, _as_plan(self.cover, plan), self.costs, strict
        )
        if schedule is None:
            out = (float(sum(overflow.values())) if not strict else math.inf, math.inf)
        else:
            out = (0.0, float(dict(schedule.info)["cost"]))  # type: ignore[arg-type]
        if not strict or schedule is not None:
            self.seen[key] = out
        return out

    def neighbours(self, plan: Plan) -> Iterator[Plan]:
        """The moves from ``plan``, lazily (a descent takes the first that improves; on a thousand-node
        graph the whole list is millions of plans)."""
        flipped = dict(plan)
        if FREE_TEMPS in plan:
            del flipped[FREE_TEMPS]
        else:
            flipped[FREE_TEMPS] = DROP
        yield flipped
        for k, modes in self.modes.items():
            for mode in (None, *modes):
                if plan.get(k) != mode:
                    nxt = dict(plan)
                    if mode is None:
                        del nxt[k]
                    else:
                        nxt[k] = mode
                    yield nxt
        for k in sorted(plan):
            if k < 0:
                continue
            g = self.cover.segs[k]
            mode, at, late = _mode(plan[k])
            for t in sorted({g.end - (1 << j) for j in range(1, 6)} - {at}):
                if g.start < t < g.end - 1 and (late is None or late < t):  # restore early
                    yield {**plan, k: _fmt(mode, t, late)}
            last = g.end - 1 if at is None else at
            for u in sorted({g.start + (1 << j) for j in range(6)} | {g.end - (1 << j) for j in range(1, 6)}):
                if g.start < u < last and u != late:  # evict late
                    yield {**plan, k: _fmt(mode, at, u)}
            if late is not None:
                yield {**plan, k: _fmt(mode, at, None)}
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
        mode, at, _ = _mode(plan[k])
        for k2 in sorted(plan):
            if k2 < 0 or k2 == k:
                continue
            h = self.cover.segs[k2]
            mode2, at2, late2 = _mode(plan[k2])
            r = h.end - 1 if at2 is None else at2
            if (
                mode2 == DROP
                and g.value in self.an.preds[h.value]
                and g.start < r < (g.end - 1 if at is None else at)
                and (late2 is None or late2 < r)
            ):
                carried = {**plan, k: _fmt(mode, at, r), k2: _fmt(mode2, r, late2)}
                yield carried
                for k3, modes in self.modes.items():  # with one more eviction where k's value stays longer
                    f = self.cover.segs[k3] if k3 >= 0 else None
                    if f is not None and k3 not in plan and f.start < r and f.end - 1 > g.start:
                        for m in modes:
                            yield {**carried, k3: m}

    def run(self, plan: Plan, deadline: float, on_better: Callable[[Plan], None]) -> Plan:
        current = self.score(plan, False)
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for nxt in self.neighbours(plan):
                if time.perf_counter() >= deadline:
                    break
                sc = self.score(nxt, current[0] == 0.0)
                if sc < (current[0], current[1] * (1 - 1e-12)) and sc != current:
                    plan, current, improved = nxt, sc, True
                    if sc[0] == 0.0:
                        on_better(plan)
                    break
        return plan


def _modes(problem: SchedulingProblem, cover: Cover) -> dict[int, tuple[str, ...]]:
    """The modes of every segment with options, and KEEP / STORE (if pageable) for every dead ancestor
    a recomputation may need (kept or paged in, it spares recomputing its own inputs)."""
    modes: dict[int, set[str]] = {}
    for o in (*cover.bound_opts, *cover.primal_opts):
        modes.setdefault(o.seg, set()).add(o.mode)
    for v in sorted({v for anc in cover.ancestors.values() for v in anc}):
        modes[_store_key(v)] = {KEEP, STORE} if problem.nodes[v].pageable else {KEEP}
    return {
        k: tuple(sorted(modes[k])) for k in sorted(modes, key=lambda k: (k < 0, abs(k)))
    }  # segments first


# -- the entry point ---------------------------------------------------------------------------------------


def _metric(sim: SimResult, options: ScaleOptions) -> float:
    return sim.latency_s if options.objective == "latency" else sim.energy_j


def _admissible(problem: SchedulingProblem, sim: SimResult) -> bool:
    limit = problem.max_latency_s
    return limit is None or sim.latency_s <= limit * (1 + 1e-9)


def _try(
    problem: SchedulingProblem, best: _Best, options: ScaleOptions, make: Callable[[], Schedule], origin: str
) -> SimResult | None:
    try:
        schedule = make()
        sim = simulate(problem, schedule)
    except PoetError:
        return None
    if _admissible(problem, sim):
        best.offer(schedule, sim, _metric(sim, options), origin)
    return sim


def _baselines(problem: SchedulingProblem, best: _Best, options: ScaleOptions) -> None:
    from poet_edge.schedulers.greedy import schedule_greedy
    from poet_edge.schedulers.none import schedule_none
    from poet_edge.schedulers.page_all import schedule_page_all
    from poet_edge.schedulers.recompute_all import schedule_recompute_all

    for name, fn in (
        ("none", schedule_none),
        ("page-all", schedule_page_all),
        ("greedy", schedule_greedy),
        ("recompute-all", schedule_recompute_all),
    ):
        _try(problem, best, options, lambda fn=fn: fn(problem), name)  # type: ignore[misc]


def _tighten(budget: np.ndarray, overflow: dict[int, int]) -> np.ndarray:
    out = budget.copy()
    for t, over in overflow.items():
        if 0 <= t < len(out) and over < 1 << 61:  # not the "cannot be followed" marker
            out[t] -= over
    return out


def _left(best: _Best, options: ScaleOptions) -> float:
    return options.time_limit_s - (time.perf_counter() - best.began)


@dataclass(frozen=True)
class _Run:
    """What the phases of one run share: the problem and its analysis, the segment cover, the options,
    the incumbent (mutable), and the objective's kind and normalisation (costs in the models are / norm)."""

    problem: SchedulingProblem
    an: Analysis
    cover: Cover
    best: _Best
    options: ScaleOptions
    latency: bool
    norm: float


def schedule_scale(problem: SchedulingProblem, options: ScaleOptions | None = None) -> Schedule:
    """See the module docstring. Raises PoetError (saying why) when no schedule exists or none is found."""
    options = options or ScaleOptions()
    if options.objective not in ("energy", "latency"):
        raise PoetError(f"unknown objective '{options.objective}'; use energy or latency")
    best = _Best()
    if not problem.nodes:
        return Schedule((), NAME, (("status", "empty problem"),))
    check_budget(problem)
    an = analyse(problem, True)
    latency = options.objective == "latency"
    comp = _costs(problem, latency)[0]
    plain = sum(comp)
    norm = plain if plain > 0 else 1.0
    _baselines(problem, best, options)
    cover = build_cover(problem, an, latency)
    n = len(problem.nodes)
    budget = np.full(n, problem.budget_bytes, dtype=np.int64)
    run = _Run(problem, an, cover, best, options, latency, norm)
    bound = plain + _bound(run, budget) * norm
    primal_status = _improve(run, bound)
    evals = 0
    pairs = stage_model.pairs(problem, an)
    if pairs <= STAGE_PAIRS:  # a short search first: the stage model's start
        evals = _search(run, bound, SEARCH_FIRST * options.time_limit_s, options.kicks // 10)
        bound = max(bound, plain + _stages(run, plain) * norm)
        evals += _search(run, bound)
    elif pairs <= LNS_PAIRS:
        evals = _search(run, bound, LNS_AFTER * options.time_limit_s, stall=LNS_STALL * options.time_limit_s)
        _lns(run, bound)
        evals += _search(run, bound)  # the rest of the time, if the windows stall at full width
    else:
        evals = _search(run, bound)
    if best.schedule is None:
        raise PoetError(f"scheduler '{NAME}' found no schedule within the budget ({primal_status})")
    return _finish(best, bound, plain, primal_status, cover, evals)


def _bound(run: _Run, budget: np.ndarray) -> float:
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    lp = _columns(problem, cover.bound_opts, run.latency, run.norm)
    _input_cuts(problem, run.an, cover, lp, run.latency, run.norm)
    _topups(problem, run.an, cover, lp, run.latency, run.norm)
    if not _rows(problem, cover, lp, budget):
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order: "
            f"values that can be neither paged out nor recomputed must stay resident"
        )
    # the LP relaxation first: its optimum is a bound even when the MIP's root is not done in time
    relaxed = _solve(lp, max(0.5, 0.25 * _left(best, options)), options, integer=False)
    solved = _solve(lp, max(0.5, 0.3 * _left(best, options)), options)
    if not solved.feasible:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order "
            f"(the segment relaxation is infeasible)"
        )
    if solved.values is not None:
        _offer_plan(run, _seg_plan(cover, lp, solved.values), "bound-model plan")
        _offer_held(run, _held_plan(problem, run.an, cover, lp, solved.values))
    return max(solved.bound, relaxed.bound)


STAGE_PAIRS = 3000  # the stage model runs on graphs of at most this many value-stage pairs
STAGE_SHARE = 0.85  # of the time left (the local search after it gets the rest)
SEARCH_FIRST = 0.3  # with the stage model, the local search runs first until this share of the time limit


def _stages(run: _Run, plain: float) -> float:
    """The stage model (:mod:`poet_edge.schedulers.stage_model`) on graphs of at most ``STAGE_PAIRS``
    value-stage pairs, started from the incumbent: its solution decoded and offered as a schedule;
    returns its (scaled) dual bound, 0 when it does not run."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    model = stage_model.build(problem, an, _costs(problem, run.latency), run.norm)
    if not model.feasible:
        return 0.0
    start = stage_model.encode(problem, an, model, best.schedule) if best.schedule is not None else None
    # stop when the gap relative to the whole cost (plain pass + the model's objective) is closed
    gap = options.gap_rel / 4 * (best.cost if math.isfinite(best.cost) else plain) / run.norm
    solved = stage_model.solve(model, STAGE_SHARE * _left(best, options), options.threads, gap, start)
    if solved.values is not None:
        values = solved.values
        _try(problem, best, options, lambda: stage_model.decode(problem, an, model, values), "stage model")
    return solved.bound


LNS_PAIRS = 8000  # larger graphs: after the local search, windows of the stage model re-optimized
LNS_AFTER = 0.5  # share of the time limit after which the large-neighbourhood search takes over
LNS_STALL = 0.1  # ... or earlier, once the local search has not improved the incumbent for this share
LNS_WIDTH, LNS_STEP, LNS_SECONDS = 20, 10, 3.0  # window stages, step between windows, seconds per window
LNS_VALUES, LNS_VALUE_STEP = 3, 2  # value windows: values (+1), step between windows
LNS_VALUE_SHARE = 0.5  # share of the LNS time the value windows get


@dataclass
class _Sweep:
    """One kind of LNS window (stages, or values at every stage) and where its sweep is."""

    by_value: bool
    width: int
    step: int
    first: int = 0
    stale: int = 0  # stages (values) swept since the incumbent last improved
    spent: float = 0.0  # seconds its windows took


def _lns(run: _Run, bound: float) -> None:
    """Large-neighbourhood search with the stage model (graphs of at most ``LNS_PAIRS`` value-stage
    pairs): the incumbent as a point of the model, every column outside a window fixed, the window
    re-optimized by HiGHS (at most ``LNS_SECONDS``, from the incumbent); a cheaper solution is
    decoded, checked by the simulator and becomes the incumbent. Two kinds of windows share the time
    (the next window is of the kind furthest below its share; ``LNS_VALUE_SHARE`` for the value
    windows): ``LNS_WIDTH`` stages (every value), and ``LNS_VALUES`` values (every stage: where a value is
    held, dropped and restored over its whole life, which a stage window cannot change at once: keep
    an early activation through the forward pass for the backward's recomputations, drop two others
    instead). Each kind sweeps its range (steps ``LNS_STEP``, ``LNS_VALUE_STEP``); after a whole sweep
    without improvement its windows and steps double (once they span everything, that kind stops),
    until the gap closes, both kinds stop, or the time limit (less 5%) is reached."""
    problem, an, best, options = run.problem, run.an, run.best, run.options
    margin = 0.05 * options.time_limit_s
    if best.schedule is None or _left(best, options) < margin + 1.0:
        return
    model = stage_model.build(problem, an, _costs(problem, run.latency), run.norm)
    x = stage_model.encode(problem, an, model, best.schedule)
    if not model.feasible or x is None:
        return
    h = stage_model.windows(model, options.threads, options.gap_rel / 4 * best.cost / run.norm)
    n = len(problem.nodes)
    sweeps = [_Sweep(False, LNS_WIDTH, LNS_STEP), _Sweep(True, LNS_VALUES, LNS_VALUE_STEP)]
    while sweeps:
        # the kind that is furthest below its share of the time
        sw = min(
            sweeps,
            key=lambda k: (k.spent / (LNS_VALUE_SHARE if k.by_value else 1 - LNS_VALUE_SHARE), k.by_value),
        )
        if sw.stale >= n:  # a whole sweep without improvement: wider windows
            if sw.width >= n:
                sweeps.remove(sw)
                continue
            sw.width, sw.step, sw.stale = 2 * sw.width, 2 * sw.step, 0
        left = _left(best, options) - margin
        if left < 0.5 or best.cost <= bound * (1 + options.gap_rel):
            return
        # HiGHS may overshoot its limit a little on wide windows: at most half of what is left
        began = time.perf_counter()
        solved = stage_model.window(
            h, x, sw.first, sw.first + sw.width, min(LNS_SECONDS, left / 2), by_value=sw.by_value
        )
        sw.spent += time.perf_counter() - began
        sw.first = sw.first + sw.step if sw.first + sw.step < n else 0
        sw.stale += sw.step
        if solved.values is None:
            continue
        before = best.cost
        _try(
            problem,
            best,
            options,
            lambda v=solved.values: stage_model.decode(problem, an, model, v),  # type: ignore[misc]
            "stage LNS",
        )
        y = stage_model.encode(problem, an, model, best.schedule) if best.cost < before else None
        if y is not None:
            x = y
            for other in sweeps:
                other.stale = 0


def _offer_plan(run: _Run, segplan: Plan, origin: str) -> dict[int, int]:
    """Offers the plan replayed exactly (and records it for the local search), else through the
    engine (which repairs overflows by DTR); returns the overflow of the exact replay (empty when it
    fits)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = _costs(problem, run.latency)
    overflows = []
    for variant in (segplan, {**segplan, FREE_TEMPS: DROP}):
        plan = _as_plan(cover, variant)
        schedule, overflow = replay_plan(problem, an, plan, costs)
        if schedule is not None:
            cost = float(dict(schedule.info)["cost"])  # type: ignore[arg-type]
            best.plans.append((cost, len(best.plans), variant))
            _try(problem, best, options, lambda schedule=schedule: schedule, origin)  # type: ignore[misc]
        else:
            _try(problem, best, options, lambda plan=plan: decode(problem, plan)[0], origin + " (engine)")  # type: ignore[misc]
        overflows.append(overflow)
    return min(overflows, key=lambda o: sum(o.values()))


def _improve(run: _Run, bound: float) -> str:
    """Primal rounds on both models: solve, replay, tighten the budget rows of overflowing stages."""
    problem, cover, best, options = run.problem, run.cover, run.best, run.options
    status = "not run"
    n = len(problem.nodes)
    margin = 0.05 * options.time_limit_s
    for name, opts, rounds in (
        ("primal", cover.primal_opts, options.rounds),
        ("bound-model", cover.bound_opts, 3 * options.rounds),
    ):
        budget = np.full(n, problem.budget_bytes, dtype=np.int64)
        spent = 0.0  # seconds the last round took: a round starts only if one more fits the time left
        for k in range(rounds):
            if best.cost <= bound * (1 + options.gap_rel) or _left(best, options) < margin + spent:
                break
            began = time.perf_counter()
            lp = _columns(problem, opts, run.latency, run.norm)
            if opts is cover.bound_opts:
                _input_cuts(problem, run.an, cover, lp, run.latency, run.norm)
            if not _rows(problem, cover, lp, budget):
                status = f"{name} round {k}: a tightened stage cannot fit"
                break
            solved = _solve(lp, min(_left(best, options) / 4, 0.1 * options.time_limit_s), options)
            if name == "primal":
                status = f"primal round {k}: {solved.status}"
            if solved.values is None:
                break
            segplan = _seg_plan(cover, lp, solved.values)
            overflow = _offer_plan(run, segplan, f"{name} plan, round {k}")
            if not overflow:
                break
            budget = _tighten(budget, overflow)
            spent = time.perf_counter() - began
    return status


def _search(
    run: _Run, bound: float, until: float | None = None, kicks: int | None = None, stall: float | None = None
) -> int:
    """Local search (:class:`_Search`) from the three cheapest recorded plans (or from no eviction at
    all), then iterated: perturb 1-3 random segments of the best plan (fixed seed) and descend again,
    at most ``options.kicks`` times, while time remains and the gap is open; returns the number of
    replays. ``until``: stop once this many seconds of the run have passed; ``kicks``: at most this
    many perturbations instead; ``stall``: stop once the incumbent has not improved for this many
    seconds (of this search: it always gets that long)."""
    problem, an, cover, best, options = run.problem, run.an, run.cover, run.best, run.options
    costs = _costs(problem, run.latency)
    search = _Search(problem, an, cover, costs, _modes(problem, cover))
    starts = [plan for _, _, plan in sorted(best.plans, key=lambda x: (x[0], x[1]))] or [{}]
    done: set[tuple[tuple[int, str], ...]] = set()
    margin = 0.05 * options.time_limit_s
    started = time.perf_counter()
    if until is not None:  # stop once ``until`` seconds of the run have passed
        margin = max(margin, options.time_limit_s - until)

    def offer(plan: Plan) -> None:
        schedule, _ = replay_plan(problem, an, _as_plan(cover, plan), costs)
        if schedule is not None:
            _try(problem, best, options, lambda: schedule, "local search")

    def more() -> bool:
        last = max(started, best.began + best.improved_at)  # the search's own start counts as one
        if stall is not None and time.perf_counter() - last > stall:
            return False
        return best.cost > bound * (1 + options.gap_rel) and _left(best, options) >= margin

    incumbent: Plan | None = None
    for plan in starts[:3]:
        key = tuple(sorted(plan.items()))
        if key in done or not more():
            continue
        done.add(key)
        found = search.run(plan, time.perf_counter() + _left(best, options) - margin, offer)
        if incumbent is None or search.score(found, False) < search.score(incumbent, False):
            incumbent = found
    rng = random.Random(0)
    movable = [k for k, m in search.modes.items() if m]
    for _ in range(options.kicks if kicks is None else kicks):
        if incumbent is None or not movable or not more():
            break
        plan = dict(incumbent)
        for k in rng.sample(movable, min(len(movable), rng.randint(1, 3))):
            mode = rng.choice((None, *search.modes[k]))
            if mode is None:
                plan.pop(k, None)
            else:
                plan[k] = mode
        found = search.run(plan, time.perf_counter() + _left(best, options) - margin, offer)
        if search.score(found, False) < search.score(incumbent, False):
            incumbent = found
    return search.evals


def _finish(best: _Best, bound: float, plain: float, status: str, cover: Cover, evals: int) -> Schedule:
    assert best.schedule is not None
    bound = max(bound, plain)
    if bound > best.cost:  # only within the solver's tolerances (the bound is a relaxation)
        bound = best.cost if bound <= best.cost * (1 + 1e-7) else bound
    gap = max(0.0, best.cost - bound) / max(abs(best.cost), 1e-300)
    info = (
        ("status", "optimal" if gap <= 1e-9 else "feasible"),
        ("objective", best.cost),
        ("bound", bound),
        ("gap", gap),
        ("seconds", round(time.perf_counter() - best.began, 3)),
        ("first_valid_s", best.first_valid_s),
        ("schedule_from", best.origin),
        ("primal", status),
        ("segments", len(cover.segs)),
        ("options", (len(cover.bound_opts), len(cover.primal_opts))),
        ("search_replays", evals),
    )
    steps = best.schedule.steps
    return Schedule(tuple(steps), NAME, info)
