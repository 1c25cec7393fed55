"""The column/row model every LP and MIP of scheduler "scale" is written in, and its solve by HiGHS.

:class:`LpModel` holds one model's columns (costs, bounds, which are continuous) and rows, plus the
segment-cover bookkeeping the model builders share (which column is which option, the page-out
columns, the RAM a column adds at a stage). The builders fill it: the bound and primal models
(:mod:`poet_edge.schedulers.segment_lp`), the strict bound model
(:mod:`poet_edge.schedulers.segment_strict`), the gap rows (:mod:`poet_edge.schedulers.segment_gap`)
and the interval bound (:mod:`poet_edge.schedulers.interval_bound`). :func:`solve_lp` runs HiGHS on it
(the MIP or its LP relaxation, a cutoff proof, a node limit) through
:mod:`poet_edge.highs` and returns an :class:`LpResult`. :func:`node_costs` gives the
per-node cost vectors the objective is written in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from poet_edge import highs
from poet_edge.highs import Csr
from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.segment_cover import Option

if TYPE_CHECKING:
    from poet_edge.schedulers.scale import ScaleOptions


@dataclass
class LpModel:
    """Columns and rows of one model, ready for HiGHS (:func:`solve_lp`, through :mod:`poet_edge.highs`).
    Columns are binary in [0, 1] unless listed in ``cont`` / ``bounds``; a row is (lower, upper, column
    indices, coefficients)."""

    cost: list[float] = field(default_factory=list)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    opts: list[Option] = field(default_factory=list)  # column j < len(opts): option j
    z: dict[int, int] = field(default_factory=dict)
    by_seg: dict[int, list[int]] = field(default_factory=dict)
    ram: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # stage -> (column, bytes it adds)
    cont: set[int] = field(default_factory=set)  # continuous columns (the others are binary)
    bounds: dict[int, tuple[float, float]] = field(default_factory=dict)  # column -> bounds, if not [0, 1]
    csr: Csr | None = None  # the rows as arrays (rows_csr), in place of ``rows``

    def col(self, cost: float, continuous: bool = False, bounds: tuple[float, float] = (0.0, 1.0)) -> int:
        """Adds a column with objective coefficient ``cost``; returns its index."""
        self.cost.append(cost)
        if continuous:
            self.cont.add(len(self.cost) - 1)
        if bounds != (0.0, 1.0):
            self.bounds[len(self.cost) - 1] = bounds
        return len(self.cost) - 1


def node_costs(problem: SchedulingProblem, latency: bool) -> tuple[list[float], list[float], list[float]]:
    """Per node: (compute, page-in, page-out) cost, in seconds if ``latency`` else in joules."""
    nodes = problem.nodes
    if latency:
        return [n.compute_s for n in nodes], [n.page_in_s for n in nodes], [n.page_out_s for n in nodes]
    return [n.compute_j for n in nodes], [n.page_in_j for n in nodes], [n.page_out_j for n in nodes]


@dataclass(frozen=True)
class LpResult:
    """What :func:`solve_lp` found: HiGHS's status, the objective and dual bound (scaled as the model's
    costs) and the column values."""

    status: str
    feasible: bool  # the model has a point (False: proven infeasible)
    optimal: bool
    objective: float | None  # scaled, None without a solution
    bound: float  # scaled dual bound (0 when unknown)
    values: np.ndarray | None
    reduced: tuple[float, np.ndarray] | None = None  # an LP's safe bound and reduced costs (``with_reduced``)


def cost_scale(cost: list[float]) -> float:
    """The power of two that puts the largest absolute cost in [0.5, 1) (1.0 without a nonzero cost).
    The models' costs are the plain pass's shares (``Run.norm``): a node's recomputation or page-in can
    be 1e-7 of it, at HiGHS's dual feasibility tolerance, and HiGHS then spends its root in cut rounds
    (POET's resnet18 problem is an example: the interval model's refinement rounds take much less CPU
    time with the costs scaled). A power of two scales exactly both ways."""
    top = max((abs(c) for c in cost), default=0.0)
    if top == 0.0 or not math.isfinite(top):
        return 1.0
    return math.ldexp(1.0, -math.frexp(top)[1])  # frexp: top = m * 2**e with m in [0.5, 1)


def solve_lp(
    lp: LpModel,
    time_limit: float,
    options: ScaleOptions,
    integer: bool = True,
    cutoff: float | None = None,
    on_bound: Callable[[float], None] | None = None,
    stop: Callable[[], bool] | None = None,
    with_reduced: bool = False,
    reduced: tuple[float, np.ndarray] | None = None,
    first_point: bool = False,
    nodes: int | None = None,
    checks: int | None = None,
) -> LpResult:
    """HiGHS on the model (its LP relaxation unless ``integer``). With ``cutoff`` (scaled), HiGHS looks
    only for points cheaper than it (as :func:`poet_edge.schedulers.stage_model.solve`): the bound is
    then at most ``cutoff``, and ``cutoff`` itself when the search ends with no cheaper point. Such a
    proof on a bound model wants no point: HiGHS runs without its heuristics (``PROOF_OPTIONS``), after
    :meth:`~poet_edge.highs.Solver.fix_by_reduced_cost` (both shorten the proof, and its presolve, on
    bert_tiny at 50%, the split model). ``on_bound``: told HiGHS's MIP dual bound
    (scaled; with ``cutoff``, at most that) whenever it checks for an interrupt; ``stop()``: asked then
    too, the solve ends once it says True (status "Interrupted by user"). ``with_reduced``: an LP
    relaxation also returns its :meth:`~poet_edge.highs.Solver.safe_bound` and reduced costs
    (``LpResult.reduced``); ``reduced``: a proof is given those of the same model (its LP not solved again).
    ``first_point``: a proof ends at the first point below the cutoff (it has failed then). ``nodes``: at
    most this many branch-and-bound nodes (HiGHS's ``mip_max_nodes``, a deterministic limit; the time
    limit is then only a safety stop); ``checks``: at most this many of HiGHS's interrupt checks
    (``highs.Options.check_limit``, deterministic too), which bound its root: the node limit does not."""
    if not lp.cost:
        return LpResult("empty", True, True, 0.0, 0.0, np.zeros(0))
    solver = highs.Solver(
        highs.Options(
            threads=options.threads or None,
            time_limit=max(0.05, time_limit),
            node_limit=nodes,
            check_limit=checks,
            # a negative gap (tests: a run whose gap never closes) is one HiGHS refuses: its default stays
            mip_rel_gap=options.inner_gap if options.inner_gap >= 0 else None,
            cutoff=cutoff,
            output=options.msg,
        )
    )
    ncol = len(lp.cost)
    low, up = zip(*(lp.bounds.get(j, (0.0, 1.0)) for j in range(ncol)), strict=True)
    ints = [integer and j not in lp.cont for j in range(ncol)]
    # a plain solve sees its costs scaled by a power of two (exact both ways); a proof's cutoff and
    # reduced costs are in the model's own units, so it sees them as they are
    scale = cost_scale(lp.cost) if cutoff is None and reduced is None and not with_reduced else 1.0
    costs = lp.cost if scale == 1.0 else [c * scale for c in lp.cost]
    # HiGHS refusing the rows (e.g. one naming a column twice) is a HighsError; a warning means the rows
    # are in and HiGHS dropped coefficients below its small_matrix_value (1e-9), as in dense graphs' tiny
    # relative sizes
    # the rows scaled: HiGHS 1.16.0's presolve loops on some of these MIPs unscaled (highs.row_scaled)
    solver.load(highs.Model.of(costs, lp.rows if lp.csr is None else lp.csr, low, up, ints, scaled=True))
    if cutoff is not None and integer:  # a proof: no point wanted, fewer columns free
        solver.set(highs.PROOF_OPTIONS)
        began = time.perf_counter()
        fixed = solver.fix_by_reduced_cost(cutoff, reduced)
        if fixed is not None and fixed[0] > cutoff + highs.CUTOFF_TOL:  # the LP alone proves it
            return LpResult("cutoff by LP", True, False, None, cutoff, None)
        solver.set_time_limit(max(0.05, time_limit - (time.perf_counter() - began)))
    found = first_point and cutoff is not None
    watch: highs.Watch | None = None
    if (on_bound is not None or stop is not None or found) and integer:

        def check(p: highs.Progress) -> bool:
            if on_bound is not None and math.isfinite(p.dual):
                on_bound(p.dual / scale if cutoff is None else min(p.dual, cutoff))
            return bool((stop is not None and stop()) or (found and cutoff is not None and p.primal < cutoff))

        watch = check

    r = solver.run(watch=watch)
    infeasible, optimal = r.infeasible, r.optimal
    obj = None if r.objective is None else r.objective / scale
    bound = r.bound / scale if integer else (obj if optimal else 0.0)
    if cutoff is not None:  # a point above the cutoff may be reported optimal: the proof covers only below
        if bound is not None and math.isfinite(bound):
            bound = min(bound, cutoff)
        else:
            bound = cutoff if optimal or infeasible else 0.0
        infeasible, optimal = False, optimal and obj is not None and obj < cutoff
    if bound is None or not math.isfinite(bound):
        bound = 0.0
    if optimal and obj is not None and not integer:
        bound = obj
    got = solver.safe_bound() if with_reduced and not integer and optimal else None
    status = "check limit reached" if r.limit == "checks" else r.status  # HiGHS: "Interrupted by user"
    return LpResult(status, not infeasible, optimal, obj, max(0.0, bound), r.values, got)
