"""On-device adaptation (issue 61): the digits CNN pretrained upright on the host with poet-edge
(examples/digits/digits_pretrained.onnx, made by examples/digits/pretrain.py) is fine-tuned on the
rotated digits (examples/digits/rotated_train.npz, 200 samples) on qemu-cortex-m4 at several RAM budgets
and `--train` choices, and evaluated with `poet run --eval-data` on 200 held-out rotated digits before
and after.

Per row: budget, --train, optimizer, the schedule's recomputations and page-ins, predicted and measured
RAM, accuracy and loss before and after on qemu-cortex-m4, whether the host gives the same bits
(parameters, losses, every predicted output), the simulator's energy and latency of one training step and
of one poet_predict batch on the cortex-m4 profile, and QEMU's instructions per step. The same number
of steps and lr per optimizer for every row (no per-row tuning); the accuracy after training does not
depend on the budget, only on --train and the optimizer (the schedule never changes the numerics).
Optimizers: sgd (lr 0.05), momentum 0.9 (lr 0.01) and Adam (lr 0.001, torch's default): one lr per
optimizer, never tuned per row.
Run: .venv/bin/python bench/adaptation.py [--steps N] [--only all|bias|last:1]
Writes bench/results/adaptation.{md,json,png} (the plot: accuracy before and after per row)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from provenance import provenance  # noqa: E402

from poet_edge import runner  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.optimizer import Optimizer, OptimizerKind  # noqa: E402

KB = 1024
DIGITS = ROOT / "examples" / "digits"
MODEL = DIGITS / "digits_pretrained.onnx"
RESULTS = ROOT / "bench" / "results"
STEPS, BATCH, LR, QEMU = 200, 8, 0.05, "qemu-cortex-m4"
LRS = {"sgd": LR, "momentum": 0.01, "adam": 0.001}  # per optimizer, never per row (adam: torch's default)
ROWS = [  # --train, budget (KB), optimizer: each choice at the smallest budget that fits it, and more
    ("all", 61, "sgd"),
    ("all", 64, "sgd"),
    ("all", 96, "sgd"),
    ("bias", 47, "sgd"),
    ("bias", 64, "sgd"),
    ("last:1", 32, "sgd"),
    ("last:1", 64, "sgd"),
    ("all", 80, "momentum"),
    ("all", 96, "adam"),
    ("last:1", 48, "adam"),
]


def run_row(train: str, kb: int, optimizer: str, work: Path, steps: int) -> dict[str, Any]:
    out = work / f"{train.replace(':', '')}-{kb}-{optimizer}"
    opts = CompileOptions(
        MODEL,
        "cortex-m4",
        kb * KB,
        out,
        BATCH,
        lr=LRS[optimizer],
        scheduler="scale",
        train=train,
        optimizer=Optimizer(OptimizerKind(optimizer)),
    )
    c = compile_model(opts)
    data, held_out = DIGITS / "rotated_train.npz", DIGITS / "rotated_test.npz"
    qemu = runner.run_project(out, QEMU, steps, data, eval_data=held_out)
    host = runner.run_project(out, "host", steps, data, eval_data=held_out)
    same = [a.loss for a in host.steps] == [b.loss for b in qemu.steps]
    same &= all(host.params[k].tobytes() == v.tobytes() for k, v in qemu.params.items())
    same &= all(
        a.outputs.tobytes() == b.outputs.tobytes() for a, b in zip(host.evals, qemu.evals, strict=True)
    )
    before, after = qemu.evals
    predict = next(m for m in c.inference if m.mode == "predict")
    return {
        "train": train,
        "budget_bytes": kb * KB,
        "optimizer": optimizer,
        "lr": LRS[optimizer],
        "steps": steps,
        "recomputations": c.sim.n_recomputations,
        "page_ins": c.sim.n_page_ins,
        "predicted_ram_bytes": c.predicted_ram_bytes,
        "measured_ram_bytes": qemu.measured_ram_bytes,
        "accuracy_before": before.accuracy,
        "accuracy_after": after.accuracy,
        "loss_before": before.loss,
        "loss_after": after.loss,
        "host_equals_qemu": bool(same),
        "step_energy_j": c.sim.energy_j,
        "step_latency_s": c.sim.latency_s,
        "predict_energy_j": predict.sim.energy_j,
        "predict_latency_s": predict.sim.latency_s,
        "instructions_per_step": qemu.instructions(qemu.steps[-1].ticks),
        "predict_instructions_per_batch": qemu.instructions(after.predict_ticks[-1]),
    }


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    head = (
        "| budget | --train | optimizer | recomp. / page-ins | RAM pred. / measured (B) | accuracy before | "
        "accuracy after | loss before → after | host = QEMU | energy / step (mJ) | latency / step (ms) | "
        "predict energy / batch (mJ) | instr. / step |"
    )
    lines = [
        "# On-device adaptation: digits CNN, upright → rotated 90°, fine-tuned on qemu-cortex-m4",
        "",
        f"{meta['machine']}; commit {meta['commit']}; {meta['date']}. Written by `bench/adaptation.py`.",
        "",
        "Pretrained upright on the host with poet-edge (`examples/digits/pretrain.py`: upright test "
        f"accuracy {meta['pretrained']}); fine-tuned {meta['steps']} steps, batch {BATCH}, "
        f"lr sgd {LRS['sgd']}, momentum {LRS['momentum']}, adam {LRS['adam']} on 200 "
        "rotated digits; accuracy and loss on 200 held-out rotated digits from `poet run --eval-data` "
        "(poet_predict and poet_eval_step on the device). Energy and latency: the simulator on the "
        "cortex-m4 profile.",
        "",
        "![accuracy before and after](adaptation.png)",
        "",
        head,
        "|" + "---|" * head.count(" | ") + "---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['budget_bytes'] // KB} KB | {r['train']} | {r['optimizer']} | "
            f"{r['recomputations']} / {r['page_ins']} | {r['predicted_ram_bytes']:,} / "
            f"{r['measured_ram_bytes']:,} | {100 * r['accuracy_before']:.1f}% | "
            f"{100 * r['accuracy_after']:.1f}% | "
            f"{r['loss_before']:.3f} → {r['loss_after']:.3f} | {'yes' if r['host_equals_qemu'] else 'NO'} | "
            f"{1e3 * r['step_energy_j']:.4f} | {1e3 * r['step_latency_s']:.2f} | "
            f"{1e3 * r['predict_energy_j']:.4f} | {r['instructions_per_step']:,} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--only", action="append", choices=sorted({t for t, _, _ in ROWS}))
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--render", action="store_true", help="only rewrite the .md and .png from the .json")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads((args.results / "adaptation.json").read_text())
        (args.results / "adaptation.md").write_text(markdown(saved["meta"], saved["rows"]))
        plot(saved["rows"], args.results / "adaptation.png")
        return 0
    meta = {
        **provenance(),
        "steps": args.steps,
        "pretrained": pretrained_accuracy(),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for train, kb, optimizer in ROWS:
            if args.only and train not in args.only:
                continue
            rows.append(run_row(train, kb, optimizer, Path(tmp), args.steps))
            print(json.dumps(rows[-1]), flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "adaptation.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    text = markdown(meta, rows)
    (args.results / "adaptation.md").write_text(text)
    plot(rows, args.results / "adaptation.png")
    print(text)
    return 0


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Accuracy on the held-out rotated digits before and after fine-tuning, one pair of bars per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['train']}\n{r['budget_bytes'] // KB} KB" for r in rows]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar([x - 0.2 for x in xs], [100 * r["accuracy_before"] for r in rows], 0.4, label="before")
    ax.bar([x + 0.2 for x in xs], [100 * r["accuracy_after"] for r in rows], 0.4, label="after")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title("rotated digits on qemu-cortex-m4: fine-tuning by --train and budget")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def pretrained_accuracy() -> str:
    """The committed pretrained model's upright test accuracy, measured on the host (poet_predict)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p"
        compile_model(CompileOptions(MODEL, "host", 1 << 20, out, BATCH, lr=LR))
        r = runner.run_project(
            out, "host", 1, DIGITS / "upright_train.npz", eval_data=DIGITS / "upright_test.npz"
        )
    return f"{100 * (r.evals[0].accuracy or 0):.1f}%"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
