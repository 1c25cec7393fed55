"""poet simulate OUT [--device NAME] [--json]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from poet_edge import planning
from poet_edge.profiles import load_profile
from poet_edge.runner import load_plan
from poet_edge.schedule import Schedule
from poet_edge.simulator import Integrity, SimResult, format_report, simulate


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser(
        "simulate",
        help="predict energy, latency and memory of a compiled plan, offline",
        description="Replay the schedule in OUT/plan.json step by step and print RAM, latency, energy "
        "and storage traffic, priced for the plan's device or for --device.",
    ).add_argument("out", type=Path, help="folder written by 'poet compile'")
    p = sub.choices["simulate"]
    p.add_argument("--device", help="price the same schedule on another device profile")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def simulate_plan(out: Path, device: str | None = None) -> SimResult:
    plan = load_plan(out)
    profile = load_profile(device or plan["device"])
    problem = planning.price(
        planning.ProblemSpec.from_json(plan["problem"]), profile, plan["ram_budget_bytes"]
    )
    schedule = Schedule.from_json(plan["schedule"]["steps"], plan["schedule"]["solver"])
    return simulate(problem, schedule, profile, Integrity.from_json(plan.get("integrity", {})))


def run(args: argparse.Namespace) -> int:
    sim = simulate_plan(args.out, args.device)
    print(json.dumps(sim.to_json(), indent=1) if args.json else format_report(sim))
    return 0
