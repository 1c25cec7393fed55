"""`poet sweep`: compile models across devices, `--train` choices, RAM budgets and schedulers, then
tabulate and plot the trade-off.

Every point (model, device, train, scheduler, budget) is one independent task
(:mod:`poet_edge.sweep_exec`): the worker plans the same compile as `poet compile`
(``compiler.plan_training``) from the ONNX bytes and returns the plan's numbers and, on request, the
project as an archive; this process stores the outcome in the result cache as it arrives and writes the
point's folder ``DIR/<point_dir>/`` from the archive. A point the cache already holds is not computed
again, whichever executor (local processes, Dask, Ray) computed it. A budget the scheduler cannot meet is
a row whose ``status`` is the error text, never a crash; the rows of sweep.csv are in grid order (model,
device, train, scheduler, budget), so the file does not depend on the executor or on finishing order.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path

from poet_edge import frontend, planning, splitting
from poet_edge.compiler import PLAN, CompileOptions, Training
from poet_edge.errors import PoetError
from poet_edge.ir import Graph
from poet_edge.memory_floor import memory_floor
from poet_edge.paths import write_project
from poet_edge.profiles import load_profile
from poet_edge.sweep_exec import Executor, Outcome, ResultCache, Task, check_code, task_key, unpack
from poet_edge.units import parse_size

CSV_NAME = "sweep.csv"
PARETO_NAME = "pareto.png"
SCALES = ("log", "linear")


@dataclass(frozen=True)
class SweepRow:
    """One line of sweep.csv. Numbers are empty (None) when ``status`` is an error."""

    model: str
    device: str
    train: str
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
class Model:
    """A model axis entry: the file, its budgets and its batch (None: the model's own, else 1)."""

    path: Path
    budgets: tuple[int, ...]
    batch: int | None = None

    @property
    def label(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Point:
    model: Model
    opts: CompileOptions  # model, device, train, ram_bytes, scheduler, out, batch set


@dataclass(frozen=True)
class Sweep:
    """What to sweep: the compile options shared by every point, and the axes."""

    base: CompileOptions  # model, device, train, ram_bytes, scheduler, batch and out are set per point
    models: tuple[Model, ...]
    devices: tuple[str, ...]
    trains: tuple[str, ...]
    schedulers: tuple[str, ...]
    out: Path
    report: bool = True
    projects: bool = True  # write every point's project folder (else sweep.csv and plots only)

    def __post_init__(self) -> None:
        labels = [m.label for m in self.models]
        if len(set(labels)) != len(labels):
            raise PoetError(f"two models have the same file name ({', '.join(labels)}); rename one")
        for axis, values in (("devices", self.devices), ("train values", self.trains)):
            if len(set(values)) != len(values):
                raise PoetError(f"the sweep lists the same {axis[:-1]} twice: {', '.join(values)}")
        if not (self.models and self.devices and self.trains and self.schedulers):
            raise PoetError("a sweep needs at least one model, device, train value and scheduler")

    def axis_parts(self, model: Model, device: str, train: str) -> list[str]:
        """``<model>``, ``<device>`` and ``train-<value>`` for each axis with more than one value."""
        parts = []
        if len(self.models) > 1:
            parts.append(safe_name(Path(model.label).stem))
        if len(self.devices) > 1:
            parts.append(safe_name(Path(device).stem))
        if len(self.trains) > 1:
            parts.append("train-" + safe_name(train))
        return parts

    def point_dir(self, model: Model, device: str, train: str, scheduler: str, budget: int) -> str:
        """``<scheduler>-<budget>``, under a folder for each of :meth:`axis_parts`."""
        return "/".join([*self.axis_parts(model, device, train), point_dir(scheduler, budget)])

    def points(self) -> list[Point]:
        out: list[Point] = []
        for m in self.models:
            batch = frontend.batch_of(m.path, m.batch)
            for d in self.devices:
                for t in self.trains:
                    for s in self.schedulers:
                        for b in m.budgets:
                            rel = self.point_dir(m, d, t, s, b)
                            opts = replace(
                                self.base,
                                model=m.path,
                                device=d,
                                train=t,
                                batch=batch,
                                ram_bytes=b,
                                scheduler=s,
                                out=self.out / rel,
                            )
                            out.append(Point(m, opts))
        return out

    def groups(self) -> list[tuple[Model, str, str]]:
        """(model, device, train) in grid order: one memory floor and one Pareto plot each."""
        return [(m, d, t) for m in self.models for d in self.devices for t in self.trains]

    def plot_name(self, model: Model, device: str, train: str) -> str:
        parts = self.axis_parts(model, device, train)
        return "-".join(["pareto", *parts]) + ".png" if parts else PARETO_NAME


def safe_name(text: str) -> str:
    """A folder name for an axis value: letters, digits, '.', '_' and '-' kept, others '_', plus a short
    hash when anything was replaced (so two values never share a folder)."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", text)
    if clean == text and text not in ("", ".", ".."):
        return text
    return f"{clean.strip('.')[:40]}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


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
    budgets = tuple(sorted({parse_size(t) for t in text.split(",") if t.strip()}))
    if not budgets:
        raise PoetError(f"--ram {text!r}: no budget given")
    return budgets


# ---- running ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A finished point, for progress reports: its row, whether it came from the cache, and how long
    the worker took (0 for a cached point)."""

    row: SweepRow
    cached: bool
    seconds: float


@dataclass(frozen=True)
class Stats:
    points: int
    cached: int  # points the cache answered
    computed: int  # tasks run on workers (points with the same key count once)
    failed: int  # rows whose status is an error


def row_of(p: Point, o: Outcome, dir: str) -> SweepRow:
    nums = (o.peak_ram_bytes, o.energy_j, o.latency_s, o.recomputations, o.page_outs, o.arena_bytes)
    o_ = p.opts
    return SweepRow(p.model.label, o_.device, o_.train, o_.ram_bytes, o_.scheduler, o.status, *nums, dir=dir)


def run(
    sweep: Sweep,
    executor: Executor,
    cache: ResultCache,
    on_start: Callable[[int, int], None] = lambda total, cached: None,
    on_event: Callable[[Event], None] = lambda e: None,
) -> tuple[list[SweepRow], Stats]:
    """Computes every point the cache does not hold on ``executor``, stores each outcome in the cache as it
    arrives and writes its folder; returns the rows in grid order. ``on_start(points, cached)`` is called
    once the cache has been consulted, ``on_event`` once per finished point (cached ones first)."""
    points = sweep.points()
    sweep.out.mkdir(parents=True, exist_ok=True)
    model_bytes = {m.label: m.path.read_bytes() for m in sweep.models}
    model_sha = {k: hashlib.sha256(v).hexdigest() for k, v in model_bytes.items()}
    keys = [task_key(model_sha[p.model.label], p.model.label, p.opts, sweep.report) for p in points]
    rows: list[SweepRow | None] = [None] * len(points)
    by_key: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)

    def finish(i: int, o: Outcome, cached: bool, seconds: float) -> None:
        p = points[i]
        rel = p.opts.out.relative_to(sweep.out).as_posix()
        if o.ok and sweep.projects:
            assert o.archive is not None
            write_project(p.opts.out, unpack(o.archive))
        else:
            _drop_stale(p.opts.out)
        rows[i] = row_of(p, o, rel if o.ok and sweep.projects else "")
        on_event(Event(rows[i], cached, seconds))  # type: ignore[arg-type]

    todo: list[Task] = []
    hits: list[tuple[int, Outcome]] = []
    for key, idx in by_key.items():
        hit = cache.get(key, need_archive=sweep.projects)
        if hit is not None:
            hits.extend((i, hit) for i in idx)
            continue
        p = points[idx[0]]
        todo.append(Task(key, p.model.label, replace(p.opts, out=Path()), sweep.report, sweep.projects))
    on_start(len(points), len(hits))
    for i, o in sorted(hits, key=lambda h: h[0]):
        finish(i, o, True, 0.0)

    def done(t: Task, o: Outcome) -> None:
        o = check_code(o)
        cache.put(o)
        for i in by_key[t.key]:
            finish(i, o, False, o.seconds)

    if todo:
        executor.run(todo, {t.model_name: model_bytes[t.model_name] for t in todo}, done)
    final = [r for r in rows if r is not None]
    assert len(final) == len(points)
    stats = Stats(len(points), len(hits), len(todo), sum(not r.ok for r in final))
    return final, stats


def _drop_stale(out: Path) -> None:
    """A failed point leaves no folder, not even one from an earlier sweep."""
    if (out / PLAN).is_file():
        shutil.rmtree(out)


def floor_bytes(opts: CompileOptions) -> int | None:
    """The model's memory floor (no schedule goes below it), or None when the model does not compile: the
    lowest over the batch whole and in the most parts the options allow (compiler.Training.max_parts)."""
    try:
        training = Training(frontend.load(opts.model, opts.batch), opts)
        parts = {1, training.max_parts()}
        return min(_floor_of(training.graph(k)[1], opts) for k in sorted(parts))
    except PoetError:
        return None


def _floor_of(tg: Graph, opts: CompileOptions) -> int:
    profile = load_profile(opts.device)
    reserve = profile.mcu.ram_reserve_bytes if opts.reserve_bytes is None else opts.reserve_bytes
    # the lowest floor the compile can reach: with --params auto or storage, every parameter stored
    stored = frozenset() if opts.params == planning.ParamPlace.RAM else frozenset(tg.trainable)
    graphs = [(tg, stored)]
    if opts.split != "off":  # ... and with --split, tiles of the given or the smallest size, in either order
        tile = splitting.tile_bytes_of(opts.split) or splitting.TILE_SIZES[-1]
        splits = [
            splitting.split_graph(tg, splitting.TileSizes(tile, rows_first=r), input_rows=opts.input_rows)
            for r in splitting.TILE_ORDERS[opts.tile_order]
        ]
        graphs = [(s.graph, s.param_names(stored)) for s in splits]
    return min(
        memory_floor(
            planning.price(planning.spec_from_graph(g, reserve, opts.input, ps), profile, opts.ram_bytes)
        ).bytes
        for g, ps in graphs
    )


def group_options(sweep: Sweep, model: Model, device: str, train: str) -> CompileOptions:
    batch = frontend.batch_of(model.path, model.batch)
    return replace(sweep.base, model=model.path, device=device, train=train, batch=batch)


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


def pareto_png(
    sweep: Sweep,
    rows: Sequence[SweepRow],
    model: Model,
    device: str,
    train: str,
    floor: int | None,
    scale: str,
) -> bytes:
    from poet_edge.report.plots import ParetoPoint
    from poet_edge.report.plots import pareto_png as draw

    mine = [r for r in rows if (r.model, r.device, r.train) == (model.label, device, train)]
    pts = [
        ParetoPoint(r.scheduler, r.budget_bytes, r.energy_j, r.latency_s)
        for r in mine
        if r.ok and r.energy_j is not None and r.latency_s is not None
    ]
    failed = sum(not r.ok for r in mine)
    batch = frontend.batch_of(model.path, model.batch)
    trained = "" if train == "all" else f", --train {train}"
    title = (
        f"{model.label} on {device}, batch {batch}{trained}: one training step "
        f"vs RAM budget ({scale} spacing; {failed} of {len(mine)} points infeasible)"
    )
    failed_points = [(r.scheduler, r.budget_bytes) for r in mine if not r.ok]
    return draw(pts, failed_points, sweep.schedulers, model.budgets, floor, scale == "log", title)


def write_outputs(
    sweep: Sweep, rows: Sequence[SweepRow], floors: Sequence[int | None], scale: str
) -> list[str]:
    """sweep.csv and one Pareto plot per (model, device, train) (``floors`` in :meth:`Sweep.groups`
    order), each written to a temporary name and renamed into place; returns the file names."""
    files = [(CSV_NAME, csv_text(rows).encode())]
    for (m, d, t), floor in zip(sweep.groups(), floors, strict=True):
        files.append((sweep.plot_name(m, d, t), pareto_png(sweep, rows, m, d, t, floor, scale)))
    for name, data in files:
        tmp = sweep.out / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(sweep.out / name)
    return [name for name, _ in files]
