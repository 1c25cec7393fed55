"""Byte sizes on the command line. KB, MB are binary (1 KB = 1024 bytes, the embedded convention), as are
KiB and MiB; plain numbers are bytes."""

from __future__ import annotations

import re

from poet_edge.errors import PoetError

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


def fmt_bytes(n: int | float) -> str:
    n = int(n)
    return f"{n} B ({n / 1024:.1f} KiB)" if n >= 1024 else f"{n} B"
