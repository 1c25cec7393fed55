"""Fast (runtime_c/src/optimized) vs reference (runtime_c/src/kernels) kernels: instructions per MAC (dense,
conv) or per element (elementwise) on the QEMU Cortex-M4/M7/M33 targets, both measured in the same program
and run. Dense shapes are every Gemm of the zoo's dense layers at batch 8 as a training step calls it:
forward (A·Bᵀ + bias), input gradient (A·B; not for a model's first layer) and weight gradient (Aᵀ·B).
The batched MatMul calls of bert_tiny's step are listed too (own geometric mean).
Conv shapes are every Conv of examples/zoo/{resnet8,dscnn,mobilenetv1_025,mobilenetv2_035,lenet5}.onnx
loaded at batch 1, as forward (with bias), input gradient (not for a model's first layer) and weight
gradient, split into general, pointwise (1x1) and depthwise (groups == C_in, the cost model's DEPTHWISE
class); identical calls (same shapes, strides, pads, groups) are measured once, and every distinct call
is measured (no cap). QEMU -icount counts instructions, not cycles.
The qemu-cortex-m55 rows are its scalar build (FPv5, no MVE); qemu-cortex-m55-mve the Helium (MVE) GEMM and
conv blocks (POET_GEMM_MVE; goal for its dense GEMM: <= 1.0 instr/MAC). The Cortex-M3 has no FPU: every
float operation is a libgcc call, so it is not in the default list; measure it on the small models' convs:
  .venv/bin/python bench/kernels.py qemu-cortex-m3 --conv-models dscnn,lenet5
Run: .venv/bin/python bench/kernels.py [TARGET...] [--conv-models M1,M2]"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import provenance  # noqa: E402
from zoo import table  # noqa: E402

from poet_edge import frontend  # noqa: E402
from poet_edge import microbench as mb  # noqa: E402
from poet_edge.ops.conv import conv_window  # noqa: E402
from poet_edge.paths import ROOT  # noqa: E402

TARGETS = ["qemu-cortex-m4", "qemu-cortex-m7", "qemu-cortex-m33", "qemu-cortex-m55", "qemu-cortex-m55-mve"]
# (fan_in, fan_out, first layer?) of the dense layers of examples/mlp.onnx and examples/zoo/*.onnx
LAYERS = {
    "autoencoder": [(640, 128, True), (128, 128, False), (128, 8, False), (8, 128, False), (128, 640, False)],
    "mlp": [(64, 32, True), (32, 32, False), (32, 10, False)],
    "lenet5": [(400, 120, False), (120, 84, False), (84, 10, False)],
    "resnet8 head": [(64, 10, False)],
    "dscnn head": [(64, 12, False)],
    "mobilenetv1 head": [(256, 2, False)],
    "mobilenetv2 head": [(1280, 2, False)],
}
BATCH = 8


def dense_cases() -> list[tuple[str, str, mb.KernelCase]]:
    out, seen = [], set()
    for model, layers in LAYERS.items():
        for fan_in, fan_out, first in layers:
            calls = [("forward", mb.gemm_case(BATCH, fan_out, fan_in, 0, 1, bias="row"))]
            if not first:
                calls.append(("input grad", mb.gemm_case(BATCH, fan_in, fan_out, 0, 0)))
            calls.append(("weight grad", mb.gemm_case(fan_out, fan_in, BATCH, 1, 0)))
            for kind, case in calls:
                if case.name not in seen:
                    seen.add(case.name)
                    out.append((f"{model} {fan_in}->{fan_out}", kind, case))
    return out


# batched MatMul calls of bert_tiny's training step (bias training, batch 1): (A, B, attributes)
MATMUL = [
    ((1, 32, 64), (64, 64), {}),
    ((1, 32, 64), (64, 128), {}),
    ((1, 32, 128), (128, 64), {}),
    ((1, 2, 32, 32), (1, 2, 32, 32), {}),
    ((1, 32, 64), (64, 64), {"transB": 1}),
    ((1, 32, 64), (128, 64), {"transB": 1}),
    ((1, 32, 128), (64, 128), {"transB": 1}),
    ((1, 2, 32, 32), (1, 2, 32, 32), {"transB": 1}),
    ((1, 2, 32, 32), (1, 2, 32, 32), {"transA": 1}),
]


def matmul_cases() -> list[tuple[str, str, mb.KernelCase]]:
    out = []
    for a, b, attrs in MATMUL:
        kind = "A·Bᵀ" if attrs.get("transB") else "Aᵀ·B" if attrs.get("transA") else "A·B"
        out.append(("bert_tiny MatMul", kind, mb.op_case("MatMul", [a, b], attrs)))
    return out


CONV_MODELS = ["resnet8", "dscnn", "mobilenetv1_025", "mobilenetv2_035", "lenet5"]
CONV_KINDS = ("general", "pointwise", "depthwise")


def conv_kind(x, w, group: int) -> str:
    if group == x[1] > 1 and w[0] % x[1] == 0:
        return "depthwise"
    return "pointwise" if tuple(w[2:]) == (1, 1) else "general"


def conv_cases(models: list[str] | None = None) -> list[tuple[str, str, str, mb.KernelCase]]:
    """(model, conv kind, kernel, case) for every distinct conv call of the zoo models at batch 1."""
    out, seen = [], set()
    for model in models or CONV_MODELS:
        g = frontend.load(ROOT / "examples" / "zoo" / f"{model}.onnx", batch=1)
        for node in g.nodes:
            if node.op != "Conv":
                continue
            x, w = g.shape(node.inputs[0]), g.shape(node.inputs[1])
            win = conv_window(x, w, node.attrs)
            kw = {
                "strides": (win.sh, win.sw),
                "pads": (win.pt, win.pl, win.pb, win.pr),
                "group": win.groups,
            }
            kernels = ["forward", "weight grad"]
            if node.inputs[0] not in g.inputs:
                kernels.insert(1, "input grad")
            for k in kernels:
                case = mb.conv_case(x, w, k, bias=len(node.inputs) > 2, **kw)
                if case.name not in seen:
                    seen.add(case.name)
                    out.append((model, conv_kind(x, w, win.groups), k, case))
    return out


def elementwise_cases() -> list[tuple[str, str, mb.KernelCase]]:
    n = BATCH * 128
    return [
        ("relu", "8x128", mb.op_case("Relu", [(BATCH, 128)])),
        ("relu grad", "8x128", mb.op_case("ReluGrad", [(BATCH, 128), (BATCH, 128)])),
        ("add bias", "8x128 + 128", mb.op_case("Add", [(BATCH, 128), (128,)])),
        ("reduce to bias", "8x128 -> 128", mb.op_case("ReduceSumTo", [(BATCH, 128)], {"shape": (128,)})),
        ("sgd", f"{n}", mb.op_case("SGDUpdate", [(n,), (n,)])),
    ]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(argv: list[str]) -> int:
    models = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("--conv-models=")]
    if "--conv-models" in argv:
        i = argv.index("--conv-models")
        models.append(argv[i + 1].split(","))
        argv = argv[:i] + argv[i + 2 :]
    argv = [a for a in argv if not a.startswith("--conv-models=")]
    unknown = [m for ms in models for m in ms if m not in CONV_MODELS]
    if unknown:
        print(f"unknown --conv-models {', '.join(unknown)}; choose from {', '.join(CONV_MODELS)}")
        return 2
    targets = argv or TARGETS
    if not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"):
        print("needs arm-none-eabi-gcc and qemu-system-arm (make toolchain)")
        return 1
    dense, elem, mm = dense_cases(), elementwise_cases(), matmul_cases()
    conv = conv_cases(models[-1] if models else None)
    cases = [c for _, _, c in dense + elem + mm] + [c for *_, c in conv]
    summary, conv_summary = [], []
    with tempfile.TemporaryDirectory(prefix="poet-bench-kernels-") as tmp:
        for target in targets:
            m = mb.measure(target, cases, Path(tmp) / target, ("reference", "fast"))
            rows, fast_all, ref_all = [], [], []
            per_kind: dict[str, list[float]] = {}
            for layer, kind, c in dense:
                f, r = (m.instructions[(c.name, v)] / c.quantity for v in ("fast", "reference"))
                fast_all.append(f)
                ref_all.append(r)
                per_kind.setdefault(kind, []).append(f)
                rows.append(
                    {
                        "layer": layer,
                        "kernel": kind,
                        "M x N x K": c.name.split()[1],
                        "MACs": c.quantity,
                        "fast instr/MAC": f"{f:.2f}",
                        "ref instr/MAC": f"{r:.2f}",
                        "speed-up": f"{r / f:.2f}x",
                    }
                )
            mm_fast, mm_ref = [], []
            for layer, kind, c in mm:
                f, r = (m.instructions[(c.name, v)] / c.quantity for v in ("fast", "reference"))
                mm_fast.append(f)
                mm_ref.append(r)
                rows.append(
                    {
                        "layer": layer,
                        "kernel": kind,
                        "M x N x K": c.name.split(" ", 1)[1],
                        "MACs": c.quantity,
                        "fast instr/MAC": f"{f:.2f}",
                        "ref instr/MAC": f"{r:.2f}",
                        "speed-up": f"{r / f:.2f}x",
                    }
                )
            rows.append(
                {
                    "layer": "geometric mean (Gemm rows only)",
                    "fast instr/MAC": f"{geomean(fast_all):.3f}",
                    "ref instr/MAC": f"{geomean(ref_all):.3f}",
                    "speed-up": f"{geomean(ref_all) / geomean(fast_all):.2f}x",
                }
            )
            print(
                f"== {target}: dense kernels (poet_gemm_f32; bert_tiny's batched poet_matmul_f32 listed after"
                " the Gemm rows), instructions per MAC (QEMU -icount; not cycles)"
            )
            print(
                table(
                    rows,
                    ["layer", "kernel", "M x N x K", "MACs", "fast instr/MAC", "ref instr/MAC", "speed-up"],
                )
            )
            erows = []
            for name, shape, c in elem:
                f, r = (m.instructions[(c.name, v)] / c.quantity for v in ("fast", "reference"))
                erows.append(
                    {
                        "kernel": name,
                        "shape": shape,
                        "fast instr/elem": f"{f:.2f}",
                        "ref instr/elem": f"{r:.2f}",
                        "speed-up": f"{r / f:.2f}x",
                    }
                )
            print(f"\n== {target}: elementwise kernels, instructions per element")
            print(table(erows, ["kernel", "shape", "fast instr/elem", "ref instr/elem", "speed-up"]))
            print()
            conv_summary += conv_report(target, m, conv)
            summary.append(
                {
                    "target": target,
                    "fast instr/MAC": f"{geomean(fast_all):.3f}",
                    "ref instr/MAC": f"{geomean(ref_all):.3f}",
                    **{f"fast {k}": f"{geomean(v):.3f}" for k, v in per_kind.items()},
                    "speed-up": f"{geomean(ref_all) / geomean(fast_all):.2f}x",
                    "fast MatMul": f"{geomean(mm_fast):.3f}",
                    "ref MatMul": f"{geomean(mm_ref):.3f}",
                }
            )
    print(
        "== geometric means over the dense (Gemm) shapes (target for the M4: <= 2.6 instr/MAC);"
        " MatMul: bert_tiny's batched MatMul calls"
    )
    print(table(summary, list(summary[0])))
    print(
        "\n== geometric means over the zoo's conv calls, instructions per MAC"
        " (targets for the M4: general and pointwise <= 2.6, depthwise <= 4)"
    )
    print(table(conv_summary, list(conv_summary[0])))
    write_results(targets, models[-1] if models else None, summary, conv_summary)
    return 0


RESULTS = Path(__file__).resolve().parent / "results"


def _markdown(rows: list[dict[str, object]]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(out + ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows])


def write_results(targets, conv_models, summary, conv_summary) -> None:
    """bench/results/kernels.{json,md}: the two geometric-mean tables, with machine, commit and date."""
    meta = provenance()
    what = {"targets": list(targets), "conv_models": list(conv_models or CONV_MODELS)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "kernels.json").write_text(
        json.dumps({**meta, **what, "dense": summary, "conv": conv_summary}, indent=1) + "\n"
    )
    (RESULTS / "kernels.md").write_text(
        "# Kernels: instructions per MAC, fast vs reference, per target\n\n"
        f"Measured by `bench/kernels.py` on {meta['machine']}, commit {meta['commit']}, {meta['date']}.\n"
        f"Targets: {', '.join(targets)}; conv calls of {', '.join(what['conv_models'])}. QEMU -icount counts "
        "instructions, not cycles; the script's docstring says which shapes are measured.\n\n"
        "## Dense (Gemm) shapes and bert_tiny's MatMul calls, geometric means\n\n"
        + _markdown(summary)
        + "\n\n## Conv calls, geometric means\n\n"
        + _markdown(conv_summary)
        + "\n"
    )


def conv_report(target: str, m: mb.Measurement, conv) -> list[dict[str, object]]:
    """Prints the per-call conv table of one target; returns its summary rows (geometric means)."""
    rows = []
    fast: dict[tuple[str, str], list[float]] = {}
    ref: dict[tuple[str, str], list[float]] = {}
    for model, kind, kernel, c in conv:
        f, r = (m.instructions[(c.name, v)] / c.quantity for v in ("fast", "reference"))
        for key in ((kind, kernel), (kind, "all"), ("all", "all")):
            fast.setdefault(key, []).append(f)
            ref.setdefault(key, []).append(r)
        if kind != "depthwise":
            fast.setdefault(("general+pointwise", "all"), []).append(f)
            ref.setdefault(("general+pointwise", "all"), []).append(r)
        rows.append(
            {
                "model": model,
                "kind": kind,
                "kernel": kernel,
                "call": c.name.split(" ", 1)[1],
                "MACs": c.quantity,
                "fast instr/MAC": f"{f:.2f}",
                "ref instr/MAC": f"{r:.2f}",
                "speed-up": f"{r / f:.2f}x",
            }
        )
    print(f"== {target}: conv kernels (poet_conv2d*_f32), instructions per MAC (QEMU -icount; not cycles)")
    print(
        table(
            rows, ["model", "kind", "kernel", "call", "MACs", "fast instr/MAC", "ref instr/MAC", "speed-up"]
        )
    )
    means = []
    order = [(k, p) for k in CONV_KINDS for p in ("forward", "input grad", "weight grad", "all")]
    order += [("general+pointwise", "all"), ("all", "all")]
    for key in order:
        if key not in fast:
            continue
        gf, gr = geomean(fast[key]), geomean(ref[key])
        means.append(
            {
                "target": target,
                "kind": key[0],
                "kernel": key[1],
                "calls": len(fast[key]),
                "fast instr/MAC": f"{gf:.3f}",
                "ref instr/MAC": f"{gr:.3f}",
                "speed-up": f"{gr / gf:.2f}x",
            }
        )
    print(f"\n== {target}: conv geometric means")
    print(table(means, list(means[0])))
    print()
    return means


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
