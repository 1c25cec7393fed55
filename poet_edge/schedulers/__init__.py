"""Registry of schedulers: name -> function(problem) -> Schedule (or PoetError saying why none exists).

``scale`` (the command lines' default) is the segment-cover scheduler (:mod:`poet_edge.schedulers.scale`);
``milp`` and ``poet-milp`` are the same POET MILP (``poet-milp`` names it explicitly, its schedules say
so).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers import proof_process
from poet_edge.schedulers.effort import SAFETY_S, anneal_moves, sequence_work
from poet_edge.schedulers.greedy import schedule_greedy
from poet_edge.schedulers.milp import MilpOptions, ProgressCallback, schedule_milp
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.ordered import Beside, Outcome, Started, schedule_ordered
from poet_edge.schedulers.page_all import schedule_page_all
from poet_edge.schedulers.recompute_all import schedule_recompute_all
from poet_edge.schedulers.scale import ScaleOptions, schedule_scale

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


def milp_solver(scheduler: str, solver: str | None) -> str:
    """The MILP's solver from a command line's --milp-solver (None: not given, HiGHS); refused with any
    scheduler but the MILP, which alone would use it."""
    if solver is not None and ALIASES.get(scheduler, scheduler) != "milp":
        raise PoetError(
            f"--milp-solver {solver} applies to the MILP only; add --scheduler milp (this run: {scheduler})"
        )
    return solver or "highs"


def configured(name: str, options: MilpOptions) -> Callable[[SchedulingProblem], Schedule]:
    """Scheduler ``name`` with the solver options of a command line: the MILP (``milp``, ``poet-milp``)
    takes them all; ``scale`` all but the MILP solver (its gap None: scale's default), and runs on the
    topological order :mod:`~poet_edge.schedulers.ordering` chooses
    (:func:`~poet_edge.schedulers.ordered.schedule_ordered`: the order's own schedules, and which
    orders a bound covers); the baselines take none. A time limit ``None`` (--time-limit not given): each
    one's default, scale's safety stop ``SAFETY_S``, the MILP's ``MilpOptions.time_limit_s``."""
    get_scheduler(name)  # unknown names fail here, listing the known ones
    if ALIASES.get(name, name) == "milp":
        if options.time_limit_s is None:
            options = replace(options, time_limit_s=MilpOptions.time_limit_s)
        return lambda p: replace(schedule_milp(p, options), solver=name)
    if name == "scale":
        limit = SAFETY_S if options.time_limit_s is None else options.time_limit_s
        scale = ScaleOptions(
            objective=options.objective,
            time_limit_s=limit,
            threads=options.threads,
            paging=options.paging,
            remat=options.remat,
            on_progress=options.on_progress,
            effort=options.effort,
            stop_above=options.stop_above,
        ).with_gap(options.gap_rel)
        latency = options.objective == "latency"
        try:
            sequences = sequence_work(options.effort)
            anneal = anneal_moves(options.effort)
        except ValueError as e:
            raise PoetError(str(e)) from None

        def solve(p: SchedulingProblem) -> Schedule:
            tell = cheapest_so_far(options.on_progress)

            def inner(problem: SchedulingProblem, seconds: float, above: float | None) -> Schedule:
                stop = min((c for c in (scale.stop_above, above) if c is not None), default=None)
                return schedule_scale(
                    problem, replace(scale, time_limit_s=seconds, on_progress=tell, stop_above=stop)
                )

            remat = options.remat
            beside = scale_beside(scale) if options.threads != 1 else None
            return schedule_ordered(
                p,
                inner,
                limit,
                latency=latency,
                remat=remat,
                sequences=sequences,
                anneal=anneal,
                on_progress=tell,
                beside=beside,
                gap_rel=scale.gap_rel,
            )

        return solve
    return get_scheduler(name)


BESIDE_GRACE = 30.0  # seconds a run beside the chosen order's may pass its safety stop before it is stopped


def scale_beside(scale: ScaleOptions) -> Beside:
    """scale's run (``scale``'s options; the time limit and the cost to stop above given) in a child
    process: the ``beside`` of :func:`~poet_edge.schedulers.ordered.schedule_ordered`. The child reports
    no progress. A child that fails is stopped, and the run is done in this process instead."""

    def start(problem: SchedulingProblem, seconds: float, above: float | None) -> Started:
        stop = min((c for c in (scale.stop_above, above) if c is not None), default=None)
        run = replace(scale, time_limit_s=seconds, on_progress=None, stop_above=stop)
        job = proof_process.start_call(schedule_scale, (problem, run), seconds, BESIDE_GRACE)

        def wait() -> Outcome:
            try:
                out, stopped = job.finish()
            except RuntimeError:  # the child failed (a crash, not the run's own error): run it here
                try:
                    return schedule_scale(problem, run), None, False
                except PoetError as e:
                    return None, e, False
            if isinstance(out, PoetError):
                return None, out, False
            return out, None, stopped

        return Started(wait, job.stop)

    return start


def cheapest_so_far(report: ProgressCallback | None) -> ProgressCallback | None:
    """``report`` told of one solve's progress across its runs (the order's sequences, scale on the chosen
    order, then on the given one, each with its own incumbent): the cheapest incumbent so far, never a
    later run's worse one, and bounds no higher than it."""
    if report is None:
        return None
    best = math.inf

    def tell(elapsed: float, incumbent: float | None, bound: float | None, gap: float | None) -> None:
        nonlocal best
        if incumbent is not None and incumbent < best:
            best = incumbent
        kept = None if math.isinf(best) else best
        if bound is not None and kept is not None:
            bound = min(bound, kept)
        report(elapsed, kept, bound, gap if kept == incumbent else None)

    return tell
