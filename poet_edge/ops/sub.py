"""Sub with numpy broadcasting: dA = sum_to(dY), dB = -sum_to(dY)."""

from __future__ import annotations

from poet_edge.ops import elementwise
from poet_edge.ops.base import OpDef, per_sample_broadcast
from poet_edge.ops.broadcast import BIN_SUB, binary_infer, binary_kernel


def forward(xs, attrs):
    return [(xs[0] - xs[1]).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    a, b = node.inputs
    return [
        gb.sum_to(gys[0], gb.shape(a)) if needs[0] else None,
        gb.sum_to(gys[0], gb.shape(b), scale=-1.0) if needs[1] else None,
    ]


OP = OpDef(
    "Sub",
    binary_infer,
    forward,
    elementwise.work,
    backward,
    binary_kernel(BIN_SUB),
    channelwise=True,
    per_sample=per_sample_broadcast,
)
