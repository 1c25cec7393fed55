"""ReduceMean over ``axes`` (attribute, or constant input from opset 18; none = all unless
noop_with_empty_axes), keepdims. C: poet_reduce_sum_to_f32 with scale 1/count. The gradient broadcasts
dY / count back to the input shape (internal op BroadcastTo)."""

from __future__ import annotations

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
    per_sample_axes,
)
from poet_edge.ops.broadcast import bcast_args, strides_for
from poet_edge.ops.softmax import norm_axis
from poet_edge.ops.transpose import strided_copy
from poet_edge.work import OpClass, Work


def axes_of(shape, attrs) -> tuple[int, ...]:
    axes = tuple(attrs.get("axes", ()) or ())
    if not axes:
        return () if int(attrs.get("noop_with_empty_axes", 0)) else tuple(range(len(shape)))
    out = sorted({norm_axis(int(a), len(shape)) for a in axes})
    if len(out) != len(axes):
        raise ValueError(f"repeated axes {axes}")
    return tuple(out)


def kept(shape, attrs) -> tuple[int, ...]:
    axes = axes_of(shape, attrs)
    return tuple(1 if i in axes else int(d) for i, d in enumerate(shape))


def infer(shapes, attrs):
    s, axes = tuple(shapes[0]), axes_of(shapes[0], attrs)
    if int(attrs.get("keepdims", 1)):
        return [kept(s, attrs)]
    return [tuple(d for i, d in enumerate(s) if i not in axes)]


def _scale(shape, attrs) -> float:
    return 1.0 / max(1, elements(tuple(shape[a] for a in axes_of(shape, attrs))))


def forward(xs, attrs):
    x, axes = xs[0], axes_of(xs[0].shape, attrs)
    y = x.mean(axis=axes, keepdims=bool(int(attrs.get("keepdims", 1)))) if axes else x.copy()
    return [np.asarray(y, x.dtype)]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    s = gb.shape(node.inputs[0])
    return [
        gb.emit(
            "BroadcastTo",
            (gys[0],),
            {"shape": s, "view": kept(s, node.attrs), "scale": _scale(s, node.attrs)},
        )
    ]


def work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    x, y = node.inputs[0], node.outputs[0]
    xs = shape(x)
    args = (
        TensorArg(x),
        TensorArg(y, False),
        FloatArg(_scale(xs, node.attrs)),
        IntArg(elements(shape(y))),
        *bcast_args(xs, kept(xs, node.attrs)),
    )
    return KernelCall("poet_reduce_sum_to_f32", args, "reduce_sum_to")


# ---- BroadcastTo(X): Y = scale * X viewed as ``view`` (default X's shape), broadcast to ``shape`` ----
def bt_infer(shapes, attrs):
    view = tuple(attrs.get("view", shapes[0]))
    if elements(view) != elements(tuple(shapes[0])):
        raise ValueError(f"BroadcastTo: view {view} does not match input {shapes[0]}")
    np.broadcast_shapes(view, tuple(attrs["shape"]))
    return [tuple(attrs["shape"])]


def bt_forward(xs, attrs):
    x = xs[0].reshape(tuple(attrs.get("view", xs[0].shape)))
    y = np.broadcast_to(x, tuple(attrs["shape"])) * xs[0].dtype.type(attrs.get("scale", 1.0))
    return [np.ascontiguousarray(y, xs[0].dtype)]


def bt_work(ins, outs, attrs):
    return Work(
        OpClass.ELEMENTWISE,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


def bt_kernel(node, shape):
    out = tuple(node.attrs["shape"])
    view = tuple(node.attrs.get("view", shape(node.inputs[0])))
    return strided_copy(
        node.inputs[0],
        node.outputs[0],
        out,
        strides_for(view, out),
        scale=float(node.attrs.get("scale", 1.0)),
    )


ATTRIBUTES = {"axes": ANY, "keepdims": ANY, "noop_with_empty_axes": ANY}  # axes: an attribute before opset 18
# per_channel: over the axes after the first two (operator splitting checks the shapes), each (n, c) alone
OP = OpDef(
    "ReduceMean",
    infer,
    forward,
    work,
    backward,
    kernel,
    const_inputs={1: "axes"},
    attributes=ATTRIBUTES,
    per_channel=True,
    per_sample=per_sample_axes("axes"),
)
BROADCAST_TO = OpDef(
    "BroadcastTo", bt_infer, bt_forward, bt_work, None, bt_kernel, internal=True, per_channel=True
)
