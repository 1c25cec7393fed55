"""`--train`: which parameters are trained. The backward graph is pruned to what they need (autodiff)."""

from __future__ import annotations

import re

from poet_edge.errors import PoetError
from poet_edge.ir import Graph

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
        chosen = {p for p in candidates if rx.search(p)}
    if not chosen:
        sample = ", ".join(sorted(candidates)[:8])
        raise PoetError(f"--train {spec} selects no trainable parameter (parameters include: {sample})")
    return frozenset(chosen)
