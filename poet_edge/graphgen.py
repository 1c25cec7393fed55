"""Small synthetic scheduling problems for tests and benchmarks (deterministic given the seed)."""

from __future__ import annotations

import random
from dataclasses import replace

from poet_edge.problem import ProblemNode, SchedulingProblem


def _node(
    rng: random.Random, name: str, bytes_range: tuple[int, int], workspace_prob: float, kind: str = "forward"
) -> ProblemNode:
    size = rng.randint(*bytes_range)
    cost = rng.uniform(1.0, 10.0)
    return ProblemNode(
        name=name,
        out_bytes=size,
        compute_s=cost,
        compute_j=cost,
        page_out_s=0.5 + size / 100.0,
        page_out_j=0.5 + size / 100.0,
        page_in_s=0.4 + size / 120.0,
        page_in_j=0.4 + size / 120.0,
        workspace_bytes=rng.randint(0, size) if rng.random() < workspace_prob else 0,
        kind=kind,
    )


def random_layered_dag(
    n: int,
    seed: int,
    width: int = 4,
    max_in_degree: int = 3,
    bytes_range: tuple[int, int] = (1, 100),
    workspace_prob: float = 0.2,
    skip_prob: float = 0.2,
    budget_bytes: int = 10**9,
    fixed_bytes: int = 0,
    unrecomputable_prob: float = 0.0,
    unpageable_prob: float = 0.0,
    n_invalidations: int = 0,
) -> SchedulingProblem:
    """A random layered DAG of ``n`` nodes in topological order.

    Nodes are cut into consecutive layers of 1..``width`` nodes. Every node after the first layer
    takes 1..``max_in_degree`` inputs: at least one from the previous layer, and each further input
    from any earlier layer with probability ``skip_prob`` per input (else from the previous layer).
    ``out_bytes`` is uniform in ``bytes_range``; with probability ``workspace_prob`` a node has a
    workspace uniform in [0, out_bytes]. Compute cost is uniform in [1, 10] (same number in seconds
    and joules); page-out costs 0.5 + bytes/100, page-in 0.4 + bytes/120. With the given probabilities
    a node is marked not recomputable / not pageable. ``n_invalidations`` random pairs (a, b), a < b,
    are added to ``invalidated_by``.
    """
    rng = random.Random(seed)
    layers: list[list[int]] = []
    i = 0
    while i < n:
        size = min(rng.randint(1, width), n - i)
        layers.append(list(range(i, i + size)))
        i += size
    edges: set[tuple[int, int]] = set()
    for li in range(1, len(layers)):
        earlier = [v for layer in layers[:li] for v in layer]
        for v in layers[li]:
            degree = rng.randint(1, max_in_degree)
            edges.add((rng.choice(layers[li - 1]), v))
            for _ in range(degree - 1):
                pool = earlier if rng.random() < skip_prob else layers[li - 1]
                edges.add((rng.choice(pool), v))
    nodes = []
    for v in range(n):
        node = _node(rng, f"n{v}", bytes_range, workspace_prob)
        recomputable = rng.random() >= unrecomputable_prob
        pageable = rng.random() >= unpageable_prob
        nodes.append(replace(node, recomputable=recomputable, pageable=pageable))
    inval: set[tuple[int, int]] = set()
    for _ in range(n_invalidations if n >= 2 else 0):
        a = rng.randrange(n - 1)
        inval.add((a, rng.randrange(a + 1, n)))
    return SchedulingProblem(
        tuple(nodes), tuple(sorted(edges)), budget_bytes, fixed_bytes, invalidated_by=tuple(sorted(inval))
    )


def chain(
    n: int,
    seed: int = 0,
    bytes_range: tuple[int, int] = (1, 100),
    budget_bytes: int = 10**9,
) -> SchedulingProblem:
    """A plain chain v0 -> v1 -> ... -> v(n-1) with random sizes in ``bytes_range``."""
    rng = random.Random(seed)
    nodes = tuple(_node(rng, f"v{i}", bytes_range, 0.0) for i in range(n))
    return SchedulingProblem(nodes, tuple((i, i + 1) for i in range(n - 1)), budget_bytes)


def training_chain(
    n: int, seed: int = 0, bytes_range: tuple[int, int] = (1, 100), budget_bytes: int = 10**9
) -> SchedulingProblem:
    """The training graph of an ``n``-layer chain: forward f0..f(n-1), a loss, backward g(n-1)..g0.

    g_i consumes f_i (its saved activation) and g_(i+1) (or the loss); the loss consumes f(n-1).
    Kinds are set (forward / loss / backward) so checkpointing sees the forward part.
    """
    rng = random.Random(seed)
    fwd = [_node(rng, f"f{i}", bytes_range, 0.0) for i in range(n)]
    loss = _node(rng, "loss", bytes_range, 0.0, kind="loss")
    bwd = [_node(rng, f"g{i}", bytes_range, 0.0, kind="backward") for i in reversed(range(n))]
    edges = [(i, i + 1) for i in range(n - 1)] + [(n - 1, n)]
    for j in range(n):  # bwd[j] is g_(n-1-j), at index n + 1 + j
        layer = n - 1 - j
        edges += [(n + j, n + 1 + j), (layer, n + 1 + j)]
    return SchedulingProblem(tuple(fwd + [loss] + bwd), tuple(sorted(set(edges))), budget_bytes)
