"""BatchNormalization in inference form (frozen running statistics, the on-device fine-tuning convention;
equal to PyTorch eval mode with gradients on): Y = (X - mean) * (scale / sqrt(var + eps)) + bias per channel
of X[N, C, *spatial]. scale and bias are trainable; mean and var are parameters that are never trained.

Gradients: dX = BatchNormGradInput(dY, scale, var) = dY * scale / sqrt(var + eps),
dscale = BatchNormGradScale(X, dY, mean, var) = sum(dY * (X - mean)) / sqrt(var + eps),
dbias = ChannelSum(dY).
"""

from __future__ import annotations

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.ops.base import (
    ANY,
    Attr,
    FloatArg,
    IntArg,
    KernelCall,
    NullArg,
    OpDef,
    TensorArg,
    elements,
    elementwise_work,
    f32_bytes,
    no_effect,
    per_sample_first,
)
from poet_edge.ops.base import unsupported as refuse
from poet_edge.ops.channel_sum import dims
from poet_edge.work import OpClass, Work

SCALE, BIAS, MEAN, VAR = 1, 2, 3, 4


def _eps(attrs) -> float:
    return float(attrs.get("epsilon", 1e-5))


def _per_channel(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def _gain(x, scale, var, attrs) -> np.ndarray:
    """scale / sqrt(var + eps), shaped to broadcast over x (C: same expression per channel)."""
    eps = np.asarray(_eps(attrs), dtype=x.dtype)
    return _per_channel(x, scale / np.sqrt(var + eps))


def _std(x, var, attrs) -> np.ndarray:
    eps = np.asarray(_eps(attrs), dtype=x.dtype)
    return np.sqrt(var + eps)


def infer(shapes, attrs):
    _, c, _ = dims(shapes[0])
    for i, s in enumerate(shapes[1:5], 1):
        if tuple(s) != (c,):
            raise ValueError(f"input {i} has shape {tuple(s)}, expected ({c},)")
    return [tuple(shapes[0])]


def forward(xs, attrs):
    x, scale, bias, mean, var = xs
    y = (x - _per_channel(x, mean)) * _gain(x, scale, var, attrs) + _per_channel(x, bias)
    return [y.astype(x.dtype)]


def backward(gb, node, gys, needs):
    x, scale, _, mean, var = node.inputs
    dy = gys[0]
    if needs[MEAN] or needs[VAR]:
        raise PoetError(
            f"node '{node.name}' (BatchNormalization): the running mean and variance are frozen "
            f"statistics; they cannot be trained or computed from trainable tensors"
        )
    eps = {"epsilon": _eps(node.attrs)}
    grads: list[str | None] = [None] * 5
    if needs[0]:
        grads[0] = gb.emit("BatchNormGradInput", (dy, scale, var), eps)
    if needs[SCALE]:
        grads[SCALE] = gb.emit("BatchNormGradScale", (x, dy, mean, var), eps)
    if needs[BIAS]:
        grads[BIAS] = gb.emit("ChannelSum", (dy,))
    return grads


work = elementwise_work


def _ncs(node, shape) -> tuple[IntArg, IntArg, IntArg]:
    n, c, s = dims(shape(node.inputs[0]))
    return IntArg(n), IntArg(c), IntArg(s)


def kernel(node, shape):
    ins = (TensorArg(t) for t in node.inputs)
    return KernelCall(
        "poet_batchnorm_f32",
        (*ins, TensorArg(node.outputs[0], False), *_ncs(node, shape), FloatArg(_eps(node.attrs))),
        "batchnorm",
    )


def check(node):
    if any(o for o in node.outputs[1:]):
        extra = [o for o in node.outputs[1:] if o]
        raise refuse(node, f"training-mode outputs {extra} (running mean/var updates); only Y is supported")
    if len(node.inputs) != 5 or "" in node.inputs:
        raise refuse(node, "missing inputs (X, scale, B, input_mean, input_var are all required)")


# ---- BatchNormGradInput(dY, scale, var) -> dX ------------------------------------------------------
def grad_input_infer(shapes, attrs):
    return [tuple(shapes[0])]


def grad_input_forward(xs, attrs):
    dy, scale, var = xs
    return [(dy * _gain(dy, scale, var, attrs)).astype(dy.dtype)]


def grad_input_kernel(node, shape):
    return KernelCall(
        "poet_batchnorm_grad_input_f32",
        (
            *(TensorArg(t) for t in node.inputs),
            TensorArg(node.outputs[0], False),
            *_ncs(node, shape),
            FloatArg(_eps(node.attrs)),
        ),
        "batchnorm",
    )


# ---- BatchNormGradScale(X, dY, mean, var, [P]) -> dscale ---------------------------------------------
# A row part (operator splitting) has ``partial`` (its sums start at P, the previous part's) and ``divide``
# (False but for the chain's last part, which divides by sqrt(var + eps)): the chain over ranges of rows
# adds in the whole node's order at batch 1, so its bits are the unsplit ones.
def grad_scale_infer(shapes, attrs):
    c = dims(shapes[0])[1]
    if len(shapes) != (5 if attrs.get("partial", False) else 4):
        raise ValueError(f"BatchNormGradScale takes X, dY, mean, var{', P' if attrs.get('partial') else ''}")
    return [(c,)]


def grad_scale_forward(xs, attrs):
    x, dy, mean, var = xs[:4]
    acc = (dy * (x - _per_channel(x, mean))).sum(axis=(0, *range(2, x.ndim)))
    if attrs.get("partial", False):
        acc = xs[4] + acc
    if not attrs.get("divide", True):
        return [np.asarray(acc).astype(x.dtype)]
    return [(acc / _std(x, var, attrs)).astype(x.dtype)]


def grad_scale_work(ins, outs, attrs):
    return Work(
        OpClass.REDUCE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(*outs)
    )


def grad_scale_kernel(node, shape):
    ins, out = tuple(TensorArg(t) for t in node.inputs[:4]), TensorArg(node.outputs[0], False)
    eps = FloatArg(_eps(node.attrs))
    if "divide" not in node.attrs and not node.attr("partial", False):
        return KernelCall("poet_batchnorm_grad_scale_f32", (*ins, out, *_ncs(node, shape), eps), "batchnorm")
    prev = TensorArg(node.inputs[4]) if node.attr("partial", False) else NullArg()
    divide = IntArg(int(bool(node.attrs.get("divide", True))))
    return KernelCall(
        "poet_batchnorm_grad_scale_part_f32", (*ins, prev, out, *_ncs(node, shape), eps, divide), "batchnorm"
    )


ATTRIBUTES = {
    "epsilon": ANY,
    "momentum": no_effect("it updates only the running mean/var, which stay frozen"),
    "spatial": Attr(lambda v: v == 1, "1 (per-channel statistics; spatial=0 is per-activation)"),
    "training_mode": Attr(
        lambda v: v == 0,
        "0: the inference form with frozen running mean/var (batch statistics are not implemented; "
        "export the model in eval mode)",
    ),
}
OP = OpDef(
    "BatchNormalization",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    frozen_inputs=frozenset({MEAN, VAR}),
    attributes=ATTRIBUTES,
    per_sample=per_sample_first,
    channel_inputs=frozenset({SCALE, BIAS, MEAN, VAR}),
)
GRAD_INPUT = OpDef(
    "BatchNormGradInput",
    grad_input_infer,
    grad_input_forward,
    work,
    None,
    grad_input_kernel,
    internal=True,
    channel_inputs=frozenset({1, 2}),  # (dY, scale, var)
)
GRAD_SCALE = OpDef(
    "BatchNormGradScale",
    grad_scale_infer,
    grad_scale_forward,
    grad_scale_work,
    None,
    grad_scale_kernel,
    internal=True,
    channel_inputs=frozenset({2, 3}),  # (X, dY, mean, var); dscale: one value per channel too
)
