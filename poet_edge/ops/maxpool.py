"""MaxPool (1-D/2-D; kernel_shape, strides, pads / auto_pad; ceil_mode 0 or 1, dilation 1, no Indices output)
and MaxPoolGrad(X, dY) -> dX, which recomputes each window's argmax from X: the first maximum in row-major
window order (ties -> first index; padding never wins), the same rule in numpy and C. Overlapping windows
add their gradients into dX. ceil_mode=1 only changes the output size (pool_common._out_size): the last
window is clipped at the input's edge like a padded one, so the same loops serve both modes. A row part of
MaxPoolGrad (operator splitting) reads a window of X's rows and writes only dX's rows ``rows`` of it."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    IntArg,
    KernelCall,
    OpDef,
    TensorArg,
    no_effect,
    per_sample_always,
    unsupported,
)
from poet_edge.ops.pool_common import WINDOW_ATTRIBUTES, Window, kept_rows, pool_window, pool_work


def argmax(win: Window, x4: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max value, flat index h * W + w of the first maximum) of every window, each [N, C, OH, OW]."""
    best = np.zeros(win.y4, dtype=x4.dtype)
    idx = np.zeros(win.y4, dtype=np.int64)
    found = np.zeros((win.oh, win.ow), dtype=bool)
    for i in range(win.kh):
        r, rv = win.rows(i)
        for j in range(win.kw):
            c, cv = win.cols(j)
            v = x4[:, :, r][:, :, :, c]
            valid = rv[:, None] & cv[None, :]
            take = valid & (~found | (v > best))  # C: if (!found || v > best)
            best = np.where(take, v, best)
            idx = np.where(take, r[:, None] * win.w + c[None, :], idx)
            found |= valid
    return best, idx


def infer(shapes, attrs):
    return [pool_window(shapes[0], attrs).y_shape]


def forward(xs, attrs):
    x = xs[0]
    win = pool_window(x.shape, attrs)
    return [argmax(win, x.reshape(win.x4))[0].reshape(win.y_shape)]


def backward(gb, node, gys, needs):
    return [gb.emit("MaxPoolGrad", (node.inputs[0], gys[0]), node.attrs) if needs[0] else None]


work = pool_work


def kernel(node, shape):
    win = pool_window(shape(node.inputs[0]), node.attrs)
    return KernelCall(
        "poet_maxpool2d_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), win.ints()),
        "maxpool",
    )


def check(node):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise unsupported(node, f"output Indices '{node.outputs[1]}' (only output Y is implemented)")


def grad_infer(shapes, attrs):
    x = tuple(shapes[0])
    if "rows" not in attrs:
        return [x]
    r0, r1 = kept_rows(attrs, pool_window(x, attrs).along_rows().h)
    return [(*x[:2], r1 - r0, *x[3:])]


def grad_forward(xs, attrs):
    """dX of X's windows; with ``rows`` (r0, r1) (a row part, splitting.py), only dX's rows [r0, r1)."""
    x, dy = xs
    win = pool_window(x.shape, attrs)
    _, idx = argmax(win, x.reshape(win.x4))
    dx = np.zeros((win.n * win.c, win.h * win.w), dtype=dy.dtype)
    rows = np.repeat(np.arange(win.n * win.c), win.oh * win.ow)
    np.add.at(dx, (rows, idx.reshape(-1)), dy.reshape(-1))  # in output order, as the C kernel
    rw = win.along_rows()  # a 1-D window's rows are its length
    r0, r1 = kept_rows(attrs, rw.h)
    return [dx.reshape(rw.x4)[:, :, r0:r1].reshape(grad_infer([x.shape], attrs)[0])]


def grad_kernel(node, shape):
    win = pool_window(shape(node.inputs[0]), node.attrs)
    if "rows" in node.attrs:  # a row part: the kernel keeps rows of H, a 1-D window's length as H
        win = win.along_rows()
    r0, r1 = kept_rows(node.attrs, win.h)
    dx = TensorArg(node.outputs[0], False)
    return KernelCall(
        "poet_maxpool2d_grad_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), dx, win.ints(), IntArg(r0), IntArg(r1)),
        "maxpool",
    )


ATTRIBUTES = {
    **WINDOW_ATTRIBUTES,
    "ceil_mode": ANY,
    "storage_order": no_effect("it orders only the Indices output, which is refused"),
}
OP = OpDef(
    "MaxPool",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    attributes=ATTRIBUTES,
    per_channel=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "MaxPoolGrad", grad_infer, grad_forward, work, None, grad_kernel, internal=True, per_channel=True
)
