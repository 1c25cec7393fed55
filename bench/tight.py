"""Whole models in microcontroller budgets (issues 56, 57): zoo models compiled as `poet compile` does by
default (--params auto, --fused-updates, --relu-masks, --split auto, --scheduler scale; here --effort quick
and --time-limit 60: a run of scale on a big split graph may be cut by that safety stop, and its row is then
time-dependent; schedule_info in tight.json says so, for rows measured since it records cut_by_time_limit),
trained 3 SGD steps on qemu-cortex-m4 and on the host, against the numpy reference.

Columns: the RAM measured on QEMU (static + stack high-water) against the budget; parameters bit-identical
to the host build; the largest relative error of a parameter tensor against the numpy reference after the 3
steps (max|a - b| / max|b| per tensor, as the tests measure it); instructions per step, measured (QEMU
-icount) and predicted by the cortex-m4 profile's compute model (poet_edge.calibrate.
predicted_step_instructions: loads are priced as copies, the write-backs and page-outs not at all); storage
bytes written per step (parameter write-backs and paged values) and the simulator's figure; steps until the
storage wears out, for the profile's SD card (the simulator) and for the MCU's own flash if the storage were
put there (nRF52840: 1 MB, 4 KB pages, 10,000 erase cycles, nRF52840 Product Specification v1.7 section 4.3,
wear spread over the flash the image does not use); the simulated energy of a step against the same model
unconstrained (every parameter in RAM, no recomputation or paging), and the simulated step latency
likewise; the operator-splitting tile size the compile chose (--split auto: only when no unsplit choice
fits) and the node count of the graph it scheduled. A budget below the model's floor is reported with the
floor and the node that sets it; for an issue-57 target that cannot be met, the next row is the smallest
budget that works: the lowest floor over the choices --split auto has (unsplit, and every tile size of
splitting.TILE_SIZES down to 4 KB), every trainable parameter in storage, rounded up to a KB, then compiled
and run, and raised by 2% of it while the schedule or the QEMU program does not fit (at most 4 compiles).

Writes bench/results/tight.json and tight.md. Run: .venv/bin/python bench/tight.py [--only MODEL]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import provenance  # noqa: E402
from zoo import ROOT, ZOO, table  # noqa: E402

from poet_edge import autodiff, calibrate, frontend, planning, reference, runner, splitting, trainable  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions  # noqa: E402

RESULTS = ROOT / "bench" / "results"
KB = 1024
STEPS = 3
LR = 0.05
RAM_IN, STORAGE_IN = planning.InputPlace.RAM, planning.InputPlace.STORAGE


@dataclass(frozen=True)
class Case:
    model: str
    train: str
    budget: int
    input: planning.InputPlace = RAM_IN  # --input
    split: str = "auto"  # --split
    smallest: bool = False  # below the floor: also run the smallest budget that works (issue 57)
    issue: int = 57  # the issue that set the target (57's rows run first)
    batch: int = 1  # --batch (above 1: --split auto may run the batch in parts, docs/batch_split.md)

    @property
    def key(self) -> str:
        batch = f"-b{self.batch}" if self.batch > 1 else ""
        return f"{self.model}-{self.train}-{self.budget // KB}-{self.input.value}-{self.split}{batch}"


CASES = [  # issue 56's targets, then issue 57's (resnet8 all at 256 KB is both)
    Case("dscnn", "all", 128 * KB, issue=56),
    Case("bert_tiny", "all", 192 * KB, issue=56),
    Case("lenet5", "all", 256 * KB, issue=56),
    Case("resnet8", "bias", 160 * KB, issue=56),
    Case("resnet8", "all", 256 * KB),
    Case("resnet8", "bias", 96 * KB),
    Case("resnet8", "bias", 96 * KB, split="off"),  # the refusal without splitting, for comparison
    Case("mobilenetv2_035", "bias", 256 * KB),
    Case("mobilenetv2_035", "all", 512 * KB, STORAGE_IN, smallest=True),
    Case("mobilenetv1_025", "all", 256 * KB, STORAGE_IN, smallest=True),
    Case("mobilenetv2_035", "all", 512 * KB, smallest=True),  # the targets with the batch in RAM too
    Case("mobilenetv1_025", "all", 256 * KB, smallest=True),
    Case("lenet5", "all", 64 * KB),  # dense weights in column blocks (floors 206.9 -> 26.8 KB)
    Case("autoencoder", "all", 64 * KB),  # (343.5 -> 33.0 KB)
    Case("resnet8", "bias", 30 * KB),  # row tiles with halos (channel tiles alone: floor 32.1 KB)
    # the batch read from storage in windows of rows (whole-batch loads: floors 126.0 / 126.1 KB)
    Case("mobilenetv1_025", "bias", 96 * KB, STORAGE_IN),
    Case("mobilenetv2_035", "bias", 96 * KB, STORAGE_IN),
    # batch 8 in parts, each part's samples and row windows loaded from storage (batch in RAM: 884,736 B)
    Case("mobilenetv2_035", "bias", 256 * KB, STORAGE_IN, batch=8),
    # an unrolled RNN: each weight's per-step gradients summed in the Gemms that make them (autodiff._fold;
    # with Adds the floor was 46.0 KB, set by grad/W_hh/Add)
    Case("gru_unrolled", "all", 40 * KB),
]
FLOOR_TILES = tuple(t for t in splitting.TILE_SIZES if t >= 4 * KB)  # the smallest-budget search's sizes
STEP_UP = 0.02  # the smallest-budget search: each retry adds 2% of the floor
MAX_TRIES = 4
RESERVE = load_profile("cortex-m4").mcu.ram_reserve_bytes
FLASH = {"bytes": 1 << 20, "page": 4096, "cycles": 10_000}  # nRF52840 internal flash


def options(
    model: str,
    train: str,
    ram: int,
    out: Path,
    place: planning.InputPlace = RAM_IN,
    split: str = "auto",
    batch: int = 1,
    **kw: Any,
) -> CompileOptions:
    return CompileOptions(
        ZOO / f"{model}.onnx",
        "cortex-m4",
        ram,
        out,
        batch,
        autodiff.Loss.CROSS_ENTROPY,
        LR,
        scheduler="scale",
        train=train,
        milp=MilpOptions(time_limit_s=60.0, threads=2, effort="quick"),
        training=autodiff.DEFAULT_OPTIONS,
        input=place,
        split=split,
        **kw,
    )


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max|a - b| / max|b| over one tensor (as tests/oputil.py: elementwise ratios blow up near zero)."""
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def flash_steps(written: int, text_bytes: int) -> float | None:
    """Steps until the MCU's flash wears out, wear spread over the pages the image leaves free."""
    if written <= 0:
        return None
    pages = (FLASH["bytes"] - text_bytes) // FLASH["page"]  # < 0: the image alone exceeds the flash
    return FLASH["cycles"] * pages / (written / FLASH["page"])


def lowest_floor(tg: Graph, place: planning.InputPlace) -> dict[str, Any]:
    """The lowest floor --split auto can reach: every trainable parameter in storage, unsplit or split
    into tiles of each FLOOR_TILES size; with the tile size (None: unsplit) and the node (and op) that
    set it."""
    best: dict[str, Any] | None = None
    for tile in (None, *FLOOR_TILES):
        g = tg if tile is None else splitting.split_graph(tg, tile).graph
        spec = planning.spec_from_graph(g, RESERVE, place, frozenset(g.trainable))
        f = memory_floor(planning.price(spec, load_profile("cortex-m4"), 1 << 62))
        if best is None or f.bytes < best["bytes"]:
            op = next(n.op for n in g.nodes if n.name == f.node)
            best = {"bytes": f.bytes, "tile": tile, "node": f.node, "op": op, "explanation": f.explanation}
    assert best is not None
    return best


def run_case(case: Case, tmp: Path, ram: int | None = None) -> dict[str, Any]:
    ram = case.budget if ram is None else ram
    row: dict[str, Any] = {
        "model": case.model,
        "train": case.train,
        "budget": ram,
        "input": case.input.value,
        "split": case.split,
        "batch": case.batch,
    }
    out = tmp / f"{case.key}-{ram}"
    began = time.monotonic()
    try:
        c = compile_model(options(case.model, case.train, ram, out, case.input, case.split, case.batch))
    except PoetError as e:
        row["error"] = str(e)
        row["compile_s"] = round(time.monotonic() - began, 1)
        return row
    row["compile_s"] = round(time.monotonic() - began, 1)
    row["predicted_ram"] = c.predicted_ram_bytes
    row["parts"] = c.batch.parts if c.batch is not None else 1
    try:
        qemu = runner.run_project(out, "qemu-cortex-m4", STEPS, timeout_s=3600.0)
    except PoetError as e:  # e.g. the link: the compile's plan fits, the program does not
        row["error"] = f"compiled (predicted RAM {c.predicted_ram_bytes:,} B), but on qemu-cortex-m4: {e}"
        return row
    host = runner.run_project(out, "host", STEPS, timeout_s=3600.0)
    plan = runner.load_plan(out)
    free = compile_model(
        options(
            case.model,
            case.train,
            64 * KB * KB,
            tmp / "free",
            batch=case.batch,
            params=planning.ParamPlace.RAM,
        )
    )
    # the oracle: numpy on the unsplit training graph (the free compile's), fed the same batches
    _, ref_params = reference.train(free.training, runner.batches(plan, STEPS), LR)
    err = max(max_rel_err(qemu.params[k], v) for k, v in ref_params.items())
    prof = calibrate.instruction_profile(
        load_profile("cortex-m4"), calibrate.CYCLES_PER_INSTRUCTION.get("cortex-m4", 1.0)
    )
    stored = planning.stored_params(c.spec)
    measured = qemu.instructions(qemu.steps[-1].ticks) or 0
    predicted = calibrate.predicted_step_instructions(plan, prof)
    written = qemu.steps[-1].bytes_written
    row.update(
        {
            "stored": f"{len(stored)}/{len(c.training.trainable)}",
            "stored_bytes": sum(c.training.tensor(p).nbytes for p in stored),
            "predicted_ram": c.predicted_ram_bytes,
            "measured_ram": qemu.measured_ram_bytes,
            "host_bits": all(np.array_equal(qemu.params[k], host.params[k]) for k in host.params)
            and [s.loss for s in qemu.steps] == [s.loss for s in host.steps],
            "max_rel_err_vs_numpy": err,
            "instr_measured": measured,
            "instr_predicted": predicted,
            "written_measured": written,
            "written_simulated": c.sim.storage_bytes_written,
            "read_measured": qemu.steps[-1].bytes_read,
            "steps_sd": c.sim.steps_until_endurance,
            "steps_flash": flash_steps(written, qemu.build.sections.get("text", 0)),
            "energy_mj": c.sim.energy_j * 1e3,
            "energy_free_mj": free.sim.energy_j * 1e3,
            "latency_ms": c.sim.latency_s * 1e3,
            "latency_free_ms": free.sim.latency_s * 1e3,
            "recomputations": c.sim.n_recomputations,
            "page_outs": c.sim.n_page_outs,
            "tile_bytes": c.split.tile_bytes if c.split else None,
            "rows_first": c.split.rows_first if c.split else None,
            "nodes": len(c.training.nodes),
            "nodes_unsplit": len(free.training.nodes),
            "schedule_info": c.schedule.report.to_json(
                ("status", "gap", "effort", "cut_by_time_limit", "cut_phase")
            ),
        }
    )
    return row


def smallest_budget(case: Case, tmp: Path) -> list[dict[str, Any]]:
    """The smallest budget that works, for a target below the floor: from the lowest floor (rounded up to a
    KB), raised by STEP_UP of it while the compile finds no schedule that fits, at most MAX_TRIES compiles.
    Returns the row of the run (with the floor and its node) or the last failure."""
    g = runner_graph(case.model)
    tg = autodiff.training_graph(
        g, autodiff.Loss.CROSS_ENTROPY, trainable.select(g, case.train), options=autodiff.DEFAULT_OPTIONS
    )
    low = lowest_floor(tg, case.input)
    ram = -(-low["bytes"] // KB) * KB
    tried: list[int] = []
    failed: list[str] = []
    for _ in range(MAX_TRIES):
        tried.append(ram)
        row = run_case(case, tmp, ram)
        if "error" not in row:
            break
        failed.append(f"{ram // KB} KB: {row['error'][:160]}")
        ram = -(-(ram + int(STEP_UP * low["bytes"])) // KB) * KB
    row["smallest"] = {**low, "tried": tried, "failed": failed}
    return [row]


def runner_graph(model: str) -> Graph:
    return frontend.load(ZOO / f"{model}.onnx", 1)


def _floor_node(error: str) -> str:
    return error.split("(node ")[1].split(":")[0] if "(node " in error else error[:80]


def flat(r: dict[str, Any]) -> dict[str, object]:
    batch = r.get("batch", 1)
    parts = f", {r['parts']} parts" if r.get("parts", 1) > 1 else ""
    head = {
        "model": r["model"] + (f" (batch {batch}{parts})" if batch > 1 else ""),
        "train": r["train"],
        "budget KB": r["budget"] // KB,
        "input": r["input"],
        "split": r["split"],
    }
    low = r.get("smallest")
    note = ""
    if low:
        how = "unsplit" if low["tile"] is None else f"{low['tile'] // KB} KB tiles"
        tried = ", ".join(f"{t // KB}" for t in low["tried"])
        note = (
            f"smallest that works: floor {low['bytes'] / KB:.1f} KB, set by {low['node']} ({low['op']}, "
            f"{how}); tried {tried} KB" + "".join(f"; {f}" for f in low.get("failed", []))
        )
    if "error" in r and r["error"].startswith("compiled"):
        return {
            **head,
            "result": "compiled, QEMU build failed: " + r["error"].split(": ", 2)[-1][:70],
            "note": note,
        }
    if "error" in r:
        return {**head, "result": "below the floor: " + _floor_node(r["error"]), "note": note}
    sd, fl, pred = r["steps_sd"], r["steps_flash"], r["instr_predicted"]
    first = ", rows first" if r.get("rows_first") else ""  # (rows measured before 2026-11-30 lack it)
    tile = f"{r['tile_bytes'] // KB} KB{first}" if r["tile_bytes"] else "-"
    return {
        **head,
        "result": "ok" if r["host_bits"] and r["measured_ram"] <= r["budget"] else "FAIL",
        "tile / nodes (unsplit)": f"{tile} / {r['nodes']:,} ({r['nodes_unsplit']:,})",
        "stored params": f"{r['stored']} ({r['stored_bytes'] / KB:.1f} KB)",
        "RAM measured / predicted B": f"{r['measured_ram']:,} / {r['predicted_ram']:,}",
        "host bits": "same" if r["host_bits"] else "DIFFER",
        "max rel err vs numpy": f"{r['max_rel_err_vs_numpy']:.1e}",
        "instr/step measured": f"{r['instr_measured']:,}",
        "predicted": f"{r['instr_predicted']:,.0f} ({100 * (pred / r['instr_measured'] - 1):+.1f}%)",
        "written B/step (sim)": f"{r['written_measured']:,} ({r['written_simulated']:,})",
        "steps to wear-out SD / flash": f"{sd:.3g} / " + (f"{fl:.3g}" if fl > 0 else "image > flash")
        if sd and fl
        else "-",
        "energy mJ (unconstrained)": f"{r['energy_mj']:.3f} ({r['energy_free_mj']:.3f}, "
        f"{100 * (r['energy_mj'] / r['energy_free_mj'] - 1):+.0f}%)",
        "latency ms (unconstrained)": f"{r['latency_ms']:.1f} ({r['latency_free_ms']:.1f}, "
        f"{100 * (r['latency_ms'] / r['latency_free_ms'] - 1):+.0f}%)",
        "recomp / page-outs": f"{r['recomputations']} / {r['page_outs']}",
        "note": note,
    }


REPORT = """# Whole models in microcontroller budgets (issues 56, 57)

Measured by `bench/tight.py` on {machine}, commit {commit}, {date} (rows measured at {commits}; a run
may resume from the rows of earlier ones with --partial).

{doc}

{table}

Rows that fail name the node that sets the floor (`poet inspect` and bench/floor.py give the floors); a
target without a "smallest that works" row below it is one whose search did not finish in this run (see
the commit message). The refusals in full:

{errors}
"""


def markdown(rows: list[dict[str, object]]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def load_partial(paths: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Rows already measured (--partial files): {case key: rows}; each row keeps the commit it was
    measured at ("commit"; rows of an older file without it take the file's)."""
    done: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        if path.is_file():
            data = json.loads(path.read_text())
            for key, rows in data["rows"].items():
                done[key] = [{"commit": data.get("commit", "?"), **r} for r in rows]
    return done


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run only this model's rows (nothing is written to bench/results)")
    ap.add_argument("--case", action="append", help="run only the case with this key (see Case.key)")
    ap.add_argument("--no-smallest", action="store_true", help="skip the smallest-budget search")
    ap.add_argument(
        "--partial",
        type=Path,
        action="append",
        default=[],
        help="JSON files of rows measured so far: read to skip their cases; the first is updated after each",
    )
    args = ap.parse_args(argv)
    done = load_partial(args.partial)
    mine: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in sorted(CASES, key=lambda c: -c.issue):
            if (args.only and case.model != args.only) or case.key in done:
                continue
            if args.case and case.key not in args.case:
                continue
            rows = [run_case(case, Path(tmp))]
            if case.smallest and "error" in rows[0] and not args.no_smallest:
                rows += smallest_budget(case, Path(tmp))
            for r in rows:
                r["commit"] = provenance()["commit"]
                print(flat(r), file=sys.stderr, flush=True)
            done[case.key] = mine[case.key] = rows
            if args.partial:
                old = load_partial(args.partial[:1])
                args.partial[0].write_text(json.dumps({"rows": {**old, **mine}}, default=str) + "\n")
    picked = [r for case in CASES if case.key in done for r in done[case.key]]
    shown = [flat(r) for r in picked]
    print(table(shown, list(dict.fromkeys(k for r in shown for k in r))))
    if args.only or args.case or any(case.key not in done for case in CASES):
        return 0
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tight.json").write_text(json.dumps({**meta, "rows": picked}, indent=1, default=str) + "\n")
    doc = __doc__.split("\n\nWrites")[0]
    errors = "\n".join(
        f"- {r['model']} --train {r['train']} --ram {r['budget'] // KB}KB --input {r['input']} "
        f"--split {r['split']}: `{r['error']}`"
        for r in picked
        if "error" in r
    )
    commits = ", ".join(sorted({str(r["commit"]) for r in picked}))
    (RESULTS / "tight.md").write_text(
        REPORT.format(**meta, doc=doc, table=markdown(shown), errors=errors, commits=commits)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
