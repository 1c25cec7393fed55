"""poet run OUT [--target T] [--steps N] [--data FILE.npz] [--eval-data FILE.npz] [--load-params FILE.npz]
[--dump-params FILE.npz]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from poet_edge.paths import check_file_target
from poet_edge.runner import Evaluation, RunOutcome, StepLog, load_plan, run_project
from poet_edge.targets import available_targets


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="build a compiled project and train it on the host or an emulated board",
        description="Build OUT for --target, run --steps training steps on deterministic synthetic "
        "data (or --data), print the loss of each step.",
    )
    p.add_argument("out", type=Path, help="folder written by 'poet compile'")
    p.add_argument(
        "--target", default="host", help=f"one of: {', '.join(available_targets())} (default host)"
    )
    p.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    p.add_argument(
        "--data", type=Path, help="npz with arrays x (N, ...) and y (N, ...); step i uses batch i, cycling"
    )
    p.add_argument("--lr", type=float, help="learning rate (default: the one given to compile)")
    p.add_argument("--dump-params", type=Path, help="write the parameters after training to this npz")
    p.add_argument(
        "--load-params",
        type=Path,
        help="npz of parameters (e.g. from --dump-params) set before the first step: every trainable one; "
        "frozen ones only if unchanged",
    )
    p.add_argument(
        "--eval-data",
        type=Path,
        help="npz with x and y: run through poet_predict and poet_eval_step on the target before and after "
        "training; prints accuracy (class labels) and loss",
    )
    p.add_argument(
        "--storage-file",
        type=Path,
        help="QEMU targets: page to this host file through semihosting (as to an SD card) instead of the "
        "board's memory region; created or emptied when the program first pages",
    )
    p.add_argument("--sanitize", action="store_true", help="host only: build with ASan + UBSan")
    p.add_argument(
        "--profile",
        action="store_true",
        help="time every kernel call and report ticks (instructions on QEMU) per op kind",
    )
    p.add_argument(
        "--json", type=Path, help="also write the run's numbers (losses, ticks, RAM) to this JSON file"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit in seconds (default 600)")


def run(args: argparse.Namespace) -> int:
    def show(s: StepLog) -> None:
        print(
            f"step {s.step:4d}  loss {s.loss:.6f}  ticks {s.ticks}  storage written {s.bytes_written} B "
            f"read {s.bytes_read} B",
            flush=True,
        )

    check_file_target("--json", args.json)
    check_file_target("--dump-params", args.dump_params)
    r = run_project(
        args.out,
        args.target,
        args.steps,
        args.data,
        args.lr,
        args.sanitize,
        args.timeout,
        show,
        args.profile,
        args.eval_data,
        args.load_params,
        args.storage_file,
    )
    summary = summarize(r, load_plan(args.out))
    print(format_summary(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    if args.dump_params:
        np.savez(args.dump_params, **r.params)  # type: ignore[arg-type]  # stubs: **kwds may hit allow_pickle
        print(f"wrote {args.dump_params}")
    return 0


def summarize(r: RunOutcome, plan: dict) -> dict:
    steps = len(r.steps)
    ticks = [s.ticks for s in r.steps]
    out = {
        "target": r.target.name,
        "steps": steps,
        "losses": [s.loss for s in r.steps],
        "ticks_per_step": ticks,
        "instructions_per_step": [r.instructions(t) for t in ticks]
        if r.target.instructions_per_tick
        else None,
        "storage_bytes_written_per_step": [s.bytes_written for s in r.steps],
        "storage_bytes_read_per_step": [s.bytes_read for s in r.steps],
        "storage_file_traffic": None
        if r.storage_file_traffic is None
        else dict(
            zip(("bytes_written", "bytes_read", "writes", "reads"), r.storage_file_traffic, strict=True)
        ),
        "ram_budget_bytes": plan["ram_budget_bytes"],
        "predicted_ram_bytes": plan["peak_ram_bytes"],
        "static_ram_bytes": r.build.ram_static_bytes if r.target.is_qemu else None,
        "stack_used_bytes": r.stack_used if r.target.is_qemu else None,
        "measured_ram_bytes": r.measured_ram_bytes if r.target.is_qemu else None,
        **(
            {
                "ram_banks": [b["bytes"] for b in plan["ram_banks"]],
                "measured_bank_bytes": r.measured_bank_bytes,
            }
            if plan.get("ram_banks") and r.target.is_qemu
            else {}
        ),
        "sections": r.build.sections,
    }
    if r.evals:
        out["eval"] = {("before", "after")[e.phase]: eval_json(e, r) for e in r.evals}
    if r.kinds:
        out["per_kind"] = {
            k: {
                "calls_per_step": c / steps,
                "ticks_per_step": t / steps,
                "instructions_per_step": i / steps if (i := r.instructions(t)) else None,
            }
            for k, (c, t) in sorted(r.kinds.items())
        }
    return out


def eval_json(e: Evaluation, r: RunOutcome) -> dict:
    """One evaluation's figures: accuracy (None for regression), mean loss, and per batch the ticks (and
    instructions on QEMU) of poet_predict and poet_eval_step."""
    return {
        "samples": e.samples,
        "accuracy": e.accuracy,
        "loss": e.loss,
        "batch_losses": list(e.batch_losses),
        "predict_ticks_per_batch": list(e.predict_ticks),
        "eval_ticks_per_batch": list(e.eval_ticks),
        "predict_instructions_per_batch": r.instructions(e.predict_ticks[-1]),
    }


def format_eval(s: dict) -> list[str]:
    lines = []
    for when, e in s.get("eval", {}).items():
        acc = "" if e["accuracy"] is None else f"accuracy {100 * e['accuracy']:.2f}%  "
        cost = (
            f"{e['predict_instructions_per_batch']:,} instructions"
            if e["predict_instructions_per_batch"]
            else f"{e['predict_ticks_per_batch'][-1]:,} ticks"
        )
        lines.append(
            f"eval {when:<6} training: {acc}loss {e['loss']:.6f} on {e['samples']} samples "
            f"(poet_predict: {cost} per batch)"
        )
    return lines


def format_summary(s: dict) -> str:
    lines = [f"target {s['target']}: {s['steps']} steps", *format_eval(s)]
    if s["instructions_per_step"]:
        lines.append(
            f"instructions per step: {s['instructions_per_step'][-1]:,} (deterministic; QEMU counts "
            f"instructions, not cycles)"
        )
    else:
        lines.append(f"ticks per step (last): {s['ticks_per_step'][-1]:,}")
    if s["measured_ram_bytes"] is not None:
        lines.append(
            f"RAM: measured {s['measured_ram_bytes']:,} B (static {s['static_ram_bytes']:,} + stack "
            f"high-water {s['stack_used_bytes']:,}) vs predicted {s['predicted_ram_bytes']:,} B, budget "
            f"{s['ram_budget_bytes']:,} B"
        )
    if s.get("measured_bank_bytes"):
        lines.append(
            "RAM banks: measured "
            + ", ".join(
                f"bank {b} {m:,} B of {size:,} B"
                for b, (m, size) in enumerate(zip(s["measured_bank_bytes"], s["ram_banks"], strict=True))
            )
            + " (bank 0: static + stack; bank 1: section .ccmram)"
        )
    lines.append(
        f"storage per step: written {s['storage_bytes_written_per_step'][-1]:,} B, read "
        f"{s['storage_bytes_read_per_step'][-1]:,} B"
    )
    for k, v in s.get("per_kind", {}).items():
        amount = (
            f"{v['instructions_per_step']:,.0f} instr"
            if v["instructions_per_step"]
            else f"{v['ticks_per_step']:,.0f} ticks"
        )
        lines.append(f"  {k:<28} {v['calls_per_step']:5.0f} calls/step  {amount}/step")
    if s.get("storage_file_traffic"):
        f = s["storage_file_traffic"]
        lines.append(
            f"storage file (semihosting), whole run: written {f['bytes_written']:,} B in {f['writes']} "
            f"transfers, read {f['bytes_read']:,} B in {f['reads']} transfers"
        )
    return "\n".join(lines)
