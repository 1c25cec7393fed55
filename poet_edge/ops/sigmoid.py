"""Sigmoid and its gradient SigmoidGrad(Y, dY) = dY * Y * (1 - Y)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import OpDef, per_sample_always


def _sigmoid(x, attrs):
    e = np.exp(-np.abs(x))  # stable on both sides
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def backward(gb, node, gys, needs):
    return [gb.emit("SigmoidGrad", (node.outputs[0], gys[0])) if needs[0] else None]


def grad_forward(xs, attrs):
    y, dy = xs
    return [(dy * y * (1 - y)).astype(dy.dtype)]


OP = OpDef(
    "Sigmoid",
    ew.same_shape,
    ew.in64(_sigmoid),
    ew.costly(70.0),
    backward,
    ew.kernel("poet_sigmoid_f32", "sigmoid"),
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "SigmoidGrad",
    ew.grad_shape,
    grad_forward,
    ew.work,
    None,
    ew.kernel("poet_sigmoid_grad_f32", "sigmoid"),
    internal=True,
    channelwise=True,
)
