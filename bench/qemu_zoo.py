"""Zoo models trained on qemu-cortex-m4: predicted vs measured RAM, instructions per step, and instructions
per MAC of the conv / dense kernels (forward, input-gradient, weight-gradient), from a --profile run.
The whole step is also built with the reference kernels (--kernels reference) and measured in the same run
("ref instr/step"; its losses must be bit-identical). "pred instr/step" is what the cortex-m4 profile's
compute model predicts for the step's schedule (every compute step, recomputations included), converted back
to instructions with the profile's stated cycles per instruction (poet_edge.calibrate.CYCLES_PER_INSTRUCTION),
i.e. the `poet calibrate` fit on qemu-cortex-m4; "pred err %" is its error against the measured step. A last
table splits prediction and measurement (--profile run) by op for the ops with the largest differences.
Run: .venv/bin/python bench/qemu_zoo.py [--profile PROFILE.toml] [--cpi F] [--only MODEL]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import ZOO, table  # noqa: E402

from poet_edge import calibrate, runner  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.cost import node_cycles  # noqa: E402
from poet_edge.planning import InputPlace, ProblemSpec  # noqa: E402
from poet_edge.profiles import Profile, load_profile  # noqa: E402
from poet_edge.schedule import Compute, Schedule  # noqa: E402

KB = 1024
CASES = [  # model, loss, train, batch, RAM, scheduler
    ("resnet8", "cross-entropy", "bias", 1, 256 * KB, "greedy"),
    ("dscnn", "cross-entropy", "last:1", 1, 256 * KB, "none"),
    ("dscnn", "cross-entropy", "bias", 1, 120 * KB, "greedy"),
    ("autoencoder", "mse", "bias", 4, 256 * KB, "none"),
    ("autoencoder", "mse", "bias", 4, 56 * KB, "greedy"),
    ("mobilenetv1_025", "cross-entropy", "last:1", 1, 256 * KB, "none"),  # with --input storage
    ("lenet5", "cross-entropy", "all", 1, 512 * KB, "none"),
    ("bert_tiny", "cross-entropy", "bias", 1, 256 * KB, "none"),
]
STORAGE_INPUT = {"mobilenetv1_025"}  # compiled with --input storage: the batch is not held in RAM
MAC_KINDS = ("Conv", "ConvGradInput", "ConvGradWeight", "Gemm", "MatMul")


def predicted_by_op(plan: dict, prof: Profile, ops: dict[str, str]) -> Counter[str]:
    """Predicted instructions of one step per op (every compute step of the plan's schedule and its fused
    epilogues, each under its own op)."""
    nodes = {n.name: n for n in ProblemSpec.from_json(plan["problem"]).nodes}
    out: Counter[str] = Counter()
    for st in Schedule.from_json(plan["schedule"]["steps"]).steps:
        if isinstance(st, Compute):
            n = nodes[st.node]
            for name, w in zip((n.name, *n.epilogue), n.works, strict=True):
                out[ops.get(name, "?")] += node_cycles(prof, w)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="cortex-m4", help="profile whose compute model predicts the step")
    ap.add_argument("--cpi", type=float, help="its cycles per instruction (default: the shipped factor)")
    ap.add_argument("--only", help="run only this model's rows")
    args = ap.parse_args(argv)
    shipped = load_profile(args.profile)
    cpi = args.cpi or calibrate.CYCLES_PER_INSTRUCTION.get(shipped.name, 1.0)
    instr_prof = calibrate.instruction_profile(shipped, cpi)
    rows, kernel_rows, op_rows = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model, loss, train, batch, ram, sched in CASES:
            if args.only and model != args.only:
                continue
            out = Path(tmp) / f"{model}-{ram}"
            c = compile_model(
                CompileOptions(
                    ZOO / f"{model}.onnx",
                    "cortex-m4",
                    ram,
                    out,
                    batch,
                    Loss(loss),
                    scheduler=sched,
                    train=train,
                    input=InputPlace.STORAGE if model in STORAGE_INPUT else InputPlace.RAM,
                )
            )
            plain = runner.run_project(out, "qemu-cortex-m4", 2)
            ref_out = Path(tmp) / f"{model}-{ram}-reference"
            compile_model(
                CompileOptions(
                    ZOO / f"{model}.onnx",
                    "cortex-m4",
                    ram,
                    ref_out,
                    batch,
                    Loss(loss),
                    scheduler=sched,
                    train=train,
                    kernels="reference",
                    input=InputPlace.STORAGE if model in STORAGE_INPUT else InputPlace.RAM,
                )
            )
            ref = runner.run_project(ref_out, "qemu-cortex-m4", 2)
            ref_instr = ref.instructions(ref.steps[-1].ticks) or 0
            assert [s.loss for s in ref.steps] == [s.loss for s in plain.steps]  # bit-identical kernels
            prof = runner.run_project(out, "qemu-cortex-m4", 1, profile=True)
            ops = {n.name: n.op for n in c.training.nodes}
            macs: Counter[str] = Counter()
            for kind, node in c.schedule.to_json():
                if kind == "compute":
                    macs[ops.get(node, "input")] += next(n.work.macs for n in c.spec.nodes if n.name == node)
            instr = plain.instructions(plain.steps[-1].ticks) or 0
            total_macs = sum(macs.values())
            plan = json.loads((out / "plan.json").read_text())
            predicted = calibrate.predicted_step_instructions(plan, instr_prof)
            rows.append(
                {
                    "model": f"{model} ({train})",
                    "RAM KB": ram // KB,
                    "scheduler": sched,
                    "predicted B": f"{c.predicted_ram_bytes:,}",
                    "measured B": f"{plain.measured_ram_bytes:,}",
                    "diff %": f"{100 * (plain.measured_ram_bytes / c.predicted_ram_bytes - 1):+.1f}",
                    "instr/step": f"{instr:,}",
                    "ref instr/step": f"{ref_instr:,}",
                    "speed-up": f"{ref_instr / instr:.2f}x",
                    "pred instr/step": f"{predicted:,.0f}",
                    "pred err %": f"{100 * (predicted / instr - 1):+.1f}",
                    "MACs/step": f"{total_macs:,}",
                    "instr/MAC": f"{instr / total_macs:.2f}" if total_macs else "",
                    "recomp": c.sim.n_recomputations,
                    "page-outs": c.sim.n_page_outs,
                }
            )
            for k in MAC_KINDS:
                if k in prof.kinds and macs[k]:
                    calls, ticks = prof.kinds[k]
                    kernel_rows.append(
                        {
                            "model": model,
                            "kernel": k,
                            "calls": calls,
                            "MACs": f"{macs[k]:,}",
                            "instr/MAC": f"{(prof.instructions(ticks) or 0) / macs[k]:.2f}",
                        }
                    )
            by_op = predicted_by_op(plan, instr_prof, ops)
            diffs = []
            for op in set(by_op) | set(prof.kinds):
                measured_op = prof.instructions(prof.kinds[op][1]) or 0 if op in prof.kinds else 0
                diffs.append((abs(by_op[op] - measured_op), op, by_op[op], measured_op))
            for _, op, p_op, m_op in sorted(diffs, reverse=True)[:4]:
                op_rows.append(
                    {
                        "model": f"{model} ({train}, {ram // KB} KB)",
                        "op": op,
                        "calls": prof.kinds.get(op, (0, 0))[0],
                        "pred instr": f"{p_op:,.0f}",
                        "measured instr": f"{m_op:,.0f}",
                        "pred - measured": f"{p_op - m_op:+,.0f}",
                    }
                )
            print(rows[-1], file=sys.stderr, flush=True)
    print(
        f"== predicted with profile {shipped.name} / {cpi:g} cycles per instruction (the calibrate fit, "
        "in instructions) vs measured on qemu-cortex-m4"
    )
    print(table(rows, list(rows[0])))
    print()
    print(table(kernel_rows, ["model", "kernel", "calls", "MACs", "instr/MAC"]))
    print("\n== ops with the largest prediction differences (measured: --profile run, timer overhead in)")
    print(table(op_rows, list(op_rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
