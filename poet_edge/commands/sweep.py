"""poet sweep MODEL.onnx [MODEL2.onnx ...] --device D [--device D2] [--train T ...] --ram LO..HI
[--points N] [--schedulers A,B] [--executor local|dask|ray] [--address ADDR] [--jobs N] -o DIR,
or poet sweep SWEEP.toml (the same settings in a file; flags given on the command line win)"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from poet_edge import autodiff, frontend, optimizer, sanity, sweep, sweep_exec
from poet_edge.autodiff import Loss
from poet_edge.batch_split import BATCH_PARTS_HELP, parts_wanted
from poet_edge.commands import add_batch, add_solve_limits, add_talk, warn_ram_above_device
from poet_edge.compiler import CompileOptions
from poet_edge.errors import PoetError
from poet_edge.planning import INPUT_HELP, InputPlace
from poet_edge.profiles import tomllib
from poet_edge.schedulers import ALIASES, SCHEDULERS
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.splitting import SPLIT_HELP, TILE_ORDER_HELP, TILE_ORDERS, parse_split
from poet_edge.trainable import TRAIN_HELP
from poet_edge.units import SIZE_HELP, parse_size

DEFAULT_SCHEDULERS = sorted(n for n in SCHEDULERS if n not in ALIASES)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="compile across models, devices, --train values, RAM budgets and schedulers; sweep.csv, plots",
        description="Compile every (model, device, --train value, scheduler, RAM budget) point as an "
        "independent task: in local worker processes (default), on a Dask cluster or on Ray. Each "
        "point's folder is DIR/<scheduler>-<bytes>/ (under <model>/, <device>/, train-<value>/ for each "
        "axis with several values); DIR/sweep.csv has one row per point in grid order, errors included; "
        "DIR/pareto.png (one per model, device and --train value when there are several) plots energy "
        "and latency per step vs budget, the memory floor marked. Results are cached by the model's "
        "bytes, the options and the poet-edge code: a sweep interrupted anywhere resumes, a repeated "
        "one computes nothing. Instead of flags, the first argument may be a TOML sweep file (see "
        "docs/sweeps.md); flags given on the command line override it.",
    )
    p.add_argument("model", type=Path, nargs="+", help="ONNX models, or one TOML sweep file")
    p.add_argument(
        "--device",
        action="append",
        help="device profile name or TOML path; repeat or comma-separate for several (default host)",
    )
    p.add_argument(
        "--ram",
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
    run = p.add_argument_group("where the points run")
    run.add_argument(
        "--executor",
        choices=sweep_exec.EXECUTORS,
        default="local",
        help="local worker processes (default), a Dask cluster (pip install 'poet-edge[dask]') or Ray "
        "(pip install 'poet-edge[ray]')",
    )
    run.add_argument(
        "--address",
        help="dask: the scheduler (tcp://host:8786); ray: the cluster (auto, ray://host:10001); "
        "default: start a local cluster of --jobs workers for this sweep",
    )
    run.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        help="local workers (default: CPU count); 1: this process",
    )
    run.add_argument(
        "--cache",
        type=Path,
        help="result cache folder (default $POET_CACHE_DIR/sweep, else ~/.cache/poet-edge/sweep)",
    )
    run.add_argument("--no-cache", action="store_true", help="compute every point, store nothing")
    run.add_argument(
        "--no-projects",
        action="store_true",
        help="write sweep.csv and the plots only, no project folder per point (smaller cache, less transfer)",
    )
    add_solve_limits(p, "scale, milp: ")
    p.add_argument("-o", "--out", type=Path, help="output folder (default: <first model name>.sweep)")
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
    p.add_argument(
        "--train",
        action="append",
        help=f"trainable parameters (repeat for several; default all): {TRAIN_HELP}",
    )
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
    p.add_argument("--split", type=parse_split, default="auto", metavar="auto|off|SIZE", help=SPLIT_HELP)
    p.add_argument("--tile-order", choices=tuple(TILE_ORDERS), default="auto", help=TILE_ORDER_HELP)
    p.add_argument("--batch-parts", type=parts_wanted, default=None, metavar="auto|K", help=BATCH_PARTS_HELP)
    p.add_argument("--no-report", action="store_true", help="skip report.html and memory.png in each point")
    add_talk(p, "print nothing but errors", "also print every point's error text")
    p.set_defaults(sweep_parser=p)


# ---- the sweep file ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileModel:
    path: Path
    ram: str | None = None
    batch: int | None = None


def _as_list(key: str, v: object) -> list[Any]:
    if isinstance(v, list):
        return v
    if isinstance(v, (str, int)):
        return [v]
    raise PoetError(f"sweep file: '{key}' must be a string or a list, not {type(v).__name__}")


def _file_models(doc: dict[str, Any], here: Path) -> list[FileModel]:
    out = []
    for m in _as_list("models", doc.pop("models", [])):
        if isinstance(m, str):
            out.append(FileModel(here / m))
        elif isinstance(m, dict):
            unknown = set(m) - {"path", "ram", "batch"}
            if "path" not in m or unknown:
                raise PoetError(
                    f"sweep file: a [[models]] table needs 'path' and may have 'ram' and 'batch' "
                    f"(got {', '.join(sorted(m))})"
                )
            ram = ",".join(map(str, m["ram"])) if isinstance(m.get("ram"), list) else m.get("ram")
            out.append(FileModel(here / str(m["path"]), None if ram is None else str(ram), m.get("batch")))
        else:
            raise PoetError(f"sweep file: models entries are paths or tables, not {m!r}")
    return out


def apply_file(parser: argparse.ArgumentParser, args: argparse.Namespace, path: Path) -> list[FileModel]:
    """Takes the settings of the TOML sweep file ``path`` into ``args`` where the command line left the
    default; returns its models (paths relative to the file)."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PoetError(f"{path}: cannot read ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise PoetError(f"{path}: invalid TOML: {e}") from None
    here = path.parent
    doc = {k.replace("-", "_"): v for k, v in doc.items()}
    if "devices" in doc:
        doc["device"] = doc.pop("devices")
    models = _file_models(doc, here)
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "model", "sweep_parser")}
    for key, value in doc.items():
        a = actions.get(key)
        if a is None:
            raise PoetError(
                f"{path}: unknown setting '{key}'; known: models, {', '.join(sorted(actions))} "
                "(the long flag names)"
            )
        if getattr(args, key) != parser.get_default(key):
            continue  # given on the command line
        if key in ("device", "train"):
            value = [str(v) for v in _as_list(key, value)]
            if key == "device":
                value = [str(here / v) if v.endswith(".toml") else v for v in value]
        elif key in ("ram", "schedulers"):
            value = ",".join(str(v) for v in _as_list(key, value))
        elif key in ("out", "cache"):
            value = here / str(value)
        elif a.nargs == 0:  # a store_true flag
            if not isinstance(value, bool):
                raise PoetError(f"{path}: '{key}' must be true or false")
        else:
            try:
                value = a.type(str(value)) if callable(a.type) else str(value)
            except (TypeError, ValueError):
                raise PoetError(f"{path}: '{key}' = {value!r} is not valid") from None
            if a.choices is not None and value not in a.choices:
                raise PoetError(
                    f"{path}: '{key}' = {value!r}; choose one of {', '.join(map(str, a.choices))}"
                )
        setattr(args, key, value)
    return models


# ---- progress -----------------------------------------------------------------------------------------


def _duration(s: float) -> str:
    s = max(0, round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@dataclass
class SweepProgress:
    """done / running / failed and an ETA: one line redrawn in place on a terminal, a plain line every
    ``plain_every_s`` seconds (and at the end) in a log; finished points print as lines above it."""

    quiet: bool = False
    verbose: bool = False
    multi: bool = False  # rows name their model, device and --train value
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    plain_every_s: float = 30.0
    total: int = 0
    workers: int = 1
    done: int = 0
    cached: int = 0
    failed: int = 0
    _start: float = field(default_factory=time.monotonic)
    _last_plain: float = field(default_factory=time.monotonic)
    _width: int = 0

    @property
    def live(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return not self.quiet and bool(isatty and isatty())

    def start(self, total: int, cached: int) -> None:
        self.total, self._start = total, time.monotonic()
        self.info(f"cache: {cached} of {total} points already computed")

    def status(self) -> str:
        running = min(self.workers, self.total - self.done)
        computed = self.done - self.cached
        eta = ""
        if computed and self.done < self.total:
            elapsed = time.monotonic() - self._start
            eta = f", ETA {_duration(elapsed / computed * (self.total - self.done))}"
        return (
            f"sweep: {self.done}/{self.total} done ({self.cached} cached), {running} running, "
            f"{self.failed} failed{eta}"
        )

    def event(self, e: sweep.Event) -> None:
        self.done += 1
        self.cached += e.cached
        self.failed += not e.row.ok
        self.info(row_text(e.row, self.verbose, self.multi))  # on a terminal: the status line redrawn below
        now = time.monotonic()
        if (
            not self.live
            and not self.quiet
            and (now - self._last_plain >= self.plain_every_s or self.done == self.total)
        ):
            self._last_plain = now
            self.stream.write(self.status() + "\n")
            self.stream.flush()

    def info(self, text: str) -> None:
        if self.quiet:
            return
        self._clear()
        self.stream.write(text + "\n")
        if self.live and self.total and self.done < self.total:
            self._draw(self.status())
        self.stream.flush()

    def _draw(self, text: str) -> None:
        self.stream.write("\r" + text + " " * max(0, self._width - len(text)))
        self.stream.flush()
        self._width = len(text)

    def _clear(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0

    def close(self) -> None:
        self._clear()
        self.stream.flush()


# ---- the command ---------------------------------------------------------------------------------------


def _schedulers(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in names if s not in SCHEDULERS]
    if unknown or not names:
        raise PoetError(
            f"--schedulers {text!r}: unknown {', '.join(unknown) or '(none given)'}; "
            f"available: {', '.join(sorted(SCHEDULERS))}"
        )
    return names


def row_text(r: sweep.SweepRow, verbose: bool, multi: bool = False) -> str:
    head = f"{r.scheduler:>14s} {r.budget_bytes:>9d} B"
    if multi:
        head = f"{r.model} {r.device} {r.train}  {head}"
    if r.ok and r.latency_s is not None and r.energy_j is not None:
        return (
            f"{head}  ok     peak {r.peak_ram_bytes} B  {r.latency_s * 1e3:9.3f} ms  "
            f"{r.energy_j * 1e3:8.4f} mJ  recompute {r.recomputations}  page-out {r.page_outs}"
        )
    return f"{head}  error  {r.status if verbose else r.status.split(';')[0][:90]}"


def _split(values: list[str] | None, default: str) -> tuple[str, ...]:
    out = [v.strip() for text in values or [default] for v in text.split(",") if v.strip()]
    return tuple(dict.fromkeys(out))


def run(args: argparse.Namespace) -> int:
    models_in: list[FileModel]
    if len(args.model) == 1 and args.model[0].suffix == ".toml":
        models_in = apply_file(args.sweep_parser, args, args.model[0])
        if not models_in:
            raise PoetError(f"{args.model[0]}: the sweep file lists no models ('models = [\"a.onnx\"]')")
    else:
        if any(m.suffix == ".toml" for m in args.model):
            raise PoetError("a TOML sweep file is the only argument; list the models inside it")
        models_in = [FileModel(m) for m in args.model]
    if args.jobs is not None and args.jobs < 1:
        raise PoetError(f"--jobs must be at least 1, got {args.jobs}")
    sanity.check_options(args.lr, args.time_limit, None, 0)  # before any point is compiled
    for m in models_in:
        if not m.path.is_file():
            raise PoetError(f"{m.path}: no such file")
    if args.ram is None and any(m.ram is None for m in models_in):
        raise PoetError("--ram is required (or 'ram' for every model of the sweep file)")
    models = tuple(
        sweep.Model(
            m.path,
            sweep.parse_budgets(m.ram or args.ram, args.points, args.scale),
            m.batch if m.batch is not None else args.batch,
        )
        for m in models_in
    )
    devices = _split(args.device, "host")
    trains = tuple(dict.fromkeys(args.train or ["all"]))
    for d in devices:
        warn_ram_above_device(max(b for m in models for b in m.budgets), d)
    out = args.out or models[0].path.with_suffix(".sweep")
    base = CompileOptions(
        models[0].path,
        devices[0],
        0,
        out,
        frontend.batch_of(models[0].path, models[0].batch),
        Loss(args.loss),
        args.lr,
        parse_size(args.reserve) if args.reserve else None,
        "none",
        trains[0],
        kernels=args.kernels,
        milp=MilpOptions(time_limit_s=args.time_limit, gap_rel=args.gap, effort=args.effort),
        input=InputPlace(args.input),
        optimizer=optimizer.from_args(args),
        training=autodiff.options_from_args(args),
        split=args.split,
        tile_order=args.tile_order,
        batch_parts=args.batch_parts,
    )
    spec = sweep.Sweep(
        base,
        models,
        devices,
        trains,
        _schedulers(args.schedulers),
        out,
        report=not args.no_report,
        projects=not args.no_projects,
    )
    cache = sweep_exec.ResultCache(None if args.no_cache else args.cache or sweep_exec.default_cache_dir())
    jobs = args.jobs or os.cpu_count() or 1
    single = len(models) == 1 and len(devices) == 1 and len(trains) == 1
    n = sum(len(m.budgets) for m in models) * len(devices) * len(trains) * len(spec.schedulers)
    progress = SweepProgress(args.quiet, args.verbose, multi=not single)
    if single:
        budgets = models[0].budgets
        progress.info(
            f"sweep: {len(budgets)} budgets ({args.scale} spacing: {', '.join(map(str, budgets))} "
            f"bytes) x {len(spec.schedulers)} schedulers, {min(jobs, n)} workers"
        )
    executor = sweep_exec.open_executor(args.executor, args.address, min(jobs, n))
    try:
        progress.workers = executor.workers
        if not single:
            progress.info(
                f"sweep: {n} points ({len(models)} models x {len(devices)} devices x {len(trains)} "
                f"--train values x {len(spec.schedulers)} schedulers x budgets), {args.executor} "
                f"executor, {executor.workers} workers"
            )
        elif args.executor != "local":
            progress.info(f"executor: {args.executor}, {executor.workers} workers")
        rows, stats = sweep.run(spec, executor, cache, progress.start, progress.event)
    finally:
        progress.close()
        executor.close()
    floors = [sweep.floor_bytes(sweep.group_options(spec, m, d, t)) for m, d, t in spec.groups()]
    written = sweep.write_outputs(spec, rows, floors, args.scale)
    for (g, d, t), floor in zip(spec.groups(), floors, strict=True):
        mine = [r for r in rows if (r.model, r.device, r.train) == (g.label, d, t)]
        head = "" if single else f"{g.label} on {d}, --train {t}: "
        progress.info(
            f"{head}{sum(r.ok for r in mine)} of {len(mine)} points compiled; memory floor "
            f"{'unknown' if floor is None else f'{floor} B'}"
        )
    progress.info(
        f"{stats.cached} of {stats.points} points from the cache, {stats.computed} computed"
        f"{'' if cache.root is None else f' (cache {cache.root})'}"
    )
    where = "<scheduler>-<bytes>/ per point" if spec.projects else "no point folders (--no-projects)"
    if not single and spec.projects:
        where = "<model>/<device>/train-<value>/<scheduler>-<bytes>/ per point (axes with several values)"
    progress.info(f"wrote {out}/ ({', '.join(written)}, {where})")
    return 0
