"""`poet sweep`: compile one model across RAM budgets and schedulers, then tabulate and plot the trade-off.

Every (budget, scheduler) pair is an independent task, :func:`compile_point`, which calls the same
compile path as `poet compile` (``compiler.compile_model``) with its own output folder
``DIR/<scheduler>-<budget bytes>/`` and returns one :class:`SweepRow`. Tasks run in worker processes
(``concurrent.futures.ProcessPoolExecutor``); since a task needs only its picklable arguments and
writes only its own folder, the same function could be handed to any other executor (a cluster queue).
A budget the scheduler cannot meet is a row whose ``status`` is the error text, never a crash.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path

from poet_edge import autodiff, frontend, planning, trainable
from poet_edge.compiler import PLAN, CompileOptions, Renderer, compile_model
from poet_edge.errors import PoetError
from poet_edge.memory_floor import memory_floor
from poet_edge.profiles import load_profile
from poet_edge.units import parse_size

CSV_NAME = "sweep.csv"
PARETO_NAME = "pareto.png"
SCALES = ("log", "linear")


@dataclass(frozen=True)
class SweepRow:
    """One line of sweep.csv. Numbers are empty (None) when ``status`` is an error."""

    budget_bytes: int
    scheduler: str
    status: str  # "ok" or the error text
    peak_ram_bytes: int | None = None  # plan.json peak_ram_bytes: fixed + arena
    energy_j: float | None = None
    latency_s: float | None = None
    recomputations: int | None = None
    page_outs: int | None = None
    arena_bytes: int | None = None
    dir: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


COLUMNS = tuple(f.name for f in fields(SweepRow))


@dataclass(frozen=True)
class Sweep:
    """What to sweep: the compile options shared by every point, and the grid."""

    base: CompileOptions  # ram_bytes, scheduler and out are replaced per point
    budgets: tuple[int, ...]
    schedulers: tuple[str, ...]
    out: Path
    report: bool = True

    def points(self) -> list[CompileOptions]:
        return [
            replace(self.base, ram_bytes=b, scheduler=s, out=self.out / point_dir(s, b))
            for s in self.schedulers
            for b in self.budgets
        ]


def point_dir(scheduler: str, budget: int) -> str:
    return f"{scheduler}-{budget}"


def spaced(lo: int, hi: int, points: int, scale: str) -> tuple[int, ...]:
    """``points`` budgets from lo to hi inclusive, evenly spaced on a log or linear scale, whole bytes."""
    if scale not in SCALES:
        raise PoetError(f"unknown budget scale '{scale}'; use one of {', '.join(SCALES)}")
    if lo > hi:
        raise PoetError(f"budget range {lo}..{hi}: the lower bound is above the upper one")
    if points < 1 or (points == 1 and lo != hi):
        raise PoetError(f"--points must be at least 2 for a range (got {points})")
    if lo == hi:
        return (lo,)
    if scale == "log":
        values = [lo * math.exp(math.log(hi / lo) * k / (points - 1)) for k in range(points)]
    else:
        values = [lo + (hi - lo) * k / (points - 1) for k in range(points)]
    out = [lo, *(round(v) for v in values[1:-1]), hi]
    return tuple(sorted(set(out)))


def parse_budgets(text: str, points: int, scale: str) -> tuple[int, ...]:
    """``32KB..256KB`` (spaced, see :func:`spaced`), ``32KB,64KB,128KB`` (exactly these) or one size."""
    if ".." in text:
        lo, _, hi = text.partition("..")
        return spaced(parse_size(lo), parse_size(hi), points, scale)
    return tuple(sorted({parse_size(t) for t in text.split(",") if t.strip()}))


def compile_point(opts: CompileOptions, report: bool = True) -> SweepRow:
    """One sweep task: compile at ``opts`` into ``opts.out``; errors become the row's status."""
    renderers: tuple[Renderer, ...] = ()
    if report:
        from poet_edge.report import render

        renderers = (render,)
    base = SweepRow(opts.ram_bytes, opts.scheduler, "ok", dir=opts.out.name)
    try:
        c = compile_model(opts, renderers=renderers)
    except PoetError as e:
        _drop_stale(opts.out)
        return replace(base, status=str(e), dir="")
    except Exception as e:  # noqa: BLE001 - a sweep reports every point; the text says it is a bug
        _drop_stale(opts.out)
        return replace(base, status=f"internal error: {type(e).__name__}: {e}", dir="")
    return replace(
        base,
        peak_ram_bytes=c.predicted_ram_bytes,
        energy_j=c.sim.energy_j,
        latency_s=c.sim.latency_s,
        recomputations=c.sim.n_recomputations,
        page_outs=c.sim.n_page_outs,
        arena_bytes=c.arena.arena_bytes,
    )


def _drop_stale(out: Path) -> None:
    """A failed point leaves no folder, not even one from an earlier sweep."""
    if (out / PLAN).is_file():
        shutil.rmtree(out)


def run(
    sweep: Sweep, jobs: int | None = None, on_row: Callable[[SweepRow], None] = lambda r: None
) -> list[SweepRow]:
    """Compiles every point (``jobs`` worker processes; 1 runs in this process) and returns the rows in
    grid order (scheduler, then budget)."""
    points = sweep.points()
    sweep.out.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(points)))
    if jobs == 1:
        rows = []
        for p in points:
            rows.append(compile_point(p, sweep.report))
            on_row(rows[-1])
        return rows
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        futures: list[Future[SweepRow]] = [pool.submit(compile_point, p, sweep.report) for p in points]
        for f in as_completed(futures):
            on_row(f.result())
        return [f.result() for f in futures]
    except BaseException:  # an error or a signal (cli.Interrupted): the workers stop now, not after a point
        for worker in list((getattr(pool, "_processes", None) or {}).values()):
            worker.terminate()  # SIGTERM: a forked worker runs its cleanup (cli's handler) and exits
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def floor_bytes(opts: CompileOptions) -> int | None:
    """The model's memory floor (no schedule goes below it), or None when the model does not compile."""
    try:
        g = frontend.load(opts.model, opts.batch)
        tg = autodiff.training_graph(
            g, opts.loss, trainable.select(g, opts.train), opts.optimizer, opts.training
        )
        profile = load_profile(opts.device)
        reserve = profile.mcu.ram_reserve_bytes if opts.reserve_bytes is None else opts.reserve_bytes
        problem = planning.price(planning.spec_from_graph(tg, reserve, opts.input), profile, opts.ram_bytes)
    except PoetError:
        return None
    return memory_floor(problem).bytes


def _cell(v: object) -> str:
    if v is None:
        return ""
    return repr(v) if isinstance(v, float) else str(v)


def csv_text(rows: Iterable[SweepRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_cell(v) for v in astuple(r)])
    return buf.getvalue()


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def pareto_png(sweep: Sweep, rows: Sequence[SweepRow], floor: int | None, scale: str) -> bytes:
    from poet_edge.report.plots import ParetoPoint
    from poet_edge.report.plots import pareto_png as draw

    pts = [
        ParetoPoint(r.scheduler, r.budget_bytes, r.energy_j, r.latency_s)
        for r in rows
        if r.ok and r.energy_j is not None and r.latency_s is not None
    ]
    failed = sum(not r.ok for r in rows)
    title = (
        f"{sweep.base.model.name} on {sweep.base.device}, batch {sweep.base.batch}: one training step "
        f"vs RAM budget ({scale} spacing; {failed} of {len(rows)} points infeasible)"
    )
    failed_points = [(r.scheduler, r.budget_bytes) for r in rows if not r.ok]
    return draw(pts, failed_points, sweep.schedulers, sweep.budgets, floor, scale == "log", title)


def write_outputs(sweep: Sweep, rows: Sequence[SweepRow], floor: int | None, scale: str) -> None:
    """sweep.csv and pareto.png, each written to a temporary name and renamed into place."""
    files = ((CSV_NAME, csv_text(rows).encode()), (PARETO_NAME, pareto_png(sweep, rows, floor, scale)))
    for name, data in files:
        tmp = sweep.out / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(sweep.out / name)
