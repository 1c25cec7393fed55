"""A slice of a matrix product's reduction (operator splitting, poet_edge/splitting.py).

``GemmPart(A, B, [P])`` adds to P (attribute ``partial``; else +0.0f) the products of A [..., K] (its leading
dims flattened into rows) and B [K, N] (attribute ``transB``: B [N, K]) over this part's K, and multiplies
by ``alpha`` when ``final`` is set. Chained over the row blocks of a weight W in ascending order (each part's
A the output-gradient columns of its block, B the block), the parts give the input gradient dY·W of the
unsplit Gemm / MatMul bit for bit: the C kernel's accumulator starts at P and adds the products in the
reference order (runtime_c/src/kernels/gemm_part.c), and the unsplit kernel's ``alpha * acc`` comes last."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from poet_edge.kernel_model import gemm_part_weight
from poet_edge.ops.base import FloatArg, IntArg, KernelCall, NullArg, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def dims(shapes: Sequence[Sequence[int]], attrs) -> tuple[int, int, int]:
    """(rows of A, N, K); ValueError when A's K is not B's."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if len(a) < 2 or len(b) != 2:
        raise ValueError(f"GemmPart takes A [..., K] and a 2-D B, got {a} and {b}")
    k, n = (b[1], b[0]) if attrs.get("transB", 0) else (b[0], b[1])
    if a[-1] != k:
        raise ValueError(f"GemmPart inner dimensions differ: {a} x {b}")
    return elements(a[:-1]), n, k


def infer(shapes, attrs):
    rows, n, _ = dims(shapes, attrs)
    out = (*shapes[0][:-1], n)
    if attrs.get("partial", False) and tuple(shapes[2]) != tuple(out):
        raise ValueError(f"partial sums {tuple(shapes[2])} are not the output's shape {out}")
    return [out]


def forward(xs, attrs):
    a, b = xs[0], xs[1]
    y = a @ (b.T if attrs.get("transB", 0) else b)
    if attrs.get("partial", False):
        y = xs[2] + y
    if attrs.get("final", True):
        y = float(attrs.get("alpha", 1.0)) * y
    return [np.ascontiguousarray(y).astype(a.dtype)]


def work(ins, outs, attrs):
    """MACs priced by the part kernel's own block structure (kernel_model.gemm_part_weight): its A·B rows
    outside 4-row strips run 1x8 assembly blocks, and every block first loads P."""
    rows, n, k = dims(ins, attrs)
    final = attrs.get("final", True)
    plain = not final or float(attrs.get("alpha", 1.0)) == 1.0
    partial = bool(attrs.get("partial", False))
    return Work(
        OpClass.DENSE,
        macs=rows * n * k,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=gemm_part_weight(rows, n, k, int(attrs.get("transB", 0)), partial, plain),
    )


def kernel(node, shape):
    rows, n, k = dims([shape(node.inputs[0]), shape(node.inputs[1])], node.attrs)
    partial = bool(node.attr("partial", False))
    alpha = float(node.attr("alpha", 1.0)) if node.attr("final", True) else 1.0
    return KernelCall(
        "poet_gemm_part_f32",
        (
            TensorArg(node.inputs[0]),
            TensorArg(node.inputs[1]),
            TensorArg(node.inputs[2]) if partial else NullArg(),
            TensorArg(node.outputs[0], const=False),
            IntArg(rows),
            IntArg(n),
            IntArg(k),
            IntArg(int(node.attr("transB", 0))),
            FloatArg(alpha),
        ),
        "gemm_part",
    )


OP = OpDef("GemmPart", infer, forward, work, None, kernel, internal=True)
