"""Div with numpy broadcasting: dA = sum_to(dY / B), dB = -sum_to(dY * Y / B)."""

from __future__ import annotations

from poet_edge.ops import elementwise
from poet_edge.ops.base import OpDef, per_sample_broadcast
from poet_edge.ops.broadcast import BIN_DIV, binary_infer, binary_kernel


def forward(xs, attrs):
    return [(xs[0] / xs[1]).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    a, b = node.inputs
    dy, y = gys[0], node.outputs[0]
    da = gb.sum_to(gb.emit("Div", (dy, b)), gb.shape(a)) if needs[0] else None
    db = None
    if needs[1]:
        db = gb.sum_to(gb.emit("Div", (gb.emit("Mul", (dy, y)), b)), gb.shape(b), scale=-1.0)
    return [da, db]


OP = OpDef(
    "Div",
    binary_infer,
    forward,
    elementwise.work,
    backward,
    binary_kernel(BIN_DIV),
    channelwise=True,
    per_sample=per_sample_broadcast,
)
