"""Gemm: Y = alpha * A' B' + beta * C, with A' = A or Aᵀ and B' = B or Bᵀ."""

from __future__ import annotations

import numpy as np

from poet_edge.kernel_model import gemm_weight
from poet_edge.ops.base import (
    ANY,
    FloatArg,
    IntArg,
    KernelCall,
    NullArg,
    OpDef,
    TensorArg,
    f32_bytes,
    per_sample_first,
    unsupported,
)
from poet_edge.ops.broadcast import strides_for
from poet_edge.work import OpClass, Work


def mnk(shapes, attrs) -> tuple[int, int, int]:
    """(M, N, K) of Gemm A x B with its ``transA`` / ``transB`` attributes: A is M x K, B is K x N (also
    for fused and transposed MatMul / Gemm kernels); ValueError when the inner dimensions differ."""
    a, b = shapes[0], shapes[1]
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
    k2, n = (b[1], b[0]) if attrs.get("transB", 0) else (b[0], b[1])
    if k != k2:
        raise ValueError(f"Gemm inner dimensions differ: {a} x {b}")
    return m, n, k


def infer(shapes, attrs):
    m, n, _ = mnk(shapes, attrs)
    if len(shapes) > 2:
        np.broadcast_shapes(shapes[2], (m, n))
    return [(m, n)]


def by_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for a 2-D ``a``, one row at a time: the BLAS product's bits for a row then do not depend
    on the other rows (a batch in parts gives each sample's row the unsplit bits, poet_edge/batch_split.py);
    one row is the plain product."""
    if a.ndim != 2 or a.shape[0] == 1:
        return a @ b
    return np.concatenate([np.ascontiguousarray(a[i : i + 1]) @ b for i in range(a.shape[0])], axis=0)


def forward(xs, attrs):
    a = xs[0].T if attrs.get("transA", 0) else xs[0]
    b = xs[1].T if attrs.get("transB", 0) else xs[1]
    y = float(attrs.get("alpha", 1.0)) * by_rows(a, b)
    if len(xs) > 2:
        y = y + float(attrs.get("beta", 1.0)) * xs[2]
    return [y.astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    a, b = node.inputs[0], node.inputs[1]
    ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    alpha, dy = float(node.attr("alpha", 1.0)), gys[0]
    grads: list[str | None] = [None] * len(node.inputs)
    if needs[0]:  # dA' = alpha dY B'ᵀ ; if transA, dA = (dA')ᵀ = alpha B' dYᵀ
        if ta:
            grads[0] = gb.emit("Gemm", (b, dy), {"transA": tb, "transB": 1, "alpha": alpha})
        else:
            grads[0] = gb.emit("Gemm", (dy, b), {"transA": 0, "transB": 1 - tb, "alpha": alpha})
    if needs[1]:  # dB' = alpha A'ᵀ dY ; if transB, dB = alpha dYᵀ A'
        if tb:
            grads[1] = gb.emit("Gemm", (dy, a), {"transA": 1, "transB": ta, "alpha": alpha})
        else:
            grads[1] = gb.emit("Gemm", (a, dy), {"transA": 1 - ta, "transB": 0, "alpha": alpha})
    if len(node.inputs) > 2 and needs[2]:
        grads[2] = gb.sum_to(dy, gb.shape(node.inputs[2]), scale=float(node.attr("beta", 1.0)))
    return grads


def work(ins, outs, attrs):
    m, n, k = mnk(ins, attrs)
    return Work(
        OpClass.DENSE,
        macs=m * n * k,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=gemm_weight(m, n, k, int(attrs.get("transA", 0)), int(attrs.get("transB", 0))),
    )


def kernel(node, shape):
    m, n, k = mnk([shape(node.inputs[0]), shape(node.inputs[1])], node.attrs)
    has_c = len(node.inputs) > 2
    c_rs, c_cs = strides_for(shape(node.inputs[2]), (m, n)) if has_c else (0, 0)
    return KernelCall(
        "poet_gemm_f32",
        (
            TensorArg(node.inputs[0]),
            TensorArg(node.inputs[1]),
            TensorArg(node.inputs[2]) if has_c else NullArg(),
            TensorArg(node.outputs[0], const=False),
            IntArg(m),
            IntArg(n),
            IntArg(k),
            IntArg(int(node.attr("transA", 0))),
            IntArg(int(node.attr("transB", 0))),
            FloatArg(float(node.attr("alpha", 1.0))),
            FloatArg(float(node.attr("beta", 1.0))),
            IntArg(c_rs),
            IntArg(c_cs),
        ),
        "gemm",
    )


def check(node):
    if len(node.inputs) == 3 and node.inputs[2] == "":
        raise unsupported(node, "empty optional input C (drop it instead)")


def per_sample(ins, batched, attrs, axis=0) -> bool:
    """Rows of A are samples (transA=0) when only A carries the batch and C broadcasts over its rows."""
    c_ok = len(ins) < 3 or len(ins[2]) < 2 or ins[2][0] == 1
    return per_sample_first(ins, batched, attrs, axis) and not int(attrs.get("transA", 0)) and c_ok


ATTRIBUTES = {"alpha": ANY, "beta": ANY, "transA": ANY, "transB": ANY}
OP = OpDef(
    "Gemm", infer, forward, work, backward, kernel, check, attributes=ATTRIBUTES, per_sample=per_sample
)
