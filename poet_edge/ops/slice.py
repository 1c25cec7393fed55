"""Slice with constant starts/ends/axes/steps (the frontend folds the inputs into attributes of the same
names; opset < 10 has them as attributes already). Negative indices count from the end and out-of-range
ones are clamped, as in numpy/ONNX. SliceGrad(dY) scatters dY into zeros of the input shape."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    IntArg,
    IntArrayArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    unsupported,
)
from poet_edge.ops.broadcast import check_rank
from poet_edge.ops.softmax import norm_axis
from poet_edge.ops.transpose import contiguous_strides, copy_work, strided_copy
from poet_edge.work import OpClass, Work


def ranges(shape, attrs) -> list[range]:
    """The selected indices of every dim."""
    starts, ends = tuple(attrs["starts"]), tuple(attrs["ends"])
    axes = tuple(attrs.get("axes", range(len(starts))))
    steps = tuple(attrs.get("steps", (1,) * len(starts)))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError(f"starts/ends/axes/steps differ in length: {starts} {ends} {axes} {steps}")
    out = [range(int(d)) for d in shape]
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = norm_axis(int(a), len(shape))
        if a in seen or int(st) == 0:
            raise ValueError(f"repeated axis {a} or zero step in Slice")
        seen.add(a)
        out[a] = range(*slice(int(s), int(e), int(st)).indices(int(shape[a])))
    return out


def infer(shapes, attrs):
    return [tuple(len(r) for r in ranges(shapes[0], attrs))]


def forward(xs, attrs):
    rs = ranges(xs[0].shape, attrs)
    return [xs[0][np.ix_(*[list(r) for r in rs])] if rs else xs[0].copy()]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    keys = ("starts", "ends", "axes", "steps")
    return [
        gb.emit(
            "SliceGrad",
            (gys[0],),
            {"shape": gb.shape(node.inputs[0]), **{k: node.attrs[k] for k in keys if k in node.attrs}},
        )
    ]


def _placement(shape, attrs):
    """(offset, strides, dims) of the slice inside a contiguous tensor of ``shape``."""
    rs, st = ranges(shape, attrs), contiguous_strides(shape)
    off = sum(r.start * s for r, s in zip(rs, st, strict=True)) if all(len(r) for r in rs) else 0
    return off, [r.step * s for r, s in zip(rs, st, strict=True)], [len(r) for r in rs]


def kernel(node, shape):
    off, strides, dims = _placement(shape(node.inputs[0]), node.attrs)
    return strided_copy(node.inputs[0], node.outputs[0], dims, strides, off)


def check(node):
    if "starts" not in node.attrs or "ends" not in node.attrs:
        raise unsupported(node, "starts/ends that are not constants (dynamic slicing)")


def grad_infer(shapes, attrs):
    expect = infer([attrs["shape"]], attrs)[0]
    if tuple(shapes[0]) != expect:
        raise ValueError(f"SliceGrad: gradient shape {shapes[0]} != slice shape {expect}")
    return [tuple(attrs["shape"])]


def grad_forward(xs, attrs):
    out = np.zeros(tuple(attrs["shape"]), xs[0].dtype)
    rs = ranges(out.shape, attrs)
    out[np.ix_(*[list(r) for r in rs])] = xs[0]
    return [out]


def grad_kernel(node, shape):
    full = tuple(node.attrs["shape"])
    off, strides, dims = _placement(full, node.attrs)
    check_rank(tuple(dims))
    args = (
        TensorArg(node.inputs[0]),
        TensorArg(node.outputs[0], False),
        IntArg(elements(full)),
        IntArg(off),
        IntArg(len(dims) or 1),
        IntArrayArg(tuple(dims) or (1,)),
        IntArrayArg(tuple(strides) or (0,)),
    )
    return KernelCall("poet_strided_scatter_f32", args, "strided")


def grad_work(ins, outs, attrs):
    return Work(
        OpClass.COPY, elements=elements(outs[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def per_sample(ins, batched, attrs, axis=0) -> bool:
    """A slice that does not cut the split axis."""
    rank = len(ins[0])
    axes = tuple(attrs.get("axes", range(len(tuple(attrs.get("starts", ()))))))
    return all(norm_axis(int(a), rank) != axis for a in axes)


OP = OpDef(
    "Slice",
    infer,
    forward,
    copy_work,
    backward,
    kernel,
    check,
    const_inputs={1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    attributes={"starts": ANY, "ends": ANY, "axes": ANY},  # opset < 10: attributes, as the inputs after it
    per_sample=per_sample,
)
GRAD = OpDef("SliceGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True)
