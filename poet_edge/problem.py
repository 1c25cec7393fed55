"""The scheduling problem: a DAG with sizes and costs, independent of ONNX."""

from __future__ import annotations

from dataclasses import dataclass

INPUT_KIND = (
    "input"  # ProblemNode.kind of a node that loads the batch from storage (its bytes are storage reads)
)
# ProblemNode.kind of a node that loads a trainable parameter kept in storage (its bytes are storage reads;
# it may run again, a reload, until the parameter's update has run)
PARAM_KIND = "param"


@dataclass(frozen=True)
class ProblemNode:
    """One node of the scheduling DAG; it produces one value of ``out_bytes`` bytes."""

    name: str
    out_bytes: int
    compute_s: float = 0.0
    compute_j: float = 0.0
    page_out_s: float = 0.0
    page_out_j: float = 0.0
    page_in_s: float = 0.0
    page_in_j: float = 0.0
    workspace_bytes: int = 0  # transient RAM while this node runs
    recomputable: bool = True  # False: may be computed only once
    pageable: bool = True
    kind: str = "forward"  # forward | loss | backward | update | input (INPUT_KIND) | param (PARAM_KIND)
    stores_bytes: int = 0  # bytes the node writes to storage when it runs (a stored parameter's write-back)
    move_s: float = 0.0  # moving the value to another place in RAM (a memmove, schedule.Move)
    move_j: float = 0.0


@dataclass(frozen=True)
class SchedulingProblem:
    """Nodes are in a valid topological order; ``edges`` are (producer, consumer) index pairs.

    ``invalidated_by`` holds pairs (a, b): once node b has run, node a may not run again
    (b is the in-place update of a parameter that a reads).
    ``fixed_bytes`` is RAM that is in use for the whole step (trainable parameters, inputs,
    optimizer state, runtime reserve); the budget covers fixed_bytes plus live values.
    """

    nodes: tuple[ProblemNode, ...]
    edges: tuple[tuple[int, int], ...]
    budget_bytes: int
    fixed_bytes: int = 0
    storage_bytes: int | None = None  # None: unlimited
    max_latency_s: float | None = None
    invalidated_by: tuple[tuple[int, int], ...] = ()
    cost_unit: str = "J"  # unit of compute_j & co; graph files use their own ("cost")

    def index(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.nodes)}

    def preds(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.nodes]
        for u, v in self.edges:
            out[v].append(u)
        return out

    def succs(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.nodes]
        for u, v in self.edges:
            out[u].append(v)
        return out
