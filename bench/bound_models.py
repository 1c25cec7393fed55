"""Scheduler "scale"'s segment bound models, each solved alone by HiGHS: the segment bound model
(segment_lp, what every scale run solves first) against the strict one (segment_strict: variants,
ancestor pairs, a second restoration priced by the exchange rule; scale runs it only when the gap
stays wide and time is left) and the split one (the strict model with gap rows and the split ends
its LP relaxation asks for, segment_gap; scale gives it a cutoff when the gap is narrow, here it is
solved without one). Zoo training graphs on cortex-m4 at bench/solver.py's budgets.

Columns per model: the bound (cost increase over the no-remat pass, %; the dual bound when the time
limit stops HiGHS), the model's columns, solve seconds (build included; for the split model, its
LP relaxation's too) and whether HiGHS proved the optimum; then the strict and split models' gains
over the segment model in percentage points and their times as multiples of its time, all measured
in this run.

With ``--split-rounds N``, a second table follows: the split model iterated, each round adding the
split ends that the previous round's LP relaxation and best point ask for, until a round asks for none
(or N rounds). Per round: the ends added so far, columns, the LP relaxation, the best point HiGHS
found (the model's optimum is at most that: no bound this model gives can be higher) and its dual
bound. It measures how far gap rows and split ends can lift the bound at all.
Run: .venv/bin/python bench/bound_models.py [--time-limit S] [--threads N] [--models bert_tiny,dscnn]
     [--budgets 50%,1.1xfloor] [--split-rounds N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver import budgets, zoo_graphs  # noqa: E402
from zoo import table  # noqa: E402

from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.problem import SchedulingProblem  # noqa: E402
from poet_edge.schedulers import SCHEDULERS  # noqa: E402
from poet_edge.schedulers.engine import Analysis, analyse  # noqa: E402
from poet_edge.schedulers.lp_model import LpModel, solve_lp  # noqa: E402
from poet_edge.schedulers.scale import ScaleOptions  # noqa: E402
from poet_edge.schedulers.segment_cover import Cover, build_cover  # noqa: E402
from poet_edge.schedulers.segment_gap import split_ends  # noqa: E402
from poet_edge.schedulers.segment_lp import bound_model  # noqa: E402
from poet_edge.schedulers.segment_strict import split_model, strict_model  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

Build = Callable[[SchedulingProblem, Analysis, Cover, bool, float, np.ndarray], "LpModel | None"]


def split(
    options: ScaleOptions,
    problem: SchedulingProblem,
    an: Analysis,
    cover: Cover,
    latency: bool,
    norm: float,
    budget: np.ndarray,
) -> LpModel | None:
    """The split model as scale's split proof builds it (its LP relaxation gets the time limit)."""
    return split_model(problem, an, cover, latency, norm, budget, options.time_limit_s, options).split()


def measure(problem: SchedulingProblem, build: Build, norm: float, options: ScaleOptions) -> tuple[str, ...]:
    """(bound %, columns, seconds, optimal) of one model; the seconds count its build (the segment
    cover under it included) and its solve."""
    start = time.perf_counter()
    an = analyse(problem, True)
    lp = build(
        problem, an, build_cover(problem, an), False, norm, np.full(len(problem.nodes), problem.budget_bytes)
    )
    if lp is None:
        return ("no fit", "", f"{time.perf_counter() - start:.1f}", "")
    solved = solve_lp(lp, options.time_limit_s, options)
    return (
        f"{100 * solved.bound:.2f}",
        str(len(lp.cost)),
        f"{time.perf_counter() - start:.1f}",
        "yes" if solved.optimal else "no",
    )


def split_rounds(
    problem: SchedulingProblem, graph: str, label: str, norm: float, options: ScaleOptions, rounds: int
) -> list[dict[str, object]]:
    """The split model iterated (see the module docstring): one table row per round."""
    an = analyse(problem, True)
    cover = build_cover(problem, an)
    budget = np.full(len(problem.nodes), problem.budget_bytes)
    splits: dict[int, set[int]] = {}
    out: list[dict[str, object]] = []
    for k in range(rounds):
        start = time.perf_counter()
        lp = strict_model(problem, an, cover, False, norm, budget, splits or None)
        if lp is None:
            break
        relaxed = solve_lp(lp, options.time_limit_s, options, integer=False)
        solved = solve_lp(lp, options.time_limit_s, options)
        point = "" if solved.objective is None else f"{100 * solved.objective:.2f}"
        out.append(
            {
                "graph": graph,
                "budget": label,
                "round": str(k),
                "ends": str(sum(len(e) for e in splits.values())),
                "cols": str(len(lp.cost)),
                "LP %": f"{100 * relaxed.bound:.2f}",
                "point %": point,
                "bound %": f"{100 * solved.bound:.2f}",
                "opt": "yes" if solved.optimal else "no",
                "s": f"{time.perf_counter() - start:.1f}",
            }
        )
        print(f"{graph} {label} split round {k} done", file=sys.stderr, flush=True)
        added = 0
        for values in (relaxed.values, solved.values):
            for seg, ends in (split_ends(cover, lp, values) if values is not None else {}).items():
                added += len(ends - splits.get(seg, set()))
                splits.setdefault(seg, set()).update(ends)
        if not added:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per model solve (default 60)")
    ap.add_argument("--threads", type=int, default=2, help="HiGHS threads (default 2)")
    ap.add_argument("--models", default="", help="comma-separated zoo models (default: all)")
    ap.add_argument("--budgets", default="", help="comma-separated budget labels (default: all)")
    ap.add_argument(
        "--split-rounds", type=int, default=0, help="also iterate the split model up to N rounds (default 0)"
    )
    args = ap.parse_args()
    options = ScaleOptions(time_limit_s=args.time_limit, threads=args.threads)
    names = [m for m in args.models.split(",") if m]
    labels = [b for b in args.budgets.split(",") if b]
    rows: list[dict[str, object]] = []
    iterated: list[dict[str, object]] = []
    models: tuple[tuple[str, Build], ...] = (
        ("seg", bound_model),
        ("strict", strict_model),
        ("split", partial(split, options)),
    )
    for name, base in zoo_graphs("cortex-m4", names):
        roomy = replace(base, budget_bytes=10**12)
        peak = simulate(roomy, SCHEDULERS["none"](roomy)).peak_ram_bytes
        floor = memory_floor(base).bytes
        norm = sum(n.compute_j for n in base.nodes)
        for label, budget in budgets(peak, floor):
            if (labels and label not in labels) or budget < floor:
                continue
            problem = replace(base, budget_bytes=budget)
            row: dict[str, object] = {"graph": name, "budget": label}
            for key, build in models:
                cells = measure(problem, build, norm, options)
                row.update(zip((f"{key} %", f"{key} cols", f"{key} s", f"{key} opt"), cells, strict=True))
            for key, _ in models[1:]:
                try:
                    row[f"{key} pp"] = f"{float(str(row[f'{key} %'])) - float(str(row['seg %'])):+.2f}"
                    row[f"{key} x"] = (
                        f"{float(str(row[f'{key} s'])) / max(float(str(row['seg s'])), 0.05):.1f}"
                    )
                except ValueError:
                    pass
            rows.append(row)
            print(f"{name} {label} done", file=sys.stderr, flush=True)
            if args.split_rounds > 0:
                iterated += split_rounds(problem, name, label, norm, options, args.split_rounds)
    columns = ["graph", "budget"]
    columns += [f"{k} {c}" for k, _ in models for c in ("%", "cols", "s", "opt")]
    print(table(rows, [*columns, *(f"{k} {c}" for k, _ in models[1:] for c in ("pp", "x"))]))
    if iterated:
        print()
        keys = ["graph", "budget", "round", "ends", "cols", "LP %", "point %", "bound %", "opt", "s"]
        print(table(iterated, keys))


if __name__ == "__main__":
    main()
