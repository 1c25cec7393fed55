"""Registry of schedulers: name -> function(problem) -> Schedule (or PoetError saying why none exists).

``milp`` and ``poet-milp`` are the same POET MILP (``poet-milp`` names it explicitly, its schedules say
so); ``scale`` is the segment-cover scheduler for large graphs (:mod:`poet_edge.schedulers.scale`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.greedy import schedule_greedy
from poet_edge.schedulers.milp import schedule_milp
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.page_all import schedule_page_all
from poet_edge.schedulers.recompute_all import schedule_recompute_all
from poet_edge.schedulers.scale import schedule_scale

BASELINES = ("none", "recompute-all", "page-all", "greedy")  # the MILP's warm-start candidates


def schedule_poet_milp(problem: SchedulingProblem) -> Schedule:
    """The POET MILP with default options, under the explicit name "poet-milp"."""
    return replace(schedule_milp(problem), solver="poet-milp")


ALIASES = {"poet-milp": "milp"}  # other names of the same scheduler

SCHEDULERS: dict[str, Callable[[SchedulingProblem], Schedule]] = {
    "none": schedule_none,
    "recompute-all": schedule_recompute_all,
    "page-all": schedule_page_all,
    "greedy": schedule_greedy,
    "milp": schedule_milp,
    "poet-milp": schedule_poet_milp,
    "scale": schedule_scale,
}


def get_scheduler(name: str) -> Callable[[SchedulingProblem], Schedule]:
    """The scheduler registered as ``name``; PoetError listing the known names otherwise."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise PoetError(f"unknown scheduler '{name}'; available: {', '.join(SCHEDULERS)}") from None
