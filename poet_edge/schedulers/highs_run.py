"""Running HiGHS from several solvers in one process."""

from __future__ import annotations

from typing import Any

import numpy as np


def run_highs(h: Any) -> None:
    """``h.run()`` on a fresh HiGHS thread pool. HiGHS keeps one pool per process and refuses to run (model
    status "Not Set") with a thread count other than the one that pool was started with, so a solve with
    ``threads=1`` after one with ``threads=2`` in the same process (a test session, a sweep worker, the
    MILP's warm start then scale) would fail without this reset."""
    import highspy

    highspy.Highs.resetGlobalScheduler(True)
    h.run()


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
