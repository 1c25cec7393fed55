"""`--train`: which parameters are trained. The backward graph is pruned to what they need (autodiff).

Which initializers may train (``Graph.trainable``, the frontend applies these rules):
1. float initializers with more than one element that some op reads as data (not an attention scale or
   a clip bound, not a BatchNorm running statistic: an op's ``frozen_inputs``);
2. except an all-zero initializer that no layer reads as its weight or bias: the zero initial state
   of an unrolled recurrent cell (h0), a zero padding or mask. A layer's weight or bias is an input in
   ``LAYER_SLOTS`` (Conv/Gemm W and B, a MatMul's right operand, norm scale and shift, the W/R/B of
   GRU/LSTM), or the parameter an Add adds to the output of a Conv, Gemm or MatMul (a Linear layer
   exported as MatMul + Add). A zero-initialised bias is therefore trained; a zero h0 is not. all, bias
   and last:N never pick such a state; a regular expression that names it does (a zero-initialised
   positional embedding or class token, which the rule also catches, is trained that way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node

# op -> inputs that hold a layer's weight or bias
LAYER_SLOTS: dict[str, frozenset[int]] = {
    "Conv": frozenset({1, 2}),
    "ConvTranspose": frozenset({1, 2}),
    "Gemm": frozenset({1, 2}),
    "MatMul": frozenset({1}),
    "BatchNormalization": frozenset({1, 2}),
    "LayerNormalization": frozenset({1, 2}),
    "InstanceNormalization": frozenset({1, 2}),
    "PRelu": frozenset({1}),
    "GRU": frozenset({1, 2, 3}),  # W, R, B; not the initial state (input 5)
    "LSTM": frozenset({1, 2, 3, 7}),  # W, R, B, peepholes; not initial_h / initial_c (5, 6)
    "RNN": frozenset({1, 2, 3}),
}
BIASED = ("Conv", "Gemm", "MatMul")  # a parameter added to their output is their bias


def layer_parameters(nodes: Sequence[Node], params: Mapping[str, np.ndarray]) -> frozenset[str]:
    """Parameters some layer reads as its weight or bias (see the module docstring)."""
    made_by = {o: n.op for n in nodes for o in n.outputs}
    out: set[str] = set()
    for n in nodes:
        slots = set(LAYER_SLOTS.get(n.op, ()))
        if n.op == "MatMul" and len(n.inputs) == 2 and n.inputs[1] not in params:
            slots.add(0)  # W @ x
        if n.op in ("Add", "Sub") and len(n.inputs) == 2:
            slots.update(i for i in (0, 1) if made_by.get(n.inputs[1 - i]) in BIASED)
        out.update(t for i, t in enumerate(n.inputs) if i in slots and t in params)
    return frozenset(out)


def zero_states(nodes: Sequence[Node], params: Mapping[str, np.ndarray]) -> frozenset[str]:
    """All-zero parameters that are no layer's weight or bias: constant states, never trained by default."""
    layers = layer_parameters(nodes, params)
    return frozenset(p for p, v in params.items() if p not in layers and v.size and not np.any(v))


TRAIN_HELP = (
    "all (default) | bias (vectors: biases and BatchNorm/LayerNorm scale and shift) | last:N (parameters "
    "of the last N layers that have any) | a regular expression searched in initializer names"
)


def is_bias(g: Graph, name: str) -> bool:
    """Bias-like: at most one dimension larger than 1 (biases, norm scales and shifts),
    not a weight matrix."""
    return sum(d > 1 for d in g.shape(name)) <= 1


def select(g: Graph, spec: str = "all") -> frozenset[str]:
    candidates = g.trainable  # parameters some op may train (BN statistics excluded)
    if spec == "all":
        chosen = set(candidates)
    elif spec == "bias":
        chosen = {p for p in candidates if is_bias(g, p)}
    elif spec.startswith("last:"):
        try:
            n = int(spec[5:])
        except ValueError:
            raise PoetError(f"--train {spec}: expected last:N with a whole number N") from None
        layers = [[t for t in node.inputs if t in candidates] for node in g.nodes]
        layers = [ps for ps in layers if ps]
        if n < 1 or n > len(layers):
            raise PoetError(f"--train {spec}: N must be between 1 and {len(layers)} (layers with parameters)")
        chosen = {p for ps in layers[-n:] for p in ps}
    else:
        try:
            rx = re.compile(spec)
        except re.error as e:
            raise PoetError(
                f"--train {spec!r} is not all, bias, last:N or a valid regular expression ({e})"
            ) from None
        chosen = {p for p in candidates | selectable_states(g) if rx.search(p)}
    if not chosen:
        sample = ", ".join(sorted(candidates)[:8])
        raise PoetError(f"--train {spec} selects no trainable parameter (parameters include: {sample})")
    return frozenset(chosen)


def selectable_states(g: Graph) -> frozenset[str]:
    """Zero states that rule 1 alone would let train: a --train regular expression may still pick them."""
    read = {
        t
        for n in g.nodes
        for i, t in enumerate(n.inputs)
        if t in g.params and i not in ops.get(n.op).frozen_inputs and g.params[t].size > 1
    }
    return zero_states(g.nodes, g.params) & read
