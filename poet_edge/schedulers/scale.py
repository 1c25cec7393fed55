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
and the runtime budget are rows too. Its optimum (or HiGHS's dual bound within the time limit) plus
the plain pass (every node once) is the reported lower bound; ignored on purpose: the transient RAM of
restorations and recomputing the missing ancestors of a recomputed value (both only add cost).

Primal model. The same model where r_s is allowed only when every input of i is in RAM at b without
further work: the input is used at b itself, or it has a segment spanning b that is not evicted (a
row r_s + p_s' + r_s' <= 1). Its solutions are turned into schedules by the baseline engine
(:mod:`poet_edge.schedulers.engine`) with a plan: after stage a, value i is paged out (once) and
freed, or dropped; the engine restores it just before b (page-in, or recomputation), and evicts by the
DTR rule of the greedy baseline if the transient RAM of a restoration does not fit. The simulator
measures every candidate; the cheapest of the decoded plans and the baselines is returned, so the
result is never worse than the best baseline. When the decoded schedule costs more than the model
said (transient RAM), the budget rows of the stages where the engine had to evict are tightened by
the overflow and the primal model is solved again (a few rounds, while time remains).

``Schedule.info``: status, objective, bound, gap ((cost - bound) / cost), seconds, first_valid_s
(time to the first valid schedule), the schedule's origin and model sizes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.engine import DROP, PAGE, Analysis, Engine, analyse
from poet_edge.schedulers.greedy import _dtr
from poet_edge.simulator import SimResult, simulate

NAME = "scale"


@dataclass(frozen=True)
class ScaleOptions:
    """``time_limit_s``: wall-clock limit of the whole run; ``gap_rel``: stop when the returned cost
    is within this fraction of the bound; ``rounds``: at most this many primal re-solves."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float = 30.0
    threads: int | None = None
    gap_rel: float = 1e-4
    rounds: int = 4
    msg: bool = False


@dataclass(frozen=True)
class Segment:
    """Value ``value`` is not used by a first computation strictly between stages ``start``/``end``."""

    value: int
    start: int
    end: int


@dataclass
class Cover:
    """The segment-cover model data (shared by the bound and the primal model)."""

    segs: list[Segment]
    page_ok: list[bool]
    drop_ok: list[bool]  # bound model
    drop_primal: list[bool]  # primal model
    conflicts: list[tuple[int, int]]  # (s, s'): r_s + p_s' + r_s' <= 1 in the primal model
    need: np.ndarray  # bytes each stage needs besides optional segments (fixed, out, ws, inputs, pinned)
    spans: list[list[int]]  # optional segments spanning each stage


@dataclass
class _Best:
    schedule: Schedule | None = None
    cost: float = math.inf
    origin: str = ""
    first_valid_s: float | None = None
    began: float = field(default_factory=time.perf_counter)

    def offer(self, schedule: Schedule, sim: SimResult, cost: float, origin: str) -> None:
        if self.first_valid_s is None:
            self.first_valid_s = time.perf_counter() - self.began
        if cost < self.cost * (1 - 1e-12):
            self.schedule, self.cost, self.origin = schedule, cost, origin


# -- the model -------------------------------------------------------------------------------------------


def _segments(problem: SchedulingProblem, an: Analysis) -> list[Segment]:
    out = []
    for i, node in enumerate(problem.nodes):
        if node.out_bytes == 0 or not an.succs[i]:
            continue
        pts = [i, *an.succs[i]]
        out += [Segment(i, a, b) for a, b in zip(pts, pts[1:], strict=False) if b - a >= 2]
    return out


def _uses(an: Analysis) -> list[set[int]]:
    return [set(s) for s in an.succs]


def _primal_drop(
    problem: SchedulingProblem, an: Analysis, segs: list[Segment], s: int, at: dict[tuple[int, int], int]
) -> tuple[bool, list[int]]:
    """Whether r_s is allowed in the primal model, and the segments of inputs that must be kept."""
    seg = segs[s]
    i, b = seg.value, seg.end
    if not (problem.nodes[i].recomputable and an.droppable[i] and b <= an.recomp_until[i]):
        return False, []
    keep = []
    for q in an.preds[i]:
        if b in an.succs[q] or problem.nodes[q].out_bytes == 0:
            continue
        if an.last_use[q] < b:
            return False, []
        hit = at.get((q, b))
        if hit is not None:
            keep.append(hit)
    return True, keep


def build_cover(problem: SchedulingProblem, an: Analysis) -> Cover:
    """Segments, which restorations each model allows, and the per-stage needs."""
    nodes, n = problem.nodes, len(problem.nodes)
    cap = problem.storage_bytes
    segs = _segments(problem, an)
    page_ok = [nodes[g.value].pageable and (cap is None or nodes[g.value].out_bytes <= cap) for g in segs]
    drop_ok = [nodes[g.value].recomputable and g.start < an.recomp_until[g.value] for g in segs]
    need = np.zeros(n + 1, dtype=np.int64)
    for t in range(n):
        need[t] += problem.fixed_bytes + nodes[t].out_bytes + nodes[t].workspace_bytes
        need[t] += sum(nodes[q].out_bytes for q in an.preds[t])
    spans: list[list[int]] = [[] for _ in range(n)]
    pinned = np.zeros(n + 1, dtype=np.int64)
    at: dict[tuple[int, int], int] = {}
    for s, g in enumerate(segs):
        for t in range(g.start + 1, g.end + 1):
            at[(g.value, t)] = s  # segment of g.value in RAM at stage t (end: needed there)
        if page_ok[s] or drop_ok[s]:
            for t in range(g.start + 1, g.end):
                spans[t].append(s)
        else:
            pinned[g.start + 1] += nodes[g.value].out_bytes
            pinned[g.end] -= nodes[g.value].out_bytes
    need[:n] += np.cumsum(pinned)[:n]
    drop_primal, conflicts = [], []
    at_open = {k: s for k, s in at.items() if k[1] < segs[s].end and (page_ok[s] or drop_ok[s])}
    for s in range(len(segs)):
        ok, keep = _primal_drop(problem, an, segs, s, at_open)
        drop_primal.append(ok and drop_ok[s])
        if ok and drop_ok[s]:
            conflicts += [(s, k) for k in keep]
    return Cover(segs, page_ok, drop_ok, drop_primal, conflicts, need[:n], spans)


@dataclass
class _Lp:
    """Columns and rows of one model, ready for highspy."""

    cost: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    p: dict[int, int] = field(default_factory=dict)
    r: dict[int, int] = field(default_factory=dict)
    z: dict[int, int] = field(default_factory=dict)

    def col(self, cost: float) -> int:
        self.cost.append(cost)
        self.upper.append(1.0)
        return len(self.cost) - 1


def _costs(problem: SchedulingProblem, latency: bool) -> tuple[list[float], list[float], list[float]]:
    nodes = problem.nodes
    if latency:
        return [n.compute_s for n in nodes], [n.page_in_s for n in nodes], [n.page_out_s for n in nodes]
    return [n.compute_j for n in nodes], [n.page_in_j for n in nodes], [n.page_out_j for n in nodes]


def _columns(problem: SchedulingProblem, cover: Cover, primal: bool, latency: bool, norm: float) -> _Lp:
    comp, pin, pout = _costs(problem, latency)
    lp = _Lp()
    drop = cover.drop_primal if primal else cover.drop_ok
    for s, g in enumerate(cover.segs):
        i = g.value
        if cover.page_ok[s]:
            lp.p[s] = lp.col(pin[i] / norm)
            if i not in lp.z:
                lp.z[i] = lp.col(pout[i] / norm)
            lp.rows.append((-math.inf, 0.0, [lp.p[s], lp.z[i]], [1.0, -1.0]))
        if drop[s]:
            lp.r[s] = lp.col(comp[i] / norm)
        if s in lp.p and s in lp.r:
            lp.rows.append((-math.inf, 1.0, [lp.p[s], lp.r[s]], [1.0, 1.0]))
    return lp


def _evict_cols(lp: _Lp, s: int) -> list[int]:
    return [c for c in (lp.p.get(s), lp.r.get(s)) if c is not None]


def _rows(problem: SchedulingProblem, cover: Cover, lp: _Lp, primal: bool, budget: np.ndarray) -> bool:
    """Adds the budget, conflict, storage and runtime rows; False when a stage cannot fit at all."""
    nodes = problem.nodes
    for t, segs in enumerate(cover.spans):
        idx, val = [], []
        for s in segs:
            cols = _evict_cols(lp, s)
            idx += cols
            val += [float(nodes[cover.segs[s].value].out_bytes)] * len(cols)
        excess = float(cover.need[t] + sum(nodes[cover.segs[s].value].out_bytes for s in segs) - budget[t])
        if excess <= 0:
            continue
        if sum(val) < excess:
            return False
        scale = max(excess, 1.0)
        lp.rows.append((excess / scale, math.inf, idx, [v / scale for v in val]))
    if primal:
        for s, k in cover.conflicts:
            lp.rows.append(
                (-math.inf, 1.0, [lp.r[s], *_evict_cols(lp, k)], [1.0] * (1 + len(_evict_cols(lp, k))))
            )
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
        idx = list(lp.p.values()) + list(lp.r.values()) + list(lp.z.values())
        val = [pin[cover.segs[s].value] for s in lp.p] + [comp[cover.segs[s].value] for s in lp.r]
        val += [pout[i] for i in lp.z]
        sc = max(room, 1e-300)
        lp.rows.append((-math.inf, room / sc, idx, [v / sc for v in val]))
    return True


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
        np.zeros(ncol),
        np.array(lp.upper),
        0,
        np.array([0]),
        np.array([0]),
        np.array([0.0]),
    )
    if integer:
        h.changeColsIntegrality(ncol, np.arange(ncol, dtype=np.int32), np.ones(ncol, dtype=np.uint8))
    for low, up, idx, val in lp.rows:
        h.addRow(low, up, len(idx), np.array(idx, dtype=np.int32), np.array(val))
    h.run()
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
    for s, g in enumerate(cover.segs):
        if s in lp.p and values[lp.p[s]] > 0.5:
            plan.setdefault(g.start, []).append((g.value, PAGE))
        elif s in lp.r and values[lp.r[s]] > 0.5:
            plan.setdefault(g.start, []).append((g.value, DROP))
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
        if u not in engine.in_ram:
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
        if 0 <= t < len(out):
            out[t] -= over
    return out


def _left(best: _Best, options: ScaleOptions) -> float:
    return options.time_limit_s - (time.perf_counter() - best.began)


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
    cover = build_cover(problem, an)
    n = len(problem.nodes)
    budget = np.full(n, problem.budget_bytes, dtype=np.int64)
    bound = plain + _bound(problem, cover, best, options, latency, norm, budget) * norm
    primal_status = _improve(problem, cover, best, options, latency, norm, budget, bound)
    if best.schedule is None:
        raise PoetError(f"scheduler '{NAME}' found no schedule within the budget ({primal_status})")
    return _finish(best, bound, plain, primal_status, cover)


def _bound(
    problem: SchedulingProblem,
    cover: Cover,
    best: _Best,
    options: ScaleOptions,
    latency: bool,
    norm: float,
    budget: np.ndarray,
) -> float:
    lp = _columns(problem, cover, False, latency, norm)
    if not _rows(problem, cover, lp, False, budget):
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order: "
            f"values that can be neither paged out nor recomputed must stay resident"
        )
    limit = max(0.5, 0.3 * _left(best, options))
    solved = _solve(lp, limit, options)
    if not solved.feasible:
        raise PoetError(
            f"no schedule exists within the RAM budget {problem.budget_bytes} bytes in the problem's order "
            f"(the segment relaxation is infeasible)"
        )
    if solved.values is not None:
        plan = plan_from(cover, lp, solved.values)
        _try(problem, best, options, lambda: decode(problem, plan)[0], "bound-model plan")
    return solved.bound


def _improve(
    problem: SchedulingProblem,
    cover: Cover,
    best: _Best,
    options: ScaleOptions,
    latency: bool,
    norm: float,
    budget: np.ndarray,
    bound: float,
) -> str:
    status = "not run"
    for k in range(options.rounds):
        if best.cost <= bound * (1 + options.gap_rel) or _left(best, options) < 0.2:
            break
        lp = _columns(problem, cover, True, latency, norm)
        if not _rows(problem, cover, lp, True, budget):
            status = f"primal round {k}: a tightened stage cannot fit"
            break
        solved = _solve(lp, _left(best, options) / max(1, options.rounds - k), options)
        status = f"primal round {k}: {solved.status}"
        if solved.values is None:
            break
        schedule, overflow = decode(problem, plan_from(cover, lp, solved.values))
        _try(problem, best, options, lambda schedule=schedule: schedule, f"primal plan, round {k}")  # type: ignore[misc]
        if not overflow:
            break
        budget = _tighten(budget, overflow)
    return status


def _finish(best: _Best, bound: float, plain: float, status: str, cover: Cover) -> Schedule:
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
    )
    steps = best.schedule.steps
    return Schedule(tuple(steps), NAME, info)
