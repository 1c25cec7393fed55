"""ReduceSumTo(X) -> Y: sum X over broadcast axes down to attribute ``shape`` and multiply by ``scale``.

Internal: the gradient of every broadcasting op (bias gradients)."""

from __future__ import annotations

from poet_edge.ops.base import FloatArg, IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.ops.broadcast import bcast_args
from poet_edge.work import OpClass, Work


def infer(shapes, attrs):
    return [tuple(attrs["shape"])]


def forward(xs, attrs):
    x, target = xs[0], tuple(attrs["shape"])
    lead = x.ndim - len(target)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(target) if d == 1 and x.shape[lead + i] != 1
    )
    y = x.sum(axis=axes, keepdims=True).reshape(target) if axes else x.reshape(target)
    return [(y * x.dtype.type(attrs.get("scale", 1.0))).astype(x.dtype)]


def work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    x, y = node.inputs[0], node.outputs[0]
    # walk X's dims; Y is addressed with broadcast strides (0 on the summed axes)
    return KernelCall(
        "poet_reduce_sum_to_f32",
        (
            TensorArg(x),
            TensorArg(y, False),
            FloatArg(float(node.attr("scale", 1.0))),
            IntArg(elements(shape(y))),
            *bcast_args(shape(x), shape(y)),
        ),
        "reduce_sum_to",
    )


# operator splitting: a ReduceSumTo that only scales (its shape kept: Div's gradient for its divisor) runs
# per tile like any channelwise op; one that sums the axes after the first two (to [N, C, 1, 1]: a
# squeeze-and-excitation gate's gradient) runs per channel tile (the shapes are checked there)
OP = OpDef(
    "ReduceSumTo", infer, forward, work, None, kernel, internal=True, channelwise=True, per_channel=True
)
