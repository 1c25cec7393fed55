"""Training graph -> device-independent ProblemSpec -> (priced with a profile) SchedulingProblem.

The spec (sizes and work per node, edges) is stored in plan.json so a plan can be re-priced for another
device without the model."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from poet_edge import ops
from poet_edge.arena import align
from poet_edge.cost import node_cost, transfer_cost
from poet_edge.ir import Graph, Phase
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.profiles import Profile
from poet_edge.work import OpClass, Work


@dataclass(frozen=True)
class FixedRam:
    """RAM in use for the whole training step, by kind (bytes)."""

    trainable_params: int
    inputs: int  # the batch (x) and its labels, held by the caller
    optimizer_state: int
    reserve: int  # stack and runtime

    @property
    def total(self) -> int:
        return self.trainable_params + self.inputs + self.optimizer_state + self.reserve


@dataclass(frozen=True)
class NodeSpec:
    name: str
    out_bytes: int
    work: Work
    recomputable: bool
    kind: str


@dataclass(frozen=True)
class ProblemSpec:
    nodes: tuple[NodeSpec, ...]
    edges: tuple[tuple[int, int], ...]
    invalidated_by: tuple[tuple[int, int], ...]
    fixed: FixedRam

    def to_json(self) -> dict[str, Any]:
        return {
            "fixed_ram": asdict(self.fixed),
            "edges": [list(e) for e in self.edges],
            "invalidated_by": [list(e) for e in self.invalidated_by],
            "nodes": [
                {**asdict(n), "work": {**asdict(n.work), "op_class": n.work.op_class.value}}
                for n in self.nodes
            ],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ProblemSpec:
        nodes = tuple(
            NodeSpec(
                n["name"],
                n["out_bytes"],
                Work(**{**n["work"], "op_class": OpClass(n["work"]["op_class"])}),
                n["recomputable"],
                n["kind"],
            )
            for n in d["nodes"]
        )
        return ProblemSpec(
            nodes,
            tuple(tuple(e) for e in d["edges"]),  # type: ignore[misc]
            tuple(tuple(e) for e in d["invalidated_by"]),
            FixedRam(**d["fixed_ram"]),
        )  # type: ignore[misc]


def value_bytes(tg: Graph) -> dict[str, int]:
    """Bytes of each node's value: its outputs, each aligned like the arena lays them out."""
    return {n.name: sum(align(tg.tensor(o).nbytes) for o in n.outputs) for n in tg.nodes}


def fixed_ram(tg: Graph, reserve: int) -> FixedRam:
    params = sum(align(tg.tensor(p).nbytes) for p in tg.trainable)
    inputs = sum(align(tg.tensor(t).nbytes) for t in tg.inputs)
    return FixedRam(params, inputs, 0, reserve)


def spec_from_graph(tg: Graph, reserve: int) -> ProblemSpec:
    index = {n.name: i for i, n in enumerate(tg.nodes)}
    producer = {o: n.name for n in tg.nodes for o in n.outputs}
    sizes = value_bytes(tg)
    nodes: list[NodeSpec] = []
    edges: set[tuple[int, int]] = set()
    for n in tg.nodes:
        work = ops.get(n.op).work([tg.shape(t) for t in n.inputs], [tg.shape(t) for t in n.outputs], n.attrs)
        nodes.append(NodeSpec(n.name, sizes[n.name], work, n.phase != Phase.UPDATE, n.phase.value))
        edges.update((index[producer[t]], index[n.name]) for t in n.inputs if t in producer)
    invalid = [
        (index[r.name], index[u.name])
        for u in tg.nodes
        if u.op == "SGDUpdate"
        for r in tg.nodes
        if u.inputs[0] in r.inputs and r is not u
    ]
    return ProblemSpec(tuple(nodes), tuple(sorted(edges)), tuple(sorted(invalid)), fixed_ram(tg, reserve))


def price(spec: ProblemSpec, profile: Profile, budget_bytes: int) -> SchedulingProblem:
    nodes = []
    for n in spec.nodes:
        c = node_cost(profile, n.work)
        out, inn = transfer_cost(profile, n.out_bytes, True), transfer_cost(profile, n.out_bytes, False)
        nodes.append(
            ProblemNode(
                n.name,
                n.out_bytes,
                c.seconds,
                c.joules,
                out.seconds,
                out.joules,
                inn.seconds,
                inn.joules,
                align(n.work.workspace_bytes) if n.work.workspace_bytes else 0,
                recomputable=n.recomputable,
                pageable=n.out_bytes > 0,
                kind=n.kind,
            )
        )
    return SchedulingProblem(
        tuple(nodes),
        spec.edges,
        budget_bytes,
        spec.fixed.total,
        profile.storage.capacity_bytes,
        None,
        spec.invalidated_by,
    )
