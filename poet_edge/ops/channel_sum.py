"""ChannelSum(X[N, C, *spatial], [P]) -> Y[C]: the sum over batch and spatial positions of each channel.

Internal: the bias gradient of Conv and the shift gradient of BatchNormalization. With attribute ``partial``
the sums start at P[C] (operator splitting's row tiles: a chain over ranges of rows, each with P the previous
call's Y, gives the unsplit sums' bits at batch 1; the C kernel adds (n, s) ascending from P)."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def dims(x) -> tuple[int, int, int]:
    """(N, C, S) of a [N, C, *spatial] shape; ValueError below rank 2."""
    if len(x) < 2:
        raise ValueError(f"expected [N, C, ...], got {tuple(x)}")
    return int(x[0]), int(x[1]), elements(tuple(x[2:]))


def infer(shapes, attrs):
    c = dims(shapes[0])[1]
    partial = bool(attrs.get("partial", False))
    if len(shapes) != (2 if partial else 1):
        raise ValueError(f"ChannelSum takes X{' and P' if partial else ''}, got {len(shapes)} inputs")
    if partial and tuple(shapes[1]) != (c,):
        raise ValueError(f"partial sums {tuple(shapes[1])} are not the output's shape ({c},)")
    return [(c,)]


def forward(xs, attrs):
    x = xs[0]
    y = x.sum(axis=(0, *range(2, x.ndim)))
    if attrs.get("partial", False):
        y = xs[1] + y
    return [np.asarray(y).astype(x.dtype)]


def work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def kernel(node, shape):
    n, c, s = dims(shape(node.inputs[0]))
    x, y, sizes = (
        TensorArg(node.inputs[0]),
        TensorArg(node.outputs[0], False),
        (IntArg(n), IntArg(c), IntArg(s)),
    )
    if node.attr("partial", False):
        return KernelCall("poet_channel_sum_part_f32", (x, TensorArg(node.inputs[1]), y, *sizes), "conv")
    return KernelCall("poet_channel_sum_f32", (x, y, *sizes), "conv")


OP = OpDef("ChannelSum", infer, forward, work, None, kernel, internal=True)
