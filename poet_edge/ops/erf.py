"""Erf (C: poet_erff) and its gradient ErfGrad(X, dY) = dY * 2/sqrt(pi) * exp(-X^2)."""

from __future__ import annotations

import math

import numpy as np

from poet_edge.ops import elementwise as ew
from poet_edge.ops.base import OpDef, per_sample_always

_erf = np.frompyfunc(math.erf, 1, 1)


def erf64(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(np.asarray(x, np.float64)), np.float64)


def backward(gb, node, gys, needs):
    return [gb.emit("ErfGrad", (node.inputs[0], gys[0])) if needs[0] else None]


def _grad(x, dy, attrs):
    return dy * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x)


OP = OpDef(
    "Erf",
    ew.same_shape,
    ew.in64(lambda x, attrs: erf64(x)),
    ew.costly(50.1),
    backward,
    ew.kernel("poet_erf_f32", "erf"),
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef(
    "ErfGrad",
    ew.grad_shape,
    ew.in64(_grad),
    ew.work,
    None,
    ew.kernel("poet_erf_grad_f32", "erf"),
    internal=True,
    channelwise=True,
)
