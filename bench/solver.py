"""Schedulers at scale: "scale" (segment-cover bound + primal plans + local search; on graphs of at most
8000 value-stage pairs also its stage model, a second bound and primal) vs the POET MILP ("poet-milp"),
greedy and the best baseline, on every zoo training graph (cortex-m4) and on random layered DAGs.

Zoo models are trained as bench/zoo.py says (only the biases of resnet8, dscnn, the MobileNets and
bert_tiny); --train all trains every parameter of each, as `poet compile` does by default.
Graphs are written as node-link graph files to a temp dir and read back (graphio). Random layered
DAGs: graphgen.random_layered_dag(n, seed=0, width=4, max_in_degree=5, skip_prob=0.3) with its other
defaults (bytes 1..100, workspace probability 0.2, compute cost 1..10, page-out 0.5 + bytes/100,
page-in 0.4 + bytes/120), n = 100, 250, 500, 1000. Budgets: 90/80/70/60/50% of the no-remat peak of
the graph's order and 1.1x the memory floor (budgets below the floor are marked and skipped).

Columns per solver: cost increase over the no-remat pass in % (energy; every node once = 0%),
peak/budget, time to the first valid schedule, total solve time, proven gap ((cost - bound) / cost;
for greedy and the best baseline against the best bound any solver proved on that row) and, for scale
and poet-milp, the status: opt (proven optimal), time (a time limit, or for scale measured seconds,
decided something: another run may return another schedule), feas (scale: the same schedule every run).
Every schedule is replayed by the simulator. After the tables, issue 7's criteria are checked on the rows
that ran (:func:`checks`); --json FILE also writes every row's numbers and the checks. Same --time-limit
for scale and poet-milp; poet-milp is skipped above --poet-max-nodes nodes (its model has ~5T^2 + T|E|
binaries; it does not build in reasonable time or memory there; default 100).
Run: .venv/bin/python bench/solver.py [--quick] [--time-limit S] [--threads N] [--sizes 100,250]
     [--only zoo|random] [--models resnet8,dscnn] [--budgets 80%,1.1xfloor] [--poet-max-nodes N]
     [--json results.json] [--repeat N] [--gap 1%] [--train all] [--effort quick|default|max]
     [--results NAME] [--reference FILE]
With --gap G, scale and poet-milp stop once proven within G ((cost - bound) / cost), as
`poet compile --gap G` does: the "t" column is then the time to a proven G; without it they close the
gap as far as the time limit allows.
With --repeat N, scale runs N times per row: the table shows its first run, a table of the spread over
the runs follows it (cost, gap, the zoo criterion, how many different schedules), and the checks count
every run. With --load as well, runs 2 to N are made while every core is kept busy by a spinning
process: issue 55's determinism check (the same schedule on a loaded machine: "schedules" 1).
With --results NAME, the rows, the checks and the run's settings are written to bench/results/NAME.json
and NAME.md with the machine, commit and date (bench/provenance.py). With --reference FILE (a JSON file
of {"rows": [{"graph", "budget", "cost_j", "source"}]}, e.g. bench/results/solver-zoo-reference.json),
a table compares scale's cost on each row with that reference: +% = cost / reference - 1, and whether
the --scale-limit safety stop cut the run (a cut run may differ between runs; the rest are
deterministic: scale's work is counted, not timed).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provenance import provenance  # noqa: E402
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
from poet_edge.schedulers.effort import EFFORTS, SAFETY_S  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions, schedule_milp  # noqa: E402
from poet_edge.schedulers.scale import ScaleOptions, schedule_scale  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402
from poet_edge.units import parse_gap  # noqa: E402

FRACTIONS = (0.9, 0.8, 0.7, 0.6, 0.5)
SOLVERS = ("scale", "poet-milp", "greedy", "best-base")
ZOO_GAP_PCT, ZOO_SECONDS = 1.0, 30.0  # issue 7: zoo rows within 1% of the proven bound in at most 30 s
BIG_NODES, BIG_BUDGET, BIG_SECONDS = 1000, "80%", 60.0  # ... layered-1000 at 80%: valid within 60 s
FIRST_SECONDS = 5.0  # ... a first valid schedule within 5 s at every size

Row = dict[str, object]  # table cells by column, and "_raw": the row's JSON record
Check = tuple[str, int, int, list[str]]


@dataclass
class Run:
    cost: float | None = None  # energy; None: no schedule
    peak_ratio: float | None = None
    first_s: float | None = None
    near_s: float | None = None  # scale: time to its first schedule within 1% of its final bound
    total_s: float = 0.0
    bound: float | None = None
    note: str = ""
    status: str = ""  # the solver's own (scale: optimal / feasible, time-dependent / feasible)
    digest: str = ""  # scale: a hash of the schedule's steps (runs that differ in it returned others)
    cut: str | None = None  # scale: the phase the safety stop (--scale-limit) cut, None when it cut none


def zoo_graphs(
    device: str, names: list[str], train: str | None = None
) -> list[tuple[str, SchedulingProblem]]:
    """The zoo's training graphs, each trained as bench/zoo.py's MODELS say, or all with ``train``."""
    profile = load_profile(device)
    out = []
    for m in MODELS:
        if names and m.name not in names:
            continue
        _, spec = training(m if train is None else replace(m, train=train), profile)
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


def run_scale(
    problem: SchedulingProblem, limit: float, threads: int, gap: float | None = None, effort: str = "default"
) -> Run:
    began = time.perf_counter()
    try:
        options = ScaleOptions(time_limit_s=limit, threads=threads, effort=effort).with_gap(gap)
        schedule = schedule_scale(problem, options)
    except PoetError as err:
        return Run(total_s=time.perf_counter() - began, note=str(err)[:40])
    info = schedule.report.to_json()
    first, near = info.get("first_valid_s"), info.get("within_1pct_s")
    run = Run(
        total_s=time.perf_counter() - began,
        first_s=float(first) if isinstance(first, float) else None,
        near_s=float(near) if isinstance(near, float) else None,
        bound=float(info["bound"]),  # type: ignore[arg-type]
        status=str(info.get("status", "")),
        digest=hashlib.sha256(repr(schedule.steps).encode()).hexdigest()[:12],
        cut=str(info.get("cut_phase")) if info.get("cut_by_time_limit") else None,
    )
    return _measured(problem, schedule, run)


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def saturated(on: bool) -> Iterator[None]:
    """Every core kept busy by a spinning process while the block runs (``on``: --load), else nothing."""
    if not on:
        yield
        return
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
    for p in spinners:
        p.start()
    try:
        yield
    finally:
        for p in spinners:
            p.terminate()
        for p in spinners:
            p.join()


def run_poet(problem: SchedulingProblem, limit: float, threads: int, gap: float | None = None) -> Run:
    began = time.perf_counter()
    first: list[float] = []

    def progress(elapsed: float, inc: float | None, bound: float | None, gap: float | None) -> None:
        if inc is not None and not first:
            first.append(time.perf_counter() - began)

    options = MilpOptions(time_limit_s=limit, threads=threads, gap_rel=gap, on_progress=progress)
    try:
        schedule = replace(schedule_milp(problem, options), solver="poet-milp")
    except PoetError as err:
        return Run(total_s=time.perf_counter() - began, note=str(err)[:40])
    info = schedule.report.to_json()
    total = time.perf_counter() - began
    bound = info.get("bound")
    run = Run(
        total_s=total,
        first_s=first[0] if first else total,
        bound=float(bound) if bound is not None else None,  # type: ignore[arg-type]
        status=str(info.get("status", "")),
    )
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


def short_status(status: str) -> str:
    """The table's status cell: opt (proven optimal), time (a time limit or measured seconds decided
    something: another run may differ), feas (feasible, the same every run), else the solver's words."""
    low = status.lower()
    if low.startswith("optimal"):
        return "opt"
    if "time" in low:
        return "time"
    return "feas" if low == "feasible" else low[:12]


def _record(run: Run, plain: float, bound: float | None) -> dict[str, object]:
    """One solver's measurements on one row (the JSON record; the table's cells are made from it)."""
    gap = None if bound is None or run.cost is None else max(0.0, run.cost - bound) / run.cost
    return {
        "cost_pct": None if run.cost is None else 100 * (run.cost / plain - 1),
        "peak_ratio": run.peak_ratio,
        "first_s": run.first_s,
        "near_s": run.near_s,
        "total_s": run.total_s,
        "bound_pct": None if bound is None else 100 * (bound / plain - 1),
        "gap_pct": None if gap is None else 100 * gap,
        "status": run.status,
        "note": run.note,
    } | ({"digest": run.digest, "cut": run.cut} if run.digest else {})


def _cells(prefix: str, rec: dict[str, object]) -> dict[str, str]:
    total = f"{rec['total_s']:.1f}"
    if rec["cost_pct"] is None:
        return {f"{prefix} %": str(rec["note"] or "none"), f"{prefix} t": total}
    first, gap = rec["first_s"], rec["gap_pct"]
    return {
        f"{prefix} %": f"{rec['cost_pct']:.2f}",
        f"{prefix} pk/B": f"{rec['peak_ratio']:.3f}",
        f"{prefix} 1st": "" if first is None else f"{first:.2f}",
        f"{prefix} t": total,
        f"{prefix} gap%": "" if gap is None else f"{gap:.2f}",
    } | ({f"{prefix} st": short_status(str(rec["status"]))} if rec["status"] else {})


def budgets(peak: int, floor: int) -> list[tuple[str, int]]:
    out = [(f"{round(100 * f)}%", int(f * peak)) for f in FRACTIONS]
    return out + [("1.1xfloor", int(1.1 * floor))]


def bench_row(
    name: str, label: str, problem: SchedulingProblem, plain: float, args: argparse.Namespace
) -> Row:
    row: dict[str, object] = {"graph": name, "T": str(len(problem.nodes)), "budget": label}
    scale_runs = []
    for k in range(args.repeat):
        with saturated(args.load and k > 0):
            scale_runs.append(run_scale(problem, args.scale_limit, args.threads, args.gap, args.effort))
    runs = {"scale": scale_runs[0]}
    if len(problem.nodes) <= args.poet_max_nodes:
        runs["poet-milp"] = run_poet(problem, args.time_limit, args.threads, args.gap)
    runs["greedy"] = run_plain(problem, SCHEDULERS["greedy"])
    runs["best-base"] = run_best_base(problem)
    bounds = [r.bound for r in [*runs.values(), *scale_runs] if r.bound is not None]
    best_bound = max(bounds) if bounds else None
    records: dict[str, dict[str, object]] = {}
    for solver in SOLVERS:
        if solver not in runs:
            row[f"{solver} %"] = f"skipped (T>{args.poet_max_nodes})"
            continue
        own = runs[solver].bound if solver in ("scale", "poet-milp") else best_bound
        records[solver] = _record(runs[solver], plain, own)
        row.update(_cells(solver, records[solver]))
    row["_raw"] = {
        "graph": name,
        "nodes": len(problem.nodes),
        "budget": label,
        "budget_bytes": problem.budget_bytes,
        "plain_j": plain,
        "solvers": records,
    }
    if args.repeat > 1:  # every run of scale (the first is the table's)
        more = [_record(r, plain, r.bound) for r in scale_runs[1:]]
        row["_raw"]["scale_runs"] = [records["scale"], *more]  # type: ignore[index]
    return row


def graph_rows(name: str, base: SchedulingProblem, tmp: Path, args: argparse.Namespace) -> list[Row]:
    path = tmp / f"{name}.json"
    write_graph(base, path)
    problem = read_graph(path)
    plain = sum(n.compute_j for n in problem.nodes)
    peak = simulate(problem, SCHEDULERS["none"](problem)).peak_ram_bytes
    floor = memory_floor(problem).bytes
    rows: list[Row] = []
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


def scaling_table(rows: list[Row]) -> str:
    """Scale's solve time per size of the layered graphs: the whole run (it stops at the time limit when
    the gap stays open), the time to a first valid schedule and the time to its first schedule within 1%
    of the bound it reported (which may have been proven later), each with the exponent of a power law
    fitted over n."""
    by_n: dict[int, list[dict[str, Any]]] = {}
    for raw in _raws(rows):
        scale = raw["solvers"].get("scale")
        if _layered(raw) and _valid(scale):
            by_n.setdefault(int(raw["nodes"]), []).append(scale)

    def times(key: str) -> dict[int, list[float]]:
        """Per size, the rows' seconds under ``key`` (rows without it left out)."""
        return {n: [float(r[key]) for r in rs if r[key] is not None] for n, rs in sorted(by_n.items())}

    total, first, near = times("total_s"), times("first_s"), times("near_s")
    lines: list[dict[str, object]] = [
        {
            "n": str(n),
            "budgets": str(len(ts)),
            "mean s": f"{mean(ts):.2f}",
            "max s": f"{max(ts):.2f}",
            "mean 1st s": f"{mean(first[n]):.3f}",
            "within 1%": f"{len(near[n])}/{len(ts)}",
            "mean s to 1%": f"{mean(near[n]):.2f}" if near[n] else "",
            "max s to 1%": f"{max(near[n]):.2f}" if near[n] else "",
        }
        for n, ts in total.items()
    ]
    fits = [
        (what, fitted_exponent([(n, mean(ts)) for n, ts in series.items() if ts]))
        for what, series in (
            ("whole run", total),
            ("to a first valid schedule", first),
            ("to within 1%", near),
        )
    ]
    text = table(
        lines, ["n", "budgets", "mean s", "max s", "mean 1st s", "within 1%", "mean s to 1%", "max s to 1%"]
    )
    for what, exp in fits:
        text += f"\nfitted exponent of scale's mean solve time over n ({what}): " + (
            "n/a" if exp is None else f"{exp:.2f}"
        )
    return text


def spread_table(rows: list[Row]) -> str:
    """Run-to-run spread of scale (--repeat N): per row, the least and the largest cost and gap over the
    runs, in how many runs it was within 1% of its own bound in at most 30 s (issue 7's zoo criterion),
    how many different schedules the runs returned (by the hash of their steps) and their statuses."""
    lines: list[dict[str, object]] = []
    for raw in _raws(rows):
        every = raw.get("scale_runs", [])
        runs = [r for r in every if _valid(r)]  # a run without a valid schedule counts as a miss
        if not runs:
            continue
        costs, gaps = [r["cost_pct"] for r in runs], [r["gap_pct"] for r in runs]
        near = sum(map(_within, runs))
        statuses = [short_status(str(r["status"]) or "none") for r in every]
        lines.append(
            {
                "graph": raw["graph"],
                "budget": raw["budget"],
                "runs": str(len(every)),
                "min %": f"{min(costs):.2f}",
                "max %": f"{max(costs):.2f}",
                "min gap%": f"{min(gaps):.2f}",
                "max gap%": f"{max(gaps):.2f}",
                "1% in 30 s": f"{near}/{len(every)}",
                "schedules": str(len({r.get("digest") for r in runs})),
                "status": " ".join(f"{st} x{statuses.count(st)}" for st in sorted(set(statuses))),
            }
        )
    if not lines:
        return ""
    columns = ["graph", "budget", "runs", "min %", "max %", "min gap%", "max gap%", "1% in 30 s"]
    return "scale run to run:\n" + table(lines, columns + ["schedules", "status"])


def _raws(rows: list[Row]) -> list[dict[str, Any]]:
    return [r["_raw"] for r in rows if "_raw" in r]  # type: ignore[misc]


def _layered(raw: dict[str, Any]) -> bool:
    return str(raw["graph"]).startswith("layered-")


def _valid(rec: dict[str, Any] | None) -> bool:
    return rec is not None and rec["cost_pct"] is not None and rec["peak_ratio"] <= 1.0 + 1e-9


def _within(rec: dict[str, Any] | None) -> bool:
    """Issue 7's zoo criterion on one run of scale: valid, within 1% of its own bound, at most 30 s."""
    return _valid(rec) and rec["gap_pct"] <= ZOO_GAP_PCT and rec["total_s"] <= ZOO_SECONDS  # type: ignore[index]


def _at_most(rec: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """rec's cost is not above other's (True when other has no schedule)."""
    if not _valid(other):
        return True
    return _valid(rec) and rec["cost_pct"] <= other["cost_pct"] + 1e-6  # type: ignore[index]


def _name(raw: dict[str, Any]) -> str:
    return f"{raw['graph']} {raw['budget']}" + (f" run {raw['run']}" if "run" in raw else "")


def _per_run(raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row once per run of scale (--repeat): a copy with that run as its scale record, named
    "run k" when there are several."""
    out = []
    for raw in raws:
        runs = raw.get("scale_runs") or [raw["solvers"]["scale"]]
        for k, rec in enumerate(runs, 1):
            tag = {"run": k} if len(runs) > 1 else {}
            out.append(raw | {"solvers": raw["solvers"] | {"scale": rec}} | tag)
    return out


def checks(rows: list[Row]) -> list[Check]:
    """Issue 7's criteria, evaluated on the rows that ran, every run of scale (--repeat) counted on its
    own: (what, rows (runs) passing, rows (runs) checked, misses)."""
    raws = _per_run(_raws(rows))
    zoo = [r for r in raws if not _layered(r)]
    layered = [r for r in raws if _layered(r)]
    big = [r for r in layered if r["nodes"] == BIG_NODES and r["budget"] == BIG_BUDGET]

    def gap(r: dict[str, Any]) -> str:
        s = r["solvers"]["scale"]
        return "no schedule" if s["gap_pct"] is None else f"gap {s['gap_pct']:.2f}%, {s['total_s']:.1f} s"

    specs: list[tuple[str, list[dict[str, Any]], Callable[[dict[str, Any]], bool], Callable[..., str]]] = [
        (
            f"zoo rows: scale within {ZOO_GAP_PCT:g}% of its proven bound in at most {ZOO_SECONDS:g} s",
            zoo,
            lambda r: _within(r["solvers"]["scale"]),
            gap,
        ),
        (
            f"layered-{BIG_NODES} at {BIG_BUDGET}: a valid schedule within {BIG_SECONDS:g} s",
            big,
            lambda r: _valid(r["solvers"]["scale"]) and r["solvers"]["scale"]["total_s"] <= BIG_SECONDS,
            lambda r: f"{r['solvers']['scale']['total_s']:.1f} s",
        ),
        (
            f"layered rows: scale's first valid schedule within {FIRST_SECONDS:g} s",
            layered,
            lambda r: (
                _valid(r["solvers"]["scale"]) and (r["solvers"]["scale"]["first_s"] or 0) <= FIRST_SECONDS
            ),
            lambda r: f"first {r['solvers']['scale']['first_s']} s",
        ),
        (
            "every row: scale at or below the best baseline",
            raws,
            lambda r: _at_most(r["solvers"]["scale"], r["solvers"].get("best-base")),
            lambda r: f"{r['solvers']['scale']['cost_pct']} vs {r['solvers']['best-base']['cost_pct']}",
        ),
        (
            "rows where poet-milp ran: scale at or below poet-milp",
            [r for r in raws if "poet-milp" in r["solvers"]],
            lambda r: _at_most(r["solvers"]["scale"], r["solvers"]["poet-milp"]),
            lambda r: f"{r['solvers']['scale']['cost_pct']} vs {r['solvers']['poet-milp']['cost_pct']}",
        ),
    ]
    return [
        (what, sum(map(ok, rs)), len(rs), [f"{_name(r)} ({why(r)})" for r in rs if not ok(r)])
        for what, rs, ok, why in specs
    ]


def checks_text(found: list[Check]) -> str:
    lines = ["checks (issue 7's criteria, on the rows that ran):"]
    for what, good, total, misses in found:
        tally = "not run" if total == 0 else f"{good}/{total}"
        lines.append(f"  {what}: {tally}" + (f"; misses: {', '.join(misses)}" if misses else ""))
    return "\n".join(lines)


REFERENCE_GOAL_PCT = 0.5  # issue 55: no zoo row more than this above its reference cost


def load_reference(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The reference rows of ``path`` by (graph, budget): each with its ``cost_j`` and ``source``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"bench/solver.py: --reference {path}: {err}") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise SystemExit(f"bench/solver.py: {path}: no 'rows' list")
    out = {}
    for r in rows:
        if not isinstance(r.get("cost_j"), (int, float)):
            raise SystemExit(f"bench/solver.py: {path}: row {r.get('graph')} {r.get('budget')} has no cost_j")
        out[(str(r["graph"]), str(r["budget"]))] = r
    return out


def compared(rows: list[Row], reference: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Per row with a reference: scale's cost against it (J and +% over the plain pass, +% over the
    reference), its seconds and gap, and whether the safety stop cut it."""
    out = []
    for raw in _raws(rows):
        ref = reference.get((str(raw["graph"]), str(raw["budget"])))
        rec = raw["solvers"].get("scale")
        if ref is None or rec is None:
            continue
        plain = float(raw["plain_j"])
        cost = None if rec["cost_pct"] is None else plain * (1 + rec["cost_pct"] / 100)
        above = None if cost is None else 100 * (cost / float(ref["cost_j"]) - 1)
        out.append(
            {
                "graph": raw["graph"],
                "budget": raw["budget"],
                "reference_j": float(ref["cost_j"]),
                "reference_pct": 100 * (float(ref["cost_j"]) / plain - 1),
                "reference_source": ref.get("source", ""),
                "cost_j": cost,
                "cost_pct": rec["cost_pct"],
                "above_reference_pct": above,
                "seconds": rec["total_s"],
                "gap_pct": rec["gap_pct"],
                "status": rec["status"],
                "cut": rec.get("cut"),
                "within_goal": above is not None and above <= REFERENCE_GOAL_PCT + 1e-9,
            }
        )
    return out


def reference_lines(found: list[dict[str, Any]]) -> list[dict[str, object]]:
    """The comparison (:func:`compared`) as table rows."""
    return [
        {
            "graph": r["graph"],
            "budget": r["budget"],
            "reference %": f"{r['reference_pct']:.2f}",
            "now %": "none" if r["cost_pct"] is None else f"{r['cost_pct']:.2f}",
            "+% vs ref": "" if r["above_reference_pct"] is None else f"{r['above_reference_pct']:+.3f}",
            "s": f"{r['seconds']:.1f}",
            "gap%": "" if r["gap_pct"] is None else f"{r['gap_pct']:.2f}",
            "st": short_status(str(r["status"])),
            "cut": r["cut"] or "no",
            "ref from": r["reference_source"],
        }
        for r in found
    ]


REFERENCE_COLUMNS = [
    "graph",
    "budget",
    "reference %",
    "now %",
    "+% vs ref",
    "s",
    "gap%",
    "st",
    "cut",
    "ref from",
]


def reference_summary(found: list[dict[str, Any]]) -> str:
    good = sum(r["within_goal"] for r in found)
    goal = f"at most {REFERENCE_GOAL_PCT:g}% above it"
    return f"scale against the reference (goal: {goal}): {good}/{len(found)} rows"


def markdown(rows: list[dict[str, object]], columns: list[str]) -> str:
    """``rows`` as a markdown table of ``columns``."""
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def write_results(
    name: str, meta: dict[str, Any], report: dict[str, Any], sections: list[tuple[str, str]]
) -> None:
    """bench/results/NAME.json (the settings and provenance as "meta", the rows, checks and the
    reference comparison) and NAME.md (the sections: title, markdown), each written whole (a temporary
    file replaced)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Scheduler scale on the zoo rows of bench/solver.py ({name})",
        "",
        f"Measured by `bench/solver.py` (`{meta['command']}`). Machine: {meta['machine']}. "
        f"Commit {meta['commit']}, {meta['date']}. Load average (1 min) at the start {meta['load_start']}, "
        f"at the end {meta['load_end']} (the machine is shared: seconds are disturbed; scale's costs "
        "are not, its work is counted, unless the safety stop cut a run: column cut).",
        "",
    ]
    for title, body in sections:
        lines += [f"## {title}", "", body, ""]
    for path, text in (
        (RESULTS / f"{name}.json", json.dumps({"meta": meta, **report}, indent=1) + "\n"),
        (RESULTS / f"{name}.md", "\n".join(lines)),
    ):
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_text(text)
        tmp.replace(path)


RESULTS = Path(__file__).resolve().parent / "results"


COLUMNS = ["graph", "T", "budget"] + [
    f"{s} {c}"
    for s in SOLVERS
    for c in ("%", "pk/B", "1st", "t", "gap%", "st")
    if c != "st" or s in ("scale", "poet-milp")
]


def _gap(text: str) -> float:
    try:
        return parse_gap(text)
    except PoetError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per poet-milp run")
    ap.add_argument("--effort", choices=tuple(EFFORTS), default="default", help="scale's --effort")
    ap.add_argument(
        "--scale-limit", type=float, default=SAFETY_S, help="scale's safety stop in seconds (--time-limit)"
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
    ap.add_argument(
        "--train",
        help="trainable parameters of every zoo model, as poet compile's --train (default: each model's "
        "own, bench/zoo.py: biases only for resnet8, dscnn, the MobileNets and bert_tiny; compile's "
        "default is all)",
    )
    ap.add_argument("--json", type=Path, help="also write the rows and the checks to this JSON file")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run scale this many times per row (the table shows the first run; a spread table and the "
        "checks cover every run)",
    )
    ap.add_argument(
        "--load",
        action="store_true",
        help="with --repeat N: runs 2 to N while every core is kept busy by a spinning process",
    )
    ap.add_argument("--results", help="also write bench/results/NAME.json and NAME.md (with provenance)")
    ap.add_argument(
        "--reference", type=Path, help="compare scale's costs with this JSON file's rows (module docstring)"
    )
    ap.add_argument(
        "--gap",
        type=_gap,
        help="scale and poet-milp stop once proven within this, e.g. 1%% (default: as close as the time "
        "limit allows)",
    )
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.load and args.repeat < 2:
        ap.error("--load needs --repeat 2 or more (the first run is the quiet one)")
    if args.quick:
        args.time_limit = min(args.time_limit, 10.0)
        args.poet_max_nodes = min(args.poet_max_nodes, 100)
    args.budget_labels = set(args.budgets.split(","))
    if args.results is not None and not args.results.replace("-", "").replace("_", "").isalnum():
        ap.error("--results takes a name (letters, digits, - and _), written to bench/results/")
    reference = load_reference(args.reference) if args.reference is not None else None
    load_start = round(os.getloadavg()[0], 2)
    zoo = not args.no_zoo and args.only != "random"
    graphs = zoo_graphs(args.device, [m for m in args.models.split(",") if m], args.train) if zoo else []
    if args.only != "zoo":
        graphs += random_graphs([int(s) for s in args.sizes.split(",") if s])
    rows: list[Row] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, problem in graphs:
            rows += graph_rows(name, problem, Path(tmp), args)
    print(
        f"time limit {args.time_limit:g} s per solver run, "
        + ("" if args.gap is None else f"stop at a proven gap of {100 * args.gap:g}%, ")
        + ("" if args.train is None else f"zoo models trained with --train {args.train}, ")
        + f"{args.threads} threads, poet-milp up to "
        f"{args.poet_max_nodes} nodes; total bench time {time.perf_counter() - began:.0f} s"
    )
    print(table(rows, COLUMNS))
    print()
    spread = spread_table(rows)
    if spread:
        print(spread)
        print()
    print(scaling_table(rows))
    print()
    found = checks(rows)
    print(checks_text(found))
    versus = compared(rows, reference) if reference is not None else []
    if reference is not None:
        print()
        print(reference_summary(versus))
        print(table(reference_lines(versus), REFERENCE_COLUMNS))
    report = {
        "time_limit_s": args.time_limit,
        "scale_limit_s": args.scale_limit,
        "effort": args.effort,
        "gap": args.gap,
        "train": args.train,
        "threads": args.threads,
        "repeat": args.repeat,
        "load": args.load,
        "device": args.device,
        "rows": _raws(rows),
        "checks": [{"what": w, "passed": g, "checked": n, "misses": m} for w, g, n, m in found],
    } | ({"reference": str(args.reference), "versus_reference": versus} if reference is not None else {})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.results is not None:
        meta = provenance() | {
            "command": "bench/solver.py " + " ".join(sys.argv[1:]),
            "load_start": load_start,
            "load_end": round(os.getloadavg()[0], 2),
        }
        sections = [
            ("Every row", markdown(rows, COLUMNS)),
            ("Checks", "```\n" + checks_text(found) + "\n```"),
        ]
        if spread:
            title = "Run to run" + (" (runs 2 on: every core busy)" if args.load else "")
            sections.insert(1, (title, "```\n" + spread + "\n```"))
        if reference is not None:
            told = json.loads(args.reference.read_text()).get("meta", {})
            about = " ".join(str(told[k]) for k in ("what", "readme", "how") if k in told)
            body = (about + "\n\n" if about else "") + reference_summary(versus) + "."
            body += "\n\n" + markdown(reference_lines(versus), REFERENCE_COLUMNS)
            sections.insert(0, (f"Against {args.reference.name}", body))
        write_results(args.results, meta, report, sections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
