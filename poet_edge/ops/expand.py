"""Expand(X, shape): X broadcast to broadcast(X.shape, shape) (ONNX's bidirectional rule; a 1 in ``shape``
keeps X's dim). The shape input must be a constant (folded to attribute ``shape``). C: a strided copy with
stride 0 on the broadcast axes. Gradient: dY summed down to X's shape (ReduceSumTo)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import OpDef, per_sample_always, unsupported
from poet_edge.ops.broadcast import broadcast_shape, strides_for
from poet_edge.ops.transpose import copy_work, strided_copy


def infer(shapes, attrs):
    target = tuple(int(d) for d in attrs["shape"])
    if min(target, default=1) < 1:
        raise ValueError(f"Expand shape {target} has a dim below 1")
    return [broadcast_shape(tuple(shapes[0]), target)]


def forward(xs, attrs):
    out = infer([xs[0].shape], attrs)[0]
    return [np.ascontiguousarray(np.broadcast_to(xs[0], out))]


def backward(gb, node, gys, needs):
    return [gb.sum_to(gys[0], gb.shape(node.inputs[0])) if needs[0] else None]


def kernel(node, shape):
    out = shape(node.outputs[0])
    return strided_copy(node.inputs[0], node.outputs[0], out, strides_for(shape(node.inputs[0]), out))


def check(node):
    if "shape" not in node.attrs:
        raise unsupported(node, "shape input that is not a constant (only a constant target shape)")


OP = OpDef(
    "Expand",
    infer,
    forward,
    copy_work,
    backward,
    kernel,
    check,
    const_inputs={1: "shape"},
    per_sample=per_sample_always,
)
