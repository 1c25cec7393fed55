"""HardSwish(X) = X * max(0, min(1, X / 6 + 1/2)) (MobileNetV3), computed as torch does:
X * min(max(X + 3, 0), 6) / 6 in float32, the C kernel's order. Gradient HardSwishGrad(X, dY):
0 for X <= -3, dY * (X / 3 + 1/2) for -3 < X < 3, dY for X >= 3 -- torch's convention at the kinks
(x = -3 -> 0, x = 3 -> 1, the one-sided derivatives from the flat and the linear piece)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import OpDef, per_sample_always


def forward(xs, attrs):
    x = xs[0]
    f = x.dtype.type
    t = np.minimum(np.maximum(x + f(3), f(0)), f(6))
    return [(x * t / f(6)).astype(x.dtype)]


def backward(gb, node, gys, needs):
    return [gb.emit("HardSwishGrad", (node.inputs[0], gys[0])) if needs[0] else None]


def grad_forward(xs, attrs):
    x, dy = xs
    f = x.dtype.type
    mid = dy * (x / f(3) + f(0.5))
    return [np.where(x <= f(-3), f(0), np.where(x < f(3), mid, dy)).astype(dy.dtype)]


OP = OpDef(
    "HardSwish",
    ew.same_shape,
    forward,
    ew.costly(14.0),  # instructions per element, measured on qemu-cortex-m4 (4096 elements)
    backward,
    ew.kernel("poet_hardswish_f32", "hardswish"),
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "HardSwishGrad",
    ew.grad_shape,
    grad_forward,
    ew.costly(16.0),
    None,
    ew.kernel("poet_hardswish_grad_f32", "hardswish"),
    internal=True,
    channelwise=True,
)
