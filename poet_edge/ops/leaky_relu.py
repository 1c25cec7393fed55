"""LeakyRelu(X; alpha=0.01) = X where X > 0, else alpha * X (float32, one multiply; torch's
``x > 0 ? x : x * negval``, which equals ONNX's ``x >= 0 ? x : alpha * x`` up to the sign of a zero).

Gradient LeakyReluGrad(T, dY) = dY where T > 0, else alpha * dY: torch's convention (its leaky_relu_backward
computes ``x > 0 ? dy : dy * negval``), so **x = 0 gets alpha * dY**. T is the output Y when alpha >= 0 (then
Y > 0 exactly where X > 0: for X <= 0, alpha * X is <= 0 even where it underflows, and NaN is not > 0 in
either), so the backward does not keep X alive beside Y, as ReluGrad; with a negative alpha (Y > 0 also for
X < 0) T is X. One kernel serves both."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import ANY, FloatArg, OpDef, per_sample_always


def alpha_of(attrs) -> np.float32:
    return np.float32(attrs.get("alpha", 0.01))


def forward(xs, attrs):
    """In the input's dtype (float32: the C kernel's bits; float64: finite differences), with alpha rounded
    to float32 as the C kernel receives it."""
    x = xs[0]
    a = x.dtype.type(alpha_of(attrs))
    return [np.where(x > 0, x, x * a).astype(x.dtype)]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    attrs = {"alpha": float(alpha_of(node.attrs))}
    t = node.outputs[0] if alpha_of(node.attrs) >= 0 else node.inputs[0]
    return [gb.emit("LeakyReluGrad", (t, gys[0]), attrs)]


def grad_forward(xs, attrs):
    t, dy = xs
    a = dy.dtype.type(alpha_of(attrs))
    return [np.where(t > 0, dy, dy * a).astype(dy.dtype)]


def _alpha(node):
    return FloatArg(float(alpha_of(node.attrs)))


OP = OpDef(
    "LeakyRelu",
    ew.same_shape,
    forward,
    ew.costly(8.0),  # instructions per element, measured on qemu-cortex-m4 (4096 elements)
    backward,
    ew.kernel("poet_leaky_relu_f32", "leaky_relu", _alpha),
    attributes={"alpha": ANY},
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "LeakyReluGrad",
    ew.grad_shape,
    grad_forward,
    ew.costly(9.0),  # instructions per element, measured on qemu-cortex-m4 (4096 elements)
    None,
    ew.kernel("poet_leaky_relu_grad_f32", "leaky_relu", _alpha),
    internal=True,
    channelwise=True,
)
