"""HardSigmoid(X; alpha=0.2, beta=0.5) = max(0, min(1, alpha * X + beta)), computed in float32 as the C
kernel does (one multiply, one add, then the clamp). Gradient HardSigmoidGrad(X, dY) = alpha * dY where
0 < alpha * X + beta < 1 strictly, else 0: at the kinks the gradient is 0, torch's convention (its
hardsigmoid with alpha = 1/6, beta = 1/2 passes grad / 6 only for -3 < x < 3)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import ANY, FloatArg, OpDef, per_sample_always


def coeffs(attrs) -> tuple[np.float32, np.float32]:
    return np.float32(attrs.get("alpha", 0.2)), np.float32(attrs.get("beta", 0.5))


def forward(xs, attrs):
    """In the input's dtype (float32: the C kernel's bits; float64: finite differences), with alpha and beta
    rounded to float32 as the C kernel receives them."""
    x = xs[0]
    alpha, beta = (x.dtype.type(c) for c in coeffs(attrs))
    t = x * alpha + beta  # C: one multiply, one add (no fused multiply-add)
    return [np.where(t < 0, x.dtype.type(0), np.where(t > 1, x.dtype.type(1), t)).astype(x.dtype)]


def backward(gb, node, gys, needs):
    attrs = {k: node.attrs[k] for k in ("alpha", "beta") if k in node.attrs}
    return [gb.emit("HardSigmoidGrad", (node.inputs[0], gys[0]), attrs) if needs[0] else None]


def grad_forward(xs, attrs):
    x, dy = xs
    alpha, beta = (x.dtype.type(c) for c in coeffs(attrs))
    t = x * alpha + beta
    inside = (t > 0) & (t < 1)
    return [np.where(inside, dy * dy.dtype.type(alpha), 0).astype(dy.dtype)]


def _alpha(node):
    return FloatArg(float(coeffs(node.attrs)[0]))


def _beta(node):
    return FloatArg(float(coeffs(node.attrs)[1]))


OP = OpDef(
    "HardSigmoid",
    ew.same_shape,
    forward,
    ew.costly(13.0),  # instructions per element, measured on qemu-cortex-m4 (4096 elements)
    backward,
    ew.kernel("poet_hardsigmoid_f32", "hardsigmoid", _alpha, _beta),
    attributes={"alpha": ANY, "beta": ANY},
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "HardSigmoidGrad",
    ew.grad_shape,
    grad_forward,
    ew.costly(17.0),
    None,
    ew.kernel("poet_hardsigmoid_grad_f32", "hardsigmoid", _alpha, _beta),
    internal=True,
    channelwise=True,
)
