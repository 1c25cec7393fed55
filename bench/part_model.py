"""Fits poet_edge.kernel_model's part-kernel coefficients (families conv_forward_part, conv_grad_input_part):
instruction counts of every distinct call of the fast part kernels (poet_conv2d_part_f32,
poet_conv2d_grad_input_part_f32) in the split training graphs of CASES, measured on a QEMU target (default
qemu-cortex-m4), against the block structure kernel_model.part_tally counts for each call. A part whose
tile is a convolution of its own runs the whole kernel (its family's coefficients are the whole kernels'
fit, bench/kernel_model.py) and is listed, not fitted. The cost model prices a call as its weight times
its MACs at the profile's per-MAC rate plus the profile's per-call cost of a conv call; the part families
are fitted to the measured count minus that per-call cost, so the two add up to the measurement.

Prints the coefficients (paste them into COEFFICIENTS), then per family the calls and the rms / max
relative error of the cost model's prediction, with the part families' coefficients as fitted and with
the whole convolution's instructions per MAC (how parts were priced before). Writes
bench/results/part_model.{json,md}. Run: .venv/bin/python bench/part_model.py [TARGET]"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import provenance  # noqa: E402
from zoo import ZOO, table  # noqa: E402

from poet_edge import autodiff, calibrate, frontend, splitting, trainable  # noqa: E402
from poet_edge import kernel_model as km  # noqa: E402
from poet_edge import microbench as mb  # noqa: E402
from poet_edge.cost import node_cycles  # noqa: E402
from poet_edge.ir import Node  # noqa: E402
from poet_edge.ops import conv_part  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.work import Work  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
KB = 1024
# (model, --train, tile bytes): the tight runs' splits (bench/tight.py) and smaller tiles of resnet8
CASES = [
    ("resnet8", "bias", 4 * KB),
    ("resnet8", "bias", 8 * KB),
    ("resnet8", "bias", 16 * KB),
    ("mobilenetv2_035", "bias", 16 * KB),
    ("mobilenetv1_025", "all", 128 * KB),
    ("dscnn", "all", 8 * KB),
]
KINDS = {"ConvPart": "forward", "ConvGradInputPart": "grad_input"}


@dataclass(frozen=True)
class Call:
    op: str
    shapes: tuple[tuple[int, ...], ...]
    attrs: tuple[tuple[str, object], ...]

    @property
    def kind(self) -> str:
        return KINDS[self.op]

    def tally(self) -> km.Tally:
        a = dict(self.attrs)
        return km.part_tally(
            conv_part.whole(a, self.shapes[1]), conv_part.tile(a), self.kind, bool(a.get("partial"))
        )

    def work(self) -> Work:
        from poet_edge import ops

        opdef = ops.get(self.op)
        a = dict(self.attrs)
        return opdef.work(list(self.shapes), opdef.infer(list(self.shapes), a), a)


def _frozen(v: object) -> object:
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def part_calls() -> dict[Call, set[str]]:
    """The distinct part-kernel calls of CASES' split training graphs, with the cases they occur in."""
    out: dict[tuple[object, ...], tuple[Call, set[str]]] = {}
    for model, train, tile in CASES:
        g = frontend.load(ZOO / f"{model}.onnx", 1)
        tg = autodiff.training_graph(
            g, autodiff.Loss.CROSS_ENTROPY, trainable.select(g, train), options=autodiff.DEFAULT_OPTIONS
        )
        split = splitting.split_graph(tg, tile).graph
        for n in split.nodes:
            if n.op in KINDS:
                call = _call(split, n)
                out.setdefault(_shape_key(call), (call, set()))[1].add(f"{model} {train} {tile // KB} KB")
    return dict(out.values())


def _shape_key(call: Call) -> tuple[object, ...]:
    """Calls that differ only in where their tile lies count the same (one is measured): the op, the shapes,
    the attributes but the tile, the tile's channel counts and whether it is a convolution of its own."""
    a = dict(call.attrs)
    c_lo, c_hi, m_lo, m_hi = conv_part.tile(a)
    whole = conv_part.whole(a, call.shapes[1])
    own = km.part_groups(whole, (c_lo, c_hi, m_lo, m_hi), call.kind, bool(a.get("partial")))
    rest = tuple((k, v) for k, v in call.attrs if k != "tile")
    return (call.op, call.shapes, rest, c_hi - c_lo, m_hi - m_lo, own)


def _call(graph, n: Node) -> Call:
    shapes = tuple(tuple(int(d) for d in graph.shape(t)) for t in n.inputs)
    return Call(n.op, shapes, tuple(sorted((k, _frozen(v)) for k, v in n.attrs.items())))


def main(argv: list[str]) -> int:
    target = argv[0] if argv else "qemu-cortex-m4"
    if not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"):
        print("needs arm-none-eabi-gcc and qemu-system-arm (make toolchain)")
        return 1
    calls = part_calls()
    order = sorted(calls, key=lambda c: (c.op, c.shapes, c.attrs))
    cases = [mb.op_case(c.op, c.shapes, dict(c.attrs), name=f"part {i}") for i, c in enumerate(order)]
    print(f"{len(cases)} distinct part calls; measuring on {target}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="poet-bench-parts-") as tmp:
        m = mb.measure(target, cases, Path(tmp), ("fast",))
    measured = [float(m.instructions[(c.name, "fast")]) for c in cases]
    prof = calibrate.instruction_profile(
        load_profile("cortex-m4"), calibrate.CYCLES_PER_INSTRUCTION.get("cortex-m4", 1.0)
    )
    per_call = prof.compute.cycles_per_call_conv
    tallies = [c.tally() for c in order]
    fitted = [i for i, t in enumerate(tallies) if t.family.endswith("_part")]
    coef, _ = km.fit([tallies[i] for i in fitted], [measured[i] - per_call for i in fitted])
    table_now = {**km.COEFFICIENTS, **coef}
    print(f"== part-kernel model fitted to {len(fitted)} calls on {target} (paste into COEFFICIENTS)")
    for fam, k in sorted(coef.items()):
        print(f'    "{fam}": {k!r},')
    rows, per_case = [], []
    for i, (call, t) in enumerate(zip(order, tallies, strict=True)):
        w = call.work()
        macs = w.macs
        new = node_cycles(prof, replace(w, weight=t.instructions(table_now) / (km.IDEAL * macs)))
        a = dict(call.attrs)  # before: priced with the whole convolution's instructions per MAC
        whole = conv_part.whole(a, call.shapes[1])
        whole_macs = whole.n * whole.m * whole.oh * whole.ow * whole.c // whole.groups * whole.kh * whole.kw
        weight = km.conv_weight(whole, call.kind, whole_macs)
        old = node_cycles(prof, replace(w, weight=weight))
        per_case.append(
            {
                "op": call.op,
                "shapes": call.shapes,
                "tile": dict(call.attrs)["tile"],
                "partial": bool(dict(call.attrs).get("partial")),
                "family": t.family,
                "macs": macs,
                "measured": measured[i],
                "predicted_before": round(old, 1),
                "predicted": round(new, 1),
                "in": sorted(calls[call]),
            }
        )
    for fam in sorted({r["family"] for r in per_case}):
        mine = [r for r in per_case if r["family"] == fam]
        err_new = [r["predicted"] / r["measured"] - 1 for r in mine]
        err_old = [r["predicted_before"] / r["measured"] - 1 for r in mine]
        total = sum(r["measured"] for r in mine)
        rows.append(
            {
                "family": fam,
                "calls": len(mine),
                "rms err now": f"{100 * math.sqrt(sum(e * e for e in err_new) / len(mine)):.1f}%",
                "max |err| now": f"{100 * max(abs(e) for e in err_new):.1f}%",
                "sum now": f"{100 * (sum(r['predicted'] for r in mine) / total - 1):+.1f}%",
                "rms err before": f"{100 * math.sqrt(sum(e * e for e in err_old) / len(mine)):.1f}%",
                "sum before": f"{100 * (sum(r['predicted_before'] for r in mine) / total - 1):+.1f}%",
            }
        )
    print(table(rows, list(rows[0])))
    write_results(target, coef, rows, per_case)
    return 0


def write_results(
    target: str,
    coef: dict[str, km.Coefficients],
    rows: list[dict[str, object]],
    per_case: list[dict[str, object]],
) -> None:
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    cases = [f"{m} --train {t}, {b // KB} KB tiles" for m, t, b in CASES]
    (RESULTS / "part_model.json").write_text(
        json.dumps(
            {
                **meta,
                "target": target,
                "cases": cases,
                "coefficients": {f: vars(k) for f, k in coef.items()},
                "rows": rows,
                "calls": per_case,
            },
            indent=1,
        )
        + "\n"
    )
    cols = list(rows[0])
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    (RESULTS / "part_model.md").write_text(
        "# Part kernels: the cost model's instructions per call against QEMU\n\n"
        f"Measured by `bench/part_model.py` on {meta['machine']}, commit {meta['commit']}, {meta['date']}.\n"
        f"Target {target}; every distinct part-kernel call of: {'; '.join(cases)}. Error: the cost model's "
        "prediction (cortex-m4 profile, in instructions) over the QEMU -icount measurement, minus 1; "
        '"before": priced with the whole convolution\'s instructions per MAC. Families ending in _part are '
        "fitted here; the others are parts that are convolutions of their own (the whole kernels' fit).\n\n"
        + "\n".join(md)
        + "\n"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
