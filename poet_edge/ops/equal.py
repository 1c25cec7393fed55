"""Equal(A, B) on run-time float values, with numpy broadcasting. The IR is float32, so the boolean result is
a float32 tensor of 0.0 / 1.0 (poet-edge's representation of booleans; Where reads any non-zero value as
true). No gradient flows through Equal (its inputs are frozen when they are parameters). Equal of
compile-time constants (exporters' shape patterns) is folded by the frontend instead."""

from __future__ import annotations

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import KernelCall, OpDef, TensorArg, per_sample_broadcast
from poet_edge.ops.broadcast import bcast_args, broadcast_shape


def infer(shapes, attrs):
    return [broadcast_shape(tuple(shapes[0]), tuple(shapes[1]))]


def forward(xs, attrs):
    a, b = xs
    return [(a == b).astype(a.dtype if a.dtype.kind == "f" else "float32")]


def backward(gb, node, gys, needs):
    return [None, None]  # piecewise constant: zero gradient, no node


def kernel(node, shape):
    a, b = node.inputs
    out = shape(node.outputs[0])
    args = (
        TensorArg(a),
        TensorArg(b),
        TensorArg(node.outputs[0], False),
        *bcast_args(out, shape(a), shape(b)),
    )
    return KernelCall("poet_equal_f32", args, "equal")


# 14.6 instructions per element measured on qemu-cortex-m4 (4096 same-shape elements)
OP = OpDef(
    "Equal",
    infer,
    forward,
    ew.costly(14.6),
    backward,
    kernel,
    frozen_inputs=frozenset({0, 1}),
    per_sample=per_sample_broadcast,
)
