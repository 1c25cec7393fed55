#!/usr/bin/env python3
"""`poet sweep` on the local executor, a local Dask cluster and a local Ray instance (issue 60).

    PYTHONPATH=$PWD .venv/bin/python bench/sweep_executors.py [--executors local,dask,ray] [--jobs 2]
        [--model examples/zoo/resnet8.onnx] [--device cortex-m4] [--ram 516KB..804KB] [--points 8]

The same sweep for every executor: resnet8 (train all, batch 1) on cortex-m4 at 8 budgets from its memory
floor (515.6 KiB) to its no-recomputation peak (803.6 KiB), log-spaced, times the 6 schedulers: 48
compiles, each writing its project folder with report.html, as `poet sweep` does by default. Each
executor runs the real command line twice with its own fresh result cache: the first run computes every
point, the second must take every point from the cache. Per run: wall time, CPU time of the whole process
tree (the command, its worker processes, Dask's nannies and workers, Ray's raylet and workers): the larger
of a psutil sample every 0.2 s (each process counted at its last sample) and the rusage of the reaped
children (exact for every process the command waited for; a short run ends between samples), the points
taken from the cache and computed; and whether sweep.csv is byte-identical to the first executor's. The
MILP's points stop at its 60 s time limit, so their numbers can differ between runs (the table says which
rows differ, if any).

Writes bench/results/sweep_executors.md and .json (machine, commit, date).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from provenance import provenance  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def tree_cpu(pid: int, stop: threading.Event, out: dict[int, float]) -> None:
    """Samples the CPU seconds (user + system) of ``pid`` and every descendant until ``stop``."""
    while not stop.is_set():
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        stop.wait(0.2)


def one_run(args: argparse.Namespace, executor: str, out: Path, cache: Path) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "poet_edge", "sweep", args.model, "--device", args.device, "--ram", args.ram,
        "--points", str(args.points), "--jobs", str(args.jobs), "--executor", executor, "--cache", str(cache),
        "-o", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    seen: dict[int, float] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=tree_cpu, args=(proc.pid, stop, seen))
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"{executor}: exit {proc.returncode}\n{stdout}\n{stderr}")
    m = re.search(r"^(\d+) of (\d+) points from the cache, (\d+) computed", stdout, re.M)
    assert m, stdout
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(max(sum(seen.values()), reaped), 1),
        "cached": int(m.group(1)),
        "points": int(m.group(2)),
        "computed": int(m.group(3)),
        "ok": sum(1 for ln in (out / "sweep.csv").read_text().splitlines()[1:] if ",ok," in ln),
        "csv": (out / "sweep.csv").read_text(),
    }


def differing_rows(a: str, b: str) -> list[str]:
    la, lb = a.splitlines(), b.splitlines()
    return [f"{x.split(',')[4]}@{x.split(',')[3]}" for x, y in zip(la[1:], lb[1:], strict=True) if x != y]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executors", default="local,dask,ray")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--model", default="examples/zoo/resnet8.onnx")
    ap.add_argument("--device", default="cortex-m4")
    ap.add_argument("--ram", default="516KB..804KB")
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None, help="results name (default sweep_executors)")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    first_csv: str | None = None
    with tempfile.TemporaryDirectory(prefix="poet-bench-sweep-") as tmp:
        for ex in args.executors.split(","):
            cache = Path(tmp) / f"cache-{ex}"
            cold = one_run(args, ex, Path(tmp) / f"out-{ex}", cache)
            warm = one_run(args, ex, Path(tmp) / f"out-{ex}", cache)
            first_csv = first_csv or cold["csv"]
            row = {
                "executor": ex,
                "points": cold["points"],
                "ok": cold["ok"],
                "wall_s": cold["wall_s"],
                "cpu_s": cold["cpu_s"],
                "second_wall_s": warm["wall_s"],
                "second_cpu_s": warm["cpu_s"],
                "second_cached": warm["cached"],
                "second_computed": warm["computed"],
                "second_csv_identical": warm["csv"] == cold["csv"],
                "csv_identical_to_first": cold["csv"] == first_csv,
                "rows_differing_from_first": differing_rows(first_csv, cold["csv"]),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {
        **provenance(),
        "sweep": f"poet sweep {args.model} --device {args.device} --ram {args.ram} --points {args.points} "
        f"--jobs {args.jobs} (all 6 schedulers, reports on)",
    }
    head = (
        "| executor | points | ok | wall (s) | CPU (s) | 2nd run wall (s) | 2nd run CPU (s) "
        "| 2nd run cache hits "
        "| 2nd run computed | sweep.csv = local's |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    body = "".join(
        f"| {r['executor']} | {r['points']} | {r['ok']} | {r['wall_s']} | {r['cpu_s']} | "
        f"{r['second_wall_s']} | "
        f"{r['second_cpu_s']} | {r['second_cached']} of {r['points']} | {r['second_computed']} | "
        f"{'yes' if r['csv_identical_to_first'] else 'no: ' + ', '.join(r['rows_differing_from_first'])} |\n"
        for r in rows
    )
    md = (
        "# poet sweep: local, Dask and Ray executors\n\n"
        f"Measured on {meta['machine']}, commit {meta['commit']}, {meta['date']} by "
        "`bench/sweep_executors.py`.\n\n"
        f"Sweep: `{meta['sweep']}`; {rows[0]['points']} compiles. Each executor starts its own local "
        f"workers ({args.jobs}) "
        "and result cache; the second run is the same command again. CPU is the whole process tree's "
        "(workers, Dask nannies, Ray's raylet and GCS included): the larger of a psutil sample every 0.2 s "
        "and the rusage of the reaped children.\n\n" + head + body
    )
    print(md)
    name = args.out or Path("sweep_executors")
    (RESULTS / f"{name}.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    (RESULTS / f"{name}.md").write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
