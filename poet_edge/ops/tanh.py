"""Tanh (C: poet_tanhf) and its gradient TanhGrad(Y, dY) = dY * (1 - Y^2)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import OpDef, per_sample_always


def backward(gb, node, gys, needs):
    return [gb.emit("TanhGrad", (node.outputs[0], gys[0])) if needs[0] else None]


def grad_forward(xs, attrs):
    y, dy = xs
    return [(dy * (1 - y * y)).astype(dy.dtype)]


OP = OpDef(
    "Tanh",
    ew.same_shape,
    ew.in64(lambda x, attrs: np.tanh(x)),
    ew.costly(61.0),
    backward,
    ew.kernel("poet_tanh_f32", "tanh"),
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "TanhGrad",
    ew.grad_shape,
    grad_forward,
    ew.work,
    None,
    ew.kernel("poet_tanh_grad_f32", "tanh"),
    internal=True,
    channelwise=True,
)
