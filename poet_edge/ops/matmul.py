"""MatMul of two 2-D matrices (batched MatMul arrives with the transformer op set)."""

from __future__ import annotations

from poet_edge.ops import gemm
from poet_edge.ops.base import OpDef, unsupported


def infer(shapes, attrs):
    if len(shapes[0]) != 2 or len(shapes[1]) != 2:
        raise ValueError(f"MatMul supports 2-D operands only, got {shapes[0]} x {shapes[1]}")
    return gemm.infer(shapes, {})


def forward(xs, attrs):
    return [(xs[0] @ xs[1]).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    a, b, dy = node.inputs[0], node.inputs[1], gys[0]
    da = gb.emit("Gemm", (dy, b), {"transB": 1}) if needs[0] else None
    db = gb.emit("Gemm", (a, dy), {"transA": 1}) if needs[1] else None
    return [da, db]


def work(ins, outs, attrs):
    return gemm.work(ins, outs, {})


def kernel(node, shape):
    return gemm.kernel(node, shape)


def check(node):
    if len(node.inputs) != 2:
        raise unsupported(node, "number of inputs")


OP = OpDef("MatMul", infer, forward, work, backward, kernel, check)
