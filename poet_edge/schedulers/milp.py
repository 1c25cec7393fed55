"""The POET MILP: joint rematerialization and paging (Checkmate's stage model plus a storage tier).

Stage t computes node t, possibly after recomputing earlier nodes (see
:mod:`poet_edge.schedulers.milp_decode` for the stage model and how solutions become schedules).
Variables, for i <= t (only pairs that can matter are created):

* binaries R[t,i] (i < t; R[t,t] = 1 is a constant), S_RAM[t,i], M_in[t,i], M_out[t,i];
* continuous S_SD[t,i] in [0,1] (storage holds i), FREE[t,i,k] in [0,1] (i leaves RAM right after
  stage t computes k; k's inputs and k itself), U[t,k] (RAM after computing k, scaled by the budget).

Constraints (what POET has, plus what it leaves out):

* dependencies: R[t,v] <= S_RAM[t,u] + M_in[t,u] + R[t,u] for every edge u -> v;
* one copy: S_RAM[t,i] + M_in[t,i] + R[t,i] <= 1; keep: S_RAM[t+1,i] <= S_RAM[t,i] + M_in[t,i] + R[t,i];
* a value resident at a stage start is used in it or kept (removes only dominated points, makes the
  RAM count exact): S_RAM[t,i] + M_in[t,i] <= S_RAM[t+1,i] + sum of R[t,j] over consumers j;
* storage: S_SD[t+1,i] <= S_SD[t,i] + M_out[t,i], M_in[t,i] <= S_SD[t,i], M_out[t,i] <= what is in
  RAM in stage t, each value written at most once, sum of out_bytes written <= storage_bytes;
* RAM: U[t,first] = bytes resident or paged in at the stage start (+ the first compute);
  U[t,k] = U[t,k-] - freed after k- + R[t,k] out_bytes(k); U[t,k] + R[t,k] workspace(k) <= budget - fixed.
  FREE[t,i,k] <= R[t,k], <= 1 - S_RAM[t+1,i], <= 1 - R[t,j] for each later consumer j of i; only
  upper bounds are needed (freeing less only over-counts RAM), so FREE is continuous;
* (a, b) in invalidated_by: a is not computed in any stage after b (in stage b it runs before b);
  non-recomputable nodes only in their own stage;
* optional runtime budget: computes + page-ins + page-outs (in seconds) <= max_latency_s.

Objective: energy (or latency) of computes, page-ins and page-outs. Costs are divided by the cost of
one plain pass and bytes by the budget, so coefficients stay near 1 (unscaled joules made both HiGHS
and CBC report wrong optima). PuLP builds the model; HiGHS solves it through :mod:`poet_edge.highs`
(the model passed in column/row form as PuLP's own HiGHS interface would build it; the best baseline
is given as MIP start, and a result whose values do not give HiGHS's objective is solved again
without it: :meth:`~poet_edge.highs.Solver.run`);
CBC through ``PULP_CBC_CMD`` (warm start via PuLP, status and bound read from CBC's log).

Progress: ``MilpOptions.on_progress(elapsed_s, incumbent, bound, gap)`` is called while HiGHS solves
(HiGHS's MIP interrupt and improving-solution callbacks, through :mod:`poet_edge.highs`; it only
observes), in problem units like the final objective, ``gap`` relative to the whole objective as in
``Schedule.report``. HiGHS only: CBC runs as a subprocess and reports nothing until it ends.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pulp

from poet_edge import highs
from poet_edge.errors import PoetError
from poet_edge.memory_floor import check_budget
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import PageIn, PageOut, Schedule, SolveReport
from poet_edge.schedulers.milp_decode import Pair, Stages, StageSolution, decode, encode, stages
from poet_edge.simulator import InvalidSchedule, SimResult, simulate

Triple = tuple[int, int, int]
GAP_REL = 1e-6  # the MILP's relative gap when MilpOptions.gap_rel is None
ProgressCallback = Callable[[float, float | None, float | None, float | None], None]


@dataclass(frozen=True)
class MilpOptions:
    """How to build and solve the MILP. ``time_limit_s`` None: no limit. ``gap_rel``: stop once the
    schedule is proven within this fraction of the lower bound, (cost - bound) / cost as
    ``Schedule.report``'s gap (None: the solver's default, ``GAP_REL`` here; scale has its own).
    ``on_progress(elapsed_s, incumbent, bound, gap)``: live solver progress (HiGHS only; see the
    module docstring)."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float | None = 60.0
    threads: int | None = None
    solver: str = "highs"  # highs | cbc
    paging: bool = True
    remat: bool = True
    warm_start: bool = True
    gap_rel: float | None = None
    msg: bool = False
    on_progress: ProgressCallback | None = field(default=None, compare=False, repr=False)
    effort: str = "default"  # --effort: scale's work (schedulers.effort); the MILP ignores it
    # scale: stop once the lower bound is above this cost (a compared choice whose schedule cannot be the
    # cheapest: compiler._compare); the MILP ignores it
    stop_above: float | None = None


@dataclass
class MilpModel:
    """The PuLP model and its variables (off-diagonal R only; R[t,t] = 1 is a constant)."""

    lp: pulp.LpProblem
    R: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    S: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    MI: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    MO: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    SD: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    FREE: dict[Triple, pulp.LpVariable] = field(default_factory=dict)
    U: dict[Pair, pulp.LpVariable] = field(default_factory=dict)
    offset: float = 0.0  # scaled objective of the diagonal computes (a constant)
    norm: float = 1.0  # objective unit: cost of one plain pass
    mem: float = 1.0  # byte unit: budget - fixed

    @property
    def binaries(self) -> int:
        return len(self.R) + len(self.S) + len(self.MI) + len(self.MO)


@dataclass(frozen=True)
class _Outcome:
    """What the solver said: its own status, whether it has a solution, values in problem units."""

    status: str
    solution: bool
    optimal: bool
    infeasible: bool
    objective: float | None
    bound: float | None
    seconds: float


# -- building ------------------------------------------------------------------------------------------


def _costs(problem: SchedulingProblem, latency: bool) -> tuple[list[float], list[float], list[float]]:
    nodes = problem.nodes
    if latency:
        return ([n.compute_s for n in nodes], [n.page_in_s for n in nodes], [n.page_out_s for n in nodes])
    return ([n.compute_j for n in nodes], [n.page_in_j for n in nodes], [n.page_out_j for n in nodes])


def _norm(values: list[float]) -> float:
    total = sum(values)
    return total if total > 0 else 1.0


def _var(
    lp: pulp.LpProblem,
    name: str,
    low: float | None = 0,
    up: float | None = None,
    cat: str = pulp.LpContinuous,
) -> pulp.LpVariable:
    if hasattr(lp, "add_variable"):  # PuLP >= 3.3: variables belong to the model
        return lp.add_variable(name, low, up, cat=cat)
    return pulp.LpVariable(name, low, up, cat=cat)


def _rows(lp: pulp.LpProblem) -> list[pulp.LpConstraint]:
    rows = lp.constraints
    return list(rows()) if callable(rows) else list(rows.values())


def _avail(m: MilpModel, t: int, i: int) -> pulp.LpAffineExpression:
    """1 when value i is in RAM at some point of stage t (resident, paged in or computed)."""
    if i == t:
        return pulp.LpAffineExpression(constant=1)
    return pulp.lpSum(v for v in (m.S.get((t, i)), m.MI.get((t, i)), m.R.get((t, i))) if v is not None)


def _computes(m: MilpModel, t: int) -> list[int]:
    return sorted([i for (s, i) in m.R if s == t] + [t])


def _rt(m: MilpModel, t: int, k: int) -> pulp.LpAffineExpression:
    return pulp.LpAffineExpression(constant=1) if k == t else pulp.LpAffineExpression(m.R[(t, k)])


def _add_variables(m: MilpModel, st: Stages) -> None:
    bins = pulp.LpBinary
    for i in range(st.n):
        for t in range(i + 1, st.need[i] + 1):
            m.S[(t, i)] = _var(m.lp, f"S_{t}_{i}", 0, 1, bins)
            if t <= st.last_run[i]:
                m.R[(t, i)] = _var(m.lp, f"R_{t}_{i}", 0, 1, bins)
            if st.pageable[i]:
                m.MI[(t, i)] = _var(m.lp, f"MI_{t}_{i}", 0, 1, bins)
                m.SD[(t, i)] = _var(m.lp, f"SD_{t}_{i}", 0, 1)
        if st.pageable[i]:
            for t in range(i, st.need[i]):
                m.MO[(t, i)] = _var(m.lp, f"MO_{t}_{i}", 0, 1, bins)


def _add_flow(m: MilpModel, st: Stages) -> None:
    lp = m.lp
    for (t, i), s in m.S.items():
        sources = [v for v in (s, m.MI.get((t, i)), m.R.get((t, i))) if v is not None]
        if len(sources) > 1:
            lp += pulp.lpSum(sources) <= 1, f"one_{t}_{i}"
        if t - 1 > i:
            lp += s <= _avail(m, t - 1, i), f"keep_{t}_{i}"
        if t not in st.users[i]:
            here = [s] + [v for v in [m.MI.get((t, i))] if v is not None]
            uses = [m.R[(t, j)] for j in st.users[i] if (t, j) in m.R]
            nxt = [m.S[(t + 1, i)]] if (t + 1, i) in m.S else []
            lp += pulp.lpSum(here) <= pulp.lpSum(uses + nxt), f"use_{t}_{i}"
    for t in range(st.n):
        for v in _computes(m, t):
            for u in st.preds[v]:
                lp += _rt(m, t, v) <= _avail(m, t, u), f"dep_{t}_{u}_{v}"


def _add_storage(m: MilpModel, problem: SchedulingProblem) -> None:
    lp = m.lp
    for (t, i), sd in m.SD.items():
        prev = [v for v in (m.SD.get((t - 1, i)), m.MO.get((t - 1, i))) if v is not None]
        lp += sd <= pulp.lpSum(prev), f"sd_{t}_{i}"
        lp += m.MI[(t, i)] <= sd, f"in_{t}_{i}"
    once: dict[int, list[pulp.LpVariable]] = {}
    for (t, i), mo in m.MO.items():
        once.setdefault(i, []).append(mo)
        if t > i:
            lp += mo <= _avail(m, t, i), f"out_{t}_{i}"
    for i, outs in once.items():
        if len(outs) > 1:
            lp += pulp.lpSum(outs) <= 1, f"once_{i}"
    cap = problem.storage_bytes
    if cap is not None and m.MO:
        total = sum(problem.nodes[i].out_bytes for i in once)
        if total > cap:
            scale = float(cap) if cap > 0 else 1.0
            lp += (
                pulp.lpSum(problem.nodes[i].out_bytes / scale * v for (_, i), v in m.MO.items())
                <= cap / scale,
                "storage",
            )


def _add_memory(m: MilpModel, problem: SchedulingProblem, st: Stages) -> None:
    lp = m.lp
    size = [n.out_bytes / m.mem for n in problem.nodes]
    for t in range(st.n):
        prev: int | None = None
        for k in _computes(m, t):
            u = m.U[(t, k)] = _var(m.lp, f"U_{t}_{k}", 0)
            if prev is None:
                start = [(v, size[i]) for (s, i), v in list(m.S.items()) + list(m.MI.items()) if s == t]
                rhs = pulp.LpAffineExpression(start) + size[k] * _rt(m, t, k)
            else:
                freed = [
                    (m.FREE[(t, i, prev)], size[i]) for i in (*st.preds[prev], prev) if (t, i, prev) in m.FREE
                ]
                rhs = m.U[(t, prev)] - pulp.LpAffineExpression(freed) + size[k] * _rt(m, t, k)
            lp += u == rhs, f"mem_{t}_{k}"
            ws = problem.nodes[k].workspace_bytes / m.mem
            lp += u + ws * _rt(m, t, k) <= 1, f"cap_{t}_{k}"
            _add_free(m, problem, st, t, k)
            prev = k


def _add_free(m: MilpModel, problem: SchedulingProblem, st: Stages, t: int, k: int) -> None:
    for i in sorted({*st.preds[k], k}):
        later = [j for j in st.users[i] if k < j <= t]
        if problem.nodes[i].out_bytes == 0 or t in later:
            continue
        f = m.FREE[(t, i, k)] = _var(m.lp, f"F_{t}_{i}_{k}", 0, 1)
        if k != t:
            m.lp += f <= m.R[(t, k)], f"fr_{t}_{i}_{k}"
        if (t + 1, i) in m.S:
            m.lp += f + m.S[(t + 1, i)] <= 1, f"fk_{t}_{i}_{k}"
        for j in later:
            if (t, j) in m.R:
                m.lp += f + m.R[(t, j)] <= 1, f"fu_{t}_{i}_{k}_{j}"


def _cost_expr(
    m: MilpModel, costs: tuple[list[float], list[float], list[float]], norm: float
) -> pulp.LpAffineExpression:
    comp, pin, pout = costs
    terms = [(v, comp[i] / norm) for (_, i), v in m.R.items()]
    terms += [(v, pin[i] / norm) for (_, i), v in m.MI.items()]
    terms += [(v, pout[i] / norm) for (_, i), v in m.MO.items()]
    return pulp.LpAffineExpression([(v, c) for v, c in terms if c != 0])


def build(problem: SchedulingProblem, st: Stages, options: MilpOptions) -> MilpModel:
    """The PuLP model of ``problem`` in the stage model ``st``."""
    m = MilpModel(pulp.LpProblem("poet", pulp.LpMinimize))
    m.mem = float(problem.budget_bytes - problem.fixed_bytes) or 1.0
    _add_variables(m, st)
    costs = _costs(problem, options.objective == "latency")
    m.norm = _norm(costs[0])
    m.offset = sum(costs[0]) / m.norm
    m.lp += _cost_expr(m, costs, m.norm)
    _add_flow(m, st)
    _add_storage(m, problem)
    _add_memory(m, problem, st)
    if problem.max_latency_s is not None:
        secs = _costs(problem, True)
        norm = _norm(secs[0])
        m.lp += _cost_expr(m, secs, norm) <= problem.max_latency_s / norm - sum(secs[0]) / norm, "runtime"
    return m


# -- solving -------------------------------------------------------------------------------------------


def _highs_model(lp: pulp.LpProblem) -> tuple[highs.Model, list[pulp.LpVariable]]:
    """The PuLP model in column/row form, as PuLP's own HiGHS interface builds it: columns in PuLP's
    order (``lp.variables()``, by name) with their objective coefficients, bounds and integrality, rows
    in the order they were added without zero coefficients. Returns the model and its columns."""
    if lp.sense != pulp.LpMinimize:
        raise ValueError("the MILP is a minimization")
    variables = lp.variables()
    index = {v.name: j for j, v in enumerate(variables)}
    inf = math.inf
    rows: list[highs.Row] = []
    for c in _rows(lp):
        items = [(index[v.name], float(a)) for v, a in c.items() if a != 0]
        low, up = c.getLb(), c.getUb()
        rows.append(
            (
                -inf if low is None else low,
                inf if up is None else up,
                [j for j, _ in items],
                [a for _, a in items],
            )
        )
    model = highs.Model.of(
        [lp.objective.get(v, 0.0) for v in variables],
        rows,
        [-inf if v.lowBound is None else v.lowBound for v in variables],
        [inf if v.upBound is None else v.upBound for v in variables],
        [v.cat == pulp.LpInteger for v in variables],
    )
    return model, variables


def _watchers(report: Callable[[float, float, float], None]) -> Callable[[highs.Progress], bool]:
    """Forwards HiGHS's MIP progress to ``report`` when it changes (or every second), read-only."""
    last: list[float] = [float("-inf"), math.nan, math.nan]

    def on_event(p: highs.Progress) -> bool:
        if (p.primal, p.dual) != (last[1], last[2]) or p.seconds - last[0] >= 1.0:
            last[:] = [p.seconds, p.primal, p.dual]
            report(p.seconds, p.primal, p.dual)
        return False  # it only observes

    return on_event


def _progress_reporter(m: MilpModel, on_progress: ProgressCallback) -> Callable[[float, float, float], None]:
    """Converts HiGHS's scaled primal/dual bounds to problem units (as for the final objective)."""
    plain = m.offset * m.norm

    def report(elapsed: float, primal: float, dual: float) -> None:
        inc = (primal + m.offset) * m.norm if math.isfinite(primal) else None
        bound = max((dual + m.offset) * m.norm, plain) if math.isfinite(dual) else None
        if inc is not None and bound is not None:
            bound = min(bound, inc)
        gap = None if inc is None or bound is None else (inc - bound) / max(abs(inc), 1e-300)
        on_progress(elapsed, inc, bound, gap)

    return report


def solver_gaps(m: MilpModel, options: MilpOptions) -> dict[str, float]:
    """The solver's gaps. Its objective leaves out the plain pass (``m.offset``), so a gap asked for on
    the whole cost is given as the same relative gap on the rest, or that fraction of the plain pass
    as an absolute gap, whichever the solver reaches first: either one has the whole within it."""
    if options.gap_rel is None:
        return {"gapRel": GAP_REL, "gapAbs": 1e-9}
    return {"gapRel": options.gap_rel, "gapAbs": max(1e-9, options.gap_rel * m.offset)}


def _solve_highs(m: MilpModel, options: MilpOptions, start: dict[str, float] | None) -> tuple[_Outcome, str]:
    began = time.perf_counter()
    was_none, dummy = m.lp.fixObjective()  # as pulp's solve: a constant objective gets a dummy column
    try:
        model, variables = _highs_model(m.lp)
    finally:
        m.lp.restoreObjective(was_none, dummy)
    gaps = solver_gaps(m, options)
    tolerances = (("mip_feasibility_tolerance", 1e-9), ("primal_feasibility_tolerance", 1e-9))
    opts = highs.Options(
        threads=options.threads,
        time_limit=options.time_limit_s,
        mip_rel_gap=gaps["gapRel"] if gaps["gapRel"] >= 0 else None,  # HiGHS refuses a negative gap
        mip_abs_gap=gaps["gapAbs"],
        output=options.msg,
        extra=tolerances,
    )
    watch = (
        _watchers(_progress_reporter(m, options.on_progress)) if options.on_progress and m.binaries else None
    )
    values = [start.get(v.name, 0.0) for v in variables] if start else None
    got = highs.solve(model, opts, values, watch, watch)
    seconds = time.perf_counter() - began
    if got.values is not None:
        for v, x in zip(variables, got.values, strict=True):
            v.varValue = float(x)
    warm = "none" if values is None else f"setSolution {got.start}"
    if got.restarted:
        warm += "; HiGHS returned values that do not give its objective, solved without it"
    ok = got.trusted  # else neither the values nor the bound can be trusted
    has = got.values is not None and ok
    obj = (got.objective + m.offset) * m.norm if has and got.objective is not None else None
    bound = got.bound if m.binaries else got.objective
    bound_out = None if bound is None or not ok or not math.isfinite(bound) else (bound + m.offset) * m.norm
    return _Outcome(got.status, has, got.optimal and ok, got.infeasible, obj, bound_out, seconds), warm


def _cbc_log(path: Path) -> tuple[str, float | None]:
    text = path.read_text(errors="replace") if path.exists() else ""
    result = re.findall(r"^Result - (.+)$", text, re.M)
    bound = re.findall(r"^Lower bound:\s+(\S+)", text, re.M)
    try:
        value = float(bound[-1]) if bound else None
    except ValueError:
        value = None
    return (result[-1].strip() if result else "unknown"), value


def _solve_cbc(m: MilpModel, options: MilpOptions, start: dict[str, float] | None) -> tuple[_Outcome, str]:
    if start:
        for v in m.lp.variables():
            v.setInitialValue(start.get(v.name, 0.0))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        log = Path(tmp) / "cbc.log"
        solver = pulp.PULP_CBC_CMD(
            msg=options.msg,
            timeLimit=options.time_limit_s,
            threads=options.threads,
            **solver_gaps(m, options),
            warmStart=bool(start),
            logPath=str(log),
        )
        began = time.perf_counter()
        m.lp.solve(solver)
        seconds = time.perf_counter() - began
        status, bound = _cbc_log(log)
    has = m.lp.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    optimal = m.lp.sol_status == pulp.LpSolutionOptimal and status.startswith("Optimal")
    infeasible = m.lp.status == pulp.LpStatusInfeasible
    value = pulp.value(m.lp.objective) if has else None
    obj = ((value or 0.0) + m.offset) * m.norm if has else None
    if optimal and bound is None:
        bound = value
    bound_out = None if bound is None else (bound + m.offset) * m.norm
    warm = "initial values" if start else "none"
    return _Outcome(status, has, optimal, infeasible, obj, bound_out, seconds), warm


def _solve(m: MilpModel, options: MilpOptions, start: dict[str, float] | None) -> tuple[_Outcome, str]:
    if options.solver == "highs":
        return _solve_highs(m, options, start)
    if options.solver == "cbc":
        return _solve_cbc(m, options, start)
    raise PoetError(f"unknown MILP solver '{options.solver}'; available: highs, cbc")


# -- solutions -----------------------------------------------------------------------------------------


def _rounded(m: MilpModel, st: Stages) -> StageSolution:
    def on(d: dict[Pair, pulp.LpVariable]) -> frozenset[Pair]:
        return frozenset(k for k, v in d.items() if round(v.varValue or 0.0) == 1)

    diag = {(t, t) for t in range(st.n)}
    return StageSolution(on(m.R) | diag, on(m.S), on(m.MI), on(m.MO))


def _assign(
    m: MilpModel, problem: SchedulingProblem, st: Stages, sol: StageSolution
) -> dict[str, float] | None:
    """Column values of ``sol`` (FREE at its largest allowed value, U by its recurrence); None when
    ``sol`` uses a pair the model does not have."""
    groups = (
        (sol.compute - {(t, t) for t in range(st.n)}, m.R),
        (sol.resident, m.S),
        (sol.page_in, m.MI),
        (sol.page_out, m.MO),
    )
    if any(not pairs <= d.keys() for pairs, d in groups):
        return None
    values = {v.name: float(k in pairs) for pairs, d in groups for k, v in d.items()}
    stored = {i: t for t, i in sol.page_out}
    for (t, i), v in m.SD.items():
        values[v.name] = float(i in stored and stored[i] < t)
    for (t, i, k), f in m.FREE.items():
        later = any((t, j) in sol.compute for j in st.users[i] if k < j <= t)
        values[f.name] = float((t, k) in sol.compute and (t + 1, i) not in sol.resident and not later)
    for t in range(st.n):
        level, prev = 0.0, None
        for k in _computes(m, t):
            if prev is None:
                level = sum(problem.nodes[i].out_bytes for (s, i) in sol.resident | sol.page_in if s == t)
            else:
                level -= sum(
                    problem.nodes[i].out_bytes * values.get(f"F_{t}_{i}_{prev}", 0.0)
                    for i in {*st.preds[prev], prev}
                )
            level += problem.nodes[k].out_bytes * float((t, k) in sol.compute)
            values[m.U[(t, k)].name] = level / m.mem
            prev = k
    return values


def _violations(m: MilpModel, values: dict[str, float], tol: float = 1e-9) -> list[str]:
    bad = []
    for c in _rows(m.lp):
        name = c.name
        lhs = sum(values.get(v.name, 0.0) * a for v, a in c.items()) + c.constant
        if (
            (c.sense == pulp.LpConstraintLE and lhs > tol)
            or (c.sense == pulp.LpConstraintGE and lhs < -tol)
            or (c.sense == pulp.LpConstraintEQ and abs(lhs) > tol)
        ):
            bad.append(name)
    return bad


# -- baselines and the entry point ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    name: str
    schedule: Schedule
    sim: SimResult
    cost: float


def _metric(sim: SimResult, options: MilpOptions) -> float:
    return sim.latency_s if options.objective == "latency" else sim.energy_j


def _admissible(problem: SchedulingProblem, sim: SimResult, schedule: Schedule, options: MilpOptions) -> bool:
    if not options.paging and any(isinstance(s, (PageIn, PageOut)) for s in schedule.steps):
        return False
    if not options.remat and sim.n_recomputations:
        return False
    limit = problem.max_latency_s
    return limit is None or sim.latency_s <= limit * (1 + 1e-9)


def best_baseline(problem: SchedulingProblem, options: MilpOptions) -> _Candidate | None:
    """The cheapest baseline schedule that succeeds and respects the options (None if none does)."""
    from poet_edge.schedulers import BASELINES, SCHEDULERS

    best: _Candidate | None = None
    for name in BASELINES:
        try:
            schedule = SCHEDULERS[name](problem)
            sim = simulate(problem, schedule)
        except PoetError:
            continue
        if not _admissible(problem, sim, schedule, options):
            continue
        cand = _Candidate(name, schedule, sim, _metric(sim, options))
        if best is None or cand.cost < best.cost:
            best = cand
    return best


def _why_unpageable(problem: SchedulingProblem, options: MilpOptions, i: int) -> str:
    node = problem.nodes[i]
    if not options.paging:
        return "paging is disabled"
    if not node.pageable:
        return "marked not pageable"
    return f"above the storage capacity {problem.storage_bytes} bytes"


def pinned_check(problem: SchedulingProblem, st: Stages, options: MilpOptions) -> None:
    """Raise PoetError when values that can be neither paged out nor recomputed later must stay
    resident across a stage whose own compute then exceeds the budget (a cheap, exact-cause test)."""
    nodes = problem.nodes
    for t in range(st.n):
        pinned = [
            i
            for i in range(t)
            if not st.pageable[i]
            and st.last_run[i] < t
            and any(j > t for j in st.users[i])
            and i not in st.preds[t]
        ]
        need = (
            problem.fixed_bytes
            + nodes[t].out_bytes
            + nodes[t].workspace_bytes
            + sum(nodes[u].out_bytes for u in st.preds[t])
            + sum(nodes[i].out_bytes for i in pinned)
        )
        if need > problem.budget_bytes:
            shown = ", ".join(nodes[i].name for i in pinned[:8]) + (" ..." if len(pinned) > 8 else "")
            why = "; ".join(sorted({_why_unpageable(problem, options, i) for i in pinned}))
            raise PoetError(
                f"no schedule exists within the RAM budget {problem.budget_bytes} bytes: computing "
                f"{nodes[t].name} needs {need} bytes, because {len(pinned)} value(s) that can be neither "
                f"paged out ({why}) nor recomputed later must stay resident until a later consumer runs "
                f"({shown})"
            )


def _infeasible(problem: SchedulingProblem, st: Stages, options: MilpOptions) -> PoetError:
    """Which bound makes the problem infeasible (memory floor is checked before solving)."""
    plain = sum(n.compute_s for n in problem.nodes)
    limit = problem.max_latency_s
    if limit is not None and plain > limit:
        return PoetError(
            f"runtime budget {limit:g} is below the latency of one plain pass ({plain:g}, "
            f"every node computed once); no schedule exists"
        )
    quick = replace(
        options, time_limit_s=min(options.time_limit_s or 30.0, 30.0), warm_start=False, on_progress=None
    )
    tries = []
    if limit is not None:
        tries.append((replace(problem, max_latency_s=None), f"the runtime budget {limit:g}"))
    if problem.storage_bytes is not None:
        cap = problem.storage_bytes
        tries.append((replace(problem, storage_bytes=None), f"the storage capacity {cap} bytes"))
    for relaxed, what in tries:
        out, _ = _solve(build(relaxed, stages(relaxed, options.paging, options.remat), quick), quick, None)
        if out.solution:
            return PoetError(
                f"no schedule fits {what}: it becomes feasible without that bound "
                f"(RAM budget {problem.budget_bytes} bytes)"
            )
    modes = [w for w, on in (("paging", options.paging), ("recomputation", options.remat)) if not on]
    off = f" with {' and '.join(modes)} disabled" if modes else ""
    return PoetError(
        f"no schedule exists in the stage model within the RAM budget {problem.budget_bytes} "
        f"bytes{off}: values that can be neither recomputed nor paged out must stay resident"
    )


def _info(
    out: _Outcome,
    m: MilpModel,
    options: MilpOptions,
    warm: str,
    fallback: str | None,
    objective: float | None,
) -> SolveReport:
    """Solver details; ``bound`` is never below the plain pass (every node once), ``gap`` is relative
    to the whole objective, ``solver_gap`` is the solver's own (on the part above the plain pass)."""
    plain = m.offset * m.norm
    bound = plain if out.bound is None else max(out.bound, plain)
    if out.optimal and objective is not None:
        bound = min(bound, objective)
    gap = solver_gap = None
    if objective is not None:
        gap = max(0.0, objective - bound) / max(abs(objective), 1e-300)
        extra = objective - plain
        solver_gap = max(0.0, objective - bound) / extra if extra > 1e-12 * max(abs(objective), 1.0) else 0.0
    return SolveReport.of(
        status=out.status,
        objective=objective,
        bound=bound,
        gap=gap,
        solver_gap=solver_gap,
        seconds=round(out.seconds, 3),
        binaries=m.binaries,
        columns=len(m.lp.variables()),
        rows=len(_rows(m.lp)),
        solver=options.solver,
        objective_kind=options.objective,
        warm_start=warm,
        fallback=fallback,
    )


def _warm_start(
    m: MilpModel, problem: SchedulingProblem, st: Stages, base: _Candidate | None
) -> tuple[dict[str, float] | None, str]:
    if base is None:
        return None, "not used: no baseline succeeded"
    sol = encode(problem, st, base.schedule)
    values = None if sol is None else _assign(m, problem, st, sol)
    if values is None:
        return None, f"not used: baseline '{base.name}' does not fit the stage model"
    bad = _violations(m, values)
    if bad:
        return None, f"not used: baseline '{base.name}' breaks {len(bad)} row(s) of the model, e.g. {bad[0]}"
    return values, f"baseline '{base.name}'"


def _fallback(base: _Candidate | None, why: str, info: SolveReport) -> Schedule:
    if base is None:
        raise PoetError(f"MILP found no schedule ({why}) and no baseline scheduler succeeded")
    note = f"{base.name}: {why}"
    return Schedule(base.schedule.steps, "milp", info.with_(fallback=note).with_(schedule_from=base.name))


def schedule_milp(problem: SchedulingProblem, options: MilpOptions | None = None) -> Schedule:
    """Solve the POET MILP for ``problem``; see the module docstring. ``Schedule.report`` carries status,
    objective, bound, gap, seconds, binaries, rows, solver, warm start and fallback."""
    options = options or MilpOptions()
    if options.objective not in ("energy", "latency"):
        raise PoetError(f"unknown objective '{options.objective}'; use energy or latency")
    if not problem.nodes:
        return Schedule((), "milp", SolveReport.of(status="empty problem"))
    if any(
        x < 0
        for n in problem.nodes
        for x in (n.compute_j, n.compute_s, n.page_in_j, n.page_in_s, n.page_out_j, n.page_out_s)
    ):
        raise PoetError("the MILP needs non-negative compute and paging costs")
    check_budget(problem)
    st = stages(problem, options.paging, options.remat)
    pinned_check(problem, st, options)
    base = best_baseline(problem, options)
    m = build(problem, st, options)
    start, warm = _warm_start(m, problem, st, base) if options.warm_start else (None, "off")
    out, start_status = _solve(m, options, start)
    if start is not None:
        warm = f"{warm} (feasible MIP start, {start_status})"
    if out.infeasible:
        raise _infeasible(problem, st, options)
    info = _info(out, m, options, warm, None, out.objective)
    if not out.solution:
        return _fallback(base, f"no MILP solution ({out.status})", info)
    schedule = Schedule(decode(problem, st, _rounded(m, st)).steps, "milp", info)
    try:
        sim = simulate(problem, schedule)
    except InvalidSchedule as err:
        return _fallback(base, f"decoded MILP solution rejected by the simulator: {err}", info)
    if base is not None and base.cost < _metric(sim, options) * (1 - 1e-9):
        return _fallback(base, "cheaper than the MILP incumbent", info)
    return schedule
