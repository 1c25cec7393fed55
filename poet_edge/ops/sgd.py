"""SGDUpdate(param, grad): param -= lr * grad, in place (torch.optim.SGD without momentum).

It has no output tensor; the reference interpreter and the C code update the parameter itself."""

from __future__ import annotations

from poet_edge.ops.base import IntArg, KernelCall, OpDef, RuntimeArg, TensorArg, elements, f32_bytes
from poet_edge.work import OpClass, Work

# instructions per element of poet_sgd_f32 (fast, 4096 elements) on qemu-cortex-m4: the profiles'
# cycles_per_element_update is calibrated on this kernel, so the other optimizers' weights are relative to it
INSTRUCTIONS = 6.25


def weight(instructions: float) -> float:
    """Weight of an update kernel measured at ``instructions`` per element, relative to plain SGD."""
    return round(instructions / INSTRUCTIONS, 3)


def infer(shapes, attrs):
    return []


def forward(xs, attrs):
    p, g = xs
    return [(p - p.dtype.type(attrs["lr"]) * g).astype(p.dtype)]  # the new value of the parameter


def work(ins, outs, attrs):
    return Work(
        OpClass.UPDATE, elements=elements(ins[0]), bytes_read=f32_bytes(*ins), bytes_written=f32_bytes(ins[0])
    )


def kernel(node, shape):
    p, g = node.inputs
    return KernelCall(
        "poet_sgd_f32",
        (TensorArg(p, const=False), TensorArg(g), RuntimeArg("lr"), IntArg(elements(shape(p)))),
        "sgd",
    )


OP = OpDef("SGDUpdate", infer, forward, work, None, kernel, internal=True)
