"""Reshape with a constant target shape (the frontend folds the shape input into attribute ``shape``).

In C a reshape is a copy into the output's own buffer (no aliasing yet)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    IntArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    per_sample_always,
    unsupported,
)
from poet_edge.work import OpClass, Work


def resolve(in_shape, target, allowzero=0) -> tuple[int, ...]:
    dims = [in_shape[i] if (d == 0 and not allowzero) else int(d) for i, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise ValueError(f"Reshape target {tuple(target)} has more than one -1")
    if -1 in dims:
        known = elements(tuple(d for d in dims if d != -1))
        dims[dims.index(-1)] = elements(in_shape) // known if known else 0
    if elements(tuple(dims)) != elements(in_shape):
        raise ValueError(f"cannot reshape {tuple(in_shape)} to {tuple(target)}")
    return tuple(dims)


def infer(shapes, attrs):
    return [resolve(shapes[0], attrs["shape"], int(attrs.get("allowzero", 0)))]


def forward(xs, attrs):
    return [xs[0].reshape(infer([xs[0].shape], attrs)[0])]


def backward(gb, node, gys, needs):
    return [gb.emit("Reshape", (gys[0],), {"shape": gb.shape(node.inputs[0])}) if needs[0] else None]


def work(ins, outs, attrs):
    return Work(
        OpClass.COPY, elements=elements(outs[0]), bytes_read=f32_bytes(ins[0]), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    return KernelCall(
        "poet_copy_f32", (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), IntArg(n)), "copy"
    )


def check(node):
    if "shape" not in node.attrs:
        raise unsupported(node, "shape input that is not a constant (dynamic reshape)")
    if np.asarray(node.attrs["shape"]).ndim != 1:
        raise unsupported(node, "shape that is not a 1-D tensor")


OP = OpDef(
    "Reshape",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={1: "shape"},
    attributes={"allowzero": ANY},
    per_sample=per_sample_always,
)
