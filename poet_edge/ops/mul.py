"""Mul with numpy broadcasting: dA = sum_to(dY * B), dB = sum_to(dY * A)."""

from __future__ import annotations

from poet_edge.ops import elementwise
from poet_edge.ops.base import OpDef, per_sample_broadcast
from poet_edge.ops.broadcast import BIN_MUL, binary_infer, binary_kernel


def forward(xs, attrs):
    return [(xs[0] * xs[1]).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    a, b = node.inputs
    return [
        gb.sum_to(gb.emit("Mul", (gys[0], b)), gb.shape(a)) if needs[0] else None,
        gb.sum_to(gb.emit("Mul", (gys[0], a)), gb.shape(b)) if needs[1] else None,
    ]


OP = OpDef(
    "Mul",
    binary_infer,
    forward,
    elementwise.work,
    backward,
    binary_kernel(BIN_MUL),
    channelwise=True,
    per_sample=per_sample_broadcast,
)
