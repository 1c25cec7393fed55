"""Byte sizes and relative gaps on the command line. KB, MB are binary (1 KB = 1024 bytes, the embedded
convention), as are KiB and MiB; plain numbers are bytes. A gap is a fraction (0.01) or a percentage (1%)."""

from __future__ import annotations

import re

from poet_edge.errors import PoetError

ALIGN = 16  # bytes: every arena offset and every RAM array is a multiple of this


def align(n: int, a: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``a``."""
    return (n + a - 1) // a * a


_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1024**3,
    "GIB": 1024**3,
}

SIZE_HELP = "bytes; suffixes KB/KiB = 1024 and MB/MiB = 1024² bytes (e.g. 256KB, 0.25MB, 262144)"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise PoetError(f"cannot read size '{text}': use {SIZE_HELP}")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value != int(value) or value <= 0:
        raise PoetError(f"size '{text}' is not a positive whole number of bytes")
    return int(value)


RAM_HELP = (
    f"{SIZE_HELP}; RAM banks joined by '+' (e.g. 128KB+64KB: the first bank holds the stack, heap, "
    "parameters and inputs and part of the arena, later banks more of the arena; no array spans two)"
)


MAX_BANKS = 2  # the arena's buffers: poet_arena, poet_arena_ccm (codegen.emit.ARENA_SYMBOLS)


def parse_ram(text: str) -> tuple[int, ...]:
    """``--ram``: one size, or the sizes of RAM banks joined by ``+`` (``128KB+64KB``), in link order."""
    parts = str(text).split("+")
    if len(parts) > 1 and any(not p.strip() for p in parts):
        raise PoetError(f"cannot read RAM banks '{text}': give sizes joined by '+', e.g. 128KB+64KB")
    if len(parts) > MAX_BANKS:
        raise PoetError(f"--ram '{text}': at most {MAX_BANKS} RAM banks (e.g. 128KB+64KB)")
    return tuple(parse_size(p) for p in parts)


def fmt_bytes(n: int | float) -> str:
    n = int(n)
    return f"{n} B ({n / 1024:.1f} KiB)" if n >= 1024 else f"{n} B"


GAP_FORMS = "a fraction or a percentage, e.g. 0.01 or 1%"
GAP_HELP = (  # argparse help (its % doubled)
    "stop once the schedule is proven within this of the lower bound: (cost - bound) / cost, the gap "
    "plan.json reports; e.g. 1%% or 0.01 (default: 0.01%% for scale, 0.0001%% for milp; a wider gap "
    "ends the solve sooner)"
)


def parse_gap(text: str) -> float:
    """A relative gap in [0, 1): ``0.01`` or ``1%``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*", str(text))
    if not m:
        raise PoetError(f"cannot read gap '{text}': use {GAP_FORMS}")
    value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if value >= 1.0:
        raise PoetError(f"gap '{text}' must be below 1 (100%): it is a fraction of the schedule's cost")
    return value
