"""Shared pieces of the unary elementwise ops (Sigmoid, Tanh, Erf, Gelu) and their gradients."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import CArg, IntArg, KernelCall, TensorArg, elements, elementwise_work


def same_shape(shapes, attrs):
    return [tuple(shapes[0])]


def grad_shape(shapes, attrs):
    """Gradient ops G(X or Y, dY): dX has the shape of dY, which must match the first input."""
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise ValueError(f"gradient shape {shapes[1]} differs from {shapes[0]}")
    return [tuple(shapes[1])]


work = elementwise_work


def in64(fn):
    """numpy forward computed in float64 and rounded to the input dtype (a correctly rounded oracle)."""

    def forward(xs, attrs):
        return [np.asarray(fn(*[np.asarray(x, np.float64) for x in xs], attrs)).astype(xs[0].dtype)]

    return forward


def kernel(func: str, source: str, *extra):
    """Binding of ``func(inputs..., output, n, *extra)``; ``extra`` maps the node to trailing C arguments."""

    def bind(node, shape):
        args: list[CArg] = [TensorArg(t) for t in node.inputs]
        args += [TensorArg(node.outputs[0], const=False), IntArg(elements(shape(node.outputs[0])))]
        args += [e(node) for e in extra]
        return KernelCall(func, tuple(args), source)

    return bind
