"""SGDMomentumUpdate(param, grad[, buf]): torch.optim.SGD with momentum and weight decay, in place.

    d = g + weight_decay * p
    buf = momentum * buf + d                     (buf starts at zero: the first step gives buf = d)
    p = p - lr * (nesterov ? d + momentum * buf : buf)

Without ``buf`` (plain SGD with weight decay) ``p = p - lr * d``. It has no output tensor: the reference
interpreter and the C code update the parameter and the buffer themselves (``forward`` returns their
new values in input order, the gradient skipped).
"""

from __future__ import annotations

from poet_edge.ops.base import (
    FloatArg,
    IntArg,
    KernelCall,
    NullArg,
    OpDef,
    RuntimeArg,
    TensorArg,
    elements,
    f32_bytes,
)
from poet_edge.ops.sgd import weight
from poet_edge.work import OpClass, Work

# instructions per element of poet_sgd_momentum_f32 on qemu-cortex-m4 (4096 elements), by (weight decay,
# nesterov); without a buffer (plain SGD with weight decay) 9.0
INSTRUCTIONS = {(False, False): 12.0, (False, True): 15.0, (True, False): 15.0, (True, True): 17.0}
NO_BUFFER_INSTRUCTIONS = 9.0


def infer(shapes, attrs):
    return []


def forward(xs, attrs):
    p, g = xs[0], xs[1]
    f = p.dtype.type
    lr, mom, wd = f(attrs["lr"]), f(attrs["momentum"]), f(attrs["weight_decay"])
    d = g + wd * p if attrs["weight_decay"] else g
    if len(xs) < 3:
        return [(p - lr * d).astype(p.dtype)]
    buf = (mom * xs[2] + d).astype(p.dtype)
    step = d + mom * buf if attrs["nesterov"] else buf
    return [(p - lr * step).astype(p.dtype), buf]


def work(ins, outs, attrs):
    """Reads p, g (and buf), writes p (and buf); the per-element instructions of the kernel relative to
    plain SGD's are in the weight."""
    stateful = len(ins) > 2
    key = (bool(attrs["weight_decay"]), bool(attrs["nesterov"]))
    return Work(
        OpClass.UPDATE,
        elements=elements(ins[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(ins[0]) * (2 if stateful else 1),
        weight=weight(INSTRUCTIONS[key] if stateful else NO_BUFFER_INSTRUCTIONS),
    )


def kernel(node, shape):
    p, g = node.inputs[0], node.inputs[1]
    buf = TensorArg(node.inputs[2], const=False) if len(node.inputs) > 2 else NullArg()
    return KernelCall(
        "poet_sgd_momentum_f32",
        (
            TensorArg(p, const=False),
            TensorArg(g),
            buf,
            IntArg(elements(shape(p))),
            RuntimeArg("lr"),
            FloatArg(float(node.attrs["momentum"])),
            FloatArg(float(node.attrs["weight_decay"])),
            IntArg(int(bool(node.attrs["nesterov"]))),
        ),
        "sgd_momentum",
    )


OP = OpDef("SGDMomentumUpdate", infer, forward, work, None, kernel, internal=True)
