"""Baseline "none": every node once in the problem's order, no recomputation, no paging.

Each value is freed right after its last consumer ran; values nobody consumes (the loss, updates
with no output) are freed right after they are computed. Fails if that peak exceeds the budget.
"""

from __future__ import annotations

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.engine import Engine


def schedule_none(problem: SchedulingProblem) -> Schedule:
    return Engine(problem, "none", policy=None).run()
