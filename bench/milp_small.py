"""POET MILP on random DAGs: model size, solve time, status and gap, against the best baseline.

Two families of about 20/40/80 nodes, seed 0: "layered" (graphgen.random_layered_dag) and "training"
(a random layered forward DAG of n/2 nodes, a loss, and one gradient node per forward node that reads
the gradients of its consumers and the activations of the node and its inputs, like autodiff).
Budgets 90/70/50% of the no-remat peak of the given order (rows below the memory floor are marked),
60 s time limit, 2 threads, HiGHS, energy objective, paging and remat on.
Run: .venv/bin/python bench/milp_small.py [--time-limit S] [--solver highs|cbc] [--sizes 20,40,80]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.graphgen import random_layered_dag  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.problem import SchedulingProblem  # noqa: E402
from poet_edge.schedulers import SCHEDULERS  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions, best_baseline, schedule_milp  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402


def training_dag(n_forward: int, seed: int) -> SchedulingProblem:
    """Forward DAG + loss + one gradient per forward node (see the module docstring)."""
    fwd = random_layered_dag(n_forward, seed)
    nodes = list(fwd.nodes)
    loss = len(nodes)
    sinks = [v for v in range(n_forward) if not fwd.succs()[v]]
    nodes.append(replace(nodes[sinks[-1]], name="loss", kind="loss"))
    edges = set(fwd.edges) | {(v, loss) for v in sinks}
    succs, preds = fwd.succs(), fwd.preds()
    grad = {v: loss + 1 + k for k, v in enumerate(reversed(range(n_forward)))}
    for v in reversed(range(n_forward)):
        nodes.append(replace(fwd.nodes[v], name=f"g{v}", kind="backward"))
        edges |= {(grad[w], grad[v]) for w in succs[v]} or {(loss, grad[v])}
        edges |= {(u, grad[v]) for u in (v, *preds[v])}
    return SchedulingProblem(tuple(nodes), tuple(sorted(edges)), 10**12)


def _row(family: str, n: int, frac: float, options: MilpOptions) -> dict[str, object]:
    base = random_layered_dag(n, seed=0) if family == "layered" else training_dag(n // 2, seed=0)
    roomy = replace(base, budget_bytes=10**12)
    peak = simulate(roomy, SCHEDULERS["none"](roomy)).peak_ram_bytes
    problem = replace(base, budget_bytes=int(frac * peak))
    head = {
        "graph": family,
        "nodes": len(problem.nodes),
        "edges": len(problem.edges),
        "budget": f"{frac:.0%}",
    }
    floor = memory_floor(problem).bytes
    if problem.budget_bytes < floor:
        return {**head, "status": f"below floor ({floor / peak:.0%} of peak)"}
    plain = sum(node.compute_j for node in problem.nodes)
    began = time.perf_counter()
    try:
        schedule = schedule_milp(problem, options)
    except PoetError as err:
        return {**head, "status": f"error: {str(err)[:70]}"}
    total = time.perf_counter() - began
    info = schedule.report.to_json()
    sim = simulate(problem, schedule)
    base_c = best_baseline(problem, options)
    return {
        **head,
        "binaries": info["binaries"],
        "rows": info["rows"],
        "status": info["status"],
        "solve_s": info["seconds"],
        "total_s": round(total, 1),
        "energy": round(sim.energy_j, 3),
        "bound": round(float(info["bound"]), 3),
        "gap": f"{float(info['gap']):.3%}",
        "solver_gap": f"{float(info['solver_gap']):.2%}",
        "over_plain": f"{sim.energy_j / plain - 1:.2%}",
        "best_baseline": "-" if base_c is None else f"{base_c.name} {base_c.cost:.3f}",
        "fallback": info["fallback"] or "-",
    }


def _table(rows: list[dict[str, object]]) -> str:
    keys = list(max(rows, key=len))
    width = {k: max(len(k), *(len(str(r.get(k, ""))) for r in rows)) for k in keys}
    lines = ["  ".join(f"{k:>{width[k]}}" for k in keys)]
    lines += ["  ".join(f"{r.get(k, '')!s:>{width[k]}}" for k in keys).rstrip() for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--solver", default="highs", choices=("highs", "cbc"))
    ap.add_argument("--sizes", default="20,40,80")
    args = ap.parse_args()
    options = MilpOptions(time_limit_s=args.time_limit, threads=args.threads, solver=args.solver)
    rows = []
    for family in ("layered", "training"):
        for n in (int(x) for x in args.sizes.split(",")):
            for frac in (0.9, 0.7, 0.5):
                rows.append(_row(family, n, frac, options))
                print(rows[-1], flush=True)
    print()
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
