"""Baseline "recompute_all": Chen et al. (2016) sqrt(n) checkpointing, generalised to DAGs.

The forward part is the nodes of kind "forward" (all nodes when no node has another kind). Every
k-th forward node, k = round(sqrt(#forward)), is a checkpoint. At the end of each segment of k
forward nodes, every resident recomputable value that is not a checkpoint and not an input of the
next node is dropped. When a later node needs a dropped value, its missing ancestors are recomputed
on demand in topological order, starting from the nearest resident values (checkpoints). If RAM
still runs short, the droppable value whose next use is farthest away is dropped. No paging.
"""

from __future__ import annotations

import math

from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers.engine import DROP, Engine, Hook


def _belady_drop(engine: Engine, candidates: list[int]) -> tuple[int, str]:
    nodes = engine.problem.nodes
    return max(candidates, key=lambda u: (engine.next_use(u), nodes[u].out_bytes, -u)), DROP


def checkpoints(problem: SchedulingProblem) -> tuple[frozenset[int], frozenset[int]]:
    """(checkpoint nodes, rounds after which non-checkpoints are dropped)."""
    kinds = [n.kind for n in problem.nodes]
    forward = [i for i, k in enumerate(kinds) if k == "forward"]
    if len(forward) == len(kinds):
        forward = list(range(len(kinds)))
    if not forward:
        return frozenset(), frozenset()
    k = max(1, round(math.sqrt(len(forward))))
    marks = frozenset(forward[i] for i in range(k - 1, len(forward), k))
    return marks, marks | {forward[-1]}


def _segment_hook(problem: SchedulingProblem) -> Hook:
    marks, boundaries = checkpoints(problem)

    def drop(engine: Engine, t: int) -> None:
        if t not in boundaries:
            return
        keep = set(engine.an.preds[t + 1]) if t + 1 < len(problem.nodes) else set()
        for u in sorted(engine.in_ram):
            if engine.an.droppable[u] and u not in marks and u not in keep:
                engine.free(u)

    return drop


def schedule_recompute_all(problem: SchedulingProblem) -> Schedule:
    engine = Engine(
        problem,
        "recompute-all",
        policy=_belady_drop,
        allow_recompute=True,
        after_target=_segment_hook(problem),
    )
    return engine.run()
