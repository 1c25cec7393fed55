"""Fits poet_edge.kernel_model's coefficients: instruction counts of the fast dense and convolution kernels
on a QEMU target (default qemu-cortex-m4) for every distinct call of the zoo (bench/kernels.py's cases) and
of `poet calibrate` (its dense, conv and depthwise cases), against the block structure the model counts for
each call. Prints the coefficients per kernel family (paste them into COEFFICIENTS), then per family the
number of calls and the rms / max relative error of the fitted count, and the calls off by more than 5%.
Run: .venv/bin/python bench/kernel_model.py [TARGET]"""

from __future__ import annotations

import math
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernels import conv_cases, dense_cases  # noqa: E402
from zoo import table  # noqa: E402

from poet_edge import calibrate  # noqa: E402
from poet_edge import kernel_model as km  # noqa: E402
from poet_edge import microbench as mb  # noqa: E402
from poet_edge.ops.conv import conv_window  # noqa: E402
from poet_edge.work import OpClass  # noqa: E402

GEMM = re.compile(r"^gemm (\d+)x(\d+)x(\d+) (A·Bᵀ|A·B|Aᵀ·B|Aᵀ·Bᵀ)")
LAYOUT = {"A·Bᵀ": (0, 1), "A·B": (0, 0), "Aᵀ·B": (1, 0), "Aᵀ·Bᵀ": (1, 1)}
CONV = re.compile(
    r"^(conv|conv_dx|conv_dw) (\d+)x(\d+)x(\d+)x(\d+) w(\d+)x(\d+)x(\d+)x(\d+) s(\d+)x(\d+) p([\d,]+) g(\d+)"
)
KIND = {"conv": "forward", "conv_dx": "grad_input", "conv_dw": "grad_weight"}


def tally(case: mb.KernelCase) -> km.Tally:
    """The model's count for a case made by mb.gemm_case or mb.conv_case (read back from its name)."""
    g = GEMM.match(case.name)
    if g:
        m, n, k, layout = g.groups()
        return km.gemm_tally(int(m), int(n), int(k), *LAYOUT[layout])
    c = CONV.match(case.name)
    if not c:
        raise ValueError(f"no model for {case.name}")
    v = c.groups()
    x, w = tuple(map(int, v[1:5])), tuple(map(int, v[5:9]))
    attrs = {
        "strides": (int(v[9]), int(v[10])),
        "pads": tuple(map(int, v[11].split(","))),
        "group": int(v[12]),
    }
    return km.conv_tally(conv_window(x, w, attrs), KIND[v[0]])


def main(argv: list[str]) -> int:
    target = argv[0] if argv else "qemu-cortex-m4"
    if not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"):
        print("needs arm-none-eabi-gcc and qemu-system-arm (make toolchain)")
        return 1
    mac_classes = (OpClass.DENSE, OpClass.CONV, OpClass.DEPTHWISE)
    cases, seen = [], set()
    zoo = [c for *_, c in dense_cases()] + [c for *_, c in conv_cases()]
    for c in zoo + [c for c in calibrate.calibration_cases(2) if c.op_class in mac_classes]:
        if c.name not in seen:
            seen.add(c.name)
            cases.append(c)
    with tempfile.TemporaryDirectory(prefix="poet-bench-kmodel-") as tmp:
        m = mb.measure(target, cases, Path(tmp), ("fast",))
    measured = [float(m.instructions[(c.name, "fast")]) for c in cases]
    tallies = [tally(c) for c in cases]
    coef, errors = km.fit(tallies, measured)
    print(f"== kernel model fitted to {len(cases)} dense / conv calls on {target} (paste into COEFFICIENTS)")
    for fam, k in sorted(coef.items()):
        print(f'    "{fam}": {k!r},')
    rows = []
    for fam in sorted(coef):
        e = [abs(err) for t, err in zip(tallies, errors, strict=True) if t.family == fam]
        rms = math.sqrt(sum(x * x for x in e) / len(e))
        rows.append(
            {
                "family": fam,
                "calls": len(e),
                "rms err %": f"{100 * rms:.1f}",
                "max err %": f"{100 * max(e):.1f}",
            }
        )
    print(table(rows, list(rows[0])))
    off = [
        {
            "call": c.name,
            "family": t.family,
            "instr/MAC": f"{y / max(t.macs, 1):.2f}",
            "err %": f"{100 * e:+.1f}",
        }
        for c, t, y, e in zip(cases, tallies, measured, errors, strict=True)
        if abs(e) > 0.05
    ]
    if off:
        print("\ncalls off by more than 5%:")
        print(table(off, list(off[0])))
    elementwise(target)
    return 0


ELEMENTWISE = [  # the elementwise ops that call the math helpers (their weights: ops/elementwise.costly)
    ("Relu", 1, {}),
    ("Gelu", 1, {}),
    ("GeluGrad", 2, {}),
    ("Gelu", 1, {"approximate": "tanh"}),
    ("GeluGrad", 2, {"approximate": "tanh"}),
    ("Tanh", 1, {}),
    ("Sigmoid", 1, {}),
    ("Erf", 1, {}),
    ("Softmax", 1, {"axis": -1}),
    ("SoftmaxGrad", 2, {"axis": -1}),
]


def elementwise(target: str) -> None:
    """Instructions per element of the fast elementwise kernels on 8 x 256 values, and the weight the cost
    model gives each op (relative to kernel_model.ELEMENT, the plain Relu's count)."""
    shape = (8, 256)
    cases = [mb.op_case(op, [shape] * n, attrs) for op, n, attrs in ELEMENTWISE]
    with tempfile.TemporaryDirectory(prefix="poet-bench-kmodel-") as tmp:
        m = mb.measure(target, cases, Path(tmp), ("fast",))
    rows = []
    for c in cases:
        per = m.instructions[(c.name, "fast")] / c.quantity
        rows.append(
            {
                "call": c.name,
                "instr/element": f"{per:.1f}",
                "model weight": f"{c.priced / c.quantity:.3f}",
                "measured weight": f"{per / km.ELEMENT:.3f}",
            }
        )
    print(f"\n== elementwise ops that call math helpers on {target}")
    print(table(rows, list(rows[0])))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
