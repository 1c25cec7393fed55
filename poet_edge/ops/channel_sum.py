"""ChannelSum(X[N, C, *spatial]) -> Y[C]: the sum over batch and spatial positions of each channel.

Internal: the bias gradient of Conv and the shift gradient of BatchNormalization."""

from __future__ import annotations

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def dims(x) -> tuple[int, int, int]:
    """(N, C, S) of a [N, C, *spatial] shape; ValueError below rank 2."""
    if len(x) < 2:
        raise ValueError(f"expected [N, C, ...], got {tuple(x)}")
    return int(x[0]), int(x[1]), elements(tuple(x[2:]))


def infer(shapes, attrs):
    return [(dims(shapes[0])[1],)]


def forward(xs, attrs):
    x = xs[0]
    return [x.sum(axis=(0, *range(2, x.ndim))).astype(x.dtype)]


def work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    n, c, s = dims(shape(node.inputs[0]))
    return KernelCall(
        "poet_channel_sum_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), IntArg(n), IntArg(c), IntArg(s)),
        "conv",
    )


OP = OpDef("ChannelSum", infer, forward, work, None, kernel, internal=True)
