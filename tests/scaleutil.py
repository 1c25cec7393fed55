"""What the tests of scheduler "scale" and its models share: problems at budgets between their floor
and no-remat peak, the random-DAG flags, and the valid schedules the baselines and scale find."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from poet_edge.errors import PoetError
from poet_edge.memory_floor import memory_floor
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers import BASELINES, get_scheduler
from poet_edge.schedulers.milp import MilpOptions, schedule_milp
from poet_edge.schedulers.scale import ScaleOptions, schedule_scale
from poet_edge.simulator import simulate

# random_layered_dag's (unrecomputable share, unpageable share, invalidations, storage capacity)
FLAGS = [
    (0.0, 0.0, 0, None),
    (0.3, 0.0, 0, None),
    (0.0, 0.5, 0, None),
    (0.2, 0.2, 3, None),
    (0.0, 0.0, 2, 150),
]


def peak_ram(problem: SchedulingProblem) -> int:
    """The problem's RAM peak without recomputation or paging."""
    roomy = replace(problem, budget_bytes=10**12)
    return simulate(roomy, get_scheduler("none")(roomy)).peak_ram_bytes


def scale_budgets(problem: SchedulingProblem, fractions: tuple[float, ...]) -> list[SchedulingProblem]:
    """The problem at these fractions of its peak, at least its floor (each budget once, ascending)."""
    floor, peak = memory_floor(problem).bytes, peak_ram(problem)
    budgets = sorted({max(floor, int(f * peak)) for f in fractions})
    return [replace(problem, budget_bytes=b) for b in budgets]


def valid_schedules(problem: SchedulingProblem, opts: ScaleOptions) -> list[Schedule]:
    """The schedules of the baselines and of scale (with ``opts``) that fit, latency cap included."""
    out = []
    for name in (*BASELINES, "scale"):
        try:
            schedule = get_scheduler(name)(problem) if name != "scale" else schedule_scale(problem, opts)
            sim = simulate(problem, schedule)
        except PoetError:
            continue
        if problem.max_latency_s is None or sim.latency_s <= problem.max_latency_s * (1 + 1e-9):
            out.append(schedule)
    return out


def exact_schedules(base: SchedulingProblem) -> Iterator[tuple[SchedulingProblem, Schedule]]:
    """(problem, the exact POET MILP's schedule, no time limit) at 80%, 60% and 0% between floor and peak
    (:func:`scale_budgets`), where the MILP finds one."""
    for problem in scale_budgets(base, (0.8, 0.6, 0.0)):
        try:
            yield problem, schedule_milp(problem, MilpOptions(time_limit_s=None, threads=1))
        except PoetError:
            continue
