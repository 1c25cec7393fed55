"""Channel tiles of a convolution and of its input gradient (operator splitting, poet_edge/splitting.py).

``ConvPart(X_j, W, [B], [P])`` computes output channels ``[m_lo, m_hi)`` of a Conv from its input channels
``[c_lo, c_hi)`` (attribute ``tile``): X_j holds only those input channels, W is the whole weight, P (when
``partial`` is set) the sums of the channels before ``c_lo`` (the previous tile's output) and B (when
``bias`` is set) the whole bias, added by the last tile. Chained over ascending input tiles, the parts give
the unsplit Conv's bits: the C kernel's accumulator starts at P and adds the products in the reference order
(runtime_c/src/kernels/conv.c). ``ConvGradInputPart(dY_t, W, [P])`` does the same for the input gradient:
input channels ``[c_lo, c_hi)`` of dX summed over output-gradient channels ``[m_lo, m_hi)``. Attribute
``x_shape`` is the whole convolution's input shape; the window geometry passed to C is the whole conv's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from poet_edge.kernel_model import part_weight
from poet_edge.ops.base import IntArrayArg, KernelCall, NullArg, OpDef, TensorArg, f32_bytes
from poet_edge.ops.conv import conv_window, grad_input_forward, op_class
from poet_edge.ops.conv import forward as conv_forward
from poet_edge.ops.pool_common import Window
from poet_edge.work import Work


def tile(attrs) -> tuple[int, int, int, int]:
    """(c_lo, c_hi, m_lo, m_hi) of a part."""
    c_lo, c_hi, m_lo, m_hi = (int(v) for v in attrs["tile"])
    return c_lo, c_hi, m_lo, m_hi


def whole(attrs, w: Sequence[int]) -> Window:
    """The unsplit convolution's window, from attribute ``x_shape`` and the whole weight shape ``w``."""
    return conv_window(tuple(attrs["x_shape"]), tuple(w), attrs)


def _channels(shape: Sequence[int], n: int) -> tuple[int, ...]:
    return (int(shape[0]), n, *(int(d) for d in shape[2:]))


def _optional(node, first: int) -> tuple[str | None, str | None]:
    """(B or None, P or None) from the inputs after ``first`` by the ``bias`` / ``partial`` attributes."""
    rest = list(node.inputs[first:])
    b = rest.pop(0) if node.attr("bias", False) else None
    p = rest.pop(0) if node.attr("partial", False) else None
    return b, p


def _macs(win: Window, c_lo: int, c_hi: int, m_lo: int, m_hi: int) -> int:
    """Multiply-adds of the tile: for each output channel, the input channels of its group in the tile."""
    mg, cg = win.m // win.groups, win.c // win.groups
    pairs = 0
    for m in range(m_lo, m_hi):
        g = m // mg
        pairs += max(0, min(c_hi, (g + 1) * cg) - max(c_lo, g * cg))
    return win.n * win.oh * win.ow * win.kh * win.kw * pairs


def _work(win: Window, t: tuple[int, int, int, int], ins, outs, kind: str) -> Work:
    """Priced by the part kernel's own block structure on its tile (kernel_model.part_tally): a small tile
    costs more per MAC than its whole convolution. P is the last input, shaped as the output."""
    macs = _macs(win, *t)
    partial = len(ins) > 2 and tuple(ins[-1]) == tuple(outs[0])
    return Work(
        op_class(win),
        macs=macs,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=part_weight(win, t, kind, partial, macs),
    )


def _embed(x: np.ndarray, total: int, lo: int) -> np.ndarray:
    """A tile of channels placed at ``lo`` in a zero tensor of ``total`` channels."""
    full = np.zeros(_channels(x.shape, total), dtype=x.dtype)
    full[:, lo : lo + x.shape[1]] = x
    return full


# ---- ConvPart(X_j, W, [B], [P]) -> Y_t -----------------------------------------------------------------
def _checked(shapes, attrs, forward: bool) -> list[tuple[int, ...]]:
    """The part's output shape; ValueError when the tile or the operand tile does not fit the conv."""
    win = whole(attrs, shapes[1])
    c_lo, c_hi, m_lo, m_hi = tile(attrs)
    if not (0 <= c_lo < c_hi <= win.c and 0 <= m_lo < m_hi <= win.m):
        raise ValueError(f"tile {tile(attrs)} outside the conv's {win.c} input / {win.m} output channels")
    (src, lo, hi), out = (
        ((win.x_shape, c_lo, c_hi), (win.y_shape, m_hi - m_lo))
        if forward
        else (
            (win.y_shape, m_lo, m_hi),
            (win.x_shape, c_hi - c_lo),
        )
    )
    if tuple(shapes[0]) != _channels(src, hi - lo):
        raise ValueError(f"operand tile {tuple(shapes[0])} does not hold channels [{lo}, {hi})")
    return [_channels(*out)]


def infer(shapes, attrs):
    return _checked(shapes, attrs, forward=True)


def forward(xs, attrs):
    x, w = xs[0], xs[1]
    win = whole(attrs, w.shape)
    c_lo, _, m_lo, m_hi = tile(attrs)
    y = conv_forward([_embed(x, win.c, c_lo), w], attrs)[0][:, m_lo:m_hi]
    rest = list(xs[2:])
    b = rest.pop(0) if attrs.get("bias", False) else None
    if attrs.get("partial", False):
        y = rest.pop(0) + y
    if b is not None:
        y = y + b[m_lo:m_hi].reshape(1, -1, *([1] * (y.ndim - 2)))
    return [np.ascontiguousarray(y).astype(x.dtype)]


def work(ins, outs, attrs):
    return _work(whole(attrs, ins[1]), tile(attrs), ins, outs, "forward")


def _call(func: str, node, shape, bias: bool) -> KernelCall:
    """(operand, W, [B,] P, out, geometry, tile): the two part kernels' shared argument list."""
    win = whole(node.attrs, shape(node.inputs[1]))
    b, p = _optional(node, 2)
    optional = ([TensorArg(b) if b else NullArg()] if bias else []) + [TensorArg(p) if p else NullArg()]
    head = (TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), *optional)
    tail = (TensorArg(node.outputs[0], False), win.ints(), IntArrayArg(tile(node.attrs)))
    return KernelCall(func, (*head, *tail), "conv")


def kernel(node, shape):
    return _call("poet_conv2d_part_f32", node, shape, bias=True)


# ---- ConvGradInputPart(dY_t, W, [P]) -> dX_j -------------------------------------------------------------
def grad_infer(shapes, attrs):
    return _checked(shapes, attrs, forward=False)


def grad_forward(xs, attrs):
    dy, w = xs[0], xs[1]
    win = whole(attrs, w.shape)
    c_lo, c_hi, m_lo, _ = tile(attrs)
    full = {**attrs, "x_shape": win.x_shape}
    dx = grad_input_forward([_embed(dy, win.m, m_lo), w], full)[0][:, c_lo:c_hi]
    if attrs.get("partial", False):
        dx = xs[2] + dx
    return [np.ascontiguousarray(dx).astype(dy.dtype)]


def grad_work(ins, outs, attrs):
    return _work(whole(attrs, ins[1]), tile(attrs), ins, outs, "grad_input")


def grad_kernel(node, shape):
    return _call("poet_conv2d_grad_input_part_f32", node, shape, bias=False)


OP = OpDef("ConvPart", infer, forward, work, None, kernel, internal=True)
GRAD_INPUT = OpDef("ConvGradInputPart", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True)
