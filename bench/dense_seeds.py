"""Dense random layered graphs over many seeds (issue 55): how often `poet solve` finds a schedule at all.

bench/dense.py runs one graph per size (seed = n). This runs K more of each size (seeds n * 100 + 1 ...
n * 100 + K, the same generator: poet_edge.graphgen.dense_layered, layers about 30 wide, about 6 in-edges
per node), in the given order, at 90% and 80% of that order's no-recomputation peak, each as a user would
(`python -m poet_edge solve FILE --ram B --time-limit T --threads 2 --json` in a child process). Columns per
size and budget: schedules found of K, the median and worst cost +% over running every node once among
those found, the median and worst first-valid seconds, the seeds with no schedule, and those whose
schedule the safety stop cut a run for (it could differ on another machine).

Writes bench/results/dense_seeds.json and .md. Run:
    PYTHONPATH=. python bench/dense_seeds.py [--sizes 250,500,1000] [--seeds 4] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dense import FRACTIONS, RESULTS, row  # noqa: E402
from provenance import markdown_table, provenance  # noqa: E402

from poet_edge.graphgen import dense_layered  # noqa: E402
from poet_edge.graphio import write_graph  # noqa: E402
from poet_edge.schedulers.ordering import Curves  # noqa: E402

SIZES = (250, 500, 1000, 2000)
SEEDS = 4


def summary(n: int, frac: float, rows: list[dict[str, Any]]) -> dict[str, object]:
    found = [r for r in rows if r["valid"]]
    costs = sorted(r["cost_pct"] for r in found)
    firsts = sorted(float(r["first_valid_s"]) for r in found if r["first_valid_s"] is not None)
    pct = lambda x: f"{x:+.2f}%"  # noqa: E731
    return {
        "n": n,
        "budget": f"{round(100 * frac)}%",
        "found": f"{len(found)} of {len(rows)}",
        "cost median": pct(statistics.median(costs)) if costs else "-",
        "cost worst": pct(costs[-1]) if costs else "-",
        "first valid median s": f"{statistics.median(firsts):.2f}" if firsts else "-",
        "first valid worst s": f"{firsts[-1]:.2f}" if firsts else "-",
        "no schedule (seeds)": ", ".join(str(r["seed"]) for r in rows if not r["valid"]) or "-",
        "cut (seeds)": ", ".join(str(r["seed"]) for r in found if r.get("cut_phase")) or "-",
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--seeds", type=int, default=SEEDS)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    meta = {**provenance(), "time_limit": args.time_limit, "load_start": round(os.getloadavg()[0], 2)}
    rows: list[dict[str, Any]] = []
    table: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            mine: dict[float, list[dict[str, Any]]] = {f: [] for f in FRACTIONS}
            for seed in range(n * 100 + 1, n * 100 + 1 + args.seeds):
                given = dense_layered(n, seed=seed)
                peak = int(Curves(given).curve(range(n)).max())
                plain = sum(node.compute_j for node in given.nodes)
                path = Path(tmp) / f"dense_{n}_{seed}.json"
                write_graph(given, path)
                for frac in FRACTIONS:
                    solved = row(n, "given", frac, path, int(frac * peak), plain, args.time_limit)
                    r = {"seed": seed, **solved}
                    rows.append(r)
                    mine[frac].append(r)
                    print(" ".join(f"{k}={v}" for k, v in r.items() if v is not None), flush=True)
            table += [summary(n, f, mine[f]) for f in FRACTIONS]
    meta["load_end"] = round(os.getloadavg()[0], 2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dense_seeds.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    text = (
        "# Dense random layered graphs over many seeds (issue 55)\n\n"
        f"Measured by `bench/dense_seeds.py` on {meta['machine']}, commit {meta['commit']}, {meta['date']}; "
        f"`poet solve --time-limit {args.time_limit:g} --threads 2`; load average {meta['load_start']} at "
        f"the start, {meta['load_end']} at the end.\n\n"
        + __doc__.split("\n\n")[1].replace("\n", " ")
        + "\n\n"
        + markdown_table(table)
    )
    (RESULTS / "dense_seeds.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
