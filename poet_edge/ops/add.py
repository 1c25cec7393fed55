"""Add with numpy broadcasting (bias addition is the common case)."""

from __future__ import annotations

from poet_edge.ops.base import KernelCall, OpDef, TensorArg, elementwise_work, per_sample_broadcast
from poet_edge.ops.broadcast import bcast_args, broadcast_shape


def infer(shapes, attrs):
    return [broadcast_shape(shapes[0], shapes[1])]


def forward(xs, attrs):
    return [(xs[0] + xs[1]).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    pairs = zip(node.inputs, needs, strict=False)
    return [gb.sum_to(gys[0], gb.shape(x)) if need else None for x, need in pairs]


work = elementwise_work


def kernel(node, shape):
    out = shape(node.outputs[0])
    a, b = node.inputs
    return KernelCall(
        "poet_add_f32",
        (
            TensorArg(a),
            TensorArg(b),
            TensorArg(node.outputs[0], const=False),
            *bcast_args(out, shape(a), shape(b)),
        ),
        "add",
    )


OP = OpDef("Add", infer, forward, work, backward, kernel, channelwise=True, per_sample=per_sample_broadcast)
