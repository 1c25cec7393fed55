"""Dropout is the identity, in training too: the device never drops activations (docs/ops.md). Constant
``ratio`` / ``training_mode`` inputs are accepted and ignored; the optional mask output is refused."""

from __future__ import annotations

from poet_edge.ops import identity
from poet_edge.ops.base import OpDef, no_effect, per_sample_always, unsupported

IDENTITY = "Dropout is the identity on the device (docs/ops.md)"


def check(node):
    if len(node.outputs) > 1:
        raise unsupported(node, "mask output (Dropout is the identity on the device)")


OP = OpDef(
    "Dropout",
    identity.infer,
    identity.forward,
    identity.copy_work,
    identity.backward,
    identity.kernel,
    check,
    const_inputs={1: "ratio", 2: "training_mode"},
    attributes={"ratio": no_effect(IDENTITY), "seed": no_effect(IDENTITY)},  # ratio: opset < 12
    per_sample=per_sample_always,
)
