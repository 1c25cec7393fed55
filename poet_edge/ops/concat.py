"""Concat(axis) of up to POET_MAX_PIECES inputs; the gradient of each input is a Slice of dY."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    IntArg,
    IntArrayArg,
    KernelCall,
    NullArg,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    per_sample_axis,
    unsupported,
)
from poet_edge.ops.softmax import norm_axis
from poet_edge.work import OpClass, Work

MAX_PIECES = 8  # POET_MAX_PIECES in runtime_c/include/poet/kernels.h


def infer(shapes, attrs):
    first = tuple(shapes[0])
    a = norm_axis(int(attrs["axis"]), len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(s[i] != first[i] for i in range(len(s)) if i != a):
            raise ValueError(f"Concat inputs {list(shapes)} differ outside axis {a}")
    return [first[:a] + (sum(int(s[a]) for s in shapes),) + first[a + 1 :]]


def forward(xs, attrs):
    return [np.concatenate(xs, axis=norm_axis(int(attrs["axis"]), xs[0].ndim))]


def backward(gb, node, gys, needs):
    axis = norm_axis(int(node.attrs["axis"]), len(gb.shape(node.inputs[0])))
    grads, start = [], 0
    for x, need in zip(node.inputs, needs, strict=True):
        end = start + gb.shape(x)[axis]
        grads.append(
            gb.emit("Slice", (gys[0],), {"starts": (start,), "ends": (end,), "axes": (axis,)})
            if need
            else None
        )
        start = end
    return grads


def pieces(shapes, axis: int) -> tuple[int, tuple[int, ...]]:
    """(outer, elements of each piece per outer index) of tensors cut along ``axis``."""
    a = norm_axis(axis, len(shapes[0]))
    return elements(tuple(shapes[0][:a])), tuple(elements(tuple(s[a:])) for s in shapes)


def work(ins, outs, attrs):
    return Work(
        OpClass.COPY, elements=elements(outs[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    outer, lens = pieces([shape(t) for t in node.inputs], int(node.attrs["axis"]))
    xs = [TensorArg(t) for t in node.inputs] + [NullArg()] * (MAX_PIECES - len(node.inputs))
    return KernelCall(
        "poet_concat_f32",
        (*xs, TensorArg(node.outputs[0], False), IntArg(outer), IntArg(len(node.inputs)), IntArrayArg(lens)),
        "concat",
    )


def check(node):
    if "axis" not in node.attrs:
        raise unsupported(node, "missing axis attribute")
    if not 1 <= len(node.inputs) <= MAX_PIECES:
        raise unsupported(node, f"{len(node.inputs)} inputs (at most {MAX_PIECES})")


OP = OpDef(
    "Concat",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    attributes={"axis": ANY},
    per_sample=per_sample_axis("axis", 0, every_input=True),
)
