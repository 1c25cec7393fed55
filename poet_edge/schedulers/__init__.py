"""Registry of schedulers: name -> function(problem) -> Schedule (or PoetError saying why none exists)."""

from __future__ import annotations

from collections.abc import Callable

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.greedy import schedule_greedy
from poet_edge.schedulers.milp import schedule_milp
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.page_all import schedule_page_all
from poet_edge.schedulers.recompute_all import schedule_recompute_all

SCHEDULERS: dict[str, Callable[[SchedulingProblem], Schedule]] = {
    "none": schedule_none,
    "recompute-all": schedule_recompute_all,
    "page-all": schedule_page_all,
    "greedy": schedule_greedy,
    "milp": schedule_milp,
}


def get_scheduler(name: str) -> Callable[[SchedulingProblem], Schedule]:
    """The scheduler registered as ``name``; PoetError listing the known names otherwise."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise PoetError(f"unknown scheduler '{name}'; available: {', '.join(SCHEDULERS)}") from None
