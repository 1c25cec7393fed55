"""Zoo models trained on qemu-cortex-m4: predicted vs measured RAM, instructions per step, and instructions
per MAC of the conv / dense kernels (forward, input-gradient, weight-gradient), from a --profile run.
The whole step is also built with the reference kernels (--kernels reference) and measured in the same run
("ref instr/step"; its losses must be bit-identical). Run: .venv/bin/python bench/qemu_zoo.py"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import ZOO, table  # noqa: E402

from poet_edge import runner  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402

KB = 1024
CASES = [  # model, loss, train, batch, RAM, scheduler
    ("resnet8", "cross-entropy", "bias", 1, 256 * KB, "greedy"),
    ("dscnn", "cross-entropy", "last:1", 1, 256 * KB, "none"),
    ("dscnn", "cross-entropy", "bias", 1, 120 * KB, "greedy"),
    ("autoencoder", "mse", "bias", 4, 256 * KB, "none"),
    ("autoencoder", "mse", "bias", 4, 56 * KB, "greedy"),
    ("mobilenetv1_025", "cross-entropy", "last:1", 1, 448 * KB, "none"),
    ("lenet5", "cross-entropy", "all", 1, 512 * KB, "none"),
    ("bert_tiny", "cross-entropy", "bias", 1, 256 * KB, "none"),
]
MAC_KINDS = ("Conv", "ConvGradInput", "ConvGradWeight", "Gemm", "MatMul")


def main() -> int:
    rows, kernel_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model, loss, train, batch, ram, sched in CASES:
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
                    macs[ops[node]] += next(n.work.macs for n in c.spec.nodes if n.name == node)
            instr = plain.instructions(plain.steps[-1].ticks) or 0
            total_macs = sum(macs.values())
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
            print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows, list(rows[0])))
    print()
    print(table(kernel_rows, ["model", "kernel", "calls", "MACs", "instr/MAC"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
