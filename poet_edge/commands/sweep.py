"""poet sweep MODEL.onnx --device D --ram LO..HI [--points N] [--schedulers A,B] [--jobs N]
[--time-limit S] [--gap G] -o DIR"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from poet_edge import autodiff, frontend, optimizer, sanity, sweep
from poet_edge.autodiff import Loss
from poet_edge.commands import add_batch, add_solve_limits, warn_ram_above_device
from poet_edge.compiler import CompileOptions
from poet_edge.errors import PoetError
from poet_edge.planning import INPUT_HELP, InputPlace
from poet_edge.progress import Progress
from poet_edge.schedulers import ALIASES, SCHEDULERS
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.trainable import TRAIN_HELP
from poet_edge.units import SIZE_HELP, parse_size

DEFAULT_SCHEDULERS = sorted(n for n in SCHEDULERS if n not in ALIASES)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="compile across RAM budgets and schedulers; write sweep.csv and pareto.png",
        description="Compile MODEL at several RAM budgets with several schedulers, each point an "
        "independent compile in a worker process into DIR/<scheduler>-<bytes>/, then write "
        "DIR/sweep.csv (one row per point, errors included) and DIR/pareto.png (energy and "
        "latency per step vs budget, the memory floor marked).",
    )
    p.add_argument("model", type=Path, help="ONNX model")
    p.add_argument("--device", default="host", help="device profile name or TOML path (see 'poet profiles')")
    p.add_argument(
        "--ram",
        required=True,
        help=f"budgets: LO..HI (--points values between the bounds, both included), a comma "
        f"list, or one size; {SIZE_HELP}",
    )
    p.add_argument("--points", type=int, default=8, help="budgets in a LO..HI range (default 8)")
    p.add_argument(
        "--scale",
        choices=sweep.SCALES,
        default="log",
        help="spacing of a range: log (default; equal ratios, rounded to whole bytes) or linear",
    )
    p.add_argument(
        "--schedulers",
        default=",".join(DEFAULT_SCHEDULERS),
        help=f"comma-separated (default all: {','.join(DEFAULT_SCHEDULERS)}; also {', '.join(ALIASES)})",
    )
    p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: CPU count)")
    add_solve_limits(p, "scale, milp: ")
    p.add_argument("-o", "--out", type=Path, help="output folder (default: <model name>.sweep)")
    add_batch(p)
    p.add_argument(
        "--loss",
        choices=[x.value for x in Loss],
        default=Loss.CROSS_ENTROPY.value,
        help="loss added after the model output (default cross-entropy)",
    )
    p.add_argument("--lr", type=float, default=0.01, help="learning rate of every step (default 0.01)")
    optimizer.add_arguments(p)
    autodiff.add_arguments(p)
    p.add_argument("--reserve", help=f"RAM kept for stack and runtime, {SIZE_HELP} (default: the profile's)")
    p.add_argument("--train", default="all", help=f"trainable parameters: {TRAIN_HELP}")
    p.add_argument(
        "--kernels",
        choices=("fast", "reference"),
        default="fast",
        help="C kernels copied into each project (as for 'poet compile'; default fast)",
    )
    p.add_argument(
        "--input",
        choices=[x.value for x in InputPlace],
        default=InputPlace.RAM.value,
        help=INPUT_HELP,
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html and memory.png in each point")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    talk.add_argument("-v", "--verbose", action="store_true", help="also print every point's error text")


def _schedulers(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in names if s not in SCHEDULERS]
    if unknown or not names:
        raise PoetError(
            f"--schedulers {text!r}: unknown {', '.join(unknown) or '(none given)'}; "
            f"available: {', '.join(sorted(SCHEDULERS))}"
        )
    return names


def _row_text(r: sweep.SweepRow, verbose: bool) -> str:
    head = f"{r.scheduler:>14s} {r.budget_bytes:>9d} B"
    if r.ok and r.latency_s is not None and r.energy_j is not None:
        return (
            f"{head}  ok     peak {r.peak_ram_bytes} B  {r.latency_s * 1e3:9.3f} ms  "
            f"{r.energy_j * 1e3:8.4f} mJ  recompute {r.recomputations}  page-out {r.page_outs}"
        )
    return f"{head}  error  {r.status if verbose else r.status.split(';')[0][:90]}"


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise PoetError(f"--jobs must be at least 1, got {args.jobs}")
    sanity.check_options(args.lr, args.time_limit, None, 0)  # before any point is compiled
    out = args.out or args.model.with_suffix(".sweep")
    base = CompileOptions(
        args.model,
        args.device,
        0,
        out,
        frontend.batch_of(args.model, args.batch),
        Loss(args.loss),
        args.lr,
        parse_size(args.reserve) if args.reserve else None,
        "none",
        args.train,
        kernels=args.kernels,
        milp=MilpOptions(time_limit_s=args.time_limit, gap_rel=args.gap, effort=args.effort),
        input=InputPlace(args.input),
        optimizer=optimizer.from_args(args),
        training=autodiff.options_from_args(args),
    )
    if not args.model.is_file():
        raise PoetError(f"{args.model}: no such file")
    budgets = sweep.parse_budgets(args.ram, args.points, args.scale)
    warn_ram_above_device(max(budgets), args.device)
    spec = sweep.Sweep(base, budgets, _schedulers(args.schedulers), out, report=not args.no_report)
    progress = Progress.from_flags(args.quiet, args.verbose)
    jobs = args.jobs or os.cpu_count() or 1
    n = len(budgets) * len(spec.schedulers)
    progress.info(
        f"sweep: {len(budgets)} budgets ({args.scale} spacing: {', '.join(map(str, budgets))} "
        f"bytes) x {len(spec.schedulers)} schedulers, {min(jobs, n)} workers"
    )
    rows = sweep.run(spec, jobs, lambda r: progress.info(_row_text(r, args.verbose)))
    floor = sweep.floor_bytes(base)
    sweep.write_outputs(spec, rows, floor, args.scale)
    ok = sum(r.ok for r in rows)
    progress.info(
        f"{ok} of {len(rows)} points compiled; memory floor {'unknown' if floor is None else f'{floor} B'}"
    )
    progress.info(f"wrote {out}/ ({sweep.CSV_NAME}, {sweep.PARETO_NAME}, <scheduler>-<bytes>/ per point)")
    return 0
