"""Zeros() -> Y: a zero-filled tensor of attribute ``shape``. Internal: the gradient of an output of a
multi-output op (Split) that received none."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def infer(shapes, attrs):
    return [tuple(attrs["shape"])]


def forward(xs, attrs):
    return [np.zeros(tuple(attrs["shape"]), np.float32)]


def work(ins, outs, attrs):
    return Work(OpClass.ELEMENTWISE, elements=elements(outs[0]), bytes_written=f32_bytes(*outs))


def kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    return KernelCall("poet_zeros_f32", (TensorArg(node.outputs[0], False), IntArg(n)), "zeros")


OP = OpDef("Zeros", infer, forward, work, None, kernel, internal=True)
