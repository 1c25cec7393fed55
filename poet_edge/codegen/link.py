"""Which runtime kernel sources a project links, read from the kernels themselves.

An op's :class:`~poet_edge.ops.base.KernelCall` names the source that defines its function
(``runtime_c/src/kernels/<source>.c``, or its fast variant in ``src/optimized/``); what that file calls in
turn is read from the file: a call to a function another kernel source defines publicly makes that
source part of the link. There is no hand-kept list: the fast convolution's calls of ``poet_gemm_f32`` bring
gemm.c into a project, the reference convolution, which calls no GEMM, does not; the weight gradient's
row-tile part kernel (conv_part.c) brings conv.c and, fast, its call of ``poet_gemm_part_f32`` gemm_part.c,
only into a project that runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from poet_edge.errors import PoetError
from poet_edge.paths import RUNTIME_C

KERNELS_DIR = RUNTIME_C / "src" / "kernels"  # every kernel source: <source>.c
OPTIMIZED_DIR = RUNTIME_C / "src" / "optimized"  # the fast variants of some of them
KERNELS_H = RUNTIME_C / "include" / "poet" / "kernels.h"  # the functions kernel sources define for others
KERNEL_VARIANTS = ("fast", "reference")
SHARED_SOURCES = ("math",)  # helpers (poet_expf, poet_tanhf...) both variants call: math.c has no variant

# comments, string and character literals (blanked before reading calls and definitions)
_NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_NAMED = re.compile(r"\b(poet_\w+)\s*\(")
# the parameters and body of a function definition (after its name)
_BODY = re.compile(r"\s*\([^;{}]*\)\s*\{")


def kernel_file(name: str, variant: str = "fast") -> Path:
    """The C file a project gets for kernel source ``name``: runtime_c/src/optimized/<name>.c for
    ``fast`` when it exists (same symbols, bit-identical results), else runtime_c/src/kernels/<name>.c."""
    if variant not in KERNEL_VARIANTS:
        raise PoetError(f"unknown kernel set '{variant}'; choose {' or '.join(KERNEL_VARIANTS)}")
    fast = OPTIMIZED_DIR / f"{name}.c"
    return fast if variant == "fast" and fast.is_file() else KERNELS_DIR / f"{name}.c"


def _code(path: Path) -> str:
    """The C text of ``path`` without comments and literals (a function named there is not called)."""
    return _NOISE.sub(lambda m: " " if m.group(0).startswith("/") else '""', path.read_text())


@cache
def api() -> frozenset[str]:
    """The functions kernels.h declares: the only ones a kernel source defines for others."""
    return frozenset(_NAMED.findall(_code(KERNELS_H)))


@cache
def definitions(path: Path) -> frozenset[str]:
    """The kernels.h functions ``path`` defines."""
    text = _code(path)
    return frozenset(
        m.group(1) for m in _NAMED.finditer(text) if m.group(1) in api() and _BODY.match(text, m.end(1))
    )


@cache
def calls(path: Path) -> frozenset[str]:
    """The kernels.h functions ``path`` calls and does not define."""
    return frozenset(_NAMED.findall(_code(path))) & api() - definitions(path)


@cache
def owners() -> dict[str, str]:
    """kernels.h function -> the kernel source that defines it (every source has a reference file; its
    fast variant defines the same functions)."""
    out: dict[str, str] = {}
    for path in sorted(KERNELS_DIR.glob("*.c")):
        for func in definitions(path):
            if func in out:
                raise PoetError(f"{func} is defined by both {out[func]}.c and {path.name}")
            out[func] = path.stem
    return out


def callees(source: str, variant: str) -> frozenset[str]:
    """The kernel sources whose functions ``source``'s file in ``variant`` calls."""
    own = owners()
    return frozenset(own[f] for f in calls(kernel_file(source, variant))) - {source}


def closure(sources: Iterable[str], variants: Iterable[str] = ("fast",)) -> list[str]:
    """``sources`` and every kernel source their files in ``variants`` call, directly or not, sorted."""
    kinds = tuple(variants)
    todo, seen = list(sources), set(sources)
    for s in seen:
        if not KERNELS_DIR.joinpath(f"{s}.c").is_file():
            raise PoetError(f"no kernel source runtime_c/src/kernels/{s}.c")
    while todo:
        source = todo.pop()
        for d in sorted(set().union(*(callees(source, v) for v in kinds)) - seen):
            seen.add(d)
            todo.append(d)
    return sorted(seen)


def check_defines(func: str, source: str) -> None:
    """Raise PoetError unless kernel source ``source`` defines ``func`` (in every variant)."""
    for v in KERNEL_VARIANTS:
        if func not in definitions(kernel_file(source, v)):
            raise PoetError(f"{func} is not defined by {kernel_file(source, v).relative_to(RUNTIME_C)}")
