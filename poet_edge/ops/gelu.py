"""Gelu (ONNX opset 20): approximate="none" is x Phi(x) with the erf, "tanh" the tanh approximation.
GeluGrad(X, dY) recomputes from X."""

from __future__ import annotations

import math

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import IntArg, OpDef, only, per_sample_always
from poet_edge.ops.erf import erf64

_K = math.sqrt(2.0 / math.pi)  # the tanh approximation: tanh(_K (x + 0.044715 x^3))


def _tanh_mode(attrs) -> int:
    return int(attrs.get("approximate", "none") == "tanh")


def _gelu(x, attrs):
    if _tanh_mode(attrs):
        return 0.5 * x * (1.0 + np.tanh(_K * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf64(x / math.sqrt(2.0)))


def _grad(x, dy, attrs):
    if _tanh_mode(attrs):
        t = np.tanh(_K * (x + 0.044715 * x**3))
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _K * (1.0 + 3 * 0.044715 * x * x))
    cdf = 0.5 * (1.0 + erf64(x / math.sqrt(2.0)))
    return dy * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def backward(gb, node, gys, needs):
    return [
        gb.emit("GeluGrad", (node.inputs[0], gys[0]), {"approximate": node.attr("approximate", "none")})
        if needs[0]
        else None
    ]


def _mode(node):
    return IntArg(_tanh_mode(node.attrs))


OP = OpDef(
    "Gelu",
    ew.same_shape,
    ew.in64(_gelu),
    ew.costly(51.0, 63.8),
    backward,
    ew.kernel("poet_gelu_f32", "gelu", _mode),
    attributes={"approximate": only("none", "tanh")},
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "GeluGrad",
    ew.grad_shape,
    ew.in64(_grad),
    ew.costly(119.0, 75.4),
    None,
    ew.kernel("poet_gelu_grad_f32", "gelu", _mode),
    internal=True,
    channelwise=True,
)
