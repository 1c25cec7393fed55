"""Flatten(axis): reshape to (prod(dims[:axis]), prod(dims[axis:]))."""

from __future__ import annotations

from poet_edge.ops import reshape
from poet_edge.ops.base import ANY, OpDef, elements, per_sample_always


def infer(shapes, attrs):
    s = shapes[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + len(s) if axis < 0 else axis
    return [(elements(tuple(s[:axis])), elements(tuple(s[axis:])))]


def forward(xs, attrs):
    return [xs[0].reshape(infer([xs[0].shape], attrs)[0])]


OP = OpDef(
    "Flatten",
    infer,
    forward,
    reshape.work,
    reshape.backward,
    reshape.kernel,
    attributes={"axis": ANY},
    per_sample=per_sample_always,
)
