"""The one place poet-edge drives HiGHS (highspy): every LP and MIP of the schedulers, POET's MILP and the
arena's exact slot packing go through it, and no other module imports highspy
(``tools/check_highs_imports.py``, run by ``make lint``, fails otherwise).

It owns:

* a quiet instance (:class:`Solver`): output off and HiGHS's banner kept off standard output
  (:func:`quiet_banner`), so ``poet solve --json`` and ``-q`` print only what poet prints;
* the options (:class:`Options`): threads, the deterministic limits (branch-and-bound nodes, simplex
  iterations), the gaps, a cutoff, the random seed, and the time limit, which is only a safety stop;
* the model in column/row form (:class:`Model`: column costs, bounds and integrality, rows as CSR
  arrays), loaded in one call per part;
* a MIP start, and a run on a fresh thread pool (HiGHS keeps one pool per process and refuses another
  thread count on it), checked: a result whose values do not give HiGHS's objective is not trusted,
  and one from a start is solved again without it;
* a watchdog on every run (:func:`stuck`): a run that outlives its time limit by :func:`grace` is left
  behind, read as cut by the time limit with no point, and no HiGHS run starts in the process while it
  lives (HiGHS 1.16's presolve can loop without checking its time limit, ERGO-Code/HiGHS#2226: a
  primal-round MIP of 919 columns with a 55 s limit ran 89 minutes in ``strengthenInequalities``);
* the result read back as a :class:`Result` (status, objective, bound, gap, values, which limit cut it,
  work done), and the helpers that need the instance itself: reduced-cost fixing against a cutoff
  (:meth:`Solver.fix_by_reduced_cost`) and the safe Lagrangian bound of an LP's duals
  (:meth:`Solver.safe_bound`).

It is the lowest layer of the import-linter contract in pyproject.toml: it imports nothing of poet-edge.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

TIME_LIMIT = "Time limit reached"  # HiGHS's model status text when it stops at its time limit
CUTOFF_TOL = 1e-6  # scaled units: how far below a node's computed LP bound its true one may be (the
# margin a cutoff, HiGHS's objective_bound, is given)

Row = tuple[float, float, list[int], list[float]]  # (low, up, column indices, coefficients)
Csr = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # rows as rows_csr gives them
OptionValue = bool | int | float | str

PROOF_OPTIONS: tuple[tuple[str, OptionValue], ...] = (
    # a cutoff proof on a bound model needs no points: HiGHS's heuristics, and its cut separation at
    # nodes, only cost time (bert_tiny at 50%, the split model, is a proof that runs faster without them)
    ("mip_heuristic_effort", 0.0),
    ("mip_allow_cut_separation_at_nodes", False),
    ("mip_detect_symmetry", False),
    ("mip_heuristic_run_feasibility_jump", False),
    ("mip_heuristic_run_rins", False),
    ("mip_heuristic_run_rens", False),
    ("mip_heuristic_run_root_reduced_cost", False),
)


class HighsError(RuntimeError):
    """HiGHS refused a model or an option (a bug in the caller, not bad user input)."""


# -- the watchdog ---------------------------------------------------------------------------------------

_left: list[threading.Thread] = []  # runs that outlived their time limit, left running (the module docstring)


def grace(limit: float) -> float:
    """How long past its time limit ``limit`` (s) a HiGHS run may go before the watchdog leaves it: 5 s
    and a quarter of the limit (HiGHS checks its clock between steps, and some steps are long)."""
    return 5.0 + 0.25 * limit


def stuck() -> bool:
    """Whether a HiGHS run the watchdog left behind is still running (then no run starts: it would share
    HiGHS's process-wide thread pool with it)."""
    _left[:] = [t for t in _left if t.is_alive()]
    return bool(_left)


def loaded() -> bool:
    """Whether this process has loaded HiGHS. Its process-wide thread pool may then still hold threads (a
    run a signal interrupted the wait for, one the watchdog left, or workers finishing a task), and the
    interpreter's teardown destroys them under it (std::terminate, SIGABRT): the process must end without
    that teardown (:func:`poet_edge.cli.entry`)."""
    return "highspy" in sys.modules


# -- the model ------------------------------------------------------------------------------------------


def rows_csr(rows: Sequence[Row]) -> Csr:
    """Rows as arrays: (low, up, start, column, value), row r's entries at [start[r], start[r + 1])."""
    sizes = [len(r[2]) for r in rows]
    return (
        np.array([r[0] for r in rows], dtype=np.float64),
        np.array([r[1] for r in rows], dtype=np.float64),
        np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64),
        np.array([j for r in rows for j in r[2]], dtype=np.int64),
        np.array([v for r in rows for v in r[3]], dtype=np.float64),
    )


def broken_rows(rows: Sequence[Row], x: np.ndarray, tol: float = 1e-7) -> list[int]:
    """The indices of the rows point ``x`` breaks by more than ``tol``."""
    out = []
    for r, (low, up, idx, val) in enumerate(rows):
        s = sum(v * x[j] for j, v in zip(idx, val, strict=True))
        if s < low - tol or s > up + tol:
            out.append(r)
    return out


@dataclass(frozen=True, eq=False)
class Model:
    """A minimization in column/row form: per column its cost, bounds and whether it is integer; the
    rows as CSR arrays (:data:`Csr`: lower, upper, start, column, value; ±inf for a missing side).
    HiGHS solves it as a MIP when any column is integer, else as an LP."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray  # bool per column
    rows: Csr
    scaled: bool = False  # a MIP's rows are loaded scaled (:func:`row_scaled`)

    @staticmethod
    def of(
        cost: Sequence[float] | np.ndarray,
        rows: Sequence[Row] | Csr,
        lower: Sequence[float] | np.ndarray | None = None,
        upper: Sequence[float] | np.ndarray | None = None,
        integer: Sequence[bool] | np.ndarray | None = None,
        scaled: bool = False,
    ) -> Model:
        """A model from column costs and rows (a list of :data:`Row` or arrays as :func:`rows_csr`
        gives them); columns in [0, 1] and binary unless ``lower`` / ``upper`` / ``integer`` say
        otherwise; ``scaled``: as a MIP, its rows are loaded scaled (:func:`row_scaled`)."""
        c = np.asarray(cost, dtype=np.float64)
        n = len(c)
        return Model(
            c,
            np.zeros(n) if lower is None else np.asarray(lower, dtype=np.float64),
            np.ones(n) if upper is None else np.asarray(upper, dtype=np.float64),
            np.ones(n, dtype=bool) if integer is None else np.asarray(integer, dtype=bool),
            rows_csr(rows) if isinstance(rows, list) else rows,  # type: ignore[arg-type]
            scaled,
        )

    @property
    def num_cols(self) -> int:
        return len(self.cost)


def row_scaled(
    low: np.ndarray, up: np.ndarray, start: np.ndarray, val: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A MIP's rows (CSR: bounds, row starts, values) each multiplied by the power of two that brings its
    largest |coefficient| nearest 1: exact (the same points satisfy them, columns and objective are
    unchanged), and it keeps HiGHS 1.16.0's MIP presolve out of a loop. On a segment-cover model of
    mobilenetv2_035 split into 32 KB tiles (2,231 rows, coefficients 7e-05 to 90, right-hand sides 1)
    HPresolve::strengthenInequalities ran for over 8 minutes past a 20 s time limit (the safety stop
    never fired: a compile never ended); with the rows scaled the same MIP is solved to optimality.
    Only the models that ask for it (``Model.scaled``: the segment cover's, lp_model.py, where the
    loop was seen); the stage model's windows are loaded as they are (one run with every MIP scaled was
    much slower on bert_tiny at 50% of its peak, but shared the machine with other jobs: not separated
    from the load). Empty rows keep their scale."""
    counts = np.diff(start)
    peak = np.zeros(len(low))
    if len(val):
        np.maximum.at(peak, np.repeat(np.arange(len(low)), counts), np.abs(val))
    factor = np.ones(len(low))
    nonzero = peak > 0
    factor[nonzero] = np.exp2(-np.round(np.log2(peak[nonzero])))
    return low * factor, up * factor, val * np.repeat(factor, counts)


@dataclass(frozen=True, eq=False)
class Lp:
    """The model HiGHS holds, read back (its matrix column-wise: column j's entries at
    [start[j], start[j + 1]))."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    start: np.ndarray
    index: np.ndarray
    value: np.ndarray
    offset: float
    integer: np.ndarray  # bool per column


def lagrangian_bound(lp: Lp, row_dual: np.ndarray) -> tuple[float, np.ndarray] | None:
    """The Lagrangian bound of a minimization ``lp`` for row duals ``row_dual`` (valid for any duals: a
    dual of the wrong sign for a row with one side is taken as 0), and the reduced costs it uses; None
    when a column is unbounded."""
    low, up = lp.lower, lp.upper
    if not (np.isfinite(low).all() and np.isfinite(up).all()):
        return None
    y = np.asarray(row_dual, dtype=np.float64)
    rlow, rup = lp.row_lower, lp.row_upper
    y = np.where((y > 0) & ~np.isfinite(rlow), 0.0, np.where((y < 0) & ~np.isfinite(rup), 0.0, y))
    col = np.repeat(np.arange(len(lp.start) - 1), np.diff(lp.start))  # column-wise storage
    d = lp.cost - np.bincount(col, y[lp.index] * lp.value, minlength=len(low))
    rows = np.where(
        y > 0, y * np.where(np.isfinite(rlow), rlow, 0.0), y * np.where(np.isfinite(rup), rup, 0.0)
    )
    return float(rows.sum() + np.minimum(d * low, d * up).sum() + lp.offset), d


# -- options and results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """How HiGHS runs. None leaves HiGHS's default. ``node_limit`` (``mip_max_nodes``) and
    ``iteration_limit`` (``simplex_iteration_limit``) are deterministic budgets, and so is ``check_limit``:
    HiGHS's MIP interrupt checks (its ``checkLimits``, called at fixed points of its own deterministic
    search: root cut rounds, strong branching, restarts, nodes), at most this many; it bounds the root,
    which ``mip_max_nodes`` does not count (the run's ``limit`` is then "checks"); ``time_limit`` (seconds)
    is a safety stop (a run it cuts depends on the machine's load); ``watchdog`` (seconds): how long a
    run may take before it is left behind (:func:`stuck`; by default the time limit and its
    :func:`grace`, none without a time limit). ``cutoff``: only points cheaper than
    it are wanted (HiGHS's ``objective_bound``, given ``CUTOFF_TOL`` to spare). ``extra``: further HiGHS
    options by name, set last (e.g. :data:`PROOF_OPTIONS`, tolerances)."""

    threads: int | None = None
    time_limit: float | None = None
    node_limit: int | None = None
    check_limit: int | None = None
    iteration_limit: int | None = None
    mip_rel_gap: float | None = None
    mip_abs_gap: float | None = None
    cutoff: float | None = None
    random_seed: int = 0
    output: bool = False
    watchdog: float | None = None
    extra: tuple[tuple[str, OptionValue], ...] = ()

    def pairs(self) -> list[tuple[str, OptionValue]]:
        """The options as HiGHS names and values, in the order they are set."""
        out: list[tuple[str, OptionValue]] = [("output_flag", self.output), ("random_seed", self.random_seed)]
        named: tuple[tuple[str, OptionValue | None], ...] = (
            ("threads", self.threads),
            ("time_limit", None if self.time_limit is None else float(self.time_limit)),
            ("mip_max_nodes", None if self.node_limit is None else max(1, self.node_limit)),
            ("simplex_iteration_limit", self.iteration_limit),
            ("mip_rel_gap", self.mip_rel_gap),
            ("mip_abs_gap", self.mip_abs_gap),
            ("objective_bound", None if self.cutoff is None else self.cutoff + CUTOFF_TOL),
        )
        out += [(k, v) for k, v in named if v is not None]
        return out + list(self.extra)


@dataclass(frozen=True)
class Progress:
    """What HiGHS reports while it solves a MIP: its running time (s), best point's objective (inf
    without one) and dual bound."""

    seconds: float
    primal: float
    dual: float


Watch = Callable[[Progress], bool]  # told the progress at each interrupt check; True ends the solve

_LIMITS = {  # HiGHS model status name -> the limit that cut the search
    "kTimeLimit": "time",
    "kIterationLimit": "iterations",
    "kSolutionLimit": "nodes",  # mip_max_nodes (also mip_max_leaves, mip_max_improving_sols)
    "kMemoryLimit": "memory",
    "kInterrupt": "interrupt",
    "kHighsInterrupt": "interrupt",
}


@dataclass(frozen=True, eq=False)
class Result:
    """One HiGHS run, read back.

    ``status``: HiGHS's model status text ("Optimal", :data:`TIME_LIMIT`, ...); ``code``: its name
    ("kOptimal", "kInfeasible", "kUnboundedOrInfeasible", ...); ``optimal``: proven
    optimal (with a cutoff, HiGHS also says so for a point above it when it finds none below);
    ``infeasible``: proven to have no point (or unbounded or infeasible); ``limit``: the limit that cut
    the search ("time", "nodes", "iterations", "memory", "interrupt"), None when it ended on its own;
    ``objective``: the point's objective, None without a point; ``bound``: the dual bound (a MIP's
    ``mip_dual_bound``, possibly infinite; an LP's objective when solved, else -inf); ``gap``: HiGHS's
    relative MIP gap; ``values``: the column values, None without a point; ``trusted``: the values give
    the objective (else use neither them nor the bound: HiGHS 1.16.0 can return a start's values with
    another point's objective); ``restarted``: solved again without the start for that; ``start``: HiGHS's
    status for the MIP start ("none" without one); ``iterations``, ``nodes``, ``checks``: simplex
    iterations, branch-and-bound nodes and MIP interrupt checks (deterministic counts)."""

    status: str
    code: str
    optimal: bool
    infeasible: bool
    limit: str | None
    objective: float | None
    bound: float
    gap: float
    values: np.ndarray | None
    trusted: bool = True
    restarted: bool = False
    start: str = "none"
    iterations: int = 0
    nodes: int = 0
    checks: int = 0

    @property
    def cut(self) -> bool:
        """Whether a limit (or an interrupt) ended the search before it finished."""
        return self.limit is not None


# -- the instance ---------------------------------------------------------------------------------------


@functools.cache
def quiet_banner() -> None:
    """HiGHS prints its banner ("Running HiGHS ...") to the process's standard output when the first
    instance is made, whatever its options: that would break ``poet solve --json`` and ``-q``. The
    first call makes that instance with file descriptor 1 pointed at /dev/null (C's buffer flushed
    before it is restored); later calls do nothing (cached)."""
    import ctypes
    import os
    import sys

    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
            try:
                ctypes.CDLL(None).fflush(None)
            except (OSError, TypeError, AttributeError):  # no C library handle (not a POSIX system)
                pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class Solver:
    """One quiet HiGHS instance with ``options``, holding one model (:meth:`load`). :meth:`run` solves
    it; ``runs`` counts the HiGHS runs made (reduced-cost fixing and a restart included)."""

    def __init__(self, options: Options) -> None:
        quiet_banner()
        import highspy

        self._highspy = highspy
        self._h = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        self.runs = 0
        self._mip = False  # the loaded model has an integer column
        self._abandoned = False  # a run of this instance was left behind by the watchdog
        self._watchdog = options.watchdog
        self._check_limit = options.check_limit
        self._checks = 0  # the last run's MIP interrupt checks
        self.set(options.pairs())

    def set(self, pairs: Sequence[tuple[str, OptionValue]]) -> None:
        """Sets HiGHS options by name; an unknown name or a bad value is a :class:`HighsError`. Does
        nothing on an instance whose run the watchdog left behind (that run still reads them)."""
        if self._abandoned:
            return
        for key, value in pairs:
            if self._h.setOptionValue(key, value) == self._highspy.HighsStatus.kError:
                raise HighsError(f"HiGHS refused option {key} = {value!r}")

    def set_time_limit(self, seconds: float) -> None:
        self.set([("time_limit", float(seconds))])

    @property
    def time_limit(self) -> float:
        return float(self._h.getOptionValue("time_limit")[1])

    @property
    def num_cols(self) -> int:
        return int(self._h.getNumCol())

    def load(self, model: Model) -> str:
        """Adds the model's columns, then its rows in one call; returns HiGHS's status name for the rows
        ("kOk"; "kWarning": it dropped coefficients below its ``small_matrix_value``, 1e-9). Raises
        :class:`HighsError` when HiGHS refuses the rows (e.g. one names a column twice: it leaves them
        all out)."""
        self._usable()
        h, n = self._h, model.num_cols
        if n:
            empty = (np.array([0]), np.array([0]), np.array([0.0]))
            h.addCols(n, model.cost, model.lower, model.upper, 0, *empty)
            ints = np.flatnonzero(model.integer).astype(np.int32)
            self._mip = self._mip or bool(len(ints))
            if len(ints):
                h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
        low, up, start, col, val = model.rows
        if not len(low):
            return "kOk"
        if self._mip and model.scaled:
            low, up, val = row_scaled(low, up, start, val)
        starts, cols = start[:-1].astype(np.int32), col.astype(np.int32)
        status = h.addRows(len(low), low, up, len(col), starts, cols, val)
        if status == self._highspy.HighsStatus.kError:
            raise HighsError(f"HiGHS refused the model's rows ({status})")
        return str(status.name)

    def lp(self) -> Lp:
        """A copy of the model HiGHS holds (bounds as narrowed by :meth:`fix_by_reduced_cost`)."""
        self._usable()
        lp = self._h.getLp()
        a = lp.a_matrix_
        return Lp(
            np.asarray(lp.col_cost_, dtype=np.float64),
            np.asarray(lp.col_lower_, dtype=np.float64),
            np.asarray(lp.col_upper_, dtype=np.float64),
            np.asarray(lp.row_lower_, dtype=np.float64),
            np.asarray(lp.row_upper_, dtype=np.float64),
            np.asarray(a.start_),
            np.asarray(a.index_),
            np.asarray(a.value_, dtype=np.float64),
            float(lp.offset_),
            np.asarray(lp.integrality_, dtype=int) != 0,
        )

    def _run(self) -> bool:
        """``run()`` on a fresh HiGHS thread pool, watched; False when it did not end (then the instance
        is not touched again). HiGHS keeps one pool per process and refuses to run (model status "Not
        Set") with a thread count other than the one that pool was started with, so a solve with
        ``threads=1`` after one with ``threads=2`` in the same process (a test session, a sweep worker,
        the MILP's warm start then scale) would fail without this reset. The run goes on a thread of
        its own (HiGHS lets go of Python's lock while it runs); after ``Options.watchdog`` seconds it is
        left behind (:func:`stuck`)."""
        if stuck():
            return False
        self._highspy.Highs.resetGlobalScheduler(True)
        self.runs += 1
        limit, wait = self.time_limit, self._watchdog
        if wait is None and limit < 1e20:
            wait = limit + grace(limit)
        if wait is None:
            self._h.run()
            return True
        raised: list[BaseException] = []

        def go() -> None:
            try:
                self._h.run()
            except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
                raised.append(e)

        run = threading.Thread(target=go, name="highs-run", daemon=True)
        run.start()
        run.join(wait)
        if run.is_alive():
            _left.append(run)
            self._abandoned = True
            return False
        if raised:
            raise raised[0]
        return True

    def _consistent(self) -> bool:
        """Whether the column values HiGHS returns give the objective it reports (True when it has no
        point). HiGHS 1.16.0, after a MIP solved from a start with presolve on, can return the start's
        values with another point's objective, or an objective below the true optimum: seen on POET's
        MILP for resnet8 at 90% of its peak and on small random DAGs (tests/test_milp.py)."""
        info = self._h.getInfo()
        if info.primal_solution_status != 2:  # no feasible point: nothing to check
            return True
        lp = self._h.getLp()
        value = float(np.dot(lp.col_cost_, np.asarray(self._h.getSolution().col_value))) + lp.offset_
        objective = info.objective_function_value
        return abs(value - objective) <= 1e-6 * max(1.0, abs(objective))

    def run(
        self,
        start: np.ndarray | Sequence[float] | None = None,
        watch: Watch | None = None,
        improving: Callable[[Progress], object] | None = None,
    ) -> Result:
        """Solves the loaded model, from MIP start ``start`` (a value per column) if given. ``watch`` is
        told HiGHS's MIP progress at each of its interrupt checks and ends the solve by returning True;
        ``improving`` is told it at each better point (read-only); the checks are counted, and the
        solve ends at ``Options.check_limit`` of them. The result is checked: values that
        do not give HiGHS's objective are not trusted, and when a start was set the model is solved
        again without it in what is left of the time limit. A run the watchdog leaves behind (or one
        not started while another is left behind, :func:`stuck`) is cut by the time limit with no point
        and no bound."""
        if self._abandoned or stuck():
            return _left_behind("none")
        h = self._h
        start_status = "none"
        if start is not None:
            sol = self._highspy.HighsSolution()
            sol.col_value = list(map(float, start))
            start_status = str(h.setSolution(sol).name)
        self._checks, most = 0, self._check_limit

        def check(e: Any) -> None:
            self._checks += 1
            d = e.data_out
            if (most is not None and self._checks >= most) or (
                watch is not None and watch(Progress(d.running_time, d.mip_primal_bound, d.mip_dual_bound))
            ):
                e.interrupt()

        if self._mip:
            h.cbMipInterrupt.subscribe(check)
        if improving is not None:

            def better(e: Any) -> None:
                d = e.data_out
                improving(Progress(d.running_time, d.mip_primal_bound, d.mip_dual_bound))

            h.cbMipImprovingSolution.subscribe(better)
        began = time.perf_counter()
        if not self._run():
            return _left_behind(start_status)
        trusted, restarted = self._consistent(), False
        if not trusted and start is not None:
            limit = self.time_limit
            h.clearSolver()  # also drops the start
            self._checks = 0
            self.set_time_limit(max(0.05, limit - (time.perf_counter() - began)))
            ended = self._run()
            if not ended:
                return _left_behind(start_status)
            self.set_time_limit(limit)
            trusted, restarted = self._consistent(), True
        return self._result(trusted, restarted, start_status)

    def _result(self, trusted: bool, restarted: bool, start: str) -> Result:
        h, ms = self._h, self._highspy.HighsModelStatus
        status = h.getModelStatus()
        info = h.getInfo()
        has = info.primal_solution_status == 2
        objective = float(info.objective_function_value) if has else None
        optimal = status == ms.kOptimal
        if self._mip:
            bound = float(info.mip_dual_bound)
        else:
            bound = objective if optimal and objective is not None else -math.inf
        return Result(
            status=h.modelStatusToString(status),
            code=str(status.name),
            optimal=optimal,
            infeasible=status in (ms.kInfeasible, ms.kUnboundedOrInfeasible),
            limit="checks"
            if self._check_limit is not None and self._checks >= self._check_limit
            else _LIMITS.get(status.name),
            objective=objective,
            bound=bound,
            gap=float(info.mip_gap),
            values=np.array(h.getSolution().col_value) if has else None,
            trusted=trusted,
            restarted=restarted,
            start=start,
            iterations=max(0, int(info.simplex_iteration_count)),
            nodes=max(0, int(info.mip_node_count)),
            checks=self._checks,
        )

    def _usable(self) -> None:
        """Raises :class:`HighsError` when the watchdog left a run of this instance behind (HiGHS still
        uses it)."""
        if self._abandoned:
            raise HighsError("this HiGHS instance's run was left behind by the watchdog; make another")

    def safe_bound(self) -> tuple[float, np.ndarray] | None:
        """After an LP solve (a minimization, every column bounded): the :func:`lagrangian_bound` of
        the row duals HiGHS returns, recomputed here (valid for any duals, so HiGHS's tolerances do not
        enter), and its reduced costs; None when HiGHS has no dual solution or a column is unbounded."""
        self._usable()
        if self._h.getInfo().dual_solution_status != 2:
            return None
        return lagrangian_bound(self.lp(), np.asarray(self._h.getSolution().row_dual, dtype=np.float64))

    def fix_by_reduced_cost(
        self, cutoff: float, got: tuple[float, np.ndarray] | None = None
    ) -> tuple[float, int] | None:
        """Reduced-cost fixing before a MIP solve with ``cutoff``: solves the LP relaxation, takes its
        :meth:`safe_bound` ``z`` and reduced costs ``d``, and narrows every integer column's bounds to
        the values at which ``z`` plus its reduced cost times the step from its cheap bound stays at
        most the cutoff (a point outside costs more). HiGHS does this at its root node, but only after
        presolving the whole model, which on a large one takes long (bert_tiny at 50%, the split model,
        where it narrows many of the integer columns). ``got``: the :meth:`safe_bound` of an LP
        relaxation of the same columns solved before (none solved here then). Returns (``z``, columns
        narrowed), None when the LP gives no bound (nothing changed). The LP's solution is cleared:
        HiGHS would take it as a start and spend time on a sub-MIP to repair it (mobilenetv2_035 with
        every parameter trained at 1.1x its floor, the split model, is a case)."""
        self._usable()
        if stuck():  # before the integrality changes below: a run that does not start restores nothing
            return None
        h = self._h
        lp = self.lp()  # a copy of the whole model: taken once (the LP solve below changes no bound)
        ints = np.flatnonzero(lp.integer).astype(np.int32)
        if got is None:
            if len(ints):
                h.changeColsIntegrality(len(ints), ints, np.zeros(len(ints), dtype=np.uint8))
            if not self._run():
                return None
            got = self.safe_bound()
            h.clearSolver()
            if len(ints):
                h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
        if got is None:
            return None
        z, d = got
        low, up = lp.lower[ints], lp.upper[ints]
        dj = d[ints]
        room = cutoff + CUTOFF_TOL - z  # what a column may add to z and stay below the cutoff
        if room < 0:
            return z, 0
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = np.floor(room / np.abs(dj) + 1e-9)
        new_up = np.where(dj > 0, np.minimum(up, low + steps), up)
        new_low = np.where(dj < 0, np.maximum(low, up - steps), low)
        changed = (new_up < up) | (new_low > low)
        if changed.any():
            h.changeColsBounds(int(changed.sum()), ints[changed], new_low[changed], new_up[changed])
        return z, int(changed.sum())


def _left_behind(start: str) -> Result:
    """The result of a run the watchdog left behind: cut by the time limit, no point, no bound."""
    return Result(
        TIME_LIMIT, "kTimeLimit", False, False, "time", None, -math.inf, math.inf, None, start=start
    )


def solve(
    model: Model,
    options: Options,
    start: np.ndarray | Sequence[float] | None = None,
    watch: Watch | None = None,
    improving: Callable[[Progress], object] | None = None,
) -> Result:
    """:class:`Solver` with ``options``, ``model`` loaded, run (see :meth:`Solver.run`)."""
    solver = Solver(options)
    solver.load(model)
    return solver.run(start, watch, improving)
