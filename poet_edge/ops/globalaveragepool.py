"""GlobalAveragePool(X[N, C, *spatial]) -> Y[N, C, 1, ...] and GlobalAveragePoolGrad(dY) -> dX = dY / S
broadcast over the S spatial positions."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes, per_sample_always
from poet_edge.ops.pool_common import with_shape
from poet_edge.work import OpClass, Work


def _ncs(x) -> tuple[int, int]:
    """(N * C, S) of a [N, C, *spatial] shape."""
    if len(x) < 3:
        raise ValueError(f"GlobalAveragePool needs [N, C, spatial...], got {tuple(x)}")
    return int(x[0]) * int(x[1]), elements(tuple(x[2:]))


def infer(shapes, attrs):
    _ncs(shapes[0])
    return [tuple(shapes[0][:2]) + (1,) * (len(shapes[0]) - 2)]


def forward(xs, attrs):
    x = xs[0]
    nc, s = _ncs(x.shape)
    y = x.reshape(nc, s).sum(axis=1) / x.dtype.type(s)
    return [y.astype(x.dtype).reshape(infer([x.shape], attrs)[0])]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    return [gb.emit("GlobalAveragePoolGrad", (gys[0],), with_shape({}, "x_shape", gb.shape(node.inputs[0])))]


def work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    nc, s = _ncs(shape(node.inputs[0]))
    x, y = TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False)
    return KernelCall("poet_global_avgpool_f32", (x, y, IntArg(nc), IntArg(s)), "pool")


def grad_infer(shapes, attrs):
    return [tuple(attrs["x_shape"])]


def grad_forward(xs, attrs):
    dy = xs[0]
    nc, s = _ncs(tuple(attrs["x_shape"]))
    dx = np.broadcast_to((dy.reshape(nc, 1) / dy.dtype.type(s)), (nc, s))
    return [np.array(dx, dtype=dy.dtype).reshape(tuple(attrs["x_shape"]))]


def grad_work(ins, outs, attrs):
    return Work(
        OpClass.ELEMENTWISE,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


def grad_kernel(node, shape):
    nc, s = _ncs(tuple(node.attrs["x_shape"]))
    dy, dx = TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False)
    return KernelCall("poet_global_avgpool_grad_f32", (dy, dx, IntArg(nc), IntArg(s)), "pool")


OP = OpDef(
    "GlobalAveragePool",
    infer,
    forward,
    work,
    backward,
    kernel,
    per_channel=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "GlobalAveragePoolGrad",
    grad_infer,
    grad_forward,
    grad_work,
    None,
    grad_kernel,
    internal=True,
    per_channel=True,
)
