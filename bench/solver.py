"""Schedulers at scale: "scale" (segment-cover bound + primal plans + local search; on graphs of at most
8000 value-stage pairs also its stage model, a second bound and primal) vs the POET MILP ("poet-milp"),
greedy and the best baseline, on every zoo training graph (cortex-m4) and on random layered DAGs.

Graphs are written as node-link graph files to a temp dir and read back (graphio). Random layered
DAGs: graphgen.random_layered_dag(n, seed=0, width=4, max_in_degree=5, skip_prob=0.3) with its other
defaults (bytes 1..100, workspace probability 0.2, compute cost 1..10, page-out 0.5 + bytes/100,
page-in 0.4 + bytes/120), n = 100, 250, 500, 1000. Budgets: 90/80/70/60/50% of the no-remat peak of
the graph's order and 1.1x the memory floor (budgets below the floor are marked and skipped).

Columns per solver: cost increase over the no-remat pass in % (energy; every node once = 0%),
peak/budget, time to the first valid schedule, total solve time, proven gap ((cost - bound) / cost;
for greedy and the best baseline against the best bound any solver proved on that row). Every
schedule is replayed by the simulator. Same --time-limit for scale and poet-milp; poet-milp is skipped
above --poet-max-nodes nodes (its model has ~5T^2 + T|E| binaries; it does not build in reasonable
time or memory there; default 100).
Run: .venv/bin/python bench/solver.py [--quick] [--time-limit S] [--threads N] [--sizes 100,250]
     [--only zoo|random] [--models resnet8,dscnn] [--budgets 80%,1.1xfloor] [--poet-max-nodes N]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zoo import MODELS, table, training  # noqa: E402

from poet_edge import planning  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.graphgen import random_layered_dag  # noqa: E402
from poet_edge.graphio import read_graph, write_graph  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.problem import SchedulingProblem  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedule import Schedule  # noqa: E402
from poet_edge.schedulers import BASELINES, SCHEDULERS  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions, schedule_milp  # noqa: E402
from poet_edge.schedulers.scale import ScaleOptions, schedule_scale  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

FRACTIONS = (0.9, 0.8, 0.7, 0.6, 0.5)
SOLVERS = ("scale", "poet-milp", "greedy", "best-base")


@dataclass
class Run:
    cost: float | None = None  # energy; None: no schedule
    peak_ratio: float | None = None
    first_s: float | None = None
    total_s: float = 0.0
    bound: float | None = None
    note: str = ""


def zoo_graphs(device: str, names: list[str]) -> list[tuple[str, SchedulingProblem]]:
    profile = load_profile(device)
    out = []
    for m in MODELS:
        if names and m.name not in names:
            continue
        _, spec = training(m, profile)
        out.append((f"{m.name}", planning.price(spec, profile, 1 << 62)))
    return out


def random_graphs(sizes: list[int]) -> list[tuple[str, SchedulingProblem]]:
    return [
        (
            f"layered-{n}",
            random_layered_dag(n, 0, width=4, max_in_degree=5, skip_prob=0.3, budget_bytes=1 << 62),
        )
        for n in sizes
    ]


def _measured(problem: SchedulingProblem, schedule: Schedule, run: Run) -> Run:
    sim = simulate(problem, schedule)
    run.cost = sim.energy_j
    run.peak_ratio = sim.peak_ram_bytes / problem.budget_bytes
    return run


def run_scale(problem: SchedulingProblem, limit: float, threads: int) -> Run:
    began = time.perf_counter()
    try:
        schedule = schedule_scale(problem, ScaleOptions(time_limit_s=limit, threads=threads))
    except PoetError as err:
        return Run(total_s=time.perf_counter() - began, note=str(err)[:40])
    info = dict(schedule.info)
    first = info.get("first_valid_s")
    run = Run(
        total_s=time.perf_counter() - began,
        first_s=float(first) if isinstance(first, float) else None,
        bound=float(info["bound"]),  # type: ignore[arg-type]
    )
    return _measured(problem, schedule, run)


def run_poet(problem: SchedulingProblem, limit: float, threads: int) -> Run:
    began = time.perf_counter()
    first: list[float] = []

    def progress(elapsed: float, inc: float | None, bound: float | None, gap: float | None) -> None:
        if inc is not None and not first:
            first.append(time.perf_counter() - began)

    options = MilpOptions(time_limit_s=limit, threads=threads, on_progress=progress)
    try:
        schedule = replace(schedule_milp(problem, options), solver="poet-milp")
    except PoetError as err:
        return Run(total_s=time.perf_counter() - began, note=str(err)[:40])
    info = dict(schedule.info)
    total = time.perf_counter() - began
    bound = info.get("bound")
    run = Run(
        total_s=total, first_s=first[0] if first else total, bound=float(bound) if bound is not None else None
    )  # type: ignore[arg-type]
    if info.get("fallback"):
        run.note = "fallback"
    return _measured(problem, schedule, run)


def run_plain(problem: SchedulingProblem, fn: Callable[[SchedulingProblem], Schedule]) -> Run:
    began = time.perf_counter()
    try:
        schedule = fn(problem)
    except PoetError as err:
        return Run(total_s=time.perf_counter() - began, note=str(err)[:40])
    total = time.perf_counter() - began
    return _measured(problem, schedule, Run(total_s=total, first_s=total))


def run_best_base(problem: SchedulingProblem) -> Run:
    runs = [run_plain(problem, SCHEDULERS[name]) for name in BASELINES]
    valid = [r for r in runs if r.cost is not None]
    total = sum(r.total_s for r in runs)
    if not valid:
        return Run(total_s=total, note="no baseline")
    best = min(valid, key=lambda r: r.cost or 0.0)
    return Run(best.cost, best.peak_ratio, total, total)


def _cells(prefix: str, run: Run, plain: float, bound: float | None) -> dict[str, str]:
    if run.cost is None:
        return {f"{prefix} %": run.note or "none", f"{prefix} t": f"{run.total_s:.1f}"}
    gap = None if bound is None else max(0.0, run.cost - bound) / run.cost
    return {
        f"{prefix} %": f"{100 * (run.cost / plain - 1):.2f}",
        f"{prefix} pk/B": f"{run.peak_ratio:.3f}",
        f"{prefix} 1st": f"{run.first_s:.2f}" if run.first_s is not None else "",
        f"{prefix} t": f"{run.total_s:.1f}",
        f"{prefix} gap%": "" if gap is None else f"{100 * gap:.2f}",
    }


def budgets(peak: int, floor: int) -> list[tuple[str, int]]:
    out = [(f"{round(100 * f)}%", int(f * peak)) for f in FRACTIONS]
    return out + [("1.1xfloor", int(1.1 * floor))]


def bench_row(
    name: str, label: str, problem: SchedulingProblem, plain: float, args: argparse.Namespace
) -> dict[str, str]:
    row = {"graph": name, "T": str(len(problem.nodes)), "budget": label}
    runs = {"scale": run_scale(problem, args.time_limit, args.threads)}
    if len(problem.nodes) <= args.poet_max_nodes:
        runs["poet-milp"] = run_poet(problem, args.time_limit, args.threads)
    runs["greedy"] = run_plain(problem, SCHEDULERS["greedy"])
    runs["best-base"] = run_best_base(problem)
    bounds = [r.bound for r in runs.values() if r.bound is not None]
    best_bound = max(bounds) if bounds else None
    for solver in SOLVERS:
        if solver not in runs:
            row[f"{solver} %"] = f"skipped (T>{args.poet_max_nodes})"
            continue
        own = runs[solver].bound if solver in ("scale", "poet-milp") else best_bound
        row.update(_cells(solver, runs[solver], plain, own))
    row["_scale_t"] = f"{runs['scale'].total_s}"
    return row


def graph_rows(
    name: str, base: SchedulingProblem, tmp: Path, args: argparse.Namespace
) -> list[dict[str, str]]:
    path = tmp / f"{name}.json"
    write_graph(base, path)
    problem = read_graph(path)
    plain = sum(n.compute_j for n in problem.nodes)
    peak = simulate(problem, SCHEDULERS["none"](problem)).peak_ram_bytes
    floor = memory_floor(problem).bytes
    rows = []
    for label, budget in budgets(peak, floor):
        if label not in args.budget_labels:
            continue
        if budget < floor:
            rows.append(
                {"graph": name, "T": str(len(problem.nodes)), "budget": label, "scale %": "below floor"}
            )
            continue
        rows.append(bench_row(name, label, read_graph(path, budget), plain, args))
        print({k: v for k, v in rows[-1].items() if not k.startswith("_")}, file=sys.stderr, flush=True)
    return rows


def fitted_exponent(points: list[tuple[int, float]]) -> float | None:
    pts = [(math.log(n), math.log(max(t, 1e-3))) for n, t in points]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def scaling_table(rows: list[dict[str, str]]) -> str:
    by_n: dict[int, list[float]] = {}
    for r in rows:
        if r["graph"].startswith("layered-") and "_scale_t" in r:
            by_n.setdefault(int(r["T"]), []).append(float(r["_scale_t"]))
    lines = [
        {
            "n": str(n),
            "budgets": str(len(ts)),
            "mean s": f"{sum(ts) / len(ts):.2f}",
            "max s": f"{max(ts):.2f}",
        }
        for n, ts in sorted(by_n.items())
    ]
    exp = fitted_exponent([(n, sum(ts) / len(ts)) for n, ts in by_n.items()])
    text = table(lines, ["n", "budgets", "mean s", "max s"])
    return (
        text
        + "\nfitted exponent of scale's mean solve time over n: "
        + ("n/a" if exp is None else f"{exp:.2f}")
    )


COLUMNS = ["graph", "T", "budget"] + [f"{s} {c}" for s in SOLVERS for c in ("%", "pk/B", "1st", "t", "gap%")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--time-limit", type=float, default=30.0, help="seconds per solver run (scale, poet-milp)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--poet-max-nodes", type=int, default=100, help="skip poet-milp above this many nodes")
    ap.add_argument("--sizes", default="100,250,500,1000", help="random layered DAG sizes")
    ap.add_argument("--budgets", default="90%,80%,70%,60%,50%,1.1xfloor")
    ap.add_argument("--models", default="", help="zoo models, comma separated (default all)")
    ap.add_argument("--no-zoo", action="store_true", help="same as --only random")
    ap.add_argument("--only", choices=("zoo", "random"), help="only the zoo graphs / only the random DAGs")
    ap.add_argument("--quick", action="store_true", help="time limit 10 s, poet-milp up to 100 nodes")
    ap.add_argument("--device", default="cortex-m4")
    args = ap.parse_args()
    if args.quick:
        args.time_limit = min(args.time_limit, 10.0)
        args.poet_max_nodes = min(args.poet_max_nodes, 100)
    args.budget_labels = set(args.budgets.split(","))
    zoo = not args.no_zoo and args.only != "random"
    graphs = zoo_graphs(args.device, [m for m in args.models.split(",") if m]) if zoo else []
    if args.only != "zoo":
        graphs += random_graphs([int(s) for s in args.sizes.split(",") if s])
    rows: list[dict[str, str]] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, problem in graphs:
            rows += graph_rows(name, problem, Path(tmp), args)
    print(
        f"time limit {args.time_limit:g} s per solver run, {args.threads} threads, poet-milp up to "
        f"{args.poet_max_nodes} nodes; total bench time {time.perf_counter() - began:.0f} s"
    )
    print(table(rows, COLUMNS))
    print()
    print(scaling_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
