"""Unsqueeze(X, axes) on run-time values: a reshape that inserts size-1 dims at ``axes`` of the output
(an attribute before opset 13, a constant input from 13; negative axes count from the output's end).
C: a copy, as Reshape. Gradient: a Reshape back to X's shape. (Unsqueeze of constants is folded.)"""

from __future__ import annotations

import numpy as np

from poet_edge.ops import reshape
from poet_edge.ops.base import ANY, OpDef, per_sample_always, unsupported
from poet_edge.ops.softmax import norm_axis


def unsqueezed(shape, attrs) -> tuple[int, ...]:
    raw = tuple(int(a) for a in attrs.get("axes", ()))  # type: ignore[attr-defined]
    rank = len(shape) + len(raw)
    axes = {norm_axis(a, rank) for a in raw}
    if not raw or len(axes) != len(raw):
        raise ValueError(f"Unsqueeze axes {raw} must be non-empty and distinct")
    dims = iter(int(d) for d in shape)
    return tuple(1 if i in axes else next(dims) for i in range(rank))


def infer(shapes, attrs):
    return [unsqueezed(shapes[0], attrs)]


def forward(xs, attrs):
    return [np.ascontiguousarray(xs[0]).reshape(unsqueezed(xs[0].shape, attrs))]


def check(node):
    if "axes" not in node.attrs:
        raise unsupported(node, "axes input that is not a constant (only constant axes)")


OP = OpDef(
    "Unsqueeze",
    infer,
    forward,
    reshape.work,
    reshape.backward,
    reshape.kernel,
    check,
    const_inputs={1: "axes"},
    attributes={"axes": ANY},  # an attribute before opset 13
    per_sample=per_sample_always,
)
