"""Window geometry shared by Conv, MaxPool, AveragePool and their gradients.

ONNX tensors are NCHW (2-D) or NCL (1-D); a 1-D window is computed as a 2-D one with H = KH = 1, so every
numpy function and C kernel works on 4-D data. The resolved geometry reaches C as one int32 array whose
layout is ``Window.ints`` = the ``POET_WIN_*`` enum in runtime_c/include/poet/kernels.h.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from poet_edge.ops.base import ANY, Attr, Attrs, IntArrayArg, Shape, f32_bytes, only
from poet_edge.work import OpClass, Work

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
# the ONNX attributes every window op handles (Conv, MaxPool and AveragePool add theirs)
WINDOW_ATTRIBUTES = {
    "auto_pad": only(*AUTO_PADS),
    "dilations": Attr(lambda v: all(int(d) == 1 for d in cast(Iterable[int], v)), "1 on every axis"),
    "kernel_shape": ANY,
    "pads": ANY,
    "strides": ANY,
}


@dataclass(frozen=True)
class Window:
    n: int
    c: int  # input channels
    h: int
    w: int
    m: int  # output channels (= c for pools)
    kh: int
    kw: int
    oh: int
    ow: int
    sh: int
    sw: int
    pt: int  # top / left / bottom / right padding
    pl: int
    pb: int
    pr: int
    groups: int
    spatial_rank: int  # of the ONNX tensors: 1 or 2

    def along_rows(self) -> Window:
        """The window with its rows on axis 2 of the tensors (the H axis): itself when 2-D; a 1-D window
        (whose length is W, H = 1) as the 2-D window on [N, C, L, 1], the same memory. Row parts
        (operator splitting) cut axis 2, so a 1-D window's row part is a range of its length, and a kernel
        given this window's geometry sums the same taps in the same order as the 1-D one."""
        if self.spatial_rank == 2:
            return self
        rows = {"h": self.w, "kh": self.kw, "oh": self.ow, "sh": self.sw, "pt": self.pl, "pb": self.pr}
        return replace(self, **rows, w=1, kw=1, ow=1, sw=1, pl=0, pr=0, spatial_rank=2)

    def row_pads(self, top: int, bottom: int) -> tuple[int, ...]:
        """ONNX ``pads`` of this window with ``top`` / ``bottom`` rows along axis 2 (:meth:`along_rows`)
        instead of its own, the columns' kept."""
        return (top, self.pl, bottom, self.pr) if self.spatial_rank == 2 else (top, bottom)

    def ints(self) -> IntArrayArg:
        """The C geometry array (order = enum POET_WIN_* in kernels.h)."""
        return IntArrayArg(
            (
                self.n,
                self.c,
                self.h,
                self.w,
                self.m,
                self.kh,
                self.kw,
                self.oh,
                self.ow,
                self.sh,
                self.sw,
                self.pt,
                self.pl,
                self.groups,
            )
        )

    @property
    def x4(self) -> Shape:
        return (self.n, self.c, self.h, self.w)

    @property
    def y4(self) -> Shape:
        return (self.n, self.m, self.oh, self.ow)

    @property
    def x_shape(self) -> Shape:
        return self.x4 if self.spatial_rank == 2 else (self.n, self.c, self.w)

    @property
    def y_shape(self) -> Shape:
        return self.y4 if self.spatial_rank == 2 else (self.n, self.m, self.ow)

    def rows(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Input row read by kernel row ``i`` for every output row (clamped), and whether it is inside."""
        r = np.arange(self.oh) * self.sh - self.pt + i
        return np.clip(r, 0, self.h - 1), (r >= 0) & (r < self.h)

    def cols(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        c = np.arange(self.ow) * self.sw - self.pl + j
        return np.clip(c, 0, self.w - 1), (c >= 0) & (c < self.w)


def _ints(attrs: Attrs, key: str, default: Sequence[int], n: int) -> tuple[int, ...]:
    v = tuple(int(d) for d in cast(Iterable[int], attrs.get(key, default)))
    if len(v) != n:
        raise ValueError(f"attribute {key}={list(v)} needs {n} values")
    return v


def auto_pad(attrs: Attrs) -> str:
    v = attrs.get("auto_pad", "NOTSET")
    return v.decode() if isinstance(v, bytes) else str(v)


def _out_size(i: int, b: int, e: int, k: int, s: int, ceil: bool) -> int:
    """Output length of one axis. ceil_mode (ONNX, as onnxruntime and torch): the last window may run past
    the end padding (its taps there are skipped), but never starts past the input and the start padding."""
    if not ceil:
        return (i + b + e - k) // s + 1
    out = -(-(i + b + e - k) // s) + 1
    return out - 1 if (out - 1) * s >= i + b else out


def window(x: Shape, kernel: Sequence[int], attrs: Attrs, m: int | None = None, groups: int = 1) -> Window:
    """Resolves strides, pads and auto_pad for input shape ``x`` and spatial ``kernel``; ValueError if
    invalid."""
    rank = len(x) - 2
    if rank not in (1, 2):
        raise ValueError(f"only 1-D and 2-D windows are supported (input rank {len(x)}, shape {tuple(x)})")
    kernel = tuple(int(k) for k in kernel)
    if len(kernel) != rank or min(kernel) < 1:
        raise ValueError(f"kernel_shape {list(kernel)} does not fit input {tuple(x)}")
    if "kernel_shape" in attrs and _ints(attrs, "kernel_shape", (), rank) != kernel:
        raise ValueError(f"kernel_shape {list(attrs['kernel_shape'])} != weight kernel {list(kernel)}")  # type: ignore
    dil = _ints(attrs, "dilations", (1,) * rank, rank)
    if any(d != 1 for d in dil):
        raise ValueError(f"dilations={list(dil)} are not supported")
    strides = _ints(attrs, "strides", (1,) * rank, rank)
    if min(strides) < 1:
        raise ValueError(f"strides {list(strides)} must be positive")
    size = tuple(int(d) for d in x[2:])
    mode = auto_pad(attrs)
    if mode == "NOTSET":
        pads = _ints(attrs, "pads", (0,) * 2 * rank, 2 * rank)
        begin, end = pads[:rank], pads[rank:]
    elif mode == "VALID":
        begin = end = (0,) * rank
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        total = [max(0, (-(-i // s) - 1) * s + k - i) for i, s, k in zip(size, strides, kernel, strict=True)]
        begin = tuple(t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total)
        end = tuple(t - b for t, b in zip(total, begin, strict=True))
    else:
        raise ValueError(f"auto_pad {mode!r} is not supported")
    if min(begin + end) < 0:
        raise ValueError(f"negative pads {list(begin + end)}")
    ceil = bool(int(cast(int, attrs.get("ceil_mode", 0))))
    out = tuple(_out_size(*g, ceil) for g in zip(size, begin, end, kernel, strides, strict=True))
    if min(out) < 1:
        raise ValueError(f"kernel {list(kernel)} is larger than the padded input {tuple(x)}")
    if rank == 1:
        size, kernel, strides, out = ((1,) + t for t in (size, kernel, strides, out))
        begin, end = (0,) + begin, (0,) + end
    return Window(
        int(x[0]),
        int(x[1]),
        size[0],
        size[1],
        int(x[1]) if m is None else m,
        kernel[0],
        kernel[1],
        out[0],
        out[1],
        strides[0],
        strides[1],
        begin[0],
        begin[1],
        end[0],
        end[1],
        groups,
        rank,
    )


def pool_window(x: Shape, attrs: Attrs) -> Window:
    """Window of a pooling op: kernel from ``kernel_shape``; every pad smaller than the kernel (so every
    window holds at least one input element)."""
    if "kernel_shape" not in attrs:
        raise ValueError("kernel_shape is required")
    k = tuple(int(v) for v in cast(Iterable[int], attrs["kernel_shape"]))
    win = window(x, k, attrs)
    if max(win.pt, win.pb) >= win.kh or max(win.pl, win.pr) >= win.kw:
        raise ValueError(f"pads {[win.pt, win.pl, win.pb, win.pr]} must be smaller than the kernel {list(k)}")
    return win


def with_shape(attrs: Attrs, key: str, shape: Shape) -> dict[str, object]:
    """Forward attributes plus a shape the gradient op needs (the input's, which strides make ambiguous)."""
    return {**attrs, key: tuple(int(d) for d in shape)}


def pool_work(ins: Sequence[Shape], outs: Sequence[Shape], attrs: Attrs) -> Work:
    """Every window element is read once per output: the work of MaxPool and AveragePool."""
    win = pool_window(ins[0], attrs)
    return Work(
        OpClass.REDUCE,
        elements=win.n * win.c * win.oh * win.ow * win.kh * win.kw,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


# ---- row parts (operator splitting, poet_edge/splitting.py) ----------------------------------------------
def pool_x_shape(op: str, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
    """The pooled input's shape of a pool or pool gradient node: X's, or AveragePoolGrad's ``x_shape``."""
    if op == "AveragePoolGrad":
        return tuple(int(d) for d in cast(Iterable[int], attrs["x_shape"]))
    return tuple(shapes[0])


def _part_rows(
    x: Shape, attrs: Attrs, lo: int, hi: int, pads: tuple[int, int], rows: int
) -> dict[str, object]:
    """The pool's attributes on input rows [lo, hi) (axis 2) with top / bottom ``pads`` (columns and
    ceil_mode as the whole pool's); ValueError unless they give ``rows`` output rows."""
    win = pool_window(x, attrs)
    part = {**attrs, "auto_pad": "NOTSET", "pads": win.row_pads(*pads)}
    if pool_window((*x[:2], hi - lo, *x[3:]), part).along_rows().oh != rows:
        raise ValueError(f"input rows [{lo}, {hi}) of pool {dict(attrs)} do not give {rows} output rows")
    return part


def forward_rows(x: Shape, attrs: Attrs, a: int, b: int) -> tuple[int, int, dict[str, object]]:
    """For output rows [a, b) (axis 2: a 1-D pool's length) of a pool on input shape ``x``: the input rows
    [lo, hi) their windows read and the pool's attributes on that window (explicit pads: the whole pool's
    where the window reaches the edge, else 0; ceil_mode kept: it gives exactly b - a rows). Every output
    takes the same taps in the same order as unsplit, and the same count of taps inside the input."""
    win = pool_window(x, attrs).along_rows()
    top, end = a * win.sh - win.pt, (b - 1) * win.sh - win.pt + win.kh
    lo, hi = max(0, top), min(win.h, end)
    return lo, hi, _part_rows(x, attrs, lo, hi, (lo - top, end - hi), b - a)


def grad_rows(x: Shape, attrs: Attrs, a: int, b: int) -> tuple[int, int, int, int, dict[str, object]]:
    """For input-gradient rows [a, b) (axis 2) of a pool on input shape ``x``: the output (dY) rows
    [oa, ob) whose windows touch them, the input rows [lo, hi) those windows read (they hold [a, b)), and
    the gradient's attributes on that window: its pads, ``x_shape`` of the window's rows and ``rows``, the
    window's rows the part writes (a - lo, b - lo). Each dX element gets the same additions in the same
    order as unsplit. ValueError when a row of [a, b) above the last window lies outside every window
    (stride above kernel: rows no window reads)."""
    win = pool_window(x, attrs).along_rows()
    oa = max(0, -(-(a + win.pt - win.kh + 1) // win.sh))
    ob = min(win.oh, (b - 1 + win.pt) // win.sh + 1)
    top, end = oa * win.sh - win.pt, (ob - 1) * win.sh - win.pt + win.kh
    lo, hi = max(0, top), min(win.h, end)
    if ob == win.oh:  # the rows below the last window (fewer than a stride, as unsplit): dX 0
        hi = max(hi, b)
    if ob <= oa or lo > a or hi < b:
        raise ValueError(f"input rows [{a}, {b}) are not all read by the windows of a pool {attrs}")
    part = _part_rows(x, attrs, lo, hi, (lo - top, max(0, end - hi)), ob - oa)
    if "x_shape" in attrs:  # AveragePoolGrad's
        part["x_shape"] = (*x[:2], hi - lo, *x[3:])
    return oa, ob, lo, hi, {**part, "rows": (a - lo, b - lo)}


def output_spans(x: Shape, attrs: Attrs, bounds: Sequence[int]) -> list[tuple[int, int]]:
    """Output row ranges (axis 2) of a pool cut where the input's row tiles ``bounds`` start (output row o
    starts reading at o * sh - pt), so each range reads about one row tile and its halo."""
    win = pool_window(x, attrs).along_rows()
    cuts = (min(win.oh, max(0, -(-(r + win.pt) // win.sh))) for r in bounds[1:-1])
    edges = sorted({0, win.oh, *cuts})
    return list(zip(edges, edges[1:], strict=False))


def kept_rows(attrs: Attrs, h: int) -> tuple[int, int]:
    """The rows [r0, r1) of its input window a pool gradient writes (``rows``; all ``h`` when absent)."""
    r = tuple(int(v) for v in cast(Iterable[int], attrs.get("rows", (0, h))))
    if len(r) != 2 or not 0 <= r[0] < r[1] <= h:
        raise ValueError(f"rows {list(r)} must be a range within the {h} input rows")
    return r[0], r[1]
