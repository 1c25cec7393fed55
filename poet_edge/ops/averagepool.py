"""AveragePool (1-D/2-D; kernel_shape, strides, pads / auto_pad, count_include_pad 0 or 1; ceil_mode 0,
dilation 1) and AveragePoolGrad(dY) -> dX: each output's gradient divided by its window's count, added to
the window's inputs (overlapping windows accumulate). A row part of AveragePoolGrad (operator splitting)
computes the gradient of a window of rows (``x_shape``) and writes only its rows ``rows``."""

from __future__ import annotations

from typing import cast

import numpy as np

from poet_edge.ops.base import ANY, IntArg, KernelCall, OpDef, TensorArg, only, per_sample_always
from poet_edge.ops.pool_common import WINDOW_ATTRIBUTES, Window, kept_rows, pool_window, pool_work, with_shape


def _include_pad(attrs) -> int:
    return int(attrs.get("count_include_pad", 0))


def counts(win: Window, attrs) -> np.ndarray:
    """Divisor of each output position [OH, OW]: the window size, or its inputs inside the image."""
    if _include_pad(attrs):
        return np.full((win.oh, win.ow), win.kh * win.kw, dtype=np.int64)
    rows = cast(np.ndarray, sum(win.rows(i)[1].astype(np.int64) for i in range(win.kh)))
    cols = cast(np.ndarray, sum(win.cols(j)[1].astype(np.int64) for j in range(win.kw)))
    return rows[:, None] * cols[None, :]


def _taps(win: Window):
    for i in range(win.kh):
        r, rv = win.rows(i)
        for j in range(win.kw):
            c, cv = win.cols(j)
            yield r, c, rv[:, None] & cv[None, :]


def infer(shapes, attrs):
    return [pool_window(shapes[0], attrs).y_shape]


def forward(xs, attrs):
    x = xs[0]
    win = pool_window(x.shape, attrs)
    x4 = x.reshape(win.x4)
    acc = np.zeros(win.y4, dtype=x.dtype)
    for r, c, valid in _taps(win):
        acc += np.where(valid, x4[:, :, r][:, :, :, c], 0)
    return [(acc / counts(win, attrs).astype(x.dtype)).astype(x.dtype).reshape(win.y_shape)]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    attrs = with_shape(node.attrs, "x_shape", gb.shape(node.inputs[0]))
    return [gb.emit("AveragePoolGrad", (gys[0],), attrs)]


work = pool_work


def kernel(node, shape):
    win = pool_window(shape(node.inputs[0]), node.attrs)
    return KernelCall(
        "poet_avgpool2d_f32",
        (
            TensorArg(node.inputs[0]),
            TensorArg(node.outputs[0], False),
            win.ints(),
            IntArg(_include_pad(node.attrs)),
        ),
        "pool",
    )


def grad_infer(shapes, attrs):
    x = tuple(attrs["x_shape"])
    if "rows" not in attrs:
        return [x]
    r0, r1 = kept_rows(attrs, pool_window(x, attrs).along_rows().h)
    return [(*x[:2], r1 - r0, *x[3:])]


def grad_forward(xs, attrs):
    """dX of the window ``x_shape``; with ``rows`` (r0, r1) (a row part, splitting.py), its rows [r0, r1)."""
    dy = xs[0]
    win = pool_window(tuple(attrs["x_shape"]), attrs)
    g = dy.reshape(win.y4) / counts(win, attrs).astype(dy.dtype)
    dx = np.zeros(win.x4, dtype=dy.dtype)
    for r, c, valid in _taps(win):
        idx = (slice(None), slice(None), r[:, None], c[None, :])
        np.add.at(dx, idx, np.where(valid, g, 0))  # type: ignore[arg-type]  # numpy stubs reject tuple indices
    rw = win.along_rows()  # a 1-D window's rows are its length
    r0, r1 = kept_rows(attrs, rw.h)
    return [dx.reshape(rw.x4)[:, :, r0:r1].reshape(grad_infer([], attrs)[0])]


def grad_work(ins, outs, attrs):
    return work([tuple(attrs["x_shape"])], outs, attrs)


def grad_kernel(node, shape):
    win = pool_window(tuple(node.attrs["x_shape"]), node.attrs)
    if "rows" in node.attrs:  # a row part: the kernel keeps rows of H, a 1-D window's length as H
        win = win.along_rows()
    dy, dx = TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False)
    include = IntArg(_include_pad(node.attrs))
    r0, r1 = kept_rows(node.attrs, win.h)
    return KernelCall(
        "poet_avgpool2d_grad_f32", (dy, dx, win.ints(), include, IntArg(r0), IntArg(r1)), "pool"
    )


ATTRIBUTES = {**WINDOW_ATTRIBUTES, "ceil_mode": only(0), "count_include_pad": ANY}
OP = OpDef(
    "AveragePool",
    infer,
    forward,
    work,
    backward,
    kernel,
    attributes=ATTRIBUTES,
    per_channel=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "AveragePoolGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True, per_channel=True
)
