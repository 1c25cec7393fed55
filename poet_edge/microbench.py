"""Kernel micro-benchmarks on a target: instructions per call of runtime kernels, and bit-for-bit comparison
of two kernel variants (the reference kernels in ``runtime_c/src/kernels`` and the fast ones in
``runtime_c/src/optimized``).

One C program is generated per measurement: for every variant, each kernel source file is compiled in its
own translation unit with every kernel symbol renamed (``poet_gemm_f32`` -> ``poet_fast_gemm_f32``), so both
variants link into the same program and are measured in the same run. Each case calls one kernel with fixed
arguments on buffers of deterministic pseudo-random data. Timing runs a case ``reps`` times between two
``poet_ticks()`` reads; on the QEMU targets (``-icount shift=0``) ticks times ``instructions_per_tick`` is an
exact instruction count (not cycles). The cost of an empty call through the same loop is subtracted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poet_edge import ops, targets
from poet_edge.codegen import emit
from poet_edge.errors import PoetError
from poet_edge.ir import Node
from poet_edge.ops.base import FloatArg, IntArg, IntArrayArg, NullArg, RuntimeArg, Shape, TensorArg, elements
from poet_edge.paths import RUNTIME_C
from poet_edge.work import OpClass, Work

KERNELS_DIR = RUNTIME_C / "src" / "kernels"
OPTIMIZED_DIR = RUNTIME_C / "src" / "optimized"
VARIANTS = ("reference", "fast")  # compare_variants: the first is the oracle
SHARED_SOURCES = ("math",)  # helpers every variant shares (poet_expf, poet_tanhf...): never renamed
_DECL = re.compile(r"\b(poet_\w+)\s*\(")
_CASE = re.compile(r"case (\d+) (\w+) ticks (\d+) reps (\d+)")
_EMPTY = re.compile(r"empty ticks (\d+) reps (\d+)")
_EQUAL = re.compile(r"compare (\d+) equal (\d+) first_diff (-?\d+)")
TARGET_INSTRUCTIONS_PER_CASE = 400_000  # per timed case: tick granularity (40 instructions) stays < 0.01 %


@dataclass(frozen=True)
class KernelCase:
    """One kernel call: ``call`` is a C statement over the float arena ``poet_mb_mem`` (tensors at fixed
    offsets, ``mem_floats`` elements in all) and the int32 labels ``poet_mb_l`` (``labels`` of them, drawn
    in [0, label_classes)). ``source`` is the kernel file (gemm, relu...); ``quantity`` is the work count of
    ``op_class`` (MACs, elements or bytes written) and ``priced`` what the cost model multiplies by its rate
    (MACs times the kernel model's weight, see poet_edge.work.Work.quantity). ``outputs`` are (offset, count)
    regions the kernel writes that are not also inputs: a comparison fills them with NaNs first."""

    name: str
    op_class: OpClass
    source: str
    call: str
    quantity: int
    mem_floats: int
    outputs: tuple[tuple[int, int], ...] = ()
    labels: int = 0
    label_classes: int = 1
    arrays: tuple[str, ...] = ()  # static const int32 arrays the call uses (C definitions)
    priced: float = 0.0  # set by op_case (every case is made there)


def quantity_of(work: Work) -> int:
    """The work count of the call: MACs (dense, conv, depthwise), bytes written (copy) or elements."""
    if work.op_class in (OpClass.DENSE, OpClass.CONV, OpClass.DEPTHWISE):
        return work.macs
    if work.op_class == OpClass.COPY:
        return work.bytes_written
    return work.elements


def op_case(
    op: str,
    shapes: Sequence[Shape],
    attrs: dict[str, object] | None = None,
    name: str = "",
    int_inputs: Sequence[int] = (),
    label_classes: int = 1,
    lr: float = 0.01,
) -> KernelCase:
    """The C call poet's codegen would emit for one node of ``op`` with these input shapes and attributes
    (through the op's own kernel binding), with its work from the op's own work function."""
    attrs = dict(attrs or {})
    opdef = ops.get(op)
    if opdef.kernel is None:
        raise PoetError(f"op {op} has no C kernel")
    ins = [tuple(int(d) for d in s) for s in shapes]
    outs = [tuple(int(d) for d in s) for s in opdef.infer(ins, attrs)]
    node = Node(
        "case",
        op,
        tuple(f"in{k}" for k in range(len(ins))),
        tuple(f"out{k}" for k in range(len(outs))),
        attrs,
    )
    shape_of = {**{f"in{k}": s for k, s in enumerate(ins)}, **{f"out{k}": s for k, s in enumerate(outs)}}
    call = opdef.kernel(node, shape_of.__getitem__)
    work = opdef.work(ins, outs, attrs)
    offsets: dict[str, int] = {}
    top, labels = 0, 0
    for t, s in shape_of.items():
        if t in (f"in{k}" for k in int_inputs):
            labels = max(labels, elements(s))
            continue
        offsets[t] = top
        top += -(-max(1, elements(s)) // 4) * 4
    arrays: list[str] = []
    args: list[str] = []
    written: list[tuple[int, int]] = []
    for a in call.args:
        if isinstance(a, TensorArg):
            if a.name not in offsets:
                args.append("poet_mb_l")
                continue
            args.append(f"(poet_mb_mem + {offsets[a.name]})")
            if not a.const and a.name.startswith("out"):
                written.append((offsets[a.name], elements(shape_of[a.name])))
        elif isinstance(a, IntArg):
            args.append(str(a.value))
        elif isinstance(a, FloatArg):
            args.append(_cf(a.value))
        elif isinstance(a, IntArrayArg):
            arrays.append(", ".join(map(str, a.values)) or "0")
            args.append(f"poet_mb_ints_@{len(arrays) - 1}")
        elif isinstance(a, RuntimeArg):
            args.append(_cf(lr))
        elif isinstance(a, NullArg):
            args.append("NULL")
        else:  # pragma: no cover
            raise TypeError(a)
    label = name or f"{op} {' '.join('x'.join(map(str, s)) for s in ins)}{_attr_text(attrs)}"
    return KernelCase(
        label,
        work.op_class,
        call.source,
        f"{call.func}({', '.join(args)});",
        quantity_of(work),
        top,
        tuple(written),
        labels,
        label_classes,
        tuple(arrays),
        work.quantity,
    )


def _attr_text(attrs: dict[str, object]) -> str:
    return "".join(f" {k}={v}" for k, v in sorted(attrs.items()) if k not in ("x_shape", "w_shape"))


def gemm_case(
    m: int,
    n: int,
    k: int,
    ta: int = 0,
    tb: int = 0,
    alpha: float = 1.0,
    beta: float = 1.0,
    bias: str | None = None,
    name: str = "",
) -> KernelCase:
    """A Gemm node computing [m, n] from op(A)[m, k] op(B)[k, n]; ``bias`` None (no C), "row" (C[n]),
    "col" (C[m, 1]), "full" (C[m, n]) or "scalar" (C[1])."""
    shapes: list[Shape] = [(k, m) if ta else (m, k), (n, k) if tb else (k, n)]
    if bias:
        shapes.append({"row": (n,), "col": (m, 1), "full": (m, n), "scalar": (1,)}[bias])
    layout = {(0, 1): "A·Bᵀ", (0, 0): "A·B", (1, 0): "Aᵀ·B", (1, 1): "Aᵀ·Bᵀ"}[(ta, tb)]
    extra = (
        (f" +{bias} C" if bias else "")
        + (f" alpha={alpha:g}" if alpha != 1.0 else "")
        + (f" beta={beta:g}" if bias and beta != 1.0 else "")
    )
    attrs: dict[str, object] = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    return op_case("Gemm", shapes, attrs, name or f"gemm {m}x{n}x{k} {layout}{extra}")


def conv_case(
    x: Shape,
    w: Shape,
    kind: str = "forward",
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    group: int = 1,
    bias: bool = True,
    name: str = "",
) -> KernelCase:
    """One call of a Conv kernel as a training step makes it: ``kind`` "forward" (Conv of X[N,C,H,W] with
    W[M,C/group,KH,KW], and B[M] when ``bias``), "input grad" (ConvGradInput(dY, W) -> dX) or "weight grad"
    (ConvGradWeight(X, dY) -> dW)."""
    from poet_edge.ops.conv import conv_window

    attrs: dict[str, object] = {"group": group, "strides": tuple(strides), "pads": tuple(pads)}
    y = conv_window(x, w, attrs).y_shape
    geo = (
        f"{'x'.join(map(str, x))} w{'x'.join(map(str, w))} s{strides[0]}x{strides[1]}"
        f" p{','.join(map(str, pads))} g{group}"
    )
    if kind == "forward":
        shapes = [x, w, (w[0],)] if bias else [x, w]
        return op_case("Conv", shapes, attrs, name or f"conv {geo}{' +b' if bias else ''}")
    if kind == "input grad":
        return op_case("ConvGradInput", [y, w], {**attrs, "x_shape": tuple(x)}, name or f"conv_dx {geo}")
    if kind == "weight grad":
        return op_case("ConvGradWeight", [x, y], {**attrs, "w_shape": tuple(w)}, name or f"conv_dw {geo}")
    raise PoetError(f"unknown conv kernel kind {kind!r}")


def _cf(v: float) -> str:
    return f"{float(v)!r}f"


def kernel_symbols() -> list[str]:
    """Kernel function names declared in runtime_c/include/poet/kernels.h, minus the shared helpers (the
    functions the SHARED_SOURCES define: poet_expf, poet_tanhf...)."""
    text = (RUNTIME_C / "include" / "poet" / "kernels.h").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    shared = set()
    for src in SHARED_SOURCES:
        shared |= set(re.findall(r"^float (poet_\w+)\(", (KERNELS_DIR / f"{src}.c").read_text(), flags=re.M))
    return sorted(set(_DECL.findall(text)) - shared)


def kernel_source(name: str, variant: str) -> Path:
    """The C file of kernel source ``name`` in a variant (as ``poet compile --kernels`` picks it)."""
    return emit.kernel_file(name, variant)


def _renames(variant: str) -> str:
    prefix = {"reference": "ref", "fast": "fast"}[variant]
    return "\n".join(f"#define {s} poet_{prefix}_{s[5:]}" for s in kernel_symbols())


def _variant_units(cases: Sequence[KernelCase], variant: str, work: Path) -> list[Path]:
    units: list[Path] = []
    for src in emit.with_dependencies({c.source for c in cases}):
        path = work / f"mb_{variant}_{src}.c"
        path.write_text(
            f"/* {variant} {src}.c with renamed symbols */\n{_renames(variant)}\n"
            f'#include "{kernel_source(src, variant)}"\n'
        )
        units.append(path)
    lines = [
        f"/* benchmark cases calling the {variant} kernels */",
        "#include <stddef.h>",
        _renames(variant),
        '#include "poet/kernels.h"',
        *_buffer_decls(cases, "extern "),
    ]
    for i, c in enumerate(cases):
        call = c.call
        for k, values in enumerate(c.arrays):
            lines.append(f"static const int32_t poet_mb_ints_{i}_{k}[] = {{{values}}};")
            call = call.replace(f"poet_mb_ints_@{k})", f"poet_mb_ints_{i}_{k})").replace(
                f"poet_mb_ints_@{k},", f"poet_mb_ints_{i}_{k},"
            )
        lines.append(f"void poet_mb_{variant}_{i}(void);\nvoid poet_mb_{variant}_{i}(void) {{ {call} }}")
    path = work / f"mb_{variant}_cases.c"
    path.write_text("\n".join(lines) + "\n")
    return [*units, path]


def _sizes(cases: Sequence[KernelCase]) -> tuple[int, int]:
    return max([c.mem_floats for c in cases] + [4]), max([c.labels for c in cases] + [1])


def _buffer_decls(cases: Sequence[KernelCase], storage: str) -> list[str]:
    mem, labels = _sizes(cases)
    return [f"{storage}float poet_mb_mem[{mem}];", f"{storage}int32_t poet_mb_l[{labels}];"]


def _main(cases: Sequence[KernelCase], variants: Sequence[str], reps: Sequence[int], compare: bool) -> str:
    mem, nl = _sizes(cases)
    protos = [f"void poet_mb_{v}_{i}(void);" for v in variants for i in range(len(cases))]
    table = ",\n".join(
        "    {" + ", ".join(f"poet_mb_{v}_{i}" for v in variants) + "}" for i in range(len(cases))
    )
    regions = [r for c in cases for r in c.outputs]
    first, k = [], 0
    for c in cases:
        first.append(k)
        k += len(c.outputs)
    first.append(k)
    region_table = ", ".join(f"{{{o}, {n}}}" for o, n in regions) or "{0, 0}"
    classes = ", ".join(str(max(1, c.label_classes)) for c in cases)
    names = ", ".join(f'"{v}"' for v in variants)
    return f"""/* Generated by poet_edge.microbench: times (or compares) kernel calls. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "poet/platform.h"

{chr(10).join(_buffer_decls(cases, ""))}
static float poet_mb_keep[{mem if compare else 1}];
{chr(10).join(protos)}
typedef void (*poet_mb_fn)(void);
static poet_mb_fn const poet_mb_cases[{len(cases)}][{len(variants)}] = {{
{table}
}};
static const char *const poet_mb_variants[{len(variants)}] = {{{names}}};
static const uint32_t poet_mb_reps[{len(cases)}] = {{{", ".join(map(str, reps))}}};
static const int32_t poet_mb_classes[{len(cases)}] = {{{classes}}};
static const int32_t poet_mb_mem_used[{len(cases)}] = {{{", ".join(str(c.mem_floats) for c in cases)}}};
static const int32_t poet_mb_first_region[{len(cases) + 1}] = {{{", ".join(map(str, first))}}};
static const int32_t poet_mb_regions[][2] = {{{region_table}}};
static volatile int32_t poet_mb_sink;

static void poet_mb_empty(void) {{ poet_mb_sink = 0; }}

/* deterministic values in [-1, 1) (some exact zeros of both signs) and labels in [0, classes) */
static void poet_mb_fill(uint32_t seed, int32_t classes)
{{
    uint32_t x = seed * 2654435761u + 12345u;
    for (int32_t i = 0; i < {mem}; ++i) {{
        x = x * 1664525u + 1013904223u;
        int32_t v = (int32_t)(x >> 9) - (1 << 22);
        poet_mb_mem[i] = (x & 0x3f0u) == 0u ? ((x & 1u) ? -0.0f : 0.0f) : (float)v / 4194304.0f;
    }}
    for (int32_t i = 0; i < {nl}; ++i) {{
        x = x * 1664525u + 1013904223u;
        poet_mb_l[i] = (int32_t)((x >> 8) % (uint32_t)classes);
    }}
}}

static uint64_t poet_mb_time(poet_mb_fn f, uint32_t reps)
{{
    uint64_t t0 = poet_ticks();
    for (uint32_t r = 0; r < reps; ++r) f();
    return poet_ticks() - t0;
}}

int main(void)
{{
    const int compare = {int(compare)};
    const uint32_t empty_reps = 4096u;
    if (!compare) {{
        poet_mb_time(poet_mb_empty, 16u);
        printf("empty ticks %lu reps %lu\\n", (unsigned long)poet_mb_time(poet_mb_empty, empty_reps),
               (unsigned long)empty_reps);
    }}
    for (int32_t i = 0; i < {len(cases)}; ++i) {{
        for (int32_t v = 0; v < {len(variants)}; ++v) {{
            poet_mb_fill((uint32_t)i + 1u, poet_mb_classes[i]);
            if (!compare) {{
                poet_mb_cases[i][v]();
                uint64_t t = poet_mb_time(poet_mb_cases[i][v], poet_mb_reps[i]);
                printf("case %ld %s ticks %lu reps %lu\\n", (long)i, poet_mb_variants[v], (unsigned long)t,
                       (unsigned long)poet_mb_reps[i]);
                continue;
            }}
            /* outputs start as a NaN pattern, so an element a variant does not write shows up */
            for (int32_t r = poet_mb_first_region[i]; r < poet_mb_first_region[i + 1]; ++r)
                for (int32_t e = 0; e < poet_mb_regions[r][1]; ++e)
                    memcpy(&poet_mb_mem[poet_mb_regions[r][0] + e], "\\xa5\\xa5\\xc1\\x7f", 4);
            poet_mb_cases[i][v]();
            if (v == 0) {{
                memcpy(poet_mb_keep, poet_mb_mem, (size_t)poet_mb_mem_used[i] * sizeof(float));
                continue;
            }}
            long diff = -1;
            for (int32_t e = 0; e < poet_mb_mem_used[i] && diff < 0; ++e)
                if (memcmp(&poet_mb_keep[e], &poet_mb_mem[e], sizeof(float)) != 0) diff = (long)e;
            printf("compare %ld equal %d first_diff %ld\\n", (long)i, diff < 0, diff);
        }}
    }}
    return 0;
}}
"""


@dataclass(frozen=True)
class Measurement:
    """Instructions (ticks x instructions_per_tick, or ticks on targets without that factor) per call of each
    case and variant, the empty call's cost already subtracted."""

    target: str
    instructions: dict[tuple[str, str], float]  # (case name, variant) -> per call
    empty_call: float
    exact: bool  # instruction counts (QEMU -icount) rather than host nanoseconds


def _reps(case: KernelCase, budget: int) -> int:
    per_call = 8 * max(case.quantity, 1) + 200
    return max(1, min(100_000, math.ceil(budget / per_call)))


def _build(
    target: targets.Target,
    cases: Sequence[KernelCase],
    variants: Sequence[str],
    work: Path,
    reps: Sequence[int],
    compare: bool,
    sanitize: bool = False,
) -> targets.RunResult:
    if not cases:
        raise PoetError("no kernel cases to run")
    dup = sorted({c.name for c in cases if sum(d.name == c.name for d in cases) > 1})
    if dup:
        raise PoetError(f"kernel case names must be unique: {dup[:3]}")
    work.mkdir(parents=True, exist_ok=True)
    main = work / "mb_main.c"
    main.write_text(_main(cases, variants, reps, compare))
    srcs = [main, *(KERNELS_DIR / f"{s}.c" for s in SHARED_SOURCES)]
    for v in variants:
        srcs += _variant_units(cases, v, work)
    mem, labels = _sizes(cases)
    need = 4 * (mem * (2 if compare else 1) + labels) + 64 * 1024
    ram = need if target.memory is None else min(target.memory.ram_max_bytes, need)
    built = targets.build(target, srcs, [work], work / "build", ram, sanitize=sanitize)
    res = targets.run(target, built, work, timeout_s=1800.0)
    if res.exit_code != 0:
        raise PoetError(f"kernel benchmark on {target.name} exited with {res.exit_code}: {res.stdout[-400:]}")
    return res


def measure(
    target_name: str,
    cases: Sequence[KernelCase],
    work: Path,
    variants: Sequence[str] = ("fast",),
    budget_instructions: int = TARGET_INSTRUCTIONS_PER_CASE,
) -> Measurement:
    """Instructions per call of every case with every variant, on one target."""
    target = targets.load_target(target_name)
    reps = [_reps(c, budget_instructions) for c in cases]
    res = _build(target, cases, variants, Path(work), reps, compare=False)
    per_tick = target.instructions_per_tick or 1
    m = _EMPTY.search(res.stdout)
    if not m:
        raise PoetError(f"kernel benchmark on {target.name}: no empty-call line in {res.stdout[:200]!r}")
    empty = int(m.group(1)) * per_tick / int(m.group(2))
    out: dict[tuple[str, str], float] = {}
    for m in _CASE.finditer(res.stdout):
        i, variant, ticks, n = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
        out[(cases[i].name, variant)] = ticks * per_tick / n - empty
    if len(out) != len(cases) * len(variants):
        raise PoetError(
            f"kernel benchmark on {target.name}: {len(out)} of {len(cases) * len(variants)} results"
        )
    return Measurement(target.name, out, empty, target.ticks_deterministic)


def compare_variants(
    target_name: str, cases: Sequence[KernelCase], work: Path, sanitize: bool = False
) -> dict[str, int]:
    """Runs every case with the reference and the fast kernels on the same inputs; returns, per case name,
    -1 when the outputs are bit-identical, else the index of the first differing output element.
    ``sanitize`` builds with the target's sanitizer flags (host only)."""
    target = targets.load_target(target_name)
    res = _build(target, cases, VARIANTS, Path(work), [1] * len(cases), compare=True, sanitize=sanitize)
    found = {cases[int(m.group(1))].name: int(m.group(3)) for m in _EQUAL.finditer(res.stdout)}
    if len(found) != len(cases):
        raise PoetError(f"kernel comparison on {target.name}: {len(found)} of {len(cases)} results")
    return found
