"""Mean squared error over all elements (torch's mse_loss, reduction="mean"); grad = 2 (y - t) / numel."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def infer(shapes, attrs):
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise ValueError(f"mse target shape {shapes[1]} differs from output shape {shapes[0]}")
    return [()]


def forward(xs, attrs):
    d = xs[0] - xs[1]
    return [np.asarray((d * d).mean(), dtype=xs[0].dtype)]


def grad_forward(xs, attrs):
    return [((xs[0] - xs[1]) * xs[0].dtype.type(2.0 / xs[0].size)).astype(xs[0].dtype)]


def grad_infer(shapes, attrs):
    infer(shapes, attrs)
    return [tuple(shapes[0])]


def work(ins, outs, attrs):
    return Work(
        OpClass.LOSS, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def _kernel(func):
    def kernel(node, shape):
        return KernelCall(
            func,
            (
                TensorArg(node.inputs[0]),
                TensorArg(node.inputs[1]),
                TensorArg(node.outputs[0], False),
                IntArg(elements(shape(node.inputs[0]))),
            ),
            "mse",
        )

    return kernel


OP = OpDef("MeanSquaredError", infer, forward, work, None, _kernel("poet_mse_f32"), internal=True)
GRAD = OpDef(
    "MeanSquaredErrorGrad", grad_infer, grad_forward, work, None, _kernel("poet_mse_grad_f32"), internal=True
)
