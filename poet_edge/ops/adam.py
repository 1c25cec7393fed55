"""AdamUpdate(param, grad, exp_avg, exp_avg_sq): torch.optim.Adam / AdamW at step t, in place.

In float32, with the scalars computed in double as torch computes them in Python floats
(``b^t`` by repeated squaring, the same in C):

    g = g + wd * p                               (Adam; AdamW instead: p = p * (1 - lr * wd))
    m = m + (1 - b1) * (g - m)                   (torch's lerp)
    v = v * b2 + (1 - b2) * g * g
    p = p + (-(lr / (1 - b1^t)) * m) / (sqrt(v) / sqrt(1 - b2^t) + eps)

``lr`` and ``t`` (the step count, 1 at the first step after poet_init) are run-time arguments. It has no
output tensor: ``forward`` returns the new p, m and v (the inputs it updates, in order).
"""

from __future__ import annotations

import math

import numpy as np

from poet_edge.ops.base import (
    DoubleArg,
    IntArg,
    KernelCall,
    OpDef,
    RuntimeArg,
    TensorArg,
    elements,
    f32_bytes,
)
from poet_edge.ops.sgd import weight
from poet_edge.work import OpClass, Work

# instructions per element of poet_adam_f32 on qemu-cortex-m4 (4096 elements): no weight decay, Adam's
# (L2, added to the gradient), AdamW's (decoupled)
INSTRUCTIONS = {"none": 36.3, "l2": 29.6, "decoupled": 37.6}


def infer(shapes, attrs):
    return []


def powi(b: float, e: int) -> float:
    """b**e by repeated squaring in double: the C kernel's poet_powi, bit for bit."""
    r = 1.0
    while e > 0:
        if e & 1:
            r *= b
        b *= b
        e >>= 1
    return r


def forward(xs, attrs):
    p, g, m, v = xs
    f = p.dtype.type
    lr, t = float(f(attrs["lr"])), int(attrs["t"])  # lr as the C kernel gets it (a float) in float32
    b1, b2, wd = float(attrs["beta1"]), float(attrs["beta2"]), float(attrs["weight_decay"])
    step = f(lr / (1.0 - powi(b1, t)))
    bc2 = f(math.sqrt(1.0 - powi(b2, t)))
    if wd and attrs["decoupled"]:
        p = p * f(1.0 - lr * wd)
    elif wd:
        g = g + f(wd) * p
    m = m + f(1.0 - b1) * (g - m)
    v = v * f(b2) + f(1.0 - b2) * g * g
    denom = np.sqrt(v) / bc2 + f(attrs["eps"])
    return [(p + (-step * m) / denom).astype(p.dtype), m.astype(p.dtype), v.astype(p.dtype)]


def work(ins, outs, attrs):
    """Reads p, g, m, v; writes p, m, v."""
    decay = "none" if not attrs["weight_decay"] else "decoupled" if attrs["decoupled"] else "l2"
    return Work(
        OpClass.UPDATE,
        elements=elements(ins[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=3 * f32_bytes(ins[0]),
        weight=weight(INSTRUCTIONS[decay]),
    )


def kernel(node, shape):
    p, g, m, v = node.inputs
    a = node.attrs
    return KernelCall(
        "poet_adam_f32",
        (
            TensorArg(p, const=False),
            TensorArg(g),
            TensorArg(m, const=False),
            TensorArg(v, const=False),
            IntArg(elements(shape(p))),
            RuntimeArg("lr"),
            RuntimeArg("t"),
            DoubleArg(float(a["beta1"])),
            DoubleArg(float(a["beta2"])),
            DoubleArg(float(a["eps"])),
            DoubleArg(float(a["weight_decay"])),
            IntArg(int(bool(a["decoupled"]))),
        ),
        "adam",
    )


OP = OpDef("AdamUpdate", infer, forward, work, None, kernel, internal=True)
