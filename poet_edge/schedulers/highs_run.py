"""Running HiGHS from several solvers in one process, and checking what it returns."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

CUTOFF_TOL = 1e-6  # scaled units: how far below a node's computed LP bound its true one may be (the
# margin a cutoff, HiGHS's objective_bound, is given)


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


def rows_csr(rows: list[Row]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
