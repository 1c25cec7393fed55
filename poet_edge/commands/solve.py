"""`poet solve GRAPH.json --ram BYTES`: the scheduler alone, on a plain graph file."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from poet_edge import sanity
from poet_edge.commands import add_solve_limits, add_talk
from poet_edge.errors import PoetError
from poet_edge.graphio import read_graph
from poet_edge.problem import SchedulingProblem
from poet_edge.progress import Progress
from poet_edge.schedule import Schedule
from poet_edge.schedulers import SCHEDULERS, configured, milp_solver
from poet_edge.schedulers.effort import cut_warning
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.simulator import InvalidSchedule, SimResult, format_report, simulate
from poet_edge.units import SIZE_HELP, parse_size


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "solve",
        help="schedule a plain graph file (scale, the MILP or a baseline) and simulate the schedule",
        description="Read a networkx node-link JSON graph (poet-edge's own node fields, or Checkmate-style "
        "cost_ram/cost_cpu), schedule one step within --ram with scale (the default), the POET MILP "
        "(recomputation + paging, HiGHS or CBC) or a baseline, replay the schedule in the simulator "
        "and report it. "
        "compute_cost is the simulated total of the objective (energy, or latency with "
        "--objective latency) in the graph's cost unit.",
    )
    p.add_argument("graph", help="node-link JSON graph file")
    p.add_argument("--ram", required=True, type=parse_size, metavar="BYTES", help=f"RAM budget; {SIZE_HELP}")
    p.add_argument("--objective", choices=("energy", "latency"), default="energy", help="what to minimise")
    add_solve_limits(p, "scale, milp: ")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="scale, milp: solver threads (1: also scale's two orders' runs, and the fallback orders' "
        "fitting sequences, one after the other; else one beside in a child process)",
    )
    p.add_argument("--milp-solver", choices=("highs", "cbc"), help="milp: HiGHS (default) or CBC")
    p.add_argument(
        "--scheduler", default="scale", choices=sorted(SCHEDULERS), help="scheduler (default scale)"
    )
    p.add_argument("--no-paging", action="store_true", help="milp, scale: recomputation only")
    p.add_argument("--no-remat", action="store_true", help="milp, scale: paging only")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    add_talk(
        p,
        "no progress on stderr (the report still goes to stdout)",
        "every cheaper schedule and higher bound on stderr",
    )
    p.set_defaults(run=run)
    return p


def _schedule(
    problem: SchedulingProblem, args: argparse.Namespace, progress: Progress
) -> tuple[Schedule, float]:
    """The schedule and the seconds it took; the solver's progress (its cheapest schedule, its bound)
    told to ``progress`` as it goes."""
    began = time.perf_counter()
    options = MilpOptions(
        objective=args.objective,
        time_limit_s=args.time_limit,
        threads=args.threads,
        solver=milp_solver(args.scheduler, args.milp_solver),
        paging=not args.no_paging,
        remat=not args.no_remat,
        gap_rel=args.gap,
        effort=args.effort,
        on_progress=progress.solver,
    )
    progress.detail(
        f"poet: {args.scheduler} on {len(problem.nodes)} nodes, {len(problem.edges)} edges within "
        f"{problem.budget_bytes} B" + (f", --effort {args.effort}" if args.scheduler == "scale" else "")
    )
    progress.phase("schedule")
    try:
        schedule = configured(args.scheduler, options)(problem)
    finally:
        progress.done()
    warning = cut_warning(schedule.report, args.time_limit)
    if warning is not None:
        print(warning, file=sys.stderr)
    return schedule, time.perf_counter() - began


def _summary(
    schedule: Schedule, sim: SimResult | None, error: str | None, seconds: float, objective: str
) -> dict[str, Any]:
    report = schedule.report
    out: dict[str, Any] = {
        "scheduler": schedule.solver,
        "status": report.status if report.has("status") else "heuristic",
        "valid": sim is not None,
        "compute_cost": None if sim is None else (sim.latency_s if objective == "latency" else sim.energy_j),
        "energy": None if sim is None else sim.energy_j,
        "latency": None if sim is None else sim.latency_s,
        "cost_unit": None if sim is None else sim.cost_unit,
        "peak_ram_bytes": None if sim is None else sim.peak_ram_bytes,
        "budget_bytes": None if sim is None else sim.budget_bytes,
        "objective": report.objective,
        "bound": report.bound,
        "gap": report.gap,
        "seconds": round(seconds, 3),
    }
    out.update({k: v for k, v in report.items() if k not in out and k != "seconds"})
    if error:
        out["error"] = error
    out["schedule"] = schedule.to_json()
    return out


def _text(summary: dict[str, Any], sim: SimResult | None) -> str:
    keys = [k for k in summary if k != "schedule" and summary[k] is not None]
    width = max(len(k) for k in keys)
    lines = [f"{k:{width}s}  {summary[k]}" for k in keys]
    if sim is not None:
        lines += ["", format_report(sim)]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    sanity.positive_finite("--time-limit", args.time_limit)
    if args.threads is not None and args.threads < 1:
        raise PoetError(f"--threads {args.threads}: must be at least 1")
    problem = read_graph(args.graph, args.ram)
    progress = Progress.from_flags(args.quiet, args.verbose, stream=sys.stderr)
    schedule, seconds = _schedule(problem, args, progress)
    sim, error = None, None
    try:
        sim = simulate(problem, schedule)
    except InvalidSchedule as err:
        error = str(err)
    summary = _summary(schedule, sim, error, seconds, args.objective)
    print(json.dumps(summary, indent=1) if args.json else _text(summary, sim))
    return 0 if sim is not None else 1
