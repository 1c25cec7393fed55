"""Baseline "page_all": no recomputation; page values out to storage when RAM runs short.

Nodes run once each in the problem's order. When the next page-in or compute would exceed the
budget, the resident value whose next use is farthest away (Belady) is paged out (unless storage
already holds a copy) and freed; it is paged back in just before its next use. Only pageable values
are evicted; values are freed after their last use.
"""

from __future__ import annotations

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.engine import PAGE, Engine


def _belady(engine: Engine, candidates: list[int]) -> tuple[int, str]:
    nodes = engine.problem.nodes
    victim = max(candidates, key=lambda u: (engine.next_use(u), nodes[u].out_bytes, -u))
    return victim, PAGE


def schedule_page_all(problem: SchedulingProblem) -> Schedule:
    return Engine(problem, "page-all", policy=_belady, allow_paging=True).run()
