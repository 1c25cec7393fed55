"""The op registry: one line per op. ``get(name)`` raises a PoetError naming what is supported."""

from __future__ import annotations

from poet_edge.errors import PoetError
from poet_edge.ops import add, flatten, gemm, matmul, mse, reduce_sum_to, relu, reshape, sgd, softmax_xent
from poet_edge.ops.base import OpDef

REGISTRY: dict[str, OpDef] = {
    op.name: op
    for op in (
        add.OP,
        flatten.OP,
        gemm.OP,
        matmul.OP,
        relu.OP,
        reshape.OP,
        # internal ops of training graphs
        relu.GRAD,
        reduce_sum_to.OP,
        softmax_xent.OP,
        softmax_xent.GRAD,
        mse.OP,
        mse.GRAD,
        sgd.OP,
    )
}


def supported_onnx_ops() -> list[str]:
    return sorted(name for name, op in REGISTRY.items() if not op.internal)


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise PoetError(f"unsupported op {name}; supported: {', '.join(supported_onnx_ops())}") from None
