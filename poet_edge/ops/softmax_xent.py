"""Softmax cross-entropy with integer labels, mean over the batch (torch's cross_entropy, reduction="mean").

SoftmaxCrossEntropy(logits[N,C], labels[N]) -> loss[];
SoftmaxCrossEntropyGrad -> dlogits = (softmax - onehot) / N.
"""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work


def _check(shapes):
    if len(shapes[0]) != 2:
        raise ValueError(f"cross-entropy needs 2-D logits [batch, classes], got {shapes[0]}")


def infer(shapes, attrs):
    _check(shapes)
    return [()]


def _log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def forward(xs, attrs):
    z, labels = xs[0], xs[1].astype(np.int64)
    ls = _log_softmax(z)
    return [np.asarray(-ls[np.arange(z.shape[0]), labels].mean(), dtype=z.dtype)]


def grad_forward(xs, attrs):
    z, labels = xs[0], xs[1].astype(np.int64)
    p = np.exp(_log_softmax(z))
    p[np.arange(z.shape[0]), labels] -= 1
    return [(p / z.shape[0]).astype(z.dtype)]


def work(ins, outs, attrs):
    return Work(
        OpClass.LOSS,
        elements=elements(ins[0]),
        bytes_read=f32_bytes(ins[0]) + 4 * ins[0][0],
        bytes_written=f32_bytes(*outs),
    )


def _kernel(func):
    def kernel(node, shape):
        n, c = shape(node.inputs[0])
        return KernelCall(
            func,
            (
                TensorArg(node.inputs[0]),
                TensorArg(node.inputs[1]),
                TensorArg(node.outputs[0], False),
                IntArg(n),
                IntArg(c),
            ),
            "softmax_xent",
        )

    return kernel


def grad_infer(shapes, attrs):
    _check(shapes)
    return [tuple(shapes[0])]


OP = OpDef("SoftmaxCrossEntropy", infer, forward, work, None, _kernel("poet_softmax_xent_f32"), internal=True)
GRAD = OpDef(
    "SoftmaxCrossEntropyGrad",
    grad_infer,
    grad_forward,
    work,
    None,
    _kernel("poet_softmax_xent_grad_f32"),
    internal=True,
)
