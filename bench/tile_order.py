"""Rows first against channels first (issue 57, `--tile-order`): the same tight compiles with the big tensors
cut into bands of rows of all channels, or into channel ranges (today's order until 2026-11-30).

Each row compiles one zoo model as `poet compile` does by default (--params auto, --fused-updates,
--relu-masks, --split auto, --scheduler scale, --effort quick, --time-limit 600, 1 thread), once with
`--tile-order rows` and once with `--tile-order channels`, each in a child process (two at a time with
--jobs 2). Columns: the simulated energy and latency of one step of each, their ratio (rows / channels), the
split graph's nodes and the tile sizes chosen, the compile's wall seconds, and whether the scheduler's
safety stop cut it (a cut row depends on the machine's load). A compile that fails says why.

Writes bench/results/tile_order.md and .json (machine, commit, date). Run:
    .venv/bin/python bench/tile_order.py [--jobs 2] [--only MODEL]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from provenance import markdown_table, provenance  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ZOO = ROOT / "examples" / "zoo"
ORDERS = ("rows", "channels")
# (model, --train, --ram, --input): the tight budgets of bench/tight.py where --split auto splits
CASES = (
    ("resnet8", "bias", "96KB", "ram"),
    ("resnet8", "all", "256KB", "ram"),
    ("mobilenetv1_025", "bias", "96KB", "storage"),
    ("mobilenetv2_035", "bias", "256KB", "ram"),
    ("dscnn", "bias", "32KB", "ram"),
    ("lenet5", "all", "64KB", "ram"),
)


def compile_one(model: str, train: str, ram: str, place: str, order: str, out: Path) -> dict[str, Any]:
    """`poet compile` in a child process; the plan's figures, or its error."""
    cmd = [sys.executable, "-m", "poet_edge", "compile", str(ZOO / f"{model}.onnx"), "--device", "cortex-m4"]
    cmd += ["--ram", ram, "--train", train, "--input", place, "--tile-order", order, "--effort", "quick"]
    cmd += ["--time-limit", "600", "--threads", "1", "-q", "-o", str(out)]
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = round(time.perf_counter() - began, 1)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:160], "compile_s": wall}
    plan = json.loads((out / "plan.json").read_text())
    sim, info = plan["simulation"], plan["schedule"]["info"]
    tiles = plan.get("tiles") or {}
    sizes = tiles.get("tile_sizes") or {}
    return {
        "energy_mj": 1e3 * sim["energy_j"],
        "latency_ms": 1e3 * sim["latency_s"],
        "nodes": len(plan["problem"]["nodes"]),
        "tiles": f"{min(sizes.values(), default=tiles.get('tile_bytes', 0)) // 1024}-"
        f"{tiles.get('tile_bytes', 0) // 1024} KB"
        if tiles
        else "-",
        "rows_first": tiles.get("rows_first"),
        "cut": bool(info.get("cut_by_time_limit")),
        "compile_s": wall,
    }


def run_case(case: tuple[str, str, str, str], tmp: Path, jobs: int) -> dict[str, Any]:
    model, train, ram, place = case
    with ThreadPoolExecutor(jobs) as pool:
        got = dict(
            zip(
                ORDERS,
                pool.map(lambda o: compile_one(*case, o, tmp / f"{model}-{train}-{ram}-{o}"), ORDERS),
                strict=True,
            )
        )
    rows, chans = got["rows"], got["channels"]
    both = "energy_mj" in rows and "energy_mj" in chans
    ratio = f"{rows['energy_mj'] / chans['energy_mj']:.2f}" if both else "-"
    return {"model": model, "train": train, "ram": ram, "input": place, "energy_ratio": ratio, **got}


def flat(r: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {k: r[k] for k in ("model", "train", "ram", "input")}
    for o in ORDERS:
        x = r[o]
        if "error" in x:
            out[f"{o}: energy mJ"] = f"error: {x['error']}"
            out[f"{o}: latency ms"] = out[f"{o}: tiles / nodes"] = "-"
        else:
            out[f"{o}: energy mJ"] = f"{x['energy_mj']:.1f}" + (" (cut)" if x["cut"] else "")
            out[f"{o}: latency ms"] = f"{x['latency_ms']:.0f}"
            out[f"{o}: tiles / nodes"] = f"{x['tiles']} / {x['nodes']:,}"
        out[f"{o}: compile s"] = x["compile_s"]
    out["energy rows / channels"] = r["energy_ratio"]
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2, help="compiles at once (default 2: the two orders)")
    ap.add_argument("--only", help="this model's rows only (nothing written to bench/results)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if args.only and case[0] != args.only:
                continue
            rows.append(run_case(case, Path(tmp), args.jobs))
            print(flat(rows[-1]), file=sys.stderr, flush=True)
    table = markdown_table([flat(r) for r in rows])
    print(table)
    if args.only:
        return 0
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tile_order.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    doc = __doc__.split("\n\nWrites")[0]
    (RESULTS / "tile_order.md").write_text(
        f"# Rows first against channels first (issue 57)\n\nMeasured by `bench/tile_order.py` on "
        f"{meta['machine']}, commit {meta['commit']}, {meta['date']}.\n\n{doc}\n\n{table}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
