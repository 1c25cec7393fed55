"""Small synthetic scheduling problems for tests and benchmarks (deterministic given the seed)."""

from __future__ import annotations

import random
from dataclasses import replace

from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedulers.ordering import precedence, reorder


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


def dense_layered(
    n: int,
    seed: int,
    width: int = 30,
    in_degree: int = 6,
    bytes_range: tuple[int, int] = (10, 1000),
    cost_range: tuple[float, float] = (1.0, 100.0),
    budget_bytes: int = 10**12,
) -> SchedulingProblem:
    """A random layered DAG like the published remat benchmarks' family (Checkmate, Moccasin, FastSA):
    ``n`` nodes in layers about ``width`` wide, about ``in_degree`` in-edges per node from earlier
    layers, random sizes and durations. Written from that description, deterministic given ``seed``.

    Parameters: layer sizes uniform in [2/3, 4/3] x ``width`` (the last layer takes what is left).
    Every node after the first layer takes a number of distinct inputs uniform in
    [``in_degree`` - 2, ``in_degree`` + 2] (at most the number of earlier nodes, so the mean is
    ``in_degree``): each input from the layer d >= 1 layers back, d geometric with p = 1/2 (d = 1 half
    the time, so most edges join adjacent layers and a few skip far back), clipped to the first layer,
    the node uniform in that layer. ``out_bytes`` is uniform in ``bytes_range``, the duration
    (``compute_s`` = ``compute_j``) uniform in ``cost_range``. As in the published graphs, nodes are
    not pageable (no storage tier; page costs 0), every node is recomputable, no workspace, cost unit
    "cost". Nodes are in layer order (the "given" order). n = 2,000 gives about 12,000 edges.
    """
    rng = random.Random(seed)
    layers: list[list[int]] = []
    lo, hi = max(1, (2 * width) // 3), max(1, (4 * width) // 3)
    while sum(map(len, layers)) < n:
        start = sum(map(len, layers))
        layers.append(list(range(start, min(n, start + rng.randint(lo, hi)))))
    edges: set[tuple[int, int]] = set()
    for li in range(1, len(layers)):
        earlier = layers[li][0]  # nodes before this layer
        for v in layers[li]:
            want = min(earlier, rng.randint(max(1, in_degree - 2), in_degree + 2))
            chosen: set[int] = set()
            while len(chosen) < want:
                d = 1
                while rng.random() < 0.5 and d < li:
                    d += 1
                chosen.add(rng.choice(layers[li - d]))
            edges.update((u, v) for u in chosen)
    nodes = tuple(
        ProblemNode(
            name=f"v{i}",
            out_bytes=rng.randint(*bytes_range),
            compute_s=(c := round(rng.uniform(*cost_range), 3)),
            compute_j=c,
            pageable=False,
        )
        for i in range(n)
    )
    return SchedulingProblem(nodes, tuple(sorted(edges)), budget_bytes, cost_unit="cost")


def shuffled(problem: SchedulingProblem, seed: int) -> SchedulingProblem:
    """The same DAG with its nodes in a random valid topological order (Kahn's algorithm taking a
    uniformly random ready node; ``invalidated_by`` pairs count as links), deterministic given ``seed``."""
    rng = random.Random(seed)
    prec = precedence(problem)
    indeg = [len(p) for p in prec]
    succs: list[list[int]] = [[] for _ in problem.nodes]
    for v, ps in enumerate(prec):
        for u in ps:
            succs[u].append(v)
    ready = [v for v, d in enumerate(indeg) if d == 0]
    order: list[int] = []
    while ready:
        u = ready.pop(rng.randrange(len(ready)))
        order.append(u)
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return reorder(problem, order)
