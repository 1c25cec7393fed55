"""Shared pieces of the unary elementwise ops (Sigmoid, Tanh, Erf, Gelu) and their gradients."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from poet_edge.kernel_model import element_weight
from poet_edge.ops.base import CArg, IntArg, KernelCall, TensorArg, elements, elementwise_work


def same_shape(shapes, attrs):
    return [tuple(shapes[0])]


def grad_shape(shapes, attrs):
    """Gradient ops G(X or Y, dY): dX has the shape of dY, which must match the first input."""
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise ValueError(f"gradient shape {shapes[1]} differs from {shapes[0]}")
    return [tuple(shapes[1])]


work = elementwise_work


def costly(instructions: float, tanh_instructions: float | None = None):
    """The work of an elementwise op that calls the math helpers: ``instructions`` per element measured for
    its fast kernel on qemu-cortex-m4 (bench/kernel_model.py), ``tanh_instructions`` for approximate=tanh
    (GELU), as a weight relative to a plain elementwise kernel (kernel_model.element_weight)."""

    def _work(ins, outs, attrs):
        tanh = tanh_instructions is not None and attrs.get("approximate", "none") == "tanh"
        per = tanh_instructions if tanh and tanh_instructions is not None else instructions
        return replace(elementwise_work(ins, outs, attrs), weight=element_weight(per))

    return _work


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
