"""Transpose(perm) (default: reverse the dims); its gradient is the inverse Transpose. C: a strided copy."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    FloatArg,
    IntArg,
    IntArrayArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
)
from poet_edge.ops.broadcast import check_rank
from poet_edge.work import OpClass, Work


def perm_of(rank: int, attrs) -> tuple[int, ...]:
    perm = tuple(int(p) for p in attrs.get("perm", range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"perm {perm} is not a permutation of {rank} dims")
    return perm


def infer(shapes, attrs):
    s = tuple(shapes[0])
    return [tuple(s[p] for p in perm_of(len(s), attrs))]


def forward(xs, attrs):
    return [np.ascontiguousarray(np.transpose(xs[0], perm_of(xs[0].ndim, attrs)))]


def backward(gb, node, gys, needs):
    perm = perm_of(len(gb.shape(node.inputs[0])), node.attrs)
    inverse = tuple(int(i) for i in np.argsort(perm))
    return [gb.emit("Transpose", (gys[0],), {"perm": inverse}) if needs[0] else None]


def contiguous_strides(shape) -> tuple[int, ...]:
    out, step = [], 1
    for d in reversed(tuple(shape)):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def copy_work(ins, outs, attrs):
    return Work(
        OpClass.COPY,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(outs[0]),
        bytes_written=f32_bytes(*outs),
    )


def grow_work(ins, outs, weight: float) -> Work:
    """A copy into a larger output (Pad, Resize): every output element written once, the input read once;
    ``weight`` the op's measured instructions per byte against the profile's copy."""
    return Work(
        OpClass.COPY,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(ins[0]),
        bytes_written=f32_bytes(*outs),
        weight=weight,
    )


def strided_copy(x: str, y: str, dims, x_strides, x_off: int = 0, scale: float = 1.0) -> KernelCall:
    """Y (contiguous, shape ``dims``) = scale * X[x_off + sum_d idx_d x_strides_d]."""
    dims = tuple(dims) or (1,)
    x_strides = tuple(x_strides) or (0,)
    check_rank(dims)
    args = (
        TensorArg(x),
        TensorArg(y, False),
        FloatArg(scale),
        IntArg(x_off),
        IntArg(len(dims)),
        IntArrayArg(dims),
        IntArrayArg(x_strides),
    )
    return KernelCall("poet_strided_copy_f32", args, "strided")


def kernel(node, shape):
    xs = shape(node.inputs[0])
    perm = perm_of(len(xs), node.attrs)
    st = contiguous_strides(xs)
    return strided_copy(node.inputs[0], node.outputs[0], [xs[p] for p in perm], [st[p] for p in perm])


def per_sample(ins, batched, attrs, axis=0) -> bool:
    """The batch stays in front: perm[0] = 0. Along positions any perm: each position's values move to
    where the split axis goes (perm.index(axis): the rewrite follows it)."""
    return axis != 0 or perm_of(len(ins[0]), attrs)[0] == 0


OP = OpDef(
    "Transpose", infer, forward, copy_work, backward, kernel, attributes={"perm": ANY}, per_sample=per_sample
)
