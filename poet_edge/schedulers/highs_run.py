"""Running HiGHS from several solvers in one process."""

from __future__ import annotations

from typing import Any


def run_highs(h: Any) -> None:
    """``h.run()`` on a fresh HiGHS thread pool. HiGHS keeps one pool per process and refuses to run (model
    status "Not Set") with a thread count other than the one that pool was started with, so a solve with
    ``threads=1`` after one with ``threads=2`` in the same process (a test session, a sweep worker, the
    MILP's warm start then scale) would fail without this reset."""
    import highspy

    highspy.Highs.resetGlobalScheduler(True)
    h.run()
