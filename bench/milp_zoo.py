"""The MILP scheduler on the zoo training graphs (cortex-m4): at 256, 128 and 64 KB (where above the memory
floor), energy and latency vs the no-remat schedule (where it fits) and vs the best baseline, binaries, solve
time and gap; --lowest adds 1.1x the floor where a budget is below it. Run: .venv/bin/python
bench/milp_zoo.py [--time-limit S] [--budgets 256,128,64] [--lowest] [model ...]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import MODELS, table, training  # noqa: E402

from poet_edge import planning  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers import SCHEDULERS  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions, schedule_milp  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402


def _sim(problem, schedule, profile):
    return simulate(problem, schedule, profile)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--device", default="cortex-m4")
    ap.add_argument("--budgets", default="256,128,64", help="KB, comma separated")
    ap.add_argument(
        "--lowest",
        action="store_true",
        help="also solve at 1.1x the memory floor (rounded up to a KB) when a budget is below it",
    )
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    profile = load_profile(args.device)
    rows = []
    for m in MODELS:
        if args.models and m.name not in args.models:
            continue
        _, spec = training(m, profile)
        floor = memory_floor(planning.price(spec, profile, 1 << 62)).bytes
        budgets = [int(b) for b in args.budgets.split(",")]
        if args.lowest and min(budgets) * 1024 < floor:
            budgets.append(-(-int(1.1 * floor) // 1024))
        for kb in budgets:
            problem = planning.price(spec, profile, kb * 1024)
            row = {
                "model": f"{m.name} ({m.train})",
                "T": len(problem.nodes),
                "KB": kb,
                "floor KB": floor // 1024,
            }
            if kb * 1024 < floor:
                rows.append({**row, "status": "below memory floor"})
                continue
            base = {}
            for name in ("none", "page-all", "greedy", "recompute-all"):
                try:
                    base[name] = _sim(problem, SCHEDULERS[name](problem), profile)
                except PoetError:
                    pass
            t0 = time.monotonic()
            try:
                sched = schedule_milp(problem, MilpOptions(time_limit_s=args.time_limit, threads=2))
            except PoetError as e:
                rows.append({**row, "status": f"error: {str(e)[:50]}"})
                continue
            secs = time.monotonic() - t0
            sim = _sim(problem, sched, profile)
            info = sched.report.to_json()
            best = min((s.energy_j, n) for n, s in base.items()) if base else None
            rows.append(
                {
                    **row,
                    "binaries": info.get("binaries", ""),
                    "status": str(info.get("status"))[:24],
                    "fallback": "yes" if info.get("fallback") else "",
                    "E mJ": f"{sim.energy_j * 1e3:.3f}",
                    "t ms": f"{sim.latency_s * 1e3:.1f}",
                    "E/none": f"{sim.energy_j / base['none'].energy_j:.3f}" if "none" in base else "n/a",
                    "best baseline": best[1] if best else "none",
                    "E/best": f"{sim.energy_j / best[0]:.4f}" if best else "",
                    "t/best": f"{sim.latency_s / base[best[1]].latency_s:.4f}" if best else "",
                    "recomp": sim.n_recomputations,
                    "page-outs": sim.n_page_outs,
                    "solve s": f"{secs:.1f}",
                    "gap %": f"{100 * float(info.get('gap') or 0):.2f}",
                }
            )
            print(rows[-1], flush=True, file=sys.stderr)
    print(
        table(
            rows,
            [
                "model",
                "T",
                "KB",
                "floor KB",
                "binaries",
                "status",
                "fallback",
                "E mJ",
                "t ms",
                "E/none",
                "best baseline",
                "E/best",
                "t/best",
                "recomp",
                "page-outs",
                "solve s",
                "gap %",
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
