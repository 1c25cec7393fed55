"""The interval bound of scheduler "scale": the stage model coarsened to a few bottleneck stages, small
enough for HiGHS to solve to optimality, refined where its point overfills RAM.

Order. As in the stage model (:mod:`poet_edge.schedulers.stage_model`), node t is first computed in
stage t. A set of bottleneck stages b1 < ... < bk cuts the run into intervals (b, b'] (the first from
the start, b = -1; the last to the end): the events after node b's first computation up to and
including node b''s. Columns, for every value v (bytes > 0) that a stage after b may need
(``Analysis.req``) and produced by b:

* H[b,v]: v is in RAM while node b runs (1 for b's inputs and output);
* C[b,v]: v is recomputed at least once in the interval after b (v recomputable, its invalidator not
  run by then);
* P[b,v]: v is paged in at least once in that interval (pageable); O[v]: v is paged out (once).

Rows. An input u <= b of a node first computed in (b, b'] is in RAM then: H[b,u] + C[b,u] + P[b,u] >= 1.
A recomputation in the interval has its inputs u <= b: C[b,v] <= H[b,u] + C[b,u] + P[b,u] (inputs first
computed after b are there). P[b,v] <= O[v]. RAM while b runs: fixed + workspace + b's inputs and
output + the bytes of the other values with H[b,v] within the budget. A value in RAM at b' was there at
b or restored in between: H[b',v] <= H[b,v] + C[b,v] + P[b,v] (v <= b). Storage: the bytes paged out
within its capacity. Objective: the recomputations, page-ins and page-outs counted.

Why it is a bound. A schedule in the problem's order gives a point: H[b,.] what is in RAM while node b
runs, C/P whether the interval recomputes / pages in the value (its first such event, which needs its
inputs in RAM then), O whether it is ever paged out. Every row holds for that point, and the objective
counts one recomputation (page-in) per value and interval where the schedule has at least one:
different intervals are different events. So the model's optimum, and HiGHS's dual bound, is a lower
bound on every schedule in the problem's order, for every choice of bottlenecks; more bottlenecks give
a larger model and, with the RAM rows of more stages, a higher optimum (with every stage a bottleneck
it is the stage model, whose LP relaxation is weak: bert_tiny at 1.1x its floor is an example).

Refinement (:func:`refine`). From the tightest stages: solve, then look, in each interval, for the
stage whose RAM the point overfills most (:func:`overfilled`: what the point must hold at a stage
inside an interval, restorations taken as late as they can be); make those bottlenecks and solve
again, until no stage overfills or the time is up. On bert_tiny (biases trained) at 1.1x its floor
the bound rises with each round's bottlenecks, above the segment models' bound; on mobilenetv1_025
with every parameter trained at 60% it reaches the optimum sooner than with one stage a round.

Where no stage overfills, the point is one of the stage model's but for the RAM of the restorations
between stages (:func:`stage_point`); decoded, it is a schedule at the bound where those fit (scale
offers it, :func:`poet_edge.schedulers.scale_bounds.interval_refined`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from poet_edge.highs import TIME_LIMIT, broken_rows
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, PageIn, PageOut, Schedule
from poet_edge.schedulers.engine import Analysis
from poet_edge.schedulers.lp_model import LpModel, node_costs, solve_lp
from poet_edge.schedulers.stage_model import StageModel

if TYPE_CHECKING:
    from poet_edge.schedulers.scale import ScaleOptions

Key = tuple[str, int, int]  # ("H" | "C" | "P", bottleneck b (-1: the start), value); ("O", -1, value)


@dataclass(frozen=True)
class IntervalModel:
    """The model for bottleneck stages ``stages`` (sorted): its columns by key, and its rows."""

    stages: tuple[int, ...]
    lp: LpModel
    cols: dict[Key, int]
    feasible: bool  # False: a bottleneck's own inputs and output overfill RAM


def _avail(problem: SchedulingProblem) -> int:
    return problem.budget_bytes - problem.fixed_bytes


def _need(an: Analysis, t: int) -> set[int]:
    return set(an.preds[t]) | {t}


def _own(problem: SchedulingProblem, an: Analysis, t: int) -> int:
    """The RAM node t needs for itself while it runs: its inputs, its output, its workspace."""
    nodes = problem.nodes
    return nodes[t].workspace_bytes + sum(nodes[u].out_bytes for u in _need(an, t))


def build(
    problem: SchedulingProblem, an: Analysis, latency: bool, norm: float, stages: tuple[int, ...]
) -> IntervalModel:
    """The interval model with bottlenecks ``stages`` (see the module docstring)."""
    nodes, n = problem.nodes, len(problem.nodes)
    comp, pin, pout = node_costs(problem, latency)
    lp = LpModel()
    cols: dict[Key, int] = {}
    sized = [v for v in range(n) if nodes[v].out_bytes > 0]
    for v in sized:
        if nodes[v].pageable:
            cols[("O", -1, v)] = lp.col(pout[v] / norm)
    starts = (-1, *stages)
    held: dict[int, list[tuple[int, int]]] = {}  # bottleneck b -> (value, its H column), in column order
    for b in starts:
        for v in (v for v in sized if v <= b and an.req[v] > b):
            cols[("H", b, v)] = lp.col(0.0)
            held.setdefault(b, []).append((v, cols[("H", b, v)]))
            if nodes[v].recomputable and an.recomp_until[v] > b:
                cols[("C", b, v)] = lp.col(comp[v] / norm)
            if nodes[v].pageable:
                cols[("P", b, v)] = lp.col(pin[v] / norm)
    feasible = True
    for k, b in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n - 1
        _interval_rows(problem, an, lp, cols, b, end)
        if b >= 0:
            feasible &= _ram_row(problem, an, lp, held.get(b, []), b)
            _link_rows(lp, cols, held.get(b, []), starts[k - 1])
    if problem.storage_bytes is not None:
        paged = sorted((j, float(nodes[v].out_bytes)) for (kind, _, v), j in cols.items() if kind == "O")
        if paged:
            lp.rows.append(
                (-math.inf, float(problem.storage_bytes), [j for j, _ in paged], [w for _, w in paged])
            )
    return IntervalModel(tuple(stages), lp, cols, feasible)


def _have(cols: dict[Key, int], b: int, u: int) -> list[int]:
    """The columns that put value u in RAM in the interval after b: held at b, recomputed, paged in."""
    return [cols[key] for key in (("H", b, u), ("C", b, u), ("P", b, u)) if key in cols]


def _interval_rows(
    problem: SchedulingProblem, an: Analysis, lp: LpModel, cols: dict[Key, int], b: int, end: int
) -> None:
    nodes = problem.nodes
    used = {u for j in range(b + 1, end + 1) for u in an.preds[j]}
    inputs = sorted(u for u in used if u <= b and nodes[u].out_bytes > 0)
    for u in inputs:
        have = _have(cols, b, u)
        lp.rows.append((1.0, math.inf, have, [1.0] * len(have)))
    for v in range(b + 1):
        c = cols.get(("C", b, v))
        if c is not None:
            for u in an.preds[v]:
                if nodes[u].out_bytes > 0:
                    have = _have(cols, b, u)
                    lp.rows.append((0.0, math.inf, [*have, c], [1.0] * len(have) + [-1.0]))
        p = cols.get(("P", b, v))
        if p is not None:
            lp.rows.append((-math.inf, 0.0, [p, cols[("O", -1, v)]], [1.0, -1.0]))


def _ram_row(
    problem: SchedulingProblem, an: Analysis, lp: LpModel, held: list[tuple[int, int]], b: int
) -> bool:
    """RAM while node b runs (``held``: b's H columns); False when b's own inputs and output do not fit."""
    need = _need(an, b)
    cap = _avail(problem) - _own(problem, an, b)
    others = [(j, float(problem.nodes[v].out_bytes)) for v, j in held if v not in need]
    for v, j in held:
        if v in need:
            lp.bounds[j] = (1.0, 1.0)
    if others:
        lp.rows.append((-math.inf, float(max(cap, 0)), [j for j, _ in others], [w for _, w in others]))
    return cap >= 0


def _link_rows(lp: LpModel, cols: dict[Key, int], held: list[tuple[int, int]], prev: int) -> None:
    """A value in RAM at a bottleneck (``held``: its H columns) was in RAM at ``prev`` or restored in
    between."""
    for v, j in held:
        if v <= prev:
            have = _have(cols, prev, v)
            lp.rows.append((-math.inf, 0.0, [j, *have], [1.0] + [-1.0] * len(have)))


def encode(
    problem: SchedulingProblem, an: Analysis, model: IntervalModel, schedule: Schedule
) -> np.ndarray | None:
    """The model's point of a schedule whose first computations follow the problem's order (None
    otherwise), as the module docstring maps it: a check of the model (every row must hold, and the
    point must cost at most what the schedule pays above the plain pass)."""
    index = problem.index()
    x = np.zeros(len(model.lp.cost))
    bottleneck = set(model.stages)
    ram: set[int] = set()
    done: set[int] = set()
    at = -1  # the interval: the last bottleneck first computed so far
    for step in schedule.steps:
        v = index[step.node]
        key: Key | None = None
        if isinstance(step, Compute):
            if v not in done:
                if v != len(done):
                    return None
                done.add(v)
                ram.add(v)
                if v in bottleneck:
                    at = v
                    for u in ram:
                        if ("H", v, u) in model.cols:
                            x[model.cols[("H", v, u)]] = 1.0
                continue
            key = ("C", at, v)
            ram.add(v)
        elif isinstance(step, PageIn):
            key = ("P", at, v)
            ram.add(v)
        elif isinstance(step, PageOut):
            key = ("O", -1, v)
        else:
            ram.discard(v)
        if key is not None and key in model.cols:
            x[model.cols[key]] = 1.0
    return x


def violated(model: IntervalModel, x: np.ndarray, tol: float = 1e-7) -> list[int]:
    """Rows the point breaks (-1 - j for a column j outside its bounds)."""
    out = [-1 - j for j, (low, up) in sorted(model.lp.bounds.items()) if not low - tol <= x[j] <= up + tol]
    return out + broken_rows(model.lp.rows, x, tol)


def overfilled(
    problem: SchedulingProblem, an: Analysis, model: IntervalModel, values: np.ndarray
) -> list[int]:
    """In each interval, the stage (not a bottleneck) whose RAM the model's point overfills most, if it
    overfills one (empty: none is overfilled). At a stage t inside an interval (b, b'] the point must
    hold, besides t's inputs, output and workspace: a value held at b and not restored, until its last
    use in the interval; a value first computed in the interval, from then until its last use; a
    restored value from its restoration (one, as late as it can be: :func:`_spans`) to its last use.
    Uses: the nodes first computed in the interval, b' when the value is held there, and the
    recomputations of the values it is an input of. Where no stage overfills, the point is one of the
    stage model's but for the RAM of restorations between stages (:func:`stage_point`)."""
    nodes, n = problem.nodes, len(problem.nodes)
    on = {key for key, j in model.cols.items() if values[j] > 0.5}
    starts, avail = (-1, *model.stages), _avail(problem)
    out = []
    for k, b in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n
        spans = _spans(problem, an, on, b, end)
        worst: tuple[int, int] | None = None  # (bytes over, -stage)
        for t in range(b + 1, min(end, n)):
            need = _need(an, t)
            ram = _own(problem, an, t)
            ram += sum(nodes[v].out_bytes for v, (lo, hi) in spans.items() if lo < t < hi and v not in need)
            over = ram - avail
            if over > 0 and (worst is None or (over, -t) > worst):
                worst = (over, -t)
        if worst is not None:
            out.append(-worst[1])
    return out


def _spans(
    problem: SchedulingProblem, an: Analysis, on: set[Key], b: int, end: int
) -> dict[int, tuple[int, int]]:
    """value -> (from, to): it is in RAM at the stages strictly between (see :func:`overfilled`). A
    restored value comes back in the gap before its first use, a recomputed one at the latest in the
    last gap that may still recompute it (``Analysis.recomp_until``); from then it is in RAM while the
    nodes up to its last use run (at its first use only as an input when that node uses it)."""
    nodes = problem.nodes
    uses: dict[int, list[int]] = {}
    back: dict[int, int] = {}  # restored value -> the gap it comes back in
    for v in range(min(end, len(nodes)) - 1, -1, -1):
        if nodes[v].out_bytes == 0:
            continue
        at = [j for j in an.succs[v] if b < j <= end and j < len(nodes)]
        if ("H", end, v) in on:
            at.append(end)
        if v <= b:
            at += [back[w] for w in an.succs[v] if ("C", b, w) in on and w in back]
            if at and (("C", b, v) in on or ("P", b, v) in on):
                back[v] = min(at) if ("P", b, v) in on else min(min(at), max(an.recomp_until[v], b + 1))
        uses[v] = at
    spans: dict[int, tuple[int, int]] = {}
    for v, at in uses.items():
        if not at:
            continue
        if v > b:
            spans[v] = (v, max(at))
        elif v in back:
            spans[v] = (back[v] - 1, max(at))
        elif ("H", b, v) in on:
            spans[v] = (b, max(at))
    return spans


def tightest_stages(problem: SchedulingProblem, an: Analysis) -> tuple[int, ...]:
    """The stages whose own inputs, output and workspace leave the least RAM free (the floor's)."""
    own = [_own(problem, an, t) for t in range(len(problem.nodes))]
    top = max(own, default=0)
    return tuple(t for t, x in enumerate(own) if x == top)


def stage_point(
    problem: SchedulingProblem, an: Analysis, model: IntervalModel, values: np.ndarray, stages: StageModel
) -> np.ndarray:
    """The stage model's point (:mod:`poet_edge.schedulers.stage_model`) of a point of this model that
    overfills no stage (:func:`overfilled`): a value in RAM over the stages of its span (:func:`_spans`)
    is kept after each of them but the last, a restored one is recomputed (paged in) in the gap it
    comes back in, the W columns follow their definitions. It costs what the point costs; of the
    stage model's rows it breaks at most those of the RAM of restorations between stages (which this
    model leaves out), and :func:`~poet_edge.schedulers.stage_model.decode` makes it a schedule."""
    n = len(problem.nodes)
    on = {key for key, j in model.cols.items() if values[j] > 0.5}
    x = np.zeros(len(stages.cost))
    starts = (-1, *model.stages)
    for k, b in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n
        for v, (lo, hi) in _spans(problem, an, on, b, end).items():
            first = lo
            if v <= b and (("C", b, v) in on or ("P", b, v) in on):
                first = lo + 1
                recompute = ("C", b, v) in on and (first, v) in stages.R
                x[(stages.R if recompute else stages.M)[(first, v)]] = 1.0
            for t in range(first, hi):
                x[stages.K[(t, v)]] = 1.0
    for (kind, _, v), j in model.cols.items():
        if kind == "O" and values[j] > 0.5:
            x[stages.out[v]] = 1.0
    for col, low, terms in stages.defs:
        x[col] = max(0.0, low + sum(x[c] * w for c, w in terms))
    return x


ROUND_GROWTH = 2.0  # a round takes about this many times the last one (one or two more bottlenecks)


@dataclass(frozen=True)
class Refined:
    bound: float  # scaled: the highest dual bound of the rounds (0 when none finished)
    stages: tuple[int, ...]  # the last model's bottlenecks
    rounds: int
    status: str  # the last solve's HiGHS status
    stopped: bool  # the time was up before a round found no overfilled stage
    model: IntervalModel | None = None  # the last model where its optimum overfills no stage ...
    point: np.ndarray | None = field(default=None, compare=False)  # ... and that optimum


def refine(
    problem: SchedulingProblem,
    an: Analysis,
    latency: bool,
    norm: float,
    options: ScaleOptions,
    seconds: float,
    enough: float = math.inf,
    on_bound: Callable[[float], None] | None = None,
    growth: float = ROUND_GROWTH,
    max_rounds: int | None = None,
    nodes: int | None = None,
) -> Refined:
    """Solve, add the most overfilled stage as a bottleneck, solve again (see the module docstring),
    for at most ``seconds``, stopping early once the bound reaches ``enough`` (scaled) or a solve
    stops short of optimal (its dual bound still counts), and not starting a round when less than
    ``ROUND_GROWTH`` x the last round's seconds are left (on bias-trained bert_tiny at 1.1x its floor the
    rounds grow so, and a round started with less left does not end).
    ``on_bound(bound)``: called with the bound after each round that raised it. ``growth``: in place of
    ``ROUND_GROWTH`` (0: a round starts whenever time is left). ``max_rounds``, ``nodes``: at most this
    many rounds, of at most this many branch-and-bound nodes each (counts: where they end the result
    does not depend on the machine; ``stopped`` then stays False, it says only that time was up)."""
    deadline = time.perf_counter() + seconds
    stages = tightest_stages(problem, an)
    bound, rounds, status, stopped = 0.0, 0, "not run", True
    took = 0.0  # seconds the last round took: the next, larger, needs more (ROUND_GROWTH)
    while time.perf_counter() + growth * took < deadline:
        if max_rounds is not None and rounds >= max_rounds:
            stopped = False
            break
        model = build(problem, an, latency, norm, stages)
        if not model.feasible:
            stopped = False
            break
        began = time.perf_counter()
        solved = solve_lp(model.lp, deadline - began, options, nodes=nodes)
        took = time.perf_counter() - began
        rounds, status = rounds + 1, solved.status
        if solved.bound > bound and on_bound is not None:
            on_bound(solved.bound)
        bound = max(bound, solved.bound)
        if not solved.optimal or solved.values is None or bound >= enough:
            stopped = solved.status == TIME_LIMIT
            break
        worst = overfilled(problem, an, model, solved.values)
        if not worst:
            return Refined(bound, stages, rounds, status, False, model, solved.values)
        stages = tuple(sorted((*stages, *worst)))
    return Refined(bound, stages, rounds, status, stopped)
