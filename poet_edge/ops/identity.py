"""Identity: a copy; its gradient is dY itself (no node)."""

from __future__ import annotations

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, per_sample_always
from poet_edge.ops.transpose import copy_work


def infer(shapes, attrs):
    return [tuple(shapes[0])]


def forward(xs, attrs):
    return [xs[0].copy()]


def backward(gb, node, gys, needs):
    return [gys[0] if needs[0] else None]


def kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    args = (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), IntArg(n))
    return KernelCall("poet_copy_f32", args, "copy")


OP = OpDef("Identity", infer, forward, copy_work, backward, kernel, per_sample=per_sample_always)
