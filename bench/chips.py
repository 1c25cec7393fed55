"""Zoo models on the real-chip targets (issue 58): qemu-stm32f405 (128 KB, 80 KB; 48KB+32KB, RAM banks: part
of the SRAM and of the second bank, see docs/targets.md), qemu-cortex-m3 (soft float), qemu-cortex-m55
(scalar) and qemu-cortex-m55-mve (Helium kernels). Each row: compile, 3 training steps on the target with
the paging storage in a host file through semihosting (`poet run --storage-file`), the same compile's 3
steps on the host; the parameters compared bit for bit with the host's; measured RAM (static + stack
high-water, and per bank) against the budget; instructions per step (QEMU -icount); the bytes that went
through the storage file against the simulator's count for 3 steps. A model that does not fit a chip gets
a row that says why, with the numbers.

Compiled for the device profile of the chip (cortex-m3, stm32f405; cortex-m4 for the M55, which has no
profile). Writes bench/results/chips.json and chips.md (machine, commit, date).
Run: PYTHONPATH=. .venv/bin/python bench/chips.py [--only MODEL]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provenance import provenance  # noqa: E402
from zoo import table  # noqa: E402

from poet_edge import planning, runner  # noqa: E402
from poet_edge.autodiff import DEFAULT_OPTIONS, Loss  # noqa: E402
from poet_edge.compiler import Compiled, CompileOptions, compile_model  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.units import parse_ram  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ZOO = ROOT / "examples" / "zoo"
STEPS = 3
DEVICE = {  # the profile each chip is compiled for (no Cortex-M55 profile exists: the M4F's)
    "qemu-stm32f405": "stm32f405",
    "qemu-cortex-m3": "cortex-m3",
    "qemu-cortex-m55": "cortex-m4",
    "qemu-cortex-m55-mve": "cortex-m4",
}
M3_M55 = ("qemu-cortex-m3", "qemu-cortex-m55", "qemu-cortex-m55-mve")
ALL = ("qemu-stm32f405", *M3_M55)


@dataclass(frozen=True)
class Case:
    model: str
    path: Path
    loss: str
    train: str
    batch: int
    ram: str  # --ram, banks joined by '+'
    scheduler: str
    targets: tuple[str, ...]


STM32 = ("qemu-stm32f405",)
CASES = (
    Case("mlp", ROOT / "examples" / "mlp.onnx", "cross-entropy", "all", 4, "128KB", "scale", ALL),
    Case("dscnn", ZOO / "dscnn.onnx", "cross-entropy", "bias", 1, "128KB", "scale", ALL),
    Case("dscnn", ZOO / "dscnn.onnx", "cross-entropy", "bias", 1, "80KB", "scale", STM32),  # pages
    # two banks (48 KB of the SRAM, 32 KB of the second bank), paging: dscnn's floor is 73.5 KB
    Case("dscnn", ZOO / "dscnn.onnx", "cross-entropy", "bias", 1, "48KB+32KB", "scale", STM32),
    Case("autoencoder", ZOO / "autoencoder.onnx", "mse", "bias", 4, "128KB", "scale", ALL),
    Case("autoencoder", ZOO / "autoencoder.onnx", "mse", "bias", 4, "50KB", "greedy", M3_M55),  # pages
)


EXPLAIN = (
    "QEMU 7.2, arm-none-eabi-gcc 12.2, fast kernels. "
    f"{STEPS} training steps per row with the paging storage in a host file through semihosting "
    "(`poet run --storage-file`). host bits: parameters and losses after the steps compared bit for "
    "bit with the same compile run on the host. RAM measured: static (data + bss + heap) + the painted "
    "stack's high-water mark + the second bank's section; with two banks, each bank's measured / budget "
    "in parentheses. instr/step: the last step (QEMU -icount: instructions, not cycles). file W/R: the "
    "bytes written and read through the storage file over the run; simulator W/R per step: the plan's "
    "simulated traffic of one step; stored params: the bytes of the trainable parameters the plan keeps in "
    "storage, written once after reset (their compiled values) and read once by the harness's parameter "
    "dump. match: the file traffic is 3 x the simulator's per step + the stored parameters once in each "
    "direction, and each step's own storage counters equal the simulator's (the first step's also count "
    "the stored parameters' store). "
    "Compiled for the chip's profile (cortex-m3, stm32f405; cortex-m4 "
    "for the M55, which has no profile), with poet compile's defaults (--fused-updates --relu-masks). "
    "On qemu-stm32f405 `48KB+32KB` puts part of the arena in the "
    "second bank: under QEMU, which models no CCM, it is linked at 0x20020000 (docs/targets.md)."
)


def _same_bits(a: runner.RunOutcome, b: runner.RunOutcome) -> bool:
    return [s.loss for s in a.steps] == [s.loss for s in b.steps] and all(
        np.array_equal(a.params[k].view(np.uint32), v.view(np.uint32)) for k, v in b.params.items()
    )


def _compile(case: Case, device: str, out: Path) -> Compiled:
    banks = parse_ram(case.ram)
    return compile_model(
        CompileOptions(
            case.path,
            device,
            sum(banks),
            out,
            case.batch,
            Loss(case.loss),
            scheduler=case.scheduler,
            train=case.train,
            training=DEFAULT_OPTIONS,  # poet compile's default: --fused-updates --relu-masks
            ram_banks=banks if len(banks) > 1 else (),
        )
    )


def _row(case: Case, target: str, c: Compiled, out: Path, host: runner.RunOutcome, tmp: Path) -> dict:
    row: dict[str, object] = {
        "model": f"{case.model} ({case.train}, {case.loss}, batch {case.batch})",
        "target": target,
        "ram": case.ram,
        "scheduler": case.scheduler,
        "recomputations": c.sim.n_recomputations,
        "page_outs": c.sim.n_page_outs,
        "predicted_ram_bytes": c.predicted_ram_bytes,
        "budget_bytes": sum(parse_ram(case.ram)),
    }
    # a fixed path: -DPOET_STORAGE_FILE is in every object's flags, so the object cache serves a re-run
    file = Path(tempfile.gettempdir()) / "poet-bench-chips" / f"storage-{target}.bin"
    file.parent.mkdir(exist_ok=True)
    try:
        r = runner.run_project(out, target, STEPS, storage_file=file, timeout_s=3600)
    except PoetError as e:
        flash = sum(p.nbytes for p in (c.training.tensor(n) for n in c.training.params))
        return {**row, "fits": False, "why": str(e).splitlines()[0], "parameter_bytes": flash}
    traffic = r.storage_file_traffic or (0, 0, 0, 0)
    # the steps' traffic, plus once the stored parameters' compiled values written after reset and read
    # back by the harness's parameter dump at the end
    stored = sum(c.training.tensor(p).nbytes for p in planning.stored_params(c.spec))
    expect = (STEPS * c.sim.storage_bytes_written + stored, STEPS * c.sim.storage_bytes_read + stored)
    sim = (c.sim.storage_bytes_written, c.sim.storage_bytes_read)
    counted = [(s.bytes_written, s.bytes_read) for s in r.steps]  # the first step stores them: its counters
    banks = parse_ram(case.ram)
    return {
        **row,
        "fits": True,
        "host_bits": _same_bits(r, host),
        "measured_ram_bytes": r.measured_ram_bytes,
        "measured_bank_bytes": list(r.measured_bank_bytes)[: len(banks)],
        "bank_budgets": list(banks),
        "within_budget": r.measured_ram_bytes <= row["budget_bytes"]
        and all(m <= b for m, b in zip(r.measured_bank_bytes, banks, strict=False)),
        "instructions_per_step": [r.instructions(s.ticks) for s in r.steps],
        "file_bytes_written": traffic[0],
        "file_bytes_read": traffic[1],
        "stored_param_bytes": stored,
        "sim_bytes_written_per_step": c.sim.storage_bytes_written,
        "sim_bytes_read_per_step": c.sim.storage_bytes_read,
        "expected_file_bytes_written": expect[0],
        "expected_file_bytes_read": expect[1],
        "step_counters_match": counted == [(sim[0] + stored, sim[1]), *[sim] * (STEPS - 1)],
        "traffic_matches": (traffic[0], traffic[1]) == expect,
        "flash_text_bytes": r.build.sections["text"],
    }


def _md_row(r: dict) -> dict[str, object]:
    base = {"model": r["model"], "target": r["target"], "--ram": r["ram"], "sched": r["scheduler"]}
    if not r["fits"]:
        return {**base, "host bits": "does not fit", "RAM measured / budget": r["why"]}
    banks = ""
    if len(r["bank_budgets"]) > 1:
        banks = (
            " ("
            + ", ".join(
                f"{m:,}/{b:,}" for m, b in zip(r["measured_bank_bytes"], r["bank_budgets"], strict=True)
            )
            + ")"
        )
    return {
        **base,
        "recomp/page-outs": f"{r['recomputations']}/{r['page_outs']}",
        "host bits": "identical" if r["host_bits"] else "DIFFER",
        "RAM measured / budget": f"{r['measured_ram_bytes']:,} / {r['budget_bytes']:,}{banks}",
        "instr/step": f"{r['instructions_per_step'][-1]:,}",
        "file W/R (3 steps)": f"{r['file_bytes_written']:,} / {r['file_bytes_read']:,}",
        "simulator W/R per step": f"{r['sim_bytes_written_per_step']:,} / {r['sim_bytes_read_per_step']:,}",
        "stored params": f"{r['stored_param_bytes']:,}",
        "match": "yes" if r["traffic_matches"] and r["step_counters_match"] else "NO",
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="run only this model's rows (results are not written)")
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for case in CASES:
            if args.only and case.model != args.only:
                continue
            compiled: dict[str, tuple[Compiled, Path, runner.RunOutcome]] = {}
            for target in case.targets:
                device = DEVICE[target]
                if device not in compiled:
                    out = tmp / f"{case.model}-{case.ram}-{case.scheduler}-{device}"
                    c = _compile(case, device, out)
                    compiled[device] = (c, out, runner.run_project(out, "host", STEPS))
                c, out, host = compiled[device]
                rows.append(_row(case, target, c, out, host, tmp))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    shown = [_md_row(r) for r in rows]
    columns = list(dict.fromkeys(k for r in shown for k in r))
    text = table(shown, columns)
    print(text)
    if args.only:
        return 0
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "chips.json").write_text(json.dumps({**meta, "steps": STEPS, "rows": rows}, indent=1) + "\n")
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |\n" for r in shown)
    (RESULTS / "chips.md").write_text(
        "# Zoo models on the real-chip targets (issue 58)\n\n"
        f"{meta['machine']}, commit {meta['commit']}, {meta['date']}. Written by bench/chips.py "
        f"(`PYTHONPATH=. .venv/bin/python bench/chips.py`). {EXPLAIN}\n\n" + head + body
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
