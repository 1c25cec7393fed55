"""Clip(X, min, max) (ReLU6 = Clip(0, 6)). The bounds are constant inputs (opset >= 11, folded to attributes
``min``/``max``) or float attributes (older opsets); a missing bound is unbounded. If min > max, every
output is max (ONNX). Gradient ClipGrad(X, dY) = dY where min < X < max (strictly, as ReLU at 0), else 0."""

from __future__ import annotations

import math

import numpy as np

from poet_edge.ops.base import (
    ANY,
    FloatArg,
    IntArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    per_sample_always,
)
from poet_edge.ops.base import unsupported as refuse
from poet_edge.work import OpClass, Work


def bound(attrs, key: str) -> float | None:
    """The bound as a float, None if absent or infinite in the unbounded direction."""
    v = attrs.get(key)
    if isinstance(v, (tuple, list, np.ndarray)):
        v = np.asarray(v).reshape(-1)
        if v.size != 1:
            raise ValueError(f"Clip {key} must be a scalar, got {v.size} values")
        v = v[0]
    if v is None:
        return None
    v = float(v)
    if v == (-math.inf if key == "min" else math.inf):
        return None
    return v


def _same(shapes, attrs):
    bound(attrs, "min"), bound(attrs, "max")
    return [tuple(shapes[0])]


def _work(ins, outs, attrs):
    return Work(
        OpClass.ELEMENTWISE,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


def bound_args(attrs) -> tuple[IntArg, FloatArg, IntArg, FloatArg]:
    """The kernel arguments (has_min, min, has_max, max) of a Clip's bounds (0.0 for a missing one): the C
    clip kernels take them, and so does the range mask (:mod:`poet_edge.ops.mask`) that stands for them."""
    lo, hi = bound(attrs, "min"), bound(attrs, "max")
    return IntArg(int(lo is not None)), FloatArg(lo or 0.0), IntArg(int(hi is not None)), FloatArg(hi or 0.0)


def forward(xs, attrs):
    x = xs[0]
    lo, hi = bound(attrs, "min"), bound(attrs, "max")
    y = x
    if lo is not None:  # C: y = x < lo ? lo : x; then y = y > hi ? hi : y
        y = np.where(y < x.dtype.type(lo), x.dtype.type(lo), y)
    if hi is not None:
        y = np.where(y > x.dtype.type(hi), x.dtype.type(hi), y)
    return [np.asarray(y, dtype=x.dtype)]


def backward(gb, node, gys, needs):
    attrs = {k: node.attrs[k] for k in ("min", "max") if k in node.attrs}
    return [gb.emit("ClipGrad", (node.inputs[0], gys[0]), attrs) if needs[0] else None]


def kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    x, y = TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False)
    return KernelCall("poet_clip_f32", (x, y, IntArg(n), *bound_args(node.attrs)), "clip")


def check(node):
    for key in ("min", "max"):
        try:
            v = bound(node.attrs, key)
        except ValueError as e:
            raise refuse(node, f"{key} bound ({e})") from None
        if v is not None and not math.isfinite(v):
            raise refuse(node, f"{key}={v}")


def grad_forward(xs, attrs):
    x, dy = xs
    lo, hi = bound(attrs, "min"), bound(attrs, "max")
    keep = np.ones(x.shape, dtype=bool)
    if lo is not None:
        keep &= x > x.dtype.type(lo)
    if hi is not None:
        keep &= x < x.dtype.type(hi)
    return [np.where(keep, dy, 0).astype(dy.dtype)]


def grad_kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    x, dy = node.inputs
    return KernelCall(
        "poet_clip_grad_f32",
        (TensorArg(x), TensorArg(dy), TensorArg(node.outputs[0], False), IntArg(n), *bound_args(node.attrs)),
        "clip",
    )


OP = OpDef(
    "Clip",
    _same,
    forward,
    _work,
    backward,
    kernel,
    check,
    const_inputs={1: "min", 2: "max"},
    attributes={"min": ANY, "max": ANY},  # opset < 11: the bounds are attributes
    channelwise=True,
    per_sample=per_sample_always,
)
GRAD = OpDef("ClipGrad", _same, grad_forward, _work, None, grad_kernel, internal=True, channelwise=True)
