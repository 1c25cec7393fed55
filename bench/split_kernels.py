"""Channel-tile conv kernels (issue 57: operator splitting) against the whole fast kernel: instructions per
MAC on QEMU (-icount: instructions, not cycles) of the fast part kernels (poet_conv2d_part_f32,
poet_conv2d_grad_input_part_f32 in runtime_c/src/optimized/conv.c) over a tiling of each conv, next to the
fast whole kernel (poet_conv2d_f32, poet_conv2d_grad_input_f32) on the same conv, measured in one program.

Shapes (batch 1, padding 1 for 3x3): 3x3 and 1x1 convs 16->16 at 32x32 and 8->48 at 48x48, 1x1 48->8 at
48x48, depthwise 3x3 48 channels at 48x48 strides 1 and 2; the forward and the input gradient of each.
Tilings (tiles of 8 channels): forward over the input channels ("c", a chain: each call starts from the
previous call's Y, the bias on the last), over the output channels ("m"), both; input gradient over the
output-gradient channels ("m", a chain) and over the input channels ("c"); depthwise: tiles of 8 channels
(c = m, one call each). A tiling is measured call by call (every call of it, with its P and B as the chain
makes them); "chain instr/MAC" is their sum over the conv's MACs, "worst call" the highest instructions
per MAC of one call. Goal: within 10% of the whole kernel.

Run: .venv/bin/python bench/split_kernels.py [TARGET...]   (default qemu-cortex-m4)"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import provenance  # noqa: E402
from zoo import table  # noqa: E402

from poet_edge import kernel_model as km  # noqa: E402
from poet_edge import microbench as mb  # noqa: E402
from poet_edge.ops.conv import conv_window  # noqa: E402
from poet_edge.work import OpClass  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TILE = 8
# (name, X shape, W shape, stride, pads, groups)
SHAPES = [
    ("3x3 16->16 32x32", (1, 16, 32, 32), (16, 16, 3, 3), 1, (1, 1, 1, 1), 1),
    ("1x1 16->16 32x32", (1, 16, 32, 32), (16, 16, 1, 1), 1, (0, 0, 0, 0), 1),
    ("3x3 8->48 48x48", (1, 8, 48, 48), (48, 8, 3, 3), 1, (1, 1, 1, 1), 1),
    ("1x1 8->48 48x48", (1, 8, 48, 48), (48, 8, 1, 1), 1, (0, 0, 0, 0), 1),
    ("1x1 48->8 48x48", (1, 48, 48, 48), (8, 48, 1, 1), 1, (0, 0, 0, 0), 1),
    ("dw 3x3 48ch 48x48 s1", (1, 48, 48, 48), (48, 1, 3, 3), 1, (1, 1, 1, 1), 48),
    ("dw 3x3 48ch 48x48 s2", (1, 48, 48, 48), (48, 1, 3, 3), 2, (1, 1, 1, 1), 48),
]
KERNELS = ("forward", "input grad")
# Gemm parts: (layer, rows M of dY, N = dX's columns, K = W's rows that the blocks cut, transB of the parts)
DENSE = [
    ("lenet5 fc1 dY·W", 1, 400, 120, 0),
    ("lenet5 fc1 dY·W", 8, 400, 120, 0),
    ("autoencoder 128x640 dY·W", 1, 640, 128, 0),
    ("autoencoder 128x640 dY·W", 8, 640, 128, 0),
    ("bert_tiny MatMul dY·Wᵀ", 32, 64, 128, 1),
]
BLOCKS = (4, 8, 16)


@dataclass(frozen=True)
class Conv:
    name: str
    x: tuple[int, ...]
    w: tuple[int, ...]
    stride: int
    pads: tuple[int, int, int, int]
    group: int

    @property
    def geom(self) -> tuple[int, ...]:
        attrs: dict[str, object] = {"group": self.group, "strides": (self.stride,) * 2, "pads": self.pads}
        y = conv_window(self.x, self.w, attrs).y_shape
        n, c, h, w = self.x
        m, _, kh, kw = self.w
        return (
            n,
            c,
            h,
            w,
            m,
            kh,
            kw,
            y[2],
            y[3],
            self.stride,
            self.stride,
            self.pads[0],
            self.pads[1],
            self.group,
        )

    def macs(self, c_lo: int, c_hi: int, m_lo: int, m_hi: int) -> int:
        """MACs of a tile: the (input, output) channel pairs it connects x N x OH x OW x KH x KW."""
        n, c, _, _, m, kh, kw, oh, ow, *_, g = self.geom
        cg, mg = c // g, m // g
        pairs = sum(
            max(0, min(c_hi, (mm // mg + 1) * cg) - max(c_lo, mm // mg * cg)) for mm in range(m_lo, m_hi)
        )
        return pairs * n * oh * ow * kh * kw


def ratios(calls: int, whole: float, chain: float, worst: float) -> dict[str, object]:
    """A tiling's columns: its calls, instructions per MAC of the whole kernel, the chain and the worst
    call, and the last two against the whole kernel."""
    return {
        "calls": calls,
        "whole instr/MAC": f"{whole:.3f}",
        "chain instr/MAC": f"{chain:.3f}",
        "chain / whole": f"{chain / whole:.3f}",
        "worst call instr/MAC": f"{worst:.3f}",
        "worst / whole": f"{worst / whole:.3f}",
    }


def part_case(
    conv: Conv, kernel: str, t: tuple[int, int, int, int], bias: bool, prev: bool, name: str
) -> mb.KernelCase:
    """One call of a part kernel: tensors X (or dY) tile, W, [B], [P], Y (or dX) tile."""
    n, c, h, w, m, kh, kw, oh, ow, *_ = conv.geom
    c_lo, c_hi, m_lo, m_hi = t
    ins = n * (c_hi - c_lo) * h * w if kernel == "forward" else n * (m_hi - m_lo) * oh * ow
    outs = n * (m_hi - m_lo) * oh * ow if kernel == "forward" else n * (c_hi - c_lo) * h * w
    tensors = [ins, m * (c // conv.group) * kh * kw]
    names = ["@T0@", "@T1@"]
    for want, size in ((bias, m), (prev, outs)):
        if want:
            names.append(f"@T{len(tensors)}@")
            tensors.append(size)
        else:
            names.append("NULL")
    y = len(tensors)
    tensors.append(outs)
    if kernel == "forward":
        call = f"poet_conv2d_part_f32({', '.join(names)}, @T{y}@, poet_mb_ints_@0, poet_mb_ints_@1);"
    else:
        args = f"{names[0]}, {names[1]}, {names[3]}, @T{y}@, poet_mb_ints_@0, poet_mb_ints_@1"
        call = f"poet_conv2d_grad_input_part_f32({args});"
    return mb.KernelCase(
        name=name,
        op_class=OpClass.CONV,
        source="conv",
        call=call,
        quantity=conv.macs(*t),
        tensors=tuple(tensors),
        outputs=(y,),
        arrays=(", ".join(map(str, conv.geom)), ", ".join(map(str, t))),
    )


def bounds(total: int) -> list[tuple[int, int]]:
    return [(lo, min(total, lo + TILE)) for lo in range(0, total, TILE)]


def tilings(conv: Conv, kernel: str) -> dict[str, list[tuple[tuple[int, int, int, int], bool, bool]]]:
    """Per tiling name: its calls in chain order as (tile, bias given, P given)."""
    n, c, _, _, m, *_ = conv.geom
    out: dict[str, list[tuple[tuple[int, int, int, int], bool, bool]]] = {}
    if conv.group == c == m:  # depthwise: c-tile = m-tile, one call each
        out[f"tiles of {TILE}"] = [((lo, hi, lo, hi), kernel == "forward", False) for lo, hi in bounds(c)]
        return out
    cs, ms = bounds(c), bounds(m)
    fwd = kernel == "forward"
    if fwd:
        if len(cs) > 1:
            out[f"c {TILE}"] = [((lo, hi, 0, m), i == len(cs) - 1, i > 0) for i, (lo, hi) in enumerate(cs)]
        if len(ms) > 1:
            out[f"m {TILE}"] = [((0, c, lo, hi), True, False) for lo, hi in ms]
        if len(cs) > 1 and len(ms) > 1:
            out[f"c {TILE} x m {TILE}"] = [
                ((clo, chi, mlo, mhi), i == len(cs) - 1, i > 0)
                for mlo, mhi in ms
                for i, (clo, chi) in enumerate(cs)
            ]
    else:
        if len(ms) > 1:
            out[f"m {TILE}"] = [((0, c, lo, hi), False, i > 0) for i, (lo, hi) in enumerate(ms)]
        if len(cs) > 1:
            out[f"c {TILE}"] = [((lo, hi, 0, m), False, False) for lo, hi in cs]
        if len(cs) > 1 and len(ms) > 1:
            out[f"c {TILE} x m {TILE}"] = [
                ((clo, chi, mlo, mhi), False, i > 0) for clo, chi in cs for i, (mlo, mhi) in enumerate(ms)
            ]
    return out


@dataclass(frozen=True)
class Dense:
    layer: str
    m: int
    n: int
    k: int
    trans_b: int

    @property
    def name(self) -> str:
        return f"{self.layer} [{self.m},{self.k}]x{'[N,K]' if self.trans_b else '[K,N]'} N={self.n}"

    def whole(self) -> mb.KernelCase:
        """The fast poet_gemm_f32 computing dX [m, n] in one call (plain: alpha 1, no C)."""
        case = mb.gemm_case(self.m, self.n, self.k, 0, self.trans_b, name=f"whole {self.name}")
        assert case.quantity == self.m * self.n * self.k, (case.name, case.quantity)
        return case

    def chain(self, block: int) -> list[tuple[int, bool, bool]]:
        """The chain's calls over blocks of ``block`` rows of W: (K of the part, P given, final)."""
        ks = [min(block, self.k - lo) for lo in range(0, self.k, block)]
        return [(kb, i > 0, i == len(ks) - 1) for i, kb in enumerate(ks)]

    def part(self, kb: int, partial: bool, final: bool) -> mb.KernelCase:
        """One GemmPart call: A [m, kb] (dY's columns of the block), B the block, [P], Y [m, n]."""
        shapes = [(self.m, kb), (self.n, kb) if self.trans_b else (kb, self.n)]
        if partial:
            shapes.append((self.m, self.n))
        attrs = {"transB": self.trans_b, "partial": partial, "final": final, "alpha": 1.0}
        name = f"part {self.name} K={kb}{' P' if partial else ''}{' final' if final else ''}"
        case = mb.op_case("GemmPart", shapes, attrs, name)
        assert case.quantity == self.m * self.n * kb, (case.name, case.quantity)
        return case


def part_model(m: int, n: int, k: int, trans_b: int) -> tuple[float, float]:
    """Instructions per MAC of a GemmPart call as the cost model prices it: (gemm_weight, the part's own
    weight when kernel_model has one, else the same) times IDEAL."""
    whole = km.gemm_weight(m, n, k, 0, trans_b) * km.IDEAL
    own = getattr(km, "gemm_part_weight", None)
    return whole, (own(m, n, k, trans_b) * km.IDEAL if own else whole)


def dense_rows(target: str, meas: mb.Measurement, dense: list[Dense]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for d in dense:
        wc = d.whole()
        w_ipm = meas.instructions[(wc.name, "fast")] / wc.quantity
        for block in BLOCKS:
            calls = [(d.part(*c), c[0]) for c in d.chain(block)]
            instr = [meas.instructions[(c.name, "fast")] for c, _ in calls]
            chain = sum(instr) / (d.m * d.n * d.k)
            per_call = [i / c.quantity for i, (c, _) in zip(instr, calls, strict=True)]
            worst = max(per_call)
            # the chain's typical call: a full block with P (the first call when the chain has one)
            typical = per_call[1] if len(calls) > 1 and calls[1][1] == block else per_call[0]
            gw, own = part_model(d.m, d.n, block, d.trans_b)
            rows.append(
                {
                    "target": target,
                    "layer": d.layer,
                    "M": d.m,
                    "N": d.n,
                    "K": d.k,
                    "transB": d.trans_b,
                    "K per part": block,
                    **ratios(len(calls), w_ipm, chain, worst),
                    "typical call instr/MAC": f"{typical:.3f}",
                    "model (gemm_weight)": f"{gw:.3f}",
                    "model (part)": f"{own:.3f}",
                    "typical / model (part)": f"{typical / own:.3f}",
                }
            )
    return rows


def main(argv: list[str]) -> int:
    gemm_only = "--gemm-only" in argv
    targets = [a for a in argv if a != "--gemm-only"] or ["qemu-cortex-m4"]
    if not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"):
        print("needs arm-none-eabi-gcc and qemu-system-arm (make toolchain)")
        return 1
    convs = [] if gemm_only else [Conv(*s) for s in SHAPES]
    whole: dict[tuple[str, str], mb.KernelCase] = {}
    parts: dict[tuple[str, str, str], list[mb.KernelCase]] = {}
    for conv in convs:
        for kernel in KERNELS:
            case = mb.conv_case(conv.x, conv.w, kernel, (conv.stride,) * 2, conv.pads, conv.group, bias=True)
            n, c, _, _, m, *_ = conv.geom
            assert case.quantity == conv.macs(0, c, 0, m), (case.name, case.quantity)
            whole[(conv.name, kernel)] = case
            for tname, calls in tilings(conv, kernel).items():
                parts[(conv.name, kernel, tname)] = [
                    part_case(conv, kernel, t, b, p, f"part {conv.name} {kernel} {tname} #{i}")
                    for i, (t, b, p) in enumerate(calls)
                ]
    dense = [Dense(*d) for d in DENSE]
    gemm_cases = {
        c.name: c for d in dense for c in [d.whole()] + [d.part(*p) for b in BLOCKS for p in d.chain(b)]
    }
    cases = list(whole.values()) + [c for cs in parts.values() for c in cs] + list(gemm_cases.values())
    rows: list[dict[str, object]] = []
    gemm_rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="poet-bench-split-") as tmp:
        for target in targets:
            meas = mb.measure(target, cases, Path(tmp) / target, ("fast",))
            for (cname, kernel, tname), calls in parts.items():
                wc = whole[(cname, kernel)]
                w_ipm = meas.instructions[(wc.name, "fast")] / wc.quantity
                instr = [meas.instructions[(c.name, "fast")] for c in calls]
                chain = sum(instr) / sum(c.quantity for c in calls)
                worst = max(i / c.quantity for i, c in zip(instr, calls, strict=True))
                rows.append(
                    {
                        "target": target,
                        "conv": cname,
                        "kernel": kernel,
                        "tiling": tname,
                        **ratios(len(calls), w_ipm, chain, worst),
                    }
                )
            gemm_rows += dense_rows(target, meas, dense)
    if rows:
        print(
            "== fast conv part kernels vs the fast whole kernel, instructions per MAC (QEMU -icount; "
            "not cycles)"
        )
        print(table(rows, list(rows[0])))
    print("\n== GemmPart chains vs the whole fast poet_gemm_f32, instructions per MAC (QEMU -icount)")
    print(table(gemm_rows, list(gemm_rows[0])))
    summary = _summary(rows, gemm_rows)
    print("\n" + "; ".join(f"{k}: {v:.3f}" for k, v in summary.items()) + " (goal <= 1.10)")
    if not gemm_only:
        write_results(targets, rows, gemm_rows, summary)
    return 0


def _summary(rows: list[dict[str, object]], gemm_rows: list[dict[str, object]]) -> dict[str, float]:
    """The worst ratios: conv calls and chains; Gemm chains and calls where a part has K >= 8 (the goal's
    scope) and over all."""

    def worst(rs: list[dict[str, object]], col: str) -> float:
        return max((float(str(r[col])) for r in rs), default=0.0)

    k8 = [r for r in gemm_rows if int(str(r["K per part"])) >= 8]
    return {
        "worst call / whole": worst(rows, "worst / whole"),
        "worst chain / whole": worst(rows, "chain / whole"),
        "gemm: worst chain / whole, K >= 8": worst(k8, "chain / whole"),
        "gemm: worst call / whole, K >= 8": worst(k8, "worst / whole"),
        "gemm: worst chain / whole, K = 4": worst([r for r in gemm_rows if r not in k8], "chain / whole"),
    }


def _markdown(rows: list[dict[str, object]]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(out + ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows])


def write_results(
    targets: list[str],
    rows: list[dict[str, object]],
    gemm_rows: list[dict[str, object]],
    summary: dict[str, float],
) -> None:
    """bench/results/split_kernels.{json,md}, with machine, commit and date."""
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    rounded = {k: round(v, 4) for k, v in summary.items()}
    data = {**meta, "targets": targets, "tile": TILE, "gemm blocks": list(BLOCKS), **rounded}
    (RESULTS / "split_kernels.json").write_text(
        json.dumps({**data, "rows": rows, "gemm rows": gemm_rows}, indent=1) + "\n"
    )
    (RESULTS / "split_kernels.md").write_text(
        "# Split kernels: channel-tile conv and GemmPart kernels vs the whole fast kernel, "
        "instructions per MAC\n\n"
        f"Measured by `bench/split_kernels.py` on {meta['machine']}, commit {meta['commit']}, "
        f"{meta['date']}.\nTargets: {', '.join(targets)}; conv tiles of {TILE} channels, Gemm parts of "
        f"{', '.join(map(str, BLOCKS))} rows of W. QEMU -icount counts instructions, not cycles; "
        "the script's docstring says which shapes and tilings are measured. Goal: part kernels within "
        "10% of the whole kernel (Gemm: where a part has K >= 8). "
        + "; ".join(f"{k}: {v:.3f}" for k, v in summary.items())
        + ".\n\n## Conv parts\n\n"
        + _markdown(rows)
        + "\n\n## Gemm parts (GemmPart chains of dX)\n\n"
        + _markdown(gemm_rows)
        + "\n"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
