"""Registry of schedulers: name -> function(problem) -> Schedule (or PoetError saying why none exists).

``milp`` and ``poet-milp`` are the same POET MILP (``poet-milp`` names it explicitly, its schedules say
so); ``scale`` is the segment-cover scheduler for large graphs (:mod:`poet_edge.schedulers.scale`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers import milp as _milp
from poet_edge.schedulers.greedy import schedule_greedy
from poet_edge.schedulers.milp import schedule_milp
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.page_all import schedule_page_all
from poet_edge.schedulers.recompute_all import schedule_recompute_all
from poet_edge.schedulers.scale import schedule_scale

BASELINES = ("none", "recompute-all", "page-all", "greedy")


def _not_a_baseline(name: str) -> None:
    """``milp.best_baseline`` tries every registered scheduler except "milp" for its MIP start; the
    solvers below are not baselines (and ``poet-milp`` would recurse), so they decline there."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return
        if frame.f_code is _milp.best_baseline.__code__:
            raise PoetError(
                f"no schedule from '{name}' here: it is a solver, not a baseline for the MIP start"
            )
        frame = frame.f_back  # type: ignore[assignment]


def schedule_poet_milp(problem: SchedulingProblem) -> Schedule:
    """The POET MILP (default options), under the name "poet-milp"."""
    _not_a_baseline("poet-milp")
    return replace(schedule_milp(problem), solver="poet-milp")


def _scale(problem: SchedulingProblem) -> Schedule:
    _not_a_baseline("scale")
    return schedule_scale(problem)


SCHEDULERS: dict[str, Callable[[SchedulingProblem], Schedule]] = {
    "none": schedule_none,
    "recompute-all": schedule_recompute_all,
    "page-all": schedule_page_all,
    "greedy": schedule_greedy,
    "milp": schedule_milp,
    "poet-milp": schedule_poet_milp,
    "scale": _scale,
}


def get_scheduler(name: str) -> Callable[[SchedulingProblem], Schedule]:
    """The scheduler registered as ``name``; PoetError listing the known names otherwise."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise PoetError(f"unknown scheduler '{name}'; available: {', '.join(SCHEDULERS)}") from None
