"""poet simulate OUT [--device NAME] [--json]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from poet_edge import planning
from poet_edge.profiles import load_profile
from poet_edge.runner import corrupted, load_plan
from poet_edge.schedule import Schedule
from poet_edge.simulator import Integrity, InvalidSchedule, SimResult, format_report, simulate


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
    try:
        spec = planning.ProblemSpec.from_json(plan["problem"])
        schedule = Schedule.from_json(plan["schedule"]["steps"], plan["schedule"]["solver"])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise corrupted(out, f"{type(e).__name__} {e}") from None
    problem = planning.price(spec, profile, plan["ram_budget_bytes"])
    try:
        return simulate(problem, schedule, profile, Integrity.from_json(plan.get("integrity", {})))
    except InvalidSchedule as e:
        raise corrupted(out, f"its schedule does not replay: {e}") from None


def simulate_inference(out: Path, device: str | None = None) -> dict[str, SimResult]:
    """The schedules of poet_predict and poet_eval_step (one batch each) in OUT/plan.json, replayed."""
    plan = load_plan(out)
    profile = load_profile(device or plan["device"])
    return {
        mode: simulate(
            planning.price(planning.ProblemSpec.from_json(m["problem"]), profile, plan["ram_budget_bytes"]),
            Schedule.from_json(m["schedule"]["steps"], m["schedule"]["solver"]),
            profile,
        )
        for mode, m in plan.get("inference", {}).items()
    }


def run(args: argparse.Namespace) -> int:
    sim = simulate_plan(args.out, args.device)
    modes = simulate_inference(args.out, args.device)
    if args.json:
        inf = {k: v.to_json() for k, v in modes.items()}
        print(json.dumps({**sim.to_json(), "inference": inf}, indent=1))
        return 0
    print(format_report(sim))
    for mode, s in modes.items():
        name = "poet_predict" if mode == "predict" else "poet_eval_step"
        print(
            f"{name} (one batch, own schedule): peak RAM {s.peak_ram_bytes} bytes, "
            f"{s.n_recomputations} recomputations, {s.n_page_ins} page-ins; {format_cost(s)}"
        )
    return 0


def format_cost(s: SimResult) -> str:
    if s.cost_unit != "J":
        return f"latency {s.latency_s:.6g} {s.cost_unit}, energy {s.energy_j:.6g} {s.cost_unit}"
    return f"latency {s.latency_s * 1e3:.4f} ms, energy {s.energy_j * 1e3:.5f} mJ"
