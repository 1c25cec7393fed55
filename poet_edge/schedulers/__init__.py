"""Registry of schedulers: name -> function(problem) -> Schedule (or PoetError saying why none exists).

``milp`` and ``poet-milp`` are the same POET MILP (``poet-milp`` names it explicitly, its schedules say
so); ``scale`` is the segment-cover scheduler for large graphs (:mod:`poet_edge.schedulers.scale`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

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
WALL_CLOCK = ("seconds", "first_valid_s")


@dataclass(frozen=True)
class WallClock:
    """A wall-clock measurement in ``Schedule.info``; excluded from comparisons, so that the same
    input gives equal schedules (the registry's determinism contract)."""

    seconds: float | None = field(compare=False)

    def __str__(self) -> str:
        return "n/a" if self.seconds is None else f"{self.seconds:.3f}"

    def __float__(self) -> float:
        return float("nan") if self.seconds is None else float(self.seconds)


def _comparable(schedule: Schedule, solver: str) -> Schedule:
    info = tuple(
        (k, WallClock(v if isinstance(v, (int, float)) else None) if k in WALL_CLOCK else v)
        for k, v in schedule.info
    )
    return replace(schedule, solver=solver, info=info)


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
    """The POET MILP (default options), under the name "poet-milp" (wall-clock info as :class:`WallClock`)."""
    _not_a_baseline("poet-milp")
    return _comparable(schedule_milp(problem), "poet-milp")


def _scale(problem: SchedulingProblem) -> Schedule:
    """Scheduler "scale" with default options (30 s limit; wall-clock info as :class:`WallClock`)."""
    _not_a_baseline("scale")
    return _comparable(schedule_scale(problem), "scale")


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
