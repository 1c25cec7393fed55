"""Pad(data, pads, constant_value, axes) with mode "constant": Y is X surrounded by ``pads`` copies of the
constant (default 0) on each side of each axis. Opset >= 11: ``pads`` (int64, [begin_0, ..., begin_k,
end_0, ..., end_k]), ``constant_value`` (a scalar) and ``axes`` (opset >= 18, negative allowed; default every
axis) are constant inputs, folded to the attributes ``pads``, ``value`` and ``axes``; before opset 11 ``pads``
and ``value`` are attributes already. Pads must be >= 0: a negative pad (cropping) is refused, and so are
the modes "reflect", "edge" and "wrap" (only "constant" is implemented).

C: ``poet_pad_f32`` writes each output element once (the constant, or a copied input element).
Gradient PadGrad(dY): dX is the part of dY over the input, computed as a Slice (starts = the begin pads,
ends = dY's dims minus the end pads) by Slice's numpy and C (the strided copy); no gradient flows to the
constant."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from poet_edge.ops import slice as sl
from poet_edge.ops.base import (
    ANY,
    FloatArg,
    IntArg,
    IntArrayArg,
    KernelCall,
    OpDef,
    TensorArg,
    only,
    unsupported,
)
from poet_edge.ops.broadcast import check_rank
from poet_edge.ops.softmax import norm_axis
from poet_edge.ops.transpose import copy_work, grow_work

SUPPORTED = "mode 'constant' with constant pads >= 0 and a constant constant_value (not NaN)"


def begins_ends(rank: int, attrs) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The pads before and after every axis of a rank-``rank`` input (0 on axes not in ``axes``)."""
    pads = tuple(int(p) for p in attrs["pads"])
    axes = tuple(norm_axis(int(a), rank) for a in attrs.get("axes", range(rank)))
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad has {len(pads)} pads for {len(axes)} axes (2 per axis expected)")
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise ValueError(
            f"Pad axes {tuple(attrs.get('axes', ()))} repeat or are out of range for rank {rank}"
        )
    b, e = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        b[a], e[a] = pads[k], pads[k + len(axes)]
    return tuple(b), tuple(e)


def value_of(attrs) -> float:
    """The constant: the folded ``constant_value`` input (a one-element tuple, empty when omitted) or the
    opset < 11 attribute ``value`` (a float); 0.0 when absent."""
    v = attrs.get("value", 0.0)
    if isinstance(v, (tuple, list, np.ndarray)):
        flat = np.asarray(v).reshape(-1)
        if flat.size > 1:
            raise ValueError(f"Pad constant_value must be a scalar, got {flat.size} values")
        v = flat[0] if flat.size else 0.0
    return float(v)  # type: ignore[arg-type]


def infer(shapes, attrs):
    x = tuple(shapes[0])
    b, e = begins_ends(len(x), attrs)
    out = tuple(d + p + q for d, p, q in zip(x, b, e, strict=True))
    if min(out, default=1) < 1:
        raise ValueError(f"Pad of {x} by {b} / {e} leaves an empty dim")
    return [out]


def forward(xs, attrs):
    x = xs[0]
    b, e = begins_ends(x.ndim, attrs)
    if min(b + e, default=0) < 0:
        raise ValueError(f"negative pads {b} / {e}")
    return [
        np.pad(x, list(zip(b, e, strict=True)), constant_values=x.dtype.type(np.float32(value_of(attrs))))
    ]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    b, e = begins_ends(len(gb.shape(node.inputs[0])), node.attrs)
    if not any(b + e):
        return [gys[0]]  # nothing padded: dX is dY
    return [gb.emit("PadGrad", (gys[0],), {"pads": b + e})]


def kernel(node, shape):
    x = shape(node.inputs[0])
    b, e = begins_ends(len(x), node.attrs)
    check_rank(tuple(x))
    args = (
        TensorArg(node.inputs[0]),
        TensorArg(node.outputs[0], False),
        FloatArg(value_of(node.attrs)),
        IntArg(len(x)),
        IntArrayArg(tuple(x) or (1,)),
        IntArrayArg(b + e or (0, 0)),
    )
    return KernelCall("poet_pad_f32", args, "pad")


def check(node):
    if "pads" not in node.attrs:
        raise unsupported(node, f"pads input that is not a constant; supported: {SUPPORTED}")
    pads = tuple(int(p) for p in node.attrs["pads"])  # type: ignore[attr-defined]
    if min(pads, default=0) < 0:
        raise unsupported(node, f"negative pads {list(pads)} (cropping); supported: {SUPPORTED}")
    try:
        v = value_of(node.attrs)
    except ValueError as e:
        raise unsupported(node, f"constant_value ({e}); supported: {SUPPORTED}") from None
    if math.isnan(v):
        raise unsupported(node, f"constant_value NaN; supported: {SUPPORTED}")


def work(ins, outs, attrs):
    """Every output element written once, each input element read once. Measured on qemu-cortex-m4
    (poet_edge.microbench, 8 channels unless said): 1.06 instructions per output byte for 4 32x32 maps padded
    by 1, 1.34 for 16x16 maps, 1.87 for 8x8 maps, 1.85 for 4 4x4 maps padded by 2, 1.02 for 1-D rows of 64
    (a fixed cost per output row, about 43 instructions, besides 0.74 per byte), against the cortex-m4
    profile's 0.977 per copied byte: weight 1.4."""
    return grow_work(ins, outs, 1.4)


def per_sample(ins: Sequence, batched: Sequence[bool], attrs, axis: int = 0) -> bool:
    """No pad on the split axis."""
    b, e = begins_ends(len(ins[0]), attrs)
    return b[axis] == 0 and e[axis] == 0


# ---- the gradient: the part of dY over X, a Slice --------------------------------------------------------
def crop(dy: Sequence[int], attrs) -> dict[str, object]:
    """The Slice attributes that cut X's part out of a dY of shape ``dy`` (``pads``: every axis's)."""
    b, e = begins_ends(len(dy), attrs)
    axes = tuple(a for a in range(len(dy)) if b[a] or e[a])
    return {"starts": tuple(b[a] for a in axes), "ends": tuple(dy[a] - e[a] for a in axes), "axes": axes}


def grad_infer(shapes, attrs):
    return sl.infer(shapes, crop(shapes[0], attrs))


def grad_forward(xs, attrs):
    return sl.forward(xs, crop(xs[0].shape, attrs))


def grad_work(ins, outs, attrs):
    """Slice's work (each dX element copied once) at the strided copy's measured rate: 1.78 instructions
    per dX byte on qemu-cortex-m4 (8 18x18 maps cropped to 16x16) against 0.977 per copied byte."""
    return replace(copy_work(ins, outs, attrs), weight=1.8)


def grad_kernel(node, shape):
    return sl.kernel(replace(node, attrs=crop(shape(node.inputs[0]), node.attrs)), shape)


OP = OpDef(
    "Pad",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={1: "pads", 2: "value", 3: "axes"},
    # opset < 11: pads and value are attributes (the names the inputs fold to)
    attributes={"mode": only("constant"), "pads": ANY, "value": ANY},
    # each output channel from the same input channel when the channels are not padded (splitting checks
    # that every operand has the same [N, C])
    per_channel=True,
    per_sample=per_sample,
)
# dX = dY cropped by Slice's numpy and C (the strided copy); an op of its own, with every axis's pads, so
# that it runs per channel tile like Pad (operator splitting)
GRAD = OpDef(
    "PadGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True, per_channel=True
)
