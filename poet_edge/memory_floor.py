"""The RAM floor of any schedule: no recomputation or paging can go below it.

Running node v needs v's output, all of v's inputs and v's workspace in RAM at once, on top of the
fixed bytes (Checkmate's bound). Only op splitting or in-place ops lower it.
"""

from __future__ import annotations

from dataclasses import dataclass

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem


@dataclass(frozen=True)
class Floor:
    """The floor in bytes, the node that sets it (empty for an empty problem) and how it adds up."""

    bytes: int
    node: str
    explanation: str


def node_need(problem: SchedulingProblem, v: int, preds: list[list[int]] | None = None) -> int:
    """Bytes in use while node ``v`` runs with nothing else live: fixed + output + inputs + workspace."""
    ps = (problem.preds() if preds is None else preds)[v]
    node = problem.nodes[v]
    inputs = sum(problem.nodes[u].out_bytes for u in set(ps))
    return problem.fixed_bytes + node.out_bytes + inputs + node.workspace_bytes


def memory_floor(problem: SchedulingProblem) -> Floor:
    """max over nodes of (fixed + out_bytes + inputs' bytes + workspace)."""
    if not problem.nodes:
        return Floor(problem.fixed_bytes, "", f"fixed {problem.fixed_bytes} bytes (no nodes)")
    preds = problem.preds()
    needs = [node_need(problem, v, preds) for v in range(len(problem.nodes))]
    v = max(range(len(needs)), key=lambda i: (needs[i], -i))
    node = problem.nodes[v]
    inputs = needs[v] - problem.fixed_bytes - node.out_bytes - node.workspace_bytes
    why = (
        f"node {node.name}: fixed {problem.fixed_bytes} + output {node.out_bytes} + "
        f"inputs {inputs} ({len(set(preds[v]))} value(s)) + workspace {node.workspace_bytes} "
        f"= {needs[v]} bytes"
    )
    return Floor(needs[v], node.name, why)


def check_budget(problem: SchedulingProblem) -> Floor:
    """Raise :class:`PoetError` when the budget is below the floor; return the floor otherwise."""
    floor = memory_floor(problem)
    if problem.budget_bytes < floor.bytes:
        raise PoetError(
            f"RAM budget {problem.budget_bytes} bytes is below the memory floor "
            f"{floor.bytes} bytes, set by {floor.explanation}; no schedule exists"
        )
    return floor
