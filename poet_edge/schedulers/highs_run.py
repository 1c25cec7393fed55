"""Running HiGHS from several solvers in one process, and checking what it returns."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

TIME_LIMIT = "Time limit reached"  # HiGHS's model status when it stops at its time limit
CUTOFF_TOL = 1e-6  # scaled units: how far below a node's computed LP bound its true one may be (the
# margin a cutoff, HiGHS's objective_bound, is given)


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


def new_highs() -> Any:
    """A highspy instance with its output off (and no banner: :func:`quiet_banner`)."""
    quiet_banner()
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def run_highs(h: Any) -> None:
    """``h.run()`` on a fresh HiGHS thread pool. HiGHS keeps one pool per process and refuses to run (model
    status "Not Set") with a thread count other than the one that pool was started with, so a solve with
    ``threads=1`` after one with ``threads=2`` in the same process (a test session, a sweep worker, the
    MILP's warm start then scale) would fail without this reset."""
    import highspy

    highspy.Highs.resetGlobalScheduler(True)
    h.run()


def consistent(h: Any) -> bool:
    """Whether the column values HiGHS returns give the objective it reports (True when it has no
    solution). HiGHS 1.16.0, after a MIP solved from a start (``setSolution``) with presolve on, can
    return the start's values with another point's objective, or an objective below the true optimum:
    seen on POET's MILP for resnet8 at 90% of its peak and on small random DAGs (tests/test_milp.py)."""
    info = h.getInfo()
    if info.primal_solution_status != 2:  # no feasible solution: nothing to check
        return True
    lp = h.getLp()
    value = float(np.dot(lp.col_cost_, np.asarray(h.getSolution().col_value))) + lp.offset_
    objective = info.objective_function_value
    return abs(value - objective) <= 1e-6 * max(1.0, abs(objective))


@dataclass(frozen=True)
class Checked:
    """What :func:`run_checked` found: ``trusted``: the values give the reported objective (else use
    neither the values nor the dual bound); ``restarted``: it solved again without the start."""

    trusted: bool
    restarted: bool


def run_checked(h: Any, started: bool) -> Checked:
    """:func:`run_highs`, then :func:`consistent`; when a MIP start was set (``started``) and the
    result is not consistent, solves again without the start in what is left of the time limit."""
    began = time.perf_counter()
    run_highs(h)
    if consistent(h):
        return Checked(True, False)
    if not started:
        return Checked(False, False)
    limit = h.getOptionValue("time_limit")[1]
    h.clearSolver()  # also drops the start
    h.setOptionValue("time_limit", max(0.05, limit - (time.perf_counter() - began)))
    run_highs(h)
    h.setOptionValue("time_limit", limit)
    return Checked(consistent(h), True)


Row = tuple[float, float, list[int], list[float]]  # (low, up, column indices, coefficients)


Csr = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # rows as rows_csr gives them


def broken_rows(rows: list[Row], x: np.ndarray, tol: float = 1e-7) -> list[int]:
    """The indices of the rows point ``x`` breaks by more than ``tol``."""
    out = []
    for r, (low, up, idx, val) in enumerate(rows):
        s = sum(v * x[j] for j, v in zip(idx, val, strict=True))
        if s < low - tol or s > up + tol:
            out.append(r)
    return out


def rows_csr(rows: list[Row]) -> Csr:
    """Rows as arrays: (low, up, start, column, value), row r's entries at [start[r], start[r + 1])."""
    sizes = [len(r[2]) for r in rows]
    return (
        np.array([r[0] for r in rows], dtype=np.float64),
        np.array([r[1] for r in rows], dtype=np.float64),
        np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64),
        np.array([j for r in rows for j in r[2]], dtype=np.int64),
        np.array([v for r in rows for v in r[3]], dtype=np.float64),
    )


def add_rows(h: Any, rows: list[Row]) -> Any:
    """Adds the rows to HiGHS instance ``h`` in one call; returns HiGHS's status (it refuses, and
    leaves out, rows that name a column twice)."""
    return add_csr(h, *rows_csr(rows))


def add_csr(
    h: Any, low: np.ndarray, up: np.ndarray, start: np.ndarray, col: np.ndarray, val: np.ndarray
) -> Any:
    """:func:`add_rows` for rows already as arrays (as :func:`rows_csr` returns them)."""
    return h.addRows(len(low), low, up, len(col), start[:-1].astype(np.int32), col.astype(np.int32), val)


PROOF_OPTIONS = (  # a cutoff proof on a bound model needs no points: HiGHS's heuristics, and its cut
    # separation at nodes, only cost time (bert_tiny at 50%, the split model, 2 threads: 24 s -> 17 s)
    ("mip_heuristic_effort", 0.0),
    ("mip_allow_cut_separation_at_nodes", False),
    ("mip_detect_symmetry", False),
    ("mip_heuristic_run_feasibility_jump", False),
    ("mip_heuristic_run_rins", False),
    ("mip_heuristic_run_rens", False),
    ("mip_heuristic_run_root_reduced_cost", False),
)


def safe_bound(h: Any) -> tuple[float, np.ndarray] | None:
    """After an LP solve of ``h`` (a minimization, every column bounded): the Lagrangian bound of the
    row duals HiGHS returns, recomputed here (valid for any duals, so HiGHS's tolerances do not enter),
    and the reduced costs it uses; None when HiGHS has no dual solution or a column is unbounded."""
    if h.getInfo().dual_solution_status != 2:
        return None
    lp = h.getLp()
    low, up = np.asarray(lp.col_lower_), np.asarray(lp.col_upper_)
    if not (np.isfinite(low).all() and np.isfinite(up).all()):
        return None
    y = np.asarray(h.getSolution().row_dual, dtype=np.float64)
    rlow, rup = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    y = np.where((y > 0) & ~np.isfinite(rlow), 0.0, np.where((y < 0) & ~np.isfinite(rup), 0.0, y))
    a = lp.a_matrix_
    start, index, value = (np.asarray(v) for v in (a.start_, a.index_, a.value_))
    col = np.repeat(np.arange(len(start) - 1), np.diff(start))  # column-wise storage
    d = np.asarray(lp.col_cost_, dtype=np.float64) - np.bincount(col, y[index] * value, minlength=len(low))
    rows = np.where(
        y > 0, y * np.where(np.isfinite(rlow), rlow, 0.0), y * np.where(np.isfinite(rup), rup, 0.0)
    )
    return float(rows.sum() + np.minimum(d * low, d * up).sum() + lp.offset_), d


def fix_by_reduced_cost(
    h: Any, cutoff: float, got: tuple[float, np.ndarray] | None = None
) -> tuple[float, int] | None:
    """Reduced-cost fixing before a MIP solve with ``cutoff``: solves ``h``'s LP relaxation, takes its
    :func:`safe_bound` ``z`` and reduced costs ``d``, and narrows every integer column's bounds to the
    values at which ``z`` plus its reduced cost times the step from its cheap bound stays at most the
    cutoff (a point outside costs more). HiGHS does this at its root node, but only after presolving the
    whole model (bert_tiny at 50%, the split model: 55% of the integer columns, after 4 s). ``got``: the
    :func:`safe_bound` of an LP relaxation of the same columns solved before (none solved here then).
    Returns (``z``, columns narrowed), None when the LP gives no bound (nothing changed). The LP's
    solution is cleared: HiGHS would take it as a start and solve a sub-MIP to repair it
    (mobilenetv2_035 with every parameter trained at 1.1x its floor, the split model: 0.7 s)."""
    lp = h.getLp()  # a copy of the whole model: taken once (the LP solve below changes no bound)
    ints = np.array([j for j, t in enumerate(lp.integrality_) if int(t)], dtype=np.int32)
    if got is None:
        if len(ints):
            h.changeColsIntegrality(len(ints), ints, np.zeros(len(ints), dtype=np.uint8))
        run_highs(h)
        got = safe_bound(h)
        h.clearSolver()
        if len(ints):
            h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
    if got is None:
        return None
    z, d = got
    low, up = np.asarray(lp.col_lower_)[ints], np.asarray(lp.col_upper_)[ints]
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
