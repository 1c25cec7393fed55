"""poet compile MODEL.onnx --device D --ram SIZE [-o OUT]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from poet_edge import autodiff, frontend, optimizer, planning, report
from poet_edge.autodiff import Loss
from poet_edge.batch_split import BATCH_PARTS_HELP, parts_wanted
from poet_edge.commands import add_batch, add_solve_limits, add_talk, warn_ram_above_device
from poet_edge.compiler import PATCHES, Compiled, CompileOptions, compile_model
from poet_edge.planning import INPUT_HELP, PARAMS_HELP, InputPlace, ParamPlace
from poet_edge.progress import Progress
from poet_edge.schedule import SolveReport
from poet_edge.schedulers import SCHEDULERS, milp_solver
from poet_edge.schedulers.effort import cut_warning
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.schedulers.ordering import ALL_ORDERS
from poet_edge.splitting import SPLIT_HELP, TILE_ORDER_HELP, TILE_ORDERS, parse_split
from poet_edge.trainable import TRAIN_HELP
from poet_edge.units import RAM_HELP, SIZE_HELP, fmt_bytes, parse_ram, parse_size


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compile",
        help="build the training program for a device and RAM budget",
        description="Build the training graph of MODEL, schedule it into --ram on --device, plan "
        "the arena and write plan.json plus a C99 project into -o OUT (atomically: an interrupted compile "
        "leaves the old OUT; OUT is replaced whole, so a recompile refuses an OUT holding files poet did "
        "not write).",
    )
    p.add_argument("model", type=Path, help="ONNX model (float32, static shapes except the batch dimension)")
    p.add_argument("--device", default="host", help="device profile name or TOML path (see 'poet profiles')")
    p.add_argument("--ram", required=True, help=f"RAM budget for one training step, {RAM_HELP}")
    p.add_argument("-o", "--out", type=Path, help="output folder (default: <model name>.poet)")
    add_batch(p)
    p.add_argument(
        "--loss",
        choices=[x.value for x in Loss],
        default=Loss.CROSS_ENTROPY.value,
        help="loss poet adds after the model output (default cross-entropy with integer labels)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=0.01,
        help="learning rate 'poet run' passes to every step (default 0.01); the generated "
        "poet_train_step takes it per step",
    )
    optimizer.add_arguments(p.add_argument_group("optimizer (torch.optim's formulas)"))
    autodiff.add_arguments(p.add_argument_group("training-graph rewrites (exact)"))
    p.add_argument(
        "--reserve",
        help=f"RAM kept for stack and runtime, {SIZE_HELP} (default: the device "
        "profile's ram_reserve_bytes, 8KB on the Cortex-M profiles)",
    )
    p.add_argument("--train", default="all", help=f"trainable parameters: {TRAIN_HELP}")
    p.add_argument(
        "--scheduler",
        choices=sorted(SCHEDULERS),
        default="scale",
        help="how to fit the budget: scale (default; segment-cover lower bound + local search and "
        "windows re-optimised by HiGHS: seconds on graphs of 1,000 nodes, gap reported), milp (POET's "
        "joint recomputation + paging MILP, optimal within the time limit, gap reported; also called "
        "poet-milp; slow beyond ~100 nodes), none (every node once), recompute-all, page-all, greedy",
    )
    m = p.add_argument_group("solver options (scale, milp, poet-milp; --milp-solver: milp only)")
    m.add_argument("--objective", choices=("energy", "latency"), default="energy", help="what to minimise")
    add_solve_limits(m)
    m.add_argument(
        "--threads",
        type=int,
        help="solver threads (default: the solver's choice); 1: also scale's two orders' runs, and the "
        "fallback orders' fitting sequences, one after the other (else one beside in a child process)",
    )
    m.add_argument(
        "--milp-solver", choices=("highs", "cbc"), help="the MILP's solver: HiGHS (default) or CBC"
    )
    m.add_argument("--no-paging", action="store_true", help="recomputation only")
    m.add_argument("--no-remat", action="store_true", help="paging only")
    m.add_argument(
        "--max-latency",
        help="runtime budget: a factor of the no-remat step time (1.5x) or seconds "
        "(0.2s); paging time counts",
    )
    p.add_argument(
        "--kernels",
        choices=("fast", "reference"),
        default="fast",
        help="C kernels copied into the project: fast (register-blocked runtime_c/src/optimized/, "
        "default) or reference (runtime_c/src/kernels/); both give bit-identical results",
    )
    p.add_argument(
        "--input",
        choices=[*(x.value for x in InputPlace), "auto"],
        default=InputPlace.RAM.value,
        help=f"{INPUT_HELP}; auto: in RAM, and also in storage where recomputing and paging add more than "
        "moving the batch would cost (or it does not fit in RAM), the cheaper kept (plan.json: input, "
        "input_compared); the generated POET_INPUT_IN_STORAGE says which",
    )
    p.add_argument(
        "--params",
        choices=[x.value for x in ParamPlace],
        default=ParamPlace.AUTO.value,
        help=PARAMS_HELP,
    )
    p.add_argument("--split", type=parse_split, default="auto", metavar="auto|off|SIZE", help=SPLIT_HELP)
    p.add_argument("--tile-order", choices=tuple(TILE_ORDERS), default="auto", help=TILE_ORDER_HELP)
    p.add_argument(
        "--patches",
        choices=PATCHES,
        default="auto",
        help="forward-only stages of a rows-first split (layers before the first trained one, --train "
        "last:N) run patch by patch: each reader computes the rows it needs from the stage's input, the "
        "halo rows recomputed (priced) instead of kept (MCUNetV2's patches; docs/splitting.md). auto "
        "(default): such a split is scheduled with and without, the least energy kept; on; off",
    )
    p.add_argument("--batch-parts", type=parts_wanted, default=None, metavar="auto|K", help=BATCH_PARTS_HELP)
    p.add_argument(
        "--check-inputs",
        action="store_true",
        help="the generated step scans x (and float targets) for NaN/Inf before training and returns "
        "POET_ERR_NONFINITE_INPUT (8 instructions per float, priced by the simulator); labels are always "
        "range-checked",
    )
    p.add_argument(
        "--verify-paging",
        action="store_true",
        help="CRC-32 of every paged value at page-out, checked at page-in: a flipped bit aborts the step "
        "with POET_ERR_CORRUPT (7 instructions per byte, priced by the simulator)",
    )
    p.add_argument(
        "--arena-moves",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="where the static memory plan fragments past --ram although the live tensors fit, move tensors "
        "within the arena (memmove, priced as copies by the simulator) instead of rescheduling with "
        "recomputation or paging; --no-arena-moves keeps every tensor where it was born (default: on)",
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html and memory.png (faster)")
    add_talk(p, "print nothing but errors", "also print each phase with its duration")


def run(args: argparse.Namespace) -> int:
    out = args.out or args.model.with_suffix(".poet")
    progress = Progress.from_flags(args.quiet, args.verbose)
    banks = parse_ram(args.ram)
    warn_ram_above_device(banks[0], args.device)  # a profile's ram_bytes: its main (first) RAM bank
    opts = CompileOptions(
        args.model,
        args.device,
        sum(banks),
        out,
        frontend.batch_of(args.model, args.batch),
        Loss(args.loss),
        args.lr,
        parse_size(args.reserve) if args.reserve else None,
        args.scheduler,
        args.train,
        kernels=args.kernels,
        milp=MilpOptions(
            args.objective,
            args.time_limit,
            args.threads,
            milp_solver(args.scheduler, args.milp_solver),
            not args.no_paging,
            not args.no_remat,
            gap_rel=args.gap,
            effort=args.effort,
            on_progress=progress.solver,
        ),
        max_latency=args.max_latency,
        input=InputPlace.RAM if args.input == "auto" else InputPlace(args.input),
        input_auto=args.input == "auto",
        params=ParamPlace(args.params),
        time_limit_s=args.time_limit,
        optimizer=optimizer.from_args(args),
        check_inputs=args.check_inputs,
        verify_paging=args.verify_paging,
        training=autodiff.options_from_args(args),
        ram_banks=banks if len(banks) > 1 else (),
        split=args.split,
        tile_order=args.tile_order,
        patches=args.patches,
        batch_parts=args.batch_parts,
        arena_moves=args.arena_moves,
    )
    try:
        c = compile_model(opts, progress.info, () if args.no_report else (report.render,), progress.phase)
    finally:
        progress.done()
    say = progress.info  # the summary obeys --quiet
    say(f"schedule: {c.schedule.solver}, {len(c.schedule.steps)} steps")
    say(
        f"RAM: {fmt_bytes(c.predicted_ram_bytes)} of {fmt_bytes(opts.ram_bytes)} "
        f"(arena {fmt_bytes(c.arena_bytes)}, "
        f"overhead {100 * (c.arena.overhead - 1):.1f}% over live peak; "
        f"fixed {fmt_bytes(c.fixed.total)}"
        + (
            f", of which {opts.optimizer.kind.value} state {fmt_bytes(c.fixed.optimizer_state)})"
            if c.fixed.optimizer_state
            else ")"
        )
    )
    for b, size in enumerate(opts.ram_banks):
        used = c.bank_bytes[b] + (c.fixed.total if b == 0 else 0)
        say(
            f"  bank {b}: {fmt_bytes(used)} of {fmt_bytes(size)} "
            f"(arena {fmt_bytes(c.bank_bytes[b])}{', fixed RAM, stack and heap' if b == 0 else ''})"
        )
    base = sum(n.compute_j for n in c.problem.nodes), sum(n.compute_s for n in c.problem.nodes)
    say(
        f"predicted step: {c.sim.latency_s * 1e3:.3f} ms, {c.sim.energy_j * 1e3:.4f} mJ on {c.profile.name} "
        f"({100 * (c.sim.energy_j / base[0] - 1):+.2f}% energy, "
        f"{100 * (c.sim.latency_s / base[1] - 1):+.2f}% latency "
        f"vs. no recomputation or paging)"
    )
    say(
        f"recomputations {c.sim.n_recomputations}, page-outs {c.sim.n_page_outs}, page-ins {c.sim.n_page_ins}"
        + (f", moves in RAM {c.sim.n_moves} ({fmt_bytes(c.sim.moved_bytes)})" if c.sim.n_moves else "")
    )
    for line in (*storage_lines(c), *c.hints):
        say(line)
    if (warn := endurance_warning(c)) is not None:
        print(warn, file=sys.stderr)
    for m in c.inference:
        ram = fmt_bytes(m.spec.fixed.total + m.arena.arena_bytes)
        say(
            f"poet_{'predict' if m.mode == 'predict' else 'eval_step'}: {m.sim.latency_s * 1e3:.3f} ms, "
            f"{m.sim.energy_j * 1e3:.4f} mJ per batch, RAM {ram} (own schedule, same arena)"
        )
    solved = c.schedule.report
    for warning in (cut_warning(solved, args.time_limit), choices_cut_warning(c)):
        if warning is not None:
            print(warning, file=sys.stderr)
    if solved.has("status"):
        gap = solved.gap
        say(
            f"solver: {solved.status}"
            + (f", gap {100 * gap:.3f}%" if gap is not None else "")
            + (f", {solved.seconds:.1f} s" if solved.seconds is not None else "")
            + (f"; fell back: {solved.fallback}" if solved.fallback else "")
        )
        plain = base[0] if args.objective == "energy" else base[1]
        for line in bound_lines(solved, plain, args.objective, args.time_limit, args.gap):
            say(line)
    say(
        f"wrote {out}/ (plan.json, {'' if args.no_report else 'report.html, memory.png, '}"
        "poet_model.c, poet_model.h, Makefile, README.md)"
    )
    return 0


def choices_cut_warning(c: Compiled) -> str | None:
    """The warning line when the safety time limit cut the planning of compared choices or of the inference
    plans: their energies, hence the choice made, may then differ between runs."""
    cut = [r for r in c.compared if r.get("cut_by_time_limit")]
    modes = [m.mode for m in c.inference if m.schedule.report.cut_by_time_limit]
    if not cut and not modes:
        return None
    what = [
        f"{len(cut)} of {len(c.compared)} compared choices ({', '.join(_row_text(r) for r in cut)})"
    ] * bool(cut)
    what += [f"poet_{m}'s plan" for m in modes]
    return (
        f"poet: warning: the --time-limit safety stop cut the planning of {' and '.join(what)}: a longer "
        "--time-limit may give them less energy, and the choice made may differ between runs"
    )


def _row_text(row: dict[str, object]) -> str:
    """A compared choice for a message: its tiles (or "unsplit"), stored parameters and where it was cut."""
    tile = row.get("tile_bytes")
    first = (", rows first" if row.get("rows_first") else "") + (", patches" if row.get("patches") else "")
    parts = [f"{fmt_bytes(tile)} tiles{first}" if isinstance(tile, int) else "unsplit"]
    parts.append(f"{row['stored_parameters']} parameters in storage")
    return f"{', '.join(parts)}: '{row.get('cut_phase')}'"


ENDURANCE_WARN_STEPS = 100_000  # fewer training steps than this until the storage wears out: a warning


def storage_lines(c: Compiled) -> list[str]:
    """Parameters kept in storage, and the storage traffic and wear of a step, when it writes storage."""
    lines = []
    stored = planning.stored_params(c.spec)
    if stored:
        nbytes = sum(c.training.tensor(p).nbytes for p in stored)
        lines.append(
            f"parameters in storage: {len(stored)} of {len(c.training.trainable)} trainable "
            f"({fmt_bytes(nbytes)}), read {c.sim.param_bytes_read:,} B and written "
            f"{c.sim.param_bytes_written:,} B per step"
        )
    if c.sim.storage_bytes_written and c.sim.steps_until_endurance is not None:
        lines.append(
            f"storage ({c.profile.storage.kind}): {c.sim.storage_bytes_written:,} B written per step, "
            f"{c.sim.erase_blocks_per_step:.4g} erase blocks; endurance reached after "
            f"{c.sim.steps_until_endurance:,.0f} steps (wear spread over the whole storage)"
        )
    return lines


def endurance_warning(c: Compiled) -> str | None:
    left = c.sim.steps_until_endurance
    if not c.sim.storage_bytes_written or left is None or left >= ENDURANCE_WARN_STEPS:
        return None
    return (
        f"poet: warning: the storage ({c.profile.storage.kind}, {c.profile.storage.endurance_cycles:,} erase "
        f"cycles) wears out after {left:,.0f} training steps at {c.sim.storage_bytes_written:,} B "
        f"written per step (below {ENDURANCE_WARN_STEPS:,}); --params ram or a larger --ram writes less"
    )


HINT_GAP = 0.01  # without --gap, a gap left wider than this by the time limit gets the hint


def bound_lines(
    report: SolveReport, plain: float, objective: str, time_limit: float | None, gap_asked: float | None
) -> list[str]:
    """What the solver's lower bound means, when the gap is open; with a hint when the time limit
    left it wider than asked (``--gap``, else ``HINT_GAP``)."""
    if report.bound is None or report.gap is None or plain <= 0.0:
        return []
    b, g = float(report.bound), float(report.gap)
    if not 0.0 < g < 1.0:
        return []
    shown = f"{b * 1e3:.4f} {'mJ' if objective == 'energy' else 'ms'}"
    space = "in any order" if report.bound_covers == ALL_ORDERS else "in this order"
    lines = [
        f"lower bound: {shown} ({100 * (b / plain - 1):+.2f}% {objective}): no schedule that computes "
        f"the nodes {space} costs less, so this one costs at most {100 * (1 / (1 - g) - 1):.2f}% "
        "more than the best"  # gap = (cost - bound) / cost
    ]
    # a time limit cut the run: scale's cut_by_time_limit; "time" in the MILP's status (HiGHS's "Time
    # limit reached", CBC's "Stopped on time limit")
    timed = bool(report.cut_by_time_limit) or "time" in str(report.status or "").lower()
    if timed and g > (HINT_GAP if gap_asked is None else gap_asked):
        shown = "the time limit" if time_limit is None else f"the {time_limit:g} s time limit"
        lines.append(
            f"hint: {shown} left the gap open; a longer --time-limit may narrow it (--gap G stops once it "
            "is proven within G)"
        )
    return lines
