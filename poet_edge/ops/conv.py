"""Conv (1-D/2-D, NCHW, groups incl. depthwise, strides, pads / auto_pad, dilation 1, optional bias)
and its gradients ConvGradInput(dY, W) -> dX and ConvGradWeight(X, dY, [P]) -> dW (the bias gradient is
ChannelSum(dY)). Direct convolution in C: no im2col buffer, no workspace.

With attribute ``partial``, ConvGradWeight adds its sums to P (shaped as dW): operator splitting's row tiles
(poet_edge/splitting.py) chain one call per range of dY's rows, each on the window of X rows that range
reads (its own geometry), P the previous call's dW. The C kernel's accumulators start at P and add the
products in the reference order (n, oh, ow), so at batch 1 the chain gives the unsplit kernel's bits."""

from __future__ import annotations

import numpy as np

from poet_edge.kernel_model import conv_weight
from poet_edge.ops.base import (
    ANY,
    KernelCall,
    NullArg,
    OpDef,
    TensorArg,
    f32_bytes,
    per_sample_first,
    unsupported,
)
from poet_edge.ops.pool_common import WINDOW_ATTRIBUTES, Window, window, with_shape
from poet_edge.work import OpClass, Work


def conv_window(x, w, attrs) -> Window:
    """Geometry from input shape ``x`` and weight shape ``w`` = (M, C/groups, *kernel)."""
    g = int(attrs.get("group", 1))
    if len(w) != len(x):
        raise ValueError(f"weight {tuple(w)} and input {tuple(x)} differ in rank")
    if g < 1 or x[1] % g or w[0] % g or w[1] * g != x[1]:
        raise ValueError(
            f"group={g}: input channels {x[1]} and weight {tuple(w)} do not match (W is [M, C/group, ...])"
        )
    return window(x, w[2:], attrs, m=int(w[0]), groups=g)


def _macs(win: Window) -> int:
    return win.n * win.m * win.oh * win.ow * (win.c // win.groups) * win.kh * win.kw


def op_class(win: Window) -> OpClass:
    # depthwise: one input channel per group (C_in == groups > 1), C_out = multiplier * C_in
    return OpClass.DEPTHWISE if win.groups == win.c > 1 and win.m % win.c == 0 else OpClass.CONV


def _conv_work(win: Window, ins, outs, kind: str) -> Work:
    cls, macs = op_class(win), _macs(win)
    return Work(
        cls,
        macs=macs,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=conv_weight(win, kind, macs),
    )


def _split(win: Window, w: np.ndarray) -> np.ndarray:
    """W as [G, M/G, C/G, KH, KW]."""
    g = win.groups
    return w.reshape(g, win.m // g, win.c // g, win.kh, win.kw)


def _padded(win: Window, x4: np.ndarray) -> np.ndarray:
    """Zero-padded input as [N, G, C/G, Hp, Wp]."""
    xp = np.pad(x4, ((0, 0), (0, 0), (win.pt, win.pb), (win.pl, win.pr)))
    return xp.reshape(win.n, win.groups, win.c // win.groups, *xp.shape[2:])


def _taps(win: Window):
    """(i, j, row slice, col slice) of the padded input that kernel tap (i, j) reads for all outputs."""
    for i in range(win.kh):
        for j in range(win.kw):
            rows = slice(i, i + win.sh * (win.oh - 1) + 1, win.sh)
            yield i, j, rows, slice(j, j + win.sw * (win.ow - 1) + 1, win.sw)


# ---- Conv ------------------------------------------------------------------------------------
def infer(shapes, attrs):
    win = conv_window(shapes[0], shapes[1], attrs)
    if len(shapes) > 2 and tuple(shapes[2]) != (win.m,):
        raise ValueError(f"bias shape {tuple(shapes[2])} != ({win.m},)")
    return [win.y_shape]


def forward(xs, attrs):
    x, w = xs[0], xs[1]
    win = conv_window(x.shape, w.shape, attrs)
    xp, wg = _padded(win, x.reshape(win.x4)), _split(win, w)
    g = win.groups
    y = np.zeros((win.n, g, win.m // g, win.oh, win.ow), dtype=x.dtype)
    for i, j, rs, cs in _taps(win):
        y += np.einsum("ngchw,gmc->ngmhw", xp[..., rs, cs], wg[..., i, j])
    y = y.reshape(win.y4)
    if len(xs) > 2:
        y = y + xs[2].reshape(1, -1, 1, 1)
    return [y.reshape(win.y_shape).astype(x.dtype)]


def backward(gb, node, gys, needs):
    x, w = node.inputs[0], node.inputs[1]
    dy = gys[0]
    grads: list[str | None] = [None] * len(node.inputs)
    if needs[0]:
        grads[0] = gb.emit("ConvGradInput", (dy, w), with_shape(node.attrs, "x_shape", gb.shape(x)))
    if needs[1]:
        grads[1] = gb.emit("ConvGradWeight", (x, dy), with_shape(node.attrs, "w_shape", gb.shape(w)))
    if len(node.inputs) > 2 and needs[2]:
        grads[2] = gb.emit("ChannelSum", (dy,))
    return grads


def work(ins, outs, attrs):
    return _conv_work(conv_window(ins[0], ins[1], attrs), ins, outs, "forward")


def kernel(node, shape):
    win = conv_window(shape(node.inputs[0]), shape(node.inputs[1]), node.attrs)
    b = TensorArg(node.inputs[2]) if len(node.inputs) > 2 else NullArg()
    return KernelCall(
        "poet_conv2d_f32",
        (
            TensorArg(node.inputs[0]),
            TensorArg(node.inputs[1]),
            b,
            TensorArg(node.outputs[0], False),
            win.ints(),
        ),
        "conv",
    )


def check(node):
    if len(node.inputs) == 3 and node.inputs[2] == "":
        raise unsupported(node, "empty optional input B (drop it instead)")


# ---- ConvGradInput(dY, W) -> dX ------------------------------------------------------------------
def _gi_window(shapes, attrs) -> Window:
    return conv_window(tuple(attrs["x_shape"]), shapes[1], attrs)


def grad_input_infer(shapes, attrs):
    return [_gi_window(shapes, attrs).x_shape]


def grad_input_forward(xs, attrs):
    dy, w = xs
    win = _gi_window([dy.shape, w.shape], attrs)
    g, wg = win.groups, _split(win, w)
    dyg = dy.reshape(win.n, g, win.m // g, win.oh, win.ow)
    dxp = np.zeros((win.n, g, win.c // g, win.h + win.pt + win.pb, win.w + win.pl + win.pr), dtype=dy.dtype)
    for i, j, rs, cs in _taps(win):
        dxp[..., rs, cs] += np.einsum("ngmhw,gmc->ngchw", dyg, wg[..., i, j])
    dx = dxp.reshape(win.n, win.c, *dxp.shape[3:])[:, :, win.pt : win.pt + win.h, win.pl : win.pl + win.w]
    return [np.ascontiguousarray(dx).reshape(win.x_shape)]


def grad_input_work(ins, outs, attrs):
    return _conv_work(_gi_window(ins, attrs), ins, outs, "grad_input")


def grad_input_kernel(node, shape):
    win = _gi_window([shape(t) for t in node.inputs], node.attrs)
    return KernelCall(
        "poet_conv2d_grad_input_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), TensorArg(node.outputs[0], False), win.ints()),
        "conv",
    )


# ---- ConvGradWeight(X, dY) -> dW -----------------------------------------------------------------
def _gw_window(shapes, attrs) -> Window:
    return conv_window(shapes[0], tuple(attrs["w_shape"]), attrs)


def _gw_partial(attrs) -> bool:
    return bool(attrs.get("partial", False))


def grad_weight_infer(shapes, attrs):
    win = _gw_window(shapes, attrs)
    w = tuple(attrs["w_shape"])
    if tuple(shapes[1]) != win.y_shape:
        raise ValueError(f"output gradient {tuple(shapes[1])} is not the conv's output {win.y_shape}")
    if len(shapes) != (3 if _gw_partial(attrs) else 2):
        raise ValueError(
            f"ConvGradWeight takes X, dY{' and P' if _gw_partial(attrs) else ''}, got {len(shapes)}"
        )
    if _gw_partial(attrs) and tuple(shapes[2]) != w:
        raise ValueError(f"partial sums {tuple(shapes[2])} are not the weight gradient's shape {w}")
    return [w]


def grad_weight_forward(xs, attrs):
    x, dy = xs[0], xs[1]
    win = _gw_window([x.shape, dy.shape], attrs)
    g = win.groups
    xp = _padded(win, x.reshape(win.x4))
    dyg = dy.reshape(win.n, g, win.m // g, win.oh, win.ow)
    dw = np.zeros((g, win.m // g, win.c // g, win.kh, win.kw), dtype=x.dtype)
    for i, j, rs, cs in _taps(win):
        dw[..., i, j] = np.einsum("ngchw,ngmhw->gmc", xp[..., rs, cs], dyg)
    out = dw.reshape(tuple(attrs["w_shape"]))
    if _gw_partial(attrs):
        out = (xs[2] + out).astype(x.dtype)
    return [out]


def grad_weight_work(ins, outs, attrs):
    return _conv_work(_gw_window(ins, attrs), ins, outs, "grad_weight")


def grad_weight_kernel(node, shape):
    win = _gw_window([shape(t) for t in node.inputs], node.attrs)
    x, dy, out = TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), TensorArg(node.outputs[0], False)
    if _gw_partial(node.attrs):
        p = TensorArg(node.inputs[2])
        # conv_part.c: the part kernel calls the part GEMM, which the whole kernels (conv.c) never need
        return KernelCall("poet_conv2d_grad_weight_part_f32", (x, dy, p, out, win.ints()), "conv_part")
    return KernelCall("poet_conv2d_grad_weight_f32", (x, dy, out, win.ints()), "conv")


OP = OpDef(
    "Conv",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    attributes={**WINDOW_ATTRIBUTES, "group": ANY},
    per_sample=per_sample_first,
)
GRAD_INPUT = OpDef(
    "ConvGradInput",
    grad_input_infer,
    grad_input_forward,
    grad_input_work,
    None,
    grad_input_kernel,
    internal=True,
)
GRAD_WEIGHT = OpDef(
    "ConvGradWeight",
    grad_weight_infer,
    grad_weight_forward,
    grad_weight_work,
    None,
    grad_weight_kernel,
    internal=True,
)
