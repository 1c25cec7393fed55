"""Numpy-style broadcasting shared by the elementwise ops and their gradients."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArrayArg, IntArg, Shape


def broadcast_shape(*shapes: Shape) -> Shape:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError as e:
        raise ValueError(f"shapes {list(shapes)} do not broadcast") from e


def strides_for(shape: Shape, out: Shape) -> tuple[int, ...]:
    """Element strides of ``shape`` walked along ``out`` (0 on broadcast axes)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for d in reversed(padded):
        strides.append(0 if d == 1 else step)
        step *= d
    return tuple(reversed(strides))


def bcast_args(out: Shape, *inputs: Shape) -> list[IntArg | IntArrayArg]:
    """rank, dims, then one stride array per input (C: poet_bcast iteration)."""
    dims = out if out else (1,)
    args: list[IntArg | IntArrayArg] = [IntArg(len(dims)), IntArrayArg(tuple(dims))]
    for s in inputs:
        args.append(IntArrayArg(strides_for(s, dims)))
    return args
