"""Storage faults and power cuts during a training step and a checkpoint save (issue 59): for every storage
call of one step + one poet_checkpoint_save, each fault kind (fail, tear = power cut inside the call, flip =
one silent bit flip) is injected by the platform (targets/common/poet_fault.h) and the driver
runtime_c/harness/faults.c checks the outcome: after a failed step the parameters in RAM are exactly the
pre-step state; after a reboot, poet_checkpoint_restore gives exactly the pre-step or the post-step state.

Columns: calls (injection points: step + save), cases (3 kinds x (every step call + every stride-th save
call); most save calls are the read-back of the slot in 64-byte chunks), torn (power cuts), flips,
reported (a non-OK status of the step or the save, or the power cut itself), unread (flips in bytes nothing
reads afterwards: undo-journal entries of a step that succeeded, the erased magic of a slot being written;
the outcome equals the fault-free one), corrupt (RAM or restored state neither pre nor post: must be 0),
not-transactional (a failed step that changed RAM: must be 0), journal B (undo-journal bytes written per
step), storage B/step (all bytes written per step, journal included), checks % of step (predicted time of
the journal writes, CRC-32s and input scans, as a share of the predicted step on cortex-m4), peak B
(simulated peak RAM of the schedule), updates-last peak B (the same schedule with the journaled updates
moved after the last storage access instead of journaling them: the RAM that alternative would need).
Models are compiled with --verify-paging and --check-inputs at budgets that force paging.
Run: .venv/bin/python bench/faults.py [--target host|qemu-cortex-m4] [--stride N] [--only MODEL]"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from poet_edge import targets  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.codegen.emit import journaled_updates  # noqa: E402
from poet_edge.compiler import Compiled, CompileOptions, compile_model  # noqa: E402
from poet_edge.paths import RUNTIME_C  # noqa: E402
from poet_edge.planning import InputPlace  # noqa: E402
from poet_edge.runner import sources  # noqa: E402
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

KB = 1024
ZOO = ROOT / "examples" / "zoo"


@dataclass(frozen=True)
class FaultModel:
    name: str
    path: Path
    ram: int
    train: str = "all"
    batch: int = 1
    scheduler: str = "greedy"
    input: InputPlace = InputPlace.RAM
    extra: dict[str, Any] = field(default_factory=dict)


MODELS = (
    FaultModel(
        "mlp",
        ROOT / "examples" / "mlp.onnx",
        44 * KB,
        batch=32,
        scheduler="page-all",
        input=InputPlace.STORAGE,
    ),
    FaultModel("dscnn", ZOO / "dscnn.onnx", 200 * KB, train="all", scheduler="scale"),
    FaultModel("resnet8", ZOO / "resnet8.onnx", 256 * KB, train="bias", scheduler="greedy"),
)


def compile_for_faults(m: FaultModel, out: Path) -> Compiled:
    opts = CompileOptions(
        m.path,
        "cortex-m4",
        m.ram,
        out,
        m.batch,
        Loss.CROSS_ENTROPY,
        0.05,
        scheduler=m.scheduler,
        train=m.train,
        input=m.input,
        check_inputs=True,
        verify_paging=True,
    )
    return compile_model(opts)


def updates_last_peak(c: Compiled) -> int:
    """The alternative to the undo journal: the simulated peak RAM of the same schedule with every journaled
    update moved after the step's last storage access (and the frees of what it reads moved after it)."""
    steps = list(c.schedule.steps)
    early = set(journaled_updates(c.spec, c.schedule))
    kinds = {n.name: n.kind for n in c.problem.nodes}
    last = max(i for i, s in enumerate(steps) if isinstance(s, PageIn | PageOut) or kinds[s.node] == "input")
    index = c.problem.index()
    reads = {u: {c.problem.nodes[a].name for a, b in c.problem.edges if b == index[u]} for u in early}
    held = set().union(*reads.values()) if reads else set()
    moved = [s for s in steps[:last] if isinstance(s, Compute) and s.node in early]
    freed = [s for s in steps[:last] if isinstance(s, Free) and s.node in held | early]
    keep = [s for s in steps[: last + 1] if s not in moved and s not in freed]
    schedule = Schedule(tuple(keep + moved + freed + steps[last + 1 :]), c.schedule.solver)
    return simulate(replace(c.problem, budget_bytes=1 << 40), schedule).peak_ram_bytes


def run_driver(out: Path, target_name: str = "host", stride: int = 1, timeout_s: float = 3600.0) -> list[str]:
    """Builds runtime_c/harness/faults.c with the compiled model for ``target_name``; returns its output."""
    target = targets.load_target(target_name)
    srcs, incs = sources(out)
    srcs = [s for s in srcs if s.name != "main.c"] + [RUNTIME_C / "harness" / "faults.c"]
    plan = json.loads((out / "plan.json").read_text())
    x_bytes = 4 * math.prod(plan["training_graph"]["tensors"][plan["training_graph"]["inputs"][0]]["shape"])
    built = targets.build(
        target,
        srcs,
        incs,
        out / f"faults-{target.name}",
        # + the driver's snapshots (3 x payload) and its batch buffer
        plan["ram_budget_bytes"] + 3 * plan["storage"]["checkpoint"]["payload_bytes"] + x_bytes + 16 * KB,
        defines={"POET_FAULTS": "", "POET_FAULT_STRIDE": str(stride)},
    )
    res = targets.run(target, built, out, timeout_s)
    if res.exit_code != 0:
        raise RuntimeError(
            f"fault driver exited with {res.exit_code}: {res.stdout[-2000:]} {res.stderr[-2000:]}"
        )
    return res.stdout.splitlines()


def summarize(lines: list[str]) -> dict[str, Any]:
    """Counts of one driver run (see the module docstring)."""
    calls = next(ln.split() for ln in lines if ln.startswith("calls "))
    checks = {ln.split()[1]: ln.split()[2:] for ln in lines if ln.startswith("check ")}
    cases = [
        dict(zip(ln.split()[4::2], ln.split()[5::2], strict=True)) | {"kind": ln.split()[1]}
        for ln in lines
        if ln.startswith("case ")
    ]
    reported = [
        c for c in cases if c["power_off"] == "1" or c["step"] != "ok" or c["save"] not in ("ok", "-")
    ]
    unread = [c for c in cases if c not in reported and (c["ram"], c["restored"]) == ("post", "post")]
    return {
        "step_calls": int(calls[2]),
        "save_calls": int(calls[4]),
        "cases": len(cases),
        "fired": sum(c["fired"] == "1" for c in cases),
        "torn": sum(c["kind"] == "tear" for c in cases),
        "flips": sum(c["kind"] == "flip" for c in cases),
        "fails": sum(c["kind"] == "fail" for c in cases),
        "reported": len(reported),
        "unread": len(unread),
        "corrupt": sum(c["ram"] == "other" or c["restored"] not in ("pre", "post") for c in cases),
        "not_transactional": sum(c["step"] not in ("ok", "-") and c["ram"] != "pre" for c in cases),
        "restored_pre": sum(c["restored"] == "pre" for c in cases),
        "restored_post": sum(c["restored"] == "post" for c in cases),
        "checks": {k: v for k, v in checks.items()},
    }


COLUMNS = [
    "model",
    "target",
    "calls",
    "cases",
    "torn",
    "flips",
    "reported",
    "unread",
    "corrupt",
    "not-transactional",
    "restored pre/post",
    "journal B",
    "storage B/step",
    "checks % of step",
    "peak B",
    "updates-last peak B",
]


def row(m: FaultModel, target: str, s: dict[str, Any], c: Compiled) -> dict[str, Any]:
    return {
        "model": m.name,
        "target": target,
        "calls": f"{s['step_calls']}+{s['save_calls']}",
        "cases": s["cases"],
        "torn": s["torn"],
        "flips": s["flips"],
        "reported": s["reported"],
        "unread": s["unread"],
        "corrupt": s["corrupt"],
        "not-transactional": s["not_transactional"],
        "restored pre/post": f"{s['restored_pre']}/{s['restored_post']}",
        "journal B": c.sim.journal_bytes_written,
        "storage B/step": c.sim.storage_bytes_written,
        "checks % of step": f"{100 * c.sim.latency_checks_s / c.sim.latency_s:.1f}",
        "peak B": c.sim.peak_ram_bytes,
        "updates-last peak B": updates_last_peak(c),
    }


def table(rows: list[dict[str, Any]]) -> str:
    cells = [[str(r[k]) for k in COLUMNS] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(COLUMNS)]
    lines = ["| " + " | ".join(k.rjust(w) for k, w in zip(COLUMNS, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)) + " |" for c in cells]
    return "\n".join(lines)


def meta() -> dict[str, str]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return {
        "machine": f"{platform.machine()} {platform.system()} {platform.release()}",
        "commit": commit.stdout.strip(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host")
    ap.add_argument(
        "--stride",
        type=int,
        default=1,
        help="inject at every storage call of the step and every N-th of the save (default 1: all)",
    )
    ap.add_argument("--only", help="one model")
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    rows, details = [], {}
    for m in MODELS:
        if args.only and m.name != args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            c = compile_for_faults(m, Path(tmp) / m.name)
            s = summarize(run_driver(Path(tmp) / m.name, args.target, args.stride))
        rows.append(row(m, args.target, s, c))
        details[m.name] = {
            "compile": {
                "ram": m.ram,
                "train": m.train,
                "batch": m.batch,
                "scheduler": m.scheduler,
                "input": m.input.value,
                "verify_paging": True,
                "check_inputs": True,
            },
            **s,
        }
        print(table(rows[-1:]), flush=True)
    info = meta() | {"target": args.target, "stride": str(args.stride)}
    text = table(rows)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.target == "host" else f"-{args.target}"
    (args.results / f"faults{suffix}.json").write_text(
        json.dumps({"meta": info, "rows": rows, "details": details}, indent=1) + "\n"
    )
    head = f"# Storage faults during a step and a checkpoint save\n\n{info['machine']}, {info['commit']}, "
    (args.results / f"faults{suffix}.md").write_text(
        head
        + f"{info['date']}, target {args.target}, stride {args.stride}\n\n"
        + __doc__.split("\n\n", 1)[1]
        + "\n\n"
        + text
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
