"""LayerNormalization over axes [axis, rank) with trainable Scale and optional bias B (both of the normalized
shape X.shape[axis:], leading 1s allowed). The optional Mean / InvStdDev outputs are refused.

Gradients: LayerNormalizationGrad(X, Scale, dY) -> dX and LayerNormalizationScaleGrad(X, dY) -> dScale
(summed over the leading axes); dB = ReduceSumTo(dY)."""

from __future__ import annotations

import numpy as np

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
    f32_bytes,
    per_sample_axis,
    unsupported,
)
from poet_edge.ops.softmax import norm_axis
from poet_edge.work import OpClass, Work


def _axis(shape, attrs) -> int:
    return norm_axis(int(attrs.get("axis", -1)), len(shape))


def _eps(attrs) -> float:
    return float(attrs.get("epsilon", 1e-5))


def _strip(shape) -> tuple[int, ...]:
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def infer(shapes, attrs):
    x = tuple(shapes[0])
    norm = x[_axis(x, attrs) :]
    for name, s in zip(("Scale", "B"), shapes[1:], strict=False):
        if _strip(s) != _strip(norm):
            raise ValueError(
                f"{name} shape {tuple(s)} must be the normalized shape {norm} (X.shape[axis:]); "
                f"other broadcasts are not supported"
            )
    return [x]


def _normalize(x, attrs):
    axes = tuple(range(_axis(x.shape, attrs), x.ndim))
    d = x - x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + x.dtype.type(_eps(attrs)))
    return d * rstd, rstd, axes


def _norm_view(t, x, attrs):
    return t.reshape(x.shape[_axis(x.shape, attrs) :])


def forward(xs, attrs):
    x = xs[0]
    xhat, _, _ = _normalize(x, attrs)
    y = xhat * _norm_view(xs[1], x, attrs)
    if len(xs) > 2:
        y = y + _norm_view(xs[2], x, attrs)
    return [y.astype(x.dtype)]


def backward(gb, node, gys, needs):
    x, s, dy = node.inputs[0], node.inputs[1], gys[0]
    attrs = {"axis": int(node.attr("axis", -1)), "epsilon": _eps(node.attrs)}
    norm = gb.shape(x)[_axis(gb.shape(x), attrs) :]

    def as_param(g, p):
        return g if gb.shape(g) == gb.shape(p) else gb.emit("Reshape", (g,), {"shape": gb.shape(p)})

    grads: list[str | None] = [None] * len(node.inputs)
    if needs[0]:
        grads[0] = gb.emit("LayerNormalizationGrad", (x, s, dy), attrs)
    if needs[1]:
        grads[1] = as_param(gb.emit("LayerNormalizationScaleGrad", (x, dy), attrs), s)
    if len(node.inputs) > 2 and needs[2]:
        grads[2] = as_param(gb.sum_to(dy, norm), node.inputs[2])
    return grads


def grad_forward(xs, attrs):
    x, s, dy = xs
    xhat, rstd, axes = _normalize(x, attrs)
    g = dy * _norm_view(s, x, attrs)
    dx = rstd * (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    return [dx.astype(dy.dtype)]


def scale_grad_infer(shapes, attrs):
    x = tuple(shapes[0])
    return [x[_axis(x, attrs) :]]


def scale_grad_forward(xs, attrs):
    x, dy = xs
    xhat, _, axes = _normalize(x, attrs)
    return [(dy * xhat).sum(axis=tuple(range(len(x.shape) - len(axes)))).astype(dy.dtype)]


def work(ins, outs, attrs):
    return Work(
        OpClass.ELEMENTWISE,
        elements=4 * elements(ins[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )


def _kernel(func, n_tensors):
    def kernel(node, shape):
        xs = shape(node.inputs[0])
        a = _axis(xs, node.attrs)
        ins = [TensorArg(t) for t in node.inputs] + [NullArg()] * (n_tensors - len(node.inputs))
        return KernelCall(
            func,
            (
                *ins,
                TensorArg(node.outputs[0], False),
                IntArg(elements(tuple(xs[:a]))),
                IntArg(elements(tuple(xs[a:]))),
                FloatArg(_eps(node.attrs)),
            ),
            "layer_norm",
        )

    return kernel


def check(node):
    if len(node.outputs) > 1:
        raise unsupported(node, "outputs Mean / InvStdDev (only Y is computed)")
    if len(node.inputs) < 2:
        raise unsupported(node, "missing Scale input")


ATTRIBUTES = {
    "axis": ANY,
    "epsilon": ANY,
    # the statistics' type: 1 (float32) is what the kernels compute in; double (11) or 16-bit stashes are not
    "stash_type": Attr(lambda v: v == 1, "1 (float32 statistics)"),
}
OP = OpDef(
    "LayerNormalization",
    infer,
    forward,
    work,
    backward,
    _kernel("poet_layer_norm_f32", 3),
    check,
    attributes=ATTRIBUTES,
    per_sample=per_sample_axis("axis", -1, onward=True),
)
GRAD = OpDef(
    "LayerNormalizationGrad",
    lambda shapes, attrs: [tuple(shapes[0])],
    grad_forward,
    work,
    None,
    _kernel("poet_layer_norm_grad_f32", 3),
    internal=True,
)
SCALE_GRAD = OpDef(
    "LayerNormalizationScaleGrad",
    scale_grad_infer,
    scale_grad_forward,
    work,
    None,
    _kernel("poet_layer_norm_scale_grad_f32", 2),
    internal=True,
)
