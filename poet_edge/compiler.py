"""`poet compile`: ONNX -> training graph -> problem -> schedule -> simulation -> arena -> C project."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from poet_edge import __version__, arena, autodiff, frontend, planning, trainable
from poet_edge.codegen import emit
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Phase
from poet_edge.memory_floor import memory_floor
from poet_edge.paths import RUNTIME_C, TARGETS
from poet_edge.problem import SchedulingProblem
from poet_edge.profiles import Profile, load_profile
from poet_edge.progress import PhaseLimit
from poet_edge.schedule import Schedule
from poet_edge.schedulers import ALIASES, configured, get_scheduler
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.simulator import SimResult, simulate
from poet_edge.units import fmt_bytes

PLAN = "plan.json"

# Extra output files made from plan.json data alone (e.g. poet_edge.report.render): {relative path: content}.
Renderer = Callable[[dict[str, Any]], dict[str, bytes | str]]


@dataclass(frozen=True)
class CompileOptions:
    model: Path
    device: str
    ram_bytes: int
    out: Path
    batch: int = 1
    loss: autodiff.Loss = autodiff.Loss.CROSS_ENTROPY
    lr: float = 0.01
    reserve_bytes: int | None = None  # None: the profile's ram_reserve_bytes
    scheduler: str = "none"
    train: str = "all"
    kernels: str = "fast"  # "fast": runtime_c/src/optimized/<k>.c where it exists; "reference": src/kernels
    input: planning.InputPlace = planning.InputPlace.RAM  # where the batch x lives during a step
    milp: MilpOptions = MilpOptions()
    max_latency: str | None = None  # "1.5x" (of the no-remat step time) or seconds, e.g. "0.2" / "0.2s"
    time_limit_s: float | None = None  # --time-limit: each phase's safety stop (progress.PhaseLimit)


@dataclass(frozen=True)
class Compiled:
    """Everything a compile produced, before it is written."""

    graph: Graph
    training: Graph
    profile: Profile
    spec: planning.ProblemSpec
    problem: SchedulingProblem
    schedule: Schedule
    sim: SimResult
    arena: arena.ArenaPlan
    storage: emit.StoragePlan

    @property
    def fixed(self) -> planning.FixedRam:
        return self.spec.fixed

    @property
    def predicted_ram_bytes(self) -> int:
        return self.fixed.total + self.arena.arena_bytes


def plan_training(
    opts: CompileOptions,
    log: Callable[[str], None] = lambda s: None,
    report: Callable[[str], None] = lambda s: None,
    limit: PhaseLimit | None = None,
) -> Compiled:
    limit = limit or PhaseLimit(opts.time_limit_s)

    def phase(name: str) -> None:
        limit.begin(name)
        report(name)

    phase("load")
    g = frontend.load(opts.model, opts.batch)
    phase("training graph")
    tg = autodiff.training_graph(g, opts.loss, trainable.select(g, opts.train))
    profile = load_profile(opts.device)
    reserve = profile.mcu.ram_reserve_bytes if opts.reserve_bytes is None else opts.reserve_bytes
    spec = planning.spec_from_graph(tg, reserve, opts.input)
    problem = planning.price(spec, profile, opts.ram_bytes)
    problem = replace(problem, max_latency_s=max_latency_s(opts.max_latency, problem))
    log(f"training graph: {len(tg.nodes)} nodes ({sum(n.phase == Phase.FORWARD for n in tg.nodes)} forward)")
    floor = memory_floor(problem)
    if opts.ram_bytes < floor.bytes:
        raise PoetError(
            f"--ram {fmt_bytes(opts.ram_bytes)} is below the memory floor of this model, "
            f"{fmt_bytes(floor.bytes)} ({floor.explanation}){_storage_hint(tg, reserve, profile, opts)}"
        )
    sizes = {n.name: n.out_bytes for n in spec.nodes}
    ws = {n.name: n.workspace_bytes for n in problem.nodes}
    target = problem
    for _ in range(4):  # the arena, not only the live bytes, must fit: tighten the budget by any excess
        phase("schedule")
        schedule = _schedule(target, opts)
        phase("arena")
        plan = arena.plan_best(arena.instances(schedule, sizes, ws), limit.check)
        excess = problem.fixed_bytes + plan.arena_bytes - opts.ram_bytes
        if excess <= 0 or opts.scheduler == "none" or target.budget_bytes - excess < floor.bytes:
            break
        log(f"arena exceeds the budget by {excess} B after fragmentation; rescheduling with a tighter budget")
        target = replace(target, budget_bytes=target.budget_bytes - excess)
    arena.verify(plan)
    phase("simulate")
    sim = simulate(problem, schedule, profile)
    limit.begin(None)
    compiled = Compiled(
        g,
        tg,
        profile,
        spec,
        problem,
        schedule,
        sim,
        plan,
        emit.plan_storage(schedule, sizes, emit.input_region(spec)),
    )
    if compiled.predicted_ram_bytes > opts.ram_bytes:
        raise PoetError(
            f"the schedule needs {fmt_bytes(compiled.predicted_ram_bytes)} of RAM (arena "
            f"{fmt_bytes(plan.arena_bytes)} + parameters, inputs and reserve "
            f"{fmt_bytes(compiled.fixed.total)}; "
            f"simulated peak {fmt_bytes(sim.peak_ram_bytes)}), more than --ram {fmt_bytes(opts.ram_bytes)}"
        )
    return compiled


def _storage_hint(tg: Graph, reserve: int, profile: Profile, opts: CompileOptions) -> str:
    """With --input ram: what the floor would be with the batch in storage, when that is lower."""
    if opts.input != planning.InputPlace.RAM:
        return ""
    spec = planning.spec_from_graph(tg, reserve, planning.InputPlace.STORAGE)
    alt = memory_floor(planning.price(spec, profile, opts.ram_bytes)).bytes
    return f"; with --input storage the floor is {fmt_bytes(alt)}" if alt < opts.ram_bytes else ""


def _no_remat(problem: SchedulingProblem) -> tuple[Schedule, int]:
    unlimited = replace(problem, budget_bytes=1 << 62)
    schedule = get_scheduler("none")(unlimited)
    return schedule, simulate(unlimited, schedule).peak_ram_bytes


def max_latency_s(text: str | None, problem: SchedulingProblem) -> float | None:
    """--max-latency: a factor of the no-remat step time ("1.5x") or seconds ("0.2", "0.2s")."""
    if text is None:
        return None
    t = text.strip().lower()
    try:
        if t.endswith("x"):
            return float(t[:-1]) * sum(n.compute_s for n in problem.nodes)
        return float(t[:-1] if t.endswith("s") else t)
    except ValueError:
        raise PoetError(f"--max-latency {text!r}: use a factor like 1.5x or seconds like 0.2s") from None


def _schedule(problem: SchedulingProblem, opts: CompileOptions) -> Schedule:
    """Runs the scheduler. `none` cannot trade anything for memory: over budget, its simulated peak is
    the error.
    `scale`, `milp`: when the no-remat schedule fits (and no latency bound binds it), it is optimal — every
    node once, nothing paged is the least energy and time possible — so the solver is not needed."""
    if ALIASES.get(opts.scheduler, opts.scheduler) in ("milp", "scale"):
        schedule, peak = _no_remat(problem)
        if peak <= problem.budget_bytes and problem.max_latency_s is None:
            return Schedule(
                schedule.steps,
                opts.scheduler,
                (("status", "Optimal (the no-remat schedule fits)"), ("gap", 0.0)),
            )
    if opts.scheduler != "none":
        return configured(opts.scheduler, opts.milp)(problem)
    schedule, peak = _no_remat(problem)
    if peak > problem.budget_bytes:
        raise PoetError(
            f"without recomputation or paging the training step peaks at {fmt_bytes(peak)}, above "
            f"--ram {fmt_bytes(problem.budget_bytes)}; try --scheduler scale, milp, greedy or page-all"
        )
    return schedule


DETERMINISTIC_INFO = (
    "status",
    "objective",
    "bound",
    "gap",
    "binaries",
    "rows",
    "solver",
    "warm_start",
    "fallback",
    "objective_kind",
    "bound_from",
    "schedule_from",
    "effort",
    "cut_by_time_limit",
    "cut_phase",
)


def plan_json(opts: CompileOptions, c: Compiled) -> dict[str, Any]:
    tg = c.training
    return {
        "poet_edge_version": __version__,
        "model": opts.model.name,
        "model_sha256": hashlib.sha256(opts.model.read_bytes()).hexdigest(),
        "device": c.profile.name,
        "ram_budget_bytes": opts.ram_bytes,
        "batch": frontend.graph_batch(c.graph),  # the batch used, also where the export fixed it
        "loss": opts.loss.value,
        "lr": opts.lr,
        "train": opts.train,
        "kernels": opts.kernels,
        "input": opts.input.value,
        "peak_ram_bytes": c.predicted_ram_bytes,
        "simulated_peak_ram_bytes": c.sim.peak_ram_bytes,
        "fixed_ram_bytes": c.fixed.total,
        "training_graph": {
            "inputs": list(tg.inputs),
            "nodes_by_phase": {p.value: sum(n.phase == p for n in tg.nodes) for p in Phase},
            "nodes": [
                {
                    "name": n.name,
                    "op": n.op,
                    "phase": n.phase.value,
                    "inputs": list(n.inputs),
                    "outputs": list(n.outputs),
                }
                for n in tg.nodes
            ],
            "tensors": {
                t.name: {"shape": list(t.shape), "dtype": t.dtype, "role": t.role.value}
                for t in sorted(tg.tensors.values(), key=lambda t: t.name)
            },
        },
        "parameters": [
            {
                "name": p,
                "shape": list(tg.shape(p)),
                "trainable": p in tg.trainable,
                "bytes": tg.tensor(p).nbytes,
            }
            for p in sorted(tg.params)
        ],
        "problem": c.spec.to_json(),
        "schedule": {
            "solver": c.schedule.solver,
            "steps": c.schedule.to_json(),
            # solver details without timings (plan.json must not depend on the wall clock)
            "info": {k: v for k, v in c.schedule.info if k in DETERMINISTIC_INFO},
        },
        "simulation": c.sim.to_json(),
        "arena": {
            "planner": c.arena.planner,
            "arena_bytes": c.arena.arena_bytes,
            "peak_live_bytes": c.arena.peak_live_bytes,
            "overhead": round(c.arena.overhead, 6),
            "instances": [
                {"value": i.value, "offset": o, "bytes": i.size, "first_step": i.start, "last_step": i.end}
                for i, o in zip(c.arena.instances, c.arena.offsets, strict=False)
            ],
        },
        "storage": {
            "bytes": c.storage.total_bytes,
            "input_bytes": c.storage.input_bytes,
            "offsets": c.storage.offsets,
        },
    }


def project_files(
    opts: CompileOptions, c: Compiled, renderers: Sequence[Renderer] = ()
) -> dict[str, str | bytes | Path]:
    """Relative path -> text, bytes, or a Path to copy."""
    files: dict[str, str | bytes | Path] = dict(
        emit.generate(
            c.training,
            c.spec,
            c.schedule,
            c.arena,
            c.storage,
            {
                "model": opts.model.name,
                "predicted_ram_bytes": c.predicted_ram_bytes,
                "device": c.profile.name,
                "budget_bytes": opts.ram_bytes,
                "fixed": c.fixed,
                "sim": c.sim,
                "storage_kind": c.profile.storage.kind,
            },
        )
    )
    files[PLAN] = text = json.dumps(plan_json(opts, c), indent=1) + "\n"
    for render in renderers:
        files.update(render(json.loads(text)))
    for h in sorted((RUNTIME_C / "include" / "poet").glob("*.h")):
        files[f"runtime/include/poet/{h.name}"] = h
    for k in emit.kernel_sources(c.training):
        files[f"runtime/src/kernels/{k}.c"] = emit.kernel_file(k, opts.kernels)
    files["harness/main.c"] = RUNTIME_C / "harness" / "main.c"
    files["target/poet_target.h"] = TARGETS / "common" / "poet_target.h"
    files["target/platform_host.c"] = TARGETS / "host" / "platform_host.c"
    return files


@contextmanager
def atomic_dir(out: Path) -> Iterator[Path]:
    """Yields a temporary directory next to ``out``; on success it replaces ``out``, on error it vanishes."""
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / PLAN).exists())):
        raise PoetError(f"{out} exists and is not a poet-edge output folder; refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
        old = out.with_name(f".{out.name}.old-{tmp.name[-8:]}")
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_project(out: Path, files: dict[str, str | bytes | Path]) -> None:
    with atomic_dir(out) as tmp:
        for rel, content in sorted(files.items()):
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, dest)
            elif isinstance(content, bytes):
                dest.write_bytes(content)
            else:
                dest.write_text(content)


def compile_model(
    opts: CompileOptions,
    log: Callable[[str], None] = lambda s: None,
    renderers: Sequence[Renderer] = (),
    phase: Callable[[str], None] = lambda s: None,
    limit: PhaseLimit | None = None,
) -> Compiled:
    """Plans and writes the project; with ``opts.time_limit_s`` each phase stops the compile with a
    PoetError naming it once it runs longer (``limit``: the clock to measure it with, for tests)."""
    limit = limit or PhaseLimit(opts.time_limit_s)
    c = plan_training(opts, log, phase, limit)
    limit.begin("codegen")
    phase("codegen")
    files = project_files(opts, c, renderers)
    limit.begin(None)  # nothing is written once the limit is passed
    write_project(opts.out, files)
    return c
