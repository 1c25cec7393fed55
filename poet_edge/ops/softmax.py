"""Softmax along ``axis`` (opset >= 13 semantics: one axis, default -1) and its gradient
SoftmaxGrad(Y, dY) = Y * (dY - sum(dY * Y, axis))."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import ANY, IntArg, KernelCall, OpDef, TensorArg, elements, per_sample_axis


def norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def split3(shape, axis: int) -> tuple[int, int, int]:
    """(outer, n, inner): the shape seen as [outer, n, inner] around ``axis``."""
    a = norm_axis(axis, len(shape))
    return elements(tuple(shape[:a])), int(shape[a]), elements(tuple(shape[a + 1 :]))


def forward(xs, attrs):
    x = xs[0]
    a = norm_axis(int(attrs.get("axis", -1)), x.ndim)
    e = np.exp(x - x.max(axis=a, keepdims=True))
    return [(e / e.sum(axis=a, keepdims=True)).astype(x.dtype)]


def backward(gb, node, gys, needs):
    return [
        gb.emit("SoftmaxGrad", (node.outputs[0], gys[0]), {"axis": int(node.attr("axis", -1))})
        if needs[0]
        else None
    ]


def grad_forward(xs, attrs):
    y, dy = xs
    a = norm_axis(int(attrs.get("axis", -1)), y.ndim)
    return [(y * (dy - (dy * y).sum(axis=a, keepdims=True))).astype(dy.dtype)]


def _kernel(func):
    def kernel(node, shape):
        outer, n, inner = split3(shape(node.inputs[0]), int(node.attr("axis", -1)))
        args = [TensorArg(t) for t in node.inputs] + [TensorArg(node.outputs[0], False)]
        return KernelCall(func, (*args, IntArg(outer), IntArg(n), IntArg(inner)), "softmax")

    return kernel


def infer(shapes, attrs):
    norm_axis(int(attrs.get("axis", -1)), len(shapes[0]))
    return [tuple(shapes[0])]


def grad_infer(shapes, attrs):
    infer(shapes, attrs)
    return ew.grad_shape(shapes, attrs)


# opset < 13 (axis default 1, the input flattened to 2-D at axis): the frontend rewrites it to this form
OP = OpDef(
    "Softmax",
    infer,
    forward,
    ew.costly(87.1),
    backward,
    _kernel("poet_softmax_f32"),
    attributes={"axis": ANY},
    per_sample=per_sample_axis("axis", -1),
)
GRAD = OpDef(
    "SoftmaxGrad",
    grad_infer,
    grad_forward,
    ew.costly(21.1),
    None,
    _kernel("poet_softmax_grad_f32"),
    internal=True,
)
