"""Relu and its gradient ReluGrad(Y, dY) = dY * (Y > 0)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes, per_sample_always
from poet_edge.work import OpClass, Work


def _same(shapes, attrs):
    return [tuple(shapes[0])]


def _work(ins, outs, attrs):
    return Work(
        OpClass.ELEMENTWISE,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


def forward(xs, attrs):
    return [np.maximum(xs[0], 0).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    return [gb.emit("ReluGrad", (node.outputs[0], gys[0])) if needs[0] else None]


def kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    return KernelCall(
        "poet_relu_f32", (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), IntArg(n)), "relu"
    )


def grad_forward(xs, attrs):
    return [np.where(xs[0] > 0, xs[1], 0).astype(xs[1].dtype)]


def grad_kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    y, dy = node.inputs
    return KernelCall(
        "poet_relu_grad_f32",
        (TensorArg(y), TensorArg(dy), TensorArg(node.outputs[0], False), IntArg(n)),
        "relu",
    )


OP = OpDef("Relu", _same, forward, _work, backward, kernel, channelwise=True, per_sample=per_sample_always)
GRAD = OpDef("ReluGrad", _same, grad_forward, _work, None, grad_kernel, internal=True, channelwise=True)
