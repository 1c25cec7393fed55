"""MaxPool (1-D/2-D; kernel_shape, strides, pads / auto_pad; ceil_mode 0 or 1, dilation 1, no Indices output)
and MaxPoolGrad(X, dY) -> dX, which recomputes each window's argmax from X: the first maximum in row-major
window order (ties -> first index; padding never wins), the same rule in numpy and C. Overlapping windows
add their gradients into dX. ceil_mode=1 only changes the output size (pool_common._out_size): the last
window is clipped at the input's edge like a padded one, so the same loops serve both modes."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import ANY, KernelCall, OpDef, TensorArg, no_effect, unsupported
from poet_edge.ops.pool_common import WINDOW_ATTRIBUTES, Window, pool_window, pool_work


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
    return [tuple(shapes[0])]


def grad_forward(xs, attrs):
    x, dy = xs
    win = pool_window(x.shape, attrs)
    _, idx = argmax(win, x.reshape(win.x4))
    dx = np.zeros((win.n * win.c, win.h * win.w), dtype=dy.dtype)
    rows = np.repeat(np.arange(win.n * win.c), win.oh * win.ow)
    np.add.at(dx, (rows, idx.reshape(-1)), dy.reshape(-1))  # in output order, as the C kernel
    return [dx.reshape(x.shape)]


def grad_kernel(node, shape):
    win = pool_window(shape(node.inputs[0]), node.attrs)
    return KernelCall(
        "poet_maxpool2d_grad_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), TensorArg(node.outputs[0], False), win.ints()),
        "maxpool",
    )


ATTRIBUTES = {
    **WINDOW_ATTRIBUTES,
    "ceil_mode": ANY,
    "storage_order": no_effect("it orders only the Indices output, which is refused"),
}
OP = OpDef("MaxPool", infer, forward, work, backward, kernel, check, attributes=ATTRIBUTES, per_channel=True)
GRAD = OpDef(
    "MaxPoolGrad", grad_infer, grad_forward, work, None, grad_kernel, internal=True, per_channel=True
)
