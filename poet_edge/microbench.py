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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poet_edge import ops, targets
from poet_edge.codegen import emit
from poet_edge.errors import PoetError
from poet_edge.ir import Node
from poet_edge.ops.base import (
    DoubleArg,
    FloatArg,
    IntArg,
    IntArrayArg,
    NullArg,
    RuntimeArg,
    Shape,
    TensorArg,
    elements,
)
from poet_edge.paths import RUNTIME_C
from poet_edge.work import OpClass, Work

KERNELS_DIR = RUNTIME_C / "src" / "kernels"
OPTIMIZED_DIR = RUNTIME_C / "src" / "optimized"
VARIANTS = ("reference", "fast")  # compare_variants: the first is the oracle
SHARED_SOURCES = ("math",)  # helpers every variant shares (poet_expf, poet_tanhf...): never renamed
_DECL = re.compile(r"\b(poet_\w+)\s*\(")
_CASE = re.compile(r"case (\d+) (\w+) ticks (\d+) reps (\d+)")
_EMPTY = re.compile(r"empty ticks (\d+) reps (\d+)")
_EQUAL = re.compile(r"compare (\d+) equal (\d+) first_diff (-?\d+) guards (-?\d+) (-?\d+)")
TARGET_INSTRUCTIONS_PER_CASE = 400_000  # per timed case: tick granularity (40 instructions) stays < 0.01 %


@dataclass(frozen=True)
class KernelCase:
    """One kernel call: ``call`` is a C statement whose float tensors are the placeholders ``@T<k>@`` (the
    ``tensors[k]`` elements of tensor k, placed in the float arena ``poet_mb_mem`` by :func:`layout`) and
    whose int32 labels are ``poet_mb_l`` (``labels`` of them, drawn in [0, label_classes)). ``source`` is the
    kernel file (gemm, relu...); ``quantity`` is the work count of ``op_class`` (MACs, elements or bytes
    written) and ``priced`` what the cost model multiplies by its rate (MACs times the kernel model's weight,
    see poet_edge.work.Work.quantity). ``outputs`` are the tensors the kernel writes that are not also
    inputs: a comparison fills them with NaNs first."""

    name: str
    op_class: OpClass
    source: str
    call: str
    quantity: int
    tensors: tuple[int, ...]
    outputs: tuple[int, ...] = ()
    labels: int = 0
    label_classes: int = 1
    arrays: tuple[str, ...] = ()  # static const int32 arrays the call uses (C definitions)
    priced: float = 0.0  # set by op_case (every case is made there)


@dataclass(frozen=True)
class Layout:
    """Where a case's tensors sit in the arena: ``offsets`` (16-byte aligned), ``floats`` in all, and the
    ``guards`` (offset, count): the gaps before, between and after the tensors (empty without guards)."""

    offsets: tuple[int, ...]
    floats: int
    guards: tuple[tuple[int, int], ...]


def guard_floats(case: KernelCase) -> int:
    """The guard zone around each tensor: as large as the case's largest tensor (at least 16 floats), so a
    read or write that strays from one tensor lands in a guard before it can reach another tensor."""
    return -(-max(16, *case.tensors) // 4) * 4


def layout(case: KernelCase, guarded: bool) -> Layout:
    """Tensors one after the other (each start 4-float aligned); ``guarded`` puts a guard zone of
    :func:`guard_floats` before the first tensor and after every tensor (the alignment padding is part of
    the guard, so it starts right at the tensor's last element)."""
    g = guard_floats(case) if guarded else 0
    offsets, guards, top = [], [], g
    if g:
        guards.append((0, g))
    for n in case.tensors:
        offsets.append(top)
        end = top + n
        top = -(-end // 4) * 4 + g
        if g:
            guards.append((end, top - end))
    return Layout(tuple(offsets), max(top, 4), tuple(guards))


def placed_call(case: KernelCase, lay: Layout) -> str:
    """The case's call with every tensor placeholder replaced by its address in the arena."""
    return re.sub(r"@T(\d+)@", lambda m: f"(poet_mb_mem + {lay.offsets[int(m.group(1))]})", case.call)


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
    index: dict[str, int] = {}
    sizes: list[int] = []
    labels = 0
    for t, s in shape_of.items():
        if t in (f"in{k}" for k in int_inputs):
            labels = max(labels, elements(s))
            continue
        index[t] = len(sizes)
        sizes.append(max(1, elements(s)))
    arrays: list[str] = []
    args: list[str] = []
    written: list[int] = []
    for a in call.args:
        if isinstance(a, TensorArg):
            if a.name not in index:
                args.append("poet_mb_l")
                continue
            args.append(f"@T{index[a.name]}@")
            if not a.const and a.name.startswith("out"):
                written.append(index[a.name])
        elif isinstance(a, IntArg):
            args.append(str(a.value))
        elif isinstance(a, FloatArg):
            args.append(_cf(a.value))
        elif isinstance(a, IntArrayArg):
            arrays.append(", ".join(map(str, a.values)) or "0")
            args.append(f"poet_mb_ints_@{len(arrays) - 1}")
        elif isinstance(a, DoubleArg):
            args.append(repr(float(a.value)))
        elif isinstance(a, RuntimeArg):
            args.append("1" if a.name == "t" else _cf(lr))  # t: the step count of the optimizers
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
        tuple(sizes),
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


def _variant_units(
    cases: Sequence[KernelCase], lays: Sequence[Layout], variant: str, work: Path
) -> list[Path]:
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
        *_buffer_decls(lays, cases, "extern "),
    ]
    for i, c in enumerate(cases):
        call = placed_call(c, lays[i])
        for k, values in enumerate(c.arrays):
            lines.append(f"static const int32_t poet_mb_ints_{i}_{k}[] = {{{values}}};")
            call = call.replace(f"poet_mb_ints_@{k})", f"poet_mb_ints_{i}_{k})").replace(
                f"poet_mb_ints_@{k},", f"poet_mb_ints_{i}_{k},"
            )
        lines.append(f"void poet_mb_{variant}_{i}(void);\nvoid poet_mb_{variant}_{i}(void) {{ {call} }}")
    path = work / f"mb_{variant}_cases.c"
    path.write_text("\n".join(lines) + "\n")
    return [*units, path]


def _sizes(lays: Sequence[Layout], cases: Sequence[KernelCase]) -> tuple[int, int]:
    return max([lay.floats for lay in lays] + [4]), max([c.labels for c in cases] + [1])


def _buffer_decls(lays: Sequence[Layout], cases: Sequence[KernelCase], storage: str) -> list[str]:
    mem, labels = _sizes(lays, cases)
    return [f"{storage}float poet_mb_mem[{mem}];", f"{storage}int32_t poet_mb_l[{labels}];"]


def _region_table(name: str, per_case: Sequence[Sequence[tuple[int, int]]]) -> str:
    """Two C tables: every case's (offset, count) regions one after the other, and where each case's begin."""
    first, flat = [0], list[tuple[int, int]]()
    for regions in per_case:
        flat += regions
        first.append(len(flat))
    rows = ", ".join(f"{{{o}, {n}}}" for o, n in flat) or "{0, 0}"
    return (
        f"static const int32_t poet_mb_first_{name}[{len(first)}] = {{{', '.join(map(str, first))}}};\n"
        f"static const int32_t poet_mb_{name}[][2] = {{{rows}}};"
    )


_MAIN_HEAD = r"""/* Generated by poet_edge.microbench: times (or compares) kernel calls. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "poet/platform.h"

/* Under AddressSanitizer the guard zones around every tensor are poisoned while a kernel runs: any read or
 * write outside the kernel's own tensors stops the run with a report. Elsewhere (QEMU) the guards hold a
 * NaN pattern that is checked after each call (stray writes) and that stray reads carry into the output. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POET_MB_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POET_MB_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POET_MB_POISON(p, n) ((void)(p), (void)(n))
#define POET_MB_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
"""

_MAIN_BODY = r"""
static volatile int32_t poet_mb_sink;

static void poet_mb_empty(void) { poet_mb_sink = 0; }

/* deterministic values in [-1, 1) (some exact zeros of both signs) in the first n floats of the arena
 * (a comparison: the case's own; timing: all) and labels in [0, classes) */
static void poet_mb_fill(uint32_t seed, int32_t classes, int32_t n)
{
    uint32_t x = seed * 2654435761u + 12345u;
    for (int32_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        int32_t v = (int32_t)(x >> 9) - (1 << 22);
        poet_mb_mem[i] = (x & 0x3f0u) == 0u ? ((x & 1u) ? -0.0f : 0.0f) : (float)v / 4194304.0f;
    }
    for (int32_t i = 0; i < POET_MB_LABELS; ++i) {
        x = x * 1664525u + 1013904223u;
        poet_mb_l[i] = (int32_t)((x >> 8) % (uint32_t)classes);
    }
}

static uint64_t poet_mb_time(poet_mb_fn f, uint32_t reps)
{
    uint64_t t0 = poet_ticks();
    for (uint32_t r = 0; r < reps; ++r) f();
    return poet_ticks() - t0;
}

static void poet_mb_set(int32_t i, const int32_t *first, const int32_t (*regions)[2], const char *bits)
{
    for (int32_t r = first[i]; r < first[i + 1]; ++r)
        for (int32_t e = 0; e < regions[r][1]; ++e) memcpy(&poet_mb_mem[regions[r][0] + e], bits, 4);
}

static void poet_mb_poison(int32_t i, int on)
{
    for (int32_t r = poet_mb_first_guards[i]; r < poet_mb_first_guards[i + 1]; ++r) {
        float *p = &poet_mb_mem[poet_mb_guards[r][0]];
        const size_t n = (size_t)poet_mb_guards[r][1] * sizeof(float);
        if (on)
            POET_MB_POISON(p, n);
        else
            POET_MB_UNPOISON(p, n);
    }
}

/* the first guard element that no longer holds the guard pattern, or -1 */
static long poet_mb_guard_hit(int32_t i)
{
    for (int32_t r = poet_mb_first_guards[i]; r < poet_mb_first_guards[i + 1]; ++r)
        for (int32_t e = 0; e < poet_mb_guards[r][1]; ++e)
            if (memcmp(&poet_mb_mem[poet_mb_guards[r][0] + e], POET_MB_GUARD, 4) != 0)
                return (long)(poet_mb_guards[r][0] + e);
    return -1;
}

/* one call of case i with variant v on fresh inputs: outputs start as a NaN pattern (an element the
 * kernel does not write shows up), the guards as another; returns the first guard element written */
static long poet_mb_checked_call(int32_t i, int32_t v)
{
    poet_mb_fill((uint32_t)i + 1u, poet_mb_classes[i], poet_mb_mem_used[i]);
    poet_mb_set(i, poet_mb_first_guards, poet_mb_guards, POET_MB_GUARD);
    poet_mb_set(i, poet_mb_first_outputs, poet_mb_outputs, "\xa5\xa5\xc1\x7f");
    poet_mb_poison(i, 1);
    poet_mb_cases[i][v]();
    poet_mb_poison(i, 0);
    return poet_mb_guard_hit(i);
}

int main(void)
{
    const uint32_t empty_reps = 4096u;
    if (!POET_MB_COMPARE) {
        poet_mb_time(poet_mb_empty, 16u);
        printf("empty ticks %lu reps %lu\n", (unsigned long)poet_mb_time(poet_mb_empty, empty_reps),
               (unsigned long)empty_reps);
    }
    for (int32_t i = 0; i < POET_MB_CASES; ++i) {
        long guard_ref = -1;
        for (int32_t v = 0; v < POET_MB_VARIANTS; ++v) {
            if (!POET_MB_COMPARE) {
                poet_mb_fill((uint32_t)i + 1u, poet_mb_classes[i], POET_MB_MEM);
                poet_mb_cases[i][v]();
                uint64_t t = poet_mb_time(poet_mb_cases[i][v], poet_mb_reps[i]);
                printf("case %ld %s ticks %lu reps %lu\n", (long)i, poet_mb_variants[v], (unsigned long)t,
                       (unsigned long)poet_mb_reps[i]);
                continue;
            }
            const long guard = poet_mb_checked_call(i, v);
            if (v == 0) {
                guard_ref = guard;
                memcpy(poet_mb_keep, poet_mb_mem, (size_t)poet_mb_mem_used[i] * sizeof(float));
                continue;
            }
            long diff = -1;
            for (int32_t e = 0; e < poet_mb_mem_used[i] && diff < 0; ++e)
                if (memcmp(&poet_mb_keep[e], &poet_mb_mem[e], sizeof(float)) != 0) diff = (long)e;
            printf("compare %ld equal %d first_diff %ld guards %ld %ld\n", (long)i, diff < 0, diff, guard_ref,
                   guard);
            fflush(stdout); /* a sanitizer stops the run without flushing: the lines so far name the case */
        }
    }
    return 0;
}
"""


def _main(
    cases: Sequence[KernelCase],
    lays: Sequence[Layout],
    variants: Sequence[str],
    reps: Sequence[int],
    compare: bool,
) -> str:
    mem, nl = _sizes(lays, cases)
    protos = [f"void poet_mb_{v}_{i}(void);" for v in variants for i in range(len(cases))]
    table = ",\n".join(
        "    {" + ", ".join(f"poet_mb_{v}_{i}" for v in variants) + "}" for i in range(len(cases))
    )
    outputs = [
        [(lay.offsets[k], c.tensors[k]) for k in c.outputs] for c, lay in zip(cases, lays, strict=True)
    ]
    classes = ", ".join(str(max(1, c.label_classes)) for c in cases)
    used = [str(lay.floats) for lay in lays]
    names = ", ".join(f'"{v}"' for v in variants)
    defs = [
        f"#define POET_MB_MEM {mem}",
        f"#define POET_MB_LABELS {nl}",
        f"#define POET_MB_CASES {len(cases)}",
        f"#define POET_MB_VARIANTS {len(variants)}",
        f"#define POET_MB_COMPARE {int(compare)}",
        '#define POET_MB_GUARD "\\xad\\xde\\xc0\\xff" /* a negative quiet NaN */',
        *_buffer_decls(lays, cases, ""),
        f"static float poet_mb_keep[{mem if compare else 1}];",
        *protos,
        "typedef void (*poet_mb_fn)(void);",
        f"static poet_mb_fn const poet_mb_cases[{len(cases)}][{len(variants)}] = {{\n{table}\n}};",
        f"static const char *const poet_mb_variants[{len(variants)}] = {{{names}}};",
        f"static const uint32_t poet_mb_reps[{len(cases)}] = {{{', '.join(map(str, reps))}}};",
        f"static const int32_t poet_mb_classes[{len(cases)}] = {{{classes}}};",
        f"static const int32_t poet_mb_mem_used[{len(cases)}] = {{{', '.join(used)}}};",
        _region_table("outputs", outputs),
        _region_table("guards", [lay.guards for lay in lays]),
    ]
    return _MAIN_HEAD + "\n" + "\n".join(defs) + "\n" + _MAIN_BODY


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
    """Builds and runs the program; a comparison is laid out with guard zones around every tensor. The run's
    exit code is the caller's to check."""
    if not cases:
        raise PoetError("no kernel cases to run")
    dup = sorted(name for name, k in Counter(c.name for c in cases).items() if k > 1)
    if dup:
        raise PoetError(f"kernel case names must be unique: {dup[:3]}")
    work.mkdir(parents=True, exist_ok=True)
    lays = [layout(c, compare) for c in cases]
    main = work / "mb_main.c"
    main.write_text(_main(cases, lays, variants, reps, compare))
    srcs = [main, *(KERNELS_DIR / f"{s}.c" for s in SHARED_SOURCES)]
    for v in variants:
        srcs += _variant_units(cases, lays, v, work)
    mem, labels = _sizes(lays, cases)
    need = 4 * (mem * (2 if compare else 1) + labels) + 64 * 1024
    ram = need if target.memory is None else min(target.memory.ram_max_bytes, need)
    built = targets.build(target, srcs, [work], work / "build", ram, sanitize=sanitize)
    return targets.run(target, built, work, timeout_s=1800.0)


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
    if res.exit_code != 0:
        raise PoetError(f"kernel benchmark on {target.name} exited with {res.exit_code}: {res.stdout[-400:]}")
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


@dataclass(frozen=True)
class Comparison:
    """What a comparison found, per case name: ``first_diff`` -1 where the fast kernel's arena is
    bit-identical to the reference's, else the first differing element; ``guards`` the first guard element
    the reference and the fast kernel wrote (-1: none); ``stopped`` one line per case that stopped its run
    (a sanitizer error or a fault: the case and the error's lines), which has no other result."""

    first_diff: dict[str, int]
    guards: dict[str, tuple[int, int]]
    stopped: tuple[str, ...] = ()

    def failures(self) -> list[str]:
        """One line per case that differs, wrote outside its tensors or stopped the run."""
        out = [f"{name}: first differing element {at}" for name, at in self.first_diff.items() if at >= 0]
        for name, (ref, fast) in self.guards.items():
            for variant, at in (("reference", ref), ("fast", fast)):
                if at >= 0:
                    out.append(f"{name}: the {variant} kernel wrote outside its tensors (guard element {at})")
        return out + list(self.stopped)


def _error_lines(text: str) -> str:
    keep = [
        ln.strip()
        for ln in text.splitlines()
        if "ERROR: AddressSanitizer" in ln
        or "runtime error:" in ln
        or ln.startswith("SUMMARY:")
        or " in poet_" in ln
    ]
    return " | ".join(keep[:6]) or text.strip()[-400:]


def compare_all(
    target_name: str,
    cases: Sequence[KernelCase],
    work: Path,
    sanitize: bool = False,
    max_stops: int = 20,
    per_build: int = 3000,
) -> Comparison:
    """Runs every case with the reference and the fast kernels on the same inputs, every tensor in its own
    guarded region of the arena (see :func:`layout`); ``sanitize`` builds with the target's sanitizer flags
    (host only), which also makes any access to a guard zone an AddressSanitizer error. At most
    ``per_build`` cases go into one program (a Cortex-M's flash holds a few thousand). A run that stops in
    a case is run again from the case after it, up to ``max_stops`` times in all (the rest are then
    reported as not run)."""
    target = targets.load_target(target_name)
    diff: dict[str, int] = {}
    guards: dict[str, tuple[int, int]] = {}
    stopped: list[str] = []
    for start in range(0, len(cases), per_build):
        todo = list(cases[start : start + per_build])
        while todo and len(stopped) < max_stops:
            res = _build(target, todo, VARIANTS, Path(work), [1] * len(todo), compare=True, sanitize=sanitize)
            done = 0
            for m in _EQUAL.finditer(res.stdout):
                name = todo[int(m.group(1))].name
                diff[name] = int(m.group(3))
                guards[name] = (int(m.group(4)), int(m.group(5)))
                done = max(done, int(m.group(1)) + 1)
            if res.exit_code == 0 and done == len(todo):
                break
            at = todo[done].name if done < len(todo) else "(after the last case)"
            why = _error_lines(res.stderr + res.stdout)
            stopped.append(f"{at}: the run on {target.name} stopped (exit code {res.exit_code}): {why}")
            todo = todo[done + 1 :]
    missing = len(cases) - len(diff) - len(stopped)
    if missing > 0:
        stopped.append(f"{missing} cases not run after {max_stops} stopped runs")
    return Comparison(diff, guards, tuple(stopped))


def compare_variants(
    target_name: str, cases: Sequence[KernelCase], work: Path, sanitize: bool = False
) -> dict[str, int]:
    """Runs every case with the reference and the fast kernels on the same inputs; returns, per case name,
    -1 when the outputs are bit-identical, else the index of the first differing output element. A kernel
    that writes outside its tensors, or a run a sanitizer stops, is raised as PoetError. ``sanitize`` builds
    with the target's sanitizer flags (host only)."""
    found = compare_all(target_name, cases, work, sanitize)
    bad = [f for f in found.failures() if "first differing element" not in f]
    if bad:
        raise PoetError(f"kernel comparison on {target_name}: {'; '.join(bad[:5])}")
    return found.first_diff
