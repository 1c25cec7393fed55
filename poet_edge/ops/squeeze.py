"""Squeeze(X, axes) on run-time values: a reshape that drops size-1 dims (``axes`` an attribute before
opset 13, a constant input from 13; none = every size-1 dim). C: a copy, as Reshape. Gradient: a Reshape
back to X's shape. (Squeeze of compile-time constants is folded by the frontend.)"""

from __future__ import annotations

import numpy as np

from poet_edge.ops import reshape
from poet_edge.ops.base import ANY, OpDef, per_sample_always
from poet_edge.ops.softmax import norm_axis


def squeezed(shape, attrs) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if not attrs.get("axes"):  # absent or empty: every size-1 dim
        return tuple(d for d in shape if d != 1)
    axes = {norm_axis(int(a), len(shape)) for a in attrs["axes"]}  # type: ignore[attr-defined]
    if len(axes) != len(tuple(attrs["axes"])):  # type: ignore[arg-type]
        raise ValueError(f"Squeeze axes {tuple(attrs['axes'])} repeat an axis")  # type: ignore[arg-type]
    bad = [a for a in sorted(axes) if shape[a] != 1]
    if bad:
        raise ValueError(f"Squeeze axes {sorted(axes)} of shape {shape}: dim {bad[0]} is not 1")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def infer(shapes, attrs):
    return [squeezed(shapes[0], attrs)]


def forward(xs, attrs):
    return [np.ascontiguousarray(xs[0]).reshape(squeezed(xs[0].shape, attrs))]


OP = OpDef(
    "Squeeze",
    infer,
    forward,
    reshape.work,
    reshape.backward,
    reshape.kernel,
    const_inputs={1: "axes"},
    attributes={"axes": ANY},  # an attribute before opset 13
    per_sample=per_sample_always,
)
