"""Numpy-style broadcasting shared by the elementwise ops and their gradients."""

from __future__ import annotations

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.ops.base import IntArg, IntArrayArg, KernelCall, Shape, TensorArg


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


MAX_RANK = 8  # POET_MAX_RANK in runtime_c/include/poet/bcast.h: the odometer's index array


def check_rank(dims: Shape) -> None:
    if len(dims) > MAX_RANK:
        raise PoetError(f"tensor rank {len(dims)} {tuple(dims)} exceeds the C kernels' limit of {MAX_RANK}")


def bcast_args(out: Shape, *inputs: Shape) -> list[IntArg | IntArrayArg]:
    """rank, dims, then one stride array per input (C: poet_bcast iteration)."""
    dims = out if out else (1,)
    check_rank(dims)
    args: list[IntArg | IntArrayArg] = [IntArg(len(dims)), IntArrayArg(tuple(dims))]
    for s in inputs:
        args.append(IntArrayArg(strides_for(s, dims)))
    return args


# ---- binary elementwise ops (Sub, Mul, Div): one C kernel, poet_binary_f32, selected by an op code ----
BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV = 0, 1, 2, 3  # POET_BIN_* in runtime_c/include/poet/kernels.h


def binary_infer(shapes, attrs):
    return [broadcast_shape(shapes[0], shapes[1])]


def binary_kernel(code: int):
    """Kernel binding of a broadcasting binary op: Y = A (op) B over the output shape."""

    def kernel(node, shape):
        a, b = node.inputs
        out = shape(node.outputs[0])
        return KernelCall(
            "poet_binary_f32",
            (
                IntArg(code),
                TensorArg(a),
                TensorArg(b),
                TensorArg(node.outputs[0], const=False),
                *bcast_args(out, shape(a), shape(b)),
            ),
            "binary",
        )

    return kernel
