"""Training graph -> device-independent ProblemSpec -> (priced with a profile) SchedulingProblem.

The spec (sizes and work per node, edges) is stored in plan.json so a plan can be re-priced for another
device without the model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from poet_edge import ops, splitting
from poet_edge.cost import Cost, node_cost, transfer_cost
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Phase, Role
from poet_edge.problem import INPUT_KIND, PARAM_KIND, ProblemNode, SchedulingProblem
from poet_edge.profiles import Profile
from poet_edge.units import align
from poet_edge.work import OpClass, Work


@dataclass(frozen=True)
class FixedRam:
    """RAM in use for the whole training step, by kind (bytes)."""

    trainable_params: int
    # held by the caller: the labels, and the batch (x); with x in storage (--input storage), instead of x the
    # staging buffer through which the caller writes it there (:func:`input_staging_bytes`)
    inputs: int
    optimizer_state: int
    reserve: int  # stack and runtime

    @property
    def total(self) -> int:
        return self.trainable_params + self.inputs + self.optimizer_state + self.reserve


class InputPlace(str, Enum):
    """Where the batch x lives during a step."""

    RAM = "ram"  # the caller's buffer, counted as fixed RAM for the whole step
    STORAGE = "storage"  # the caller writes it to storage; the schedule loads (and reloads) it into the arena


INPUT_HELP = (
    "where the batch x lives: ram (the caller's buffer, counted in the RAM budget for the whole step; "
    "default) or storage (the caller writes it to storage before each step; the schedule loads it into "
    "the arena when needed and drops or reloads it like any other value)"
)

# Unary elementwise ops whose C kernels may run in place (Y == X, element i read before it is written).
# Elementwise ops whose C kernels may run in place, by the index of the input their output may overwrite
# (every kernel reads element i of all inputs before it writes element i of the output).
IN_PLACE_EPILOGUES: dict[str, int] = {
    "Relu": 0,
    "Clip": 0,
    "BatchNormalization": 0,
    "Sigmoid": 0,
    "Tanh": 0,
    "LeakyRelu": 0,
    "ReluGrad": 1,  # (Y, dY) -> dX over dY
    "ClipGrad": 1,  # (X, dY) -> dX over dY
    "MaskGrad": 1,  # (M, dY) -> dX over dY: ReluGrad / ClipGrad on a 1-bit mask
    "SigmoidGrad": 1,
    "TanhGrad": 1,
    "LeakyReluGrad": 1,  # (T, dY) -> dX over dY
    "BatchNormGradInput": 0,  # (dY, scale, var) -> dX over dY
}


@dataclass(frozen=True)
class NodeSpec:
    """One scheduling node: a training-graph node, followed by the in-place ``epilogue`` nodes fused into
    it (e.g. Conv -> BatchNormalization -> Relu), which rewrite its output buffer and leave the last
    member's output as the node's value. Kind ``input`` loads the batch from storage."""

    name: str
    out_bytes: int
    work: Work
    recomputable: bool
    kind: str
    epilogue: tuple[str, ...] = ()
    epilogue_work: tuple[Work, ...] = ()
    stores: int = 0  # bytes written to storage after the node ran: a stored parameter's write-back
    reads: int = 1  # storage reads of a load (kind input: one per (sample, channel) of a window of rows)

    @property
    def works(self) -> tuple[Work, ...]:
        return (self.work, *self.epilogue_work)


@dataclass(frozen=True)
class ProblemSpec:
    nodes: tuple[NodeSpec, ...]
    edges: tuple[tuple[int, int], ...]
    invalidated_by: tuple[tuple[int, int], ...]
    fixed: FixedRam
    input_bytes: int = 0  # the batch's bytes in storage (--input storage), however its loads cut it

    def to_json(self) -> dict[str, Any]:
        return {
            "fixed_ram": asdict(self.fixed),
            "input_bytes": self.input_bytes,
            "edges": [list(e) for e in self.edges],
            "invalidated_by": [list(e) for e in self.invalidated_by],
            "nodes": [
                {
                    **asdict(n),
                    "work": _work_json(n.work),
                    "epilogue": list(n.epilogue),
                    "epilogue_work": [_work_json(w) for w in n.epilogue_work],
                }
                for n in self.nodes
            ],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ProblemSpec:
        nodes = tuple(
            NodeSpec(
                n["name"],
                n["out_bytes"],
                _work_from_json(n["work"]),
                n["recomputable"],
                n["kind"],
                tuple(n.get("epilogue", ())),
                tuple(_work_from_json(w) for w in n.get("epilogue_work", ())),
                n.get("stores", 0),
                n.get("reads", 1),
            )
            for n in d["nodes"]
        )
        return ProblemSpec(
            nodes,
            tuple(tuple(e) for e in d["edges"]),  # type: ignore[misc]
            tuple(tuple(e) for e in d["invalidated_by"]),
            FixedRam(**d["fixed_ram"]),
            d.get("input_bytes", 0),
        )  # type: ignore[misc]


def _work_json(w: Work) -> dict[str, Any]:
    return {**asdict(w), "op_class": w.op_class.value}


def _work_from_json(d: dict[str, Any]) -> Work:
    return Work(**{**d, "op_class": OpClass(d["op_class"])})


def value_bytes(tg: Graph) -> dict[str, int]:
    """Bytes of each node's value: its outputs, each aligned like the arena lays them out."""
    return {n.name: sum(align(tg.tensor(o).nbytes) for o in n.outputs) for n in tg.nodes}


def output_extra_bytes(tg: Graph) -> int:
    """RAM poet_predict's ``out`` buffer (batch x model outputs floats) needs beyond the labels buffer: the
    caller holds labels (train, eval) or outputs (predict), never both at once, so one buffer of the larger
    size serves both (MSE: outputs and targets have one size; cross-entropy: batch x classes floats vs
    batch int32 labels). 0 for a graph without a loss."""
    loss = next((n for n in tg.nodes if n.phase == Phase.LOSS), None)
    if loss is None:
        return 0
    return max(0, align(tg.tensor(loss.inputs[0]).nbytes) - align(tg.tensor(loss.inputs[1]).nbytes))


# Floats of the buffer through which the training harness (runtime_c/harness/main.c, poet_x) writes a batch
# to storage with --input storage, a chunk at a time (a smaller batch: the batch's floats). The caller of a
# step compiled that way needs such a buffer, so the plan counts it with the inputs; tests/
# test_ram_accounting.py checks the harness's buffer against it.
INPUT_STAGING_FLOATS = 256


def input_staging_bytes(tg: Graph) -> int:
    """RAM of the caller's staging buffer for a batch kept in storage (--input storage), aligned."""
    x = next(t for t in tg.inputs if tg.tensor(t).role == Role.INPUT)
    return align(4 * min(int(tg.tensor(x).nbytes) // 4, INPUT_STAGING_FLOATS))


def fixed_ram(
    tg: Graph, reserve: int, input_place: InputPlace = InputPlace.RAM, stored: frozenset[str] = frozenset()
) -> FixedRam:
    """``stored``: trainable parameters kept in storage (loaded into the arena when needed), not in RAM.
    With the batch in storage, the inputs count the caller's staging buffer instead of the batch."""
    params = sum(align(tg.tensor(p).nbytes) for p in tg.trainable if p not in stored)
    held = [t for t in tg.inputs if input_place == InputPlace.RAM or tg.tensor(t).role != Role.INPUT]
    state = sum(align(t.nbytes) for t in tg.tensors.values() if t.role == Role.OPTIMIZER_STATE)
    inputs = sum(align(tg.tensor(t).nbytes) for t in held) + output_extra_bytes(tg)
    if input_place == InputPlace.STORAGE:
        inputs += input_staging_bytes(tg)
    return FixedRam(params, inputs, state, reserve)


def _epilogue_input(
    tg: Graph, n: Node, producer: dict[str, Node], consumers: dict[str, list[Node]], start: dict[str, int]
) -> str | None:
    """The tensor that ``n`` may rewrite in place as an epilogue of its producer, or None: ``n`` is an
    in-place op (:data:`IN_PLACE_EPILOGUES`) of the producer's phase (forward or backward) with one output
    of that tensor's size; the tensor is its producer's only output and has no other reader; every other
    input of ``n`` is a parameter, a step input, or a value computed before the producer's group starts
    (``start``: position of each node's group head), so running ``n`` right after its producer keeps
    the order topological."""
    k = IN_PLACE_EPILOGUES.get(n.op)
    if (
        k is None
        or n.phase not in (Phase.FORWARD, Phase.BACKWARD)
        or len(n.outputs) != 1
        or k >= len(n.inputs)
    ):
        return None
    t = n.inputs[k]
    p = producer.get(t)
    if p is None or p.phase != n.phase or len(p.outputs) != 1 or t in tg.outputs:
        return None
    if consumers[t] != [n] or tg.tensor(t).nbytes != tg.tensor(n.outputs[0]).nbytes:
        return None
    others = [r for i, r in enumerate(n.inputs) if i != k]
    if t in others or any(r in producer and start[producer[r].name] >= start[p.name] for r in others):
        return None
    return t


def fusion_groups(tg: Graph) -> list[list[Node]]:
    """Training-graph nodes grouped into scheduling nodes, in topological order: each group is a node
    followed by the in-place epilogues fused into it (see :func:`_epilogue_input`), so the intermediate
    values never need buffers of their own. An epilogue that reads other values (ReluGrad reads the
    ReLU's output) joins only if the group's RAM while it runs does not grow: the group's value inputs
    plus the epilogue's must not exceed the larger of the two separate nodes' needs."""
    producer, consumers = tg.producers(), tg.consumers()
    position = {n.name: i for i, n in enumerate(tg.nodes)}
    head: dict[str, str] = {}
    start: dict[str, int] = {}  # node -> position of its group's head
    groups: dict[str, list[Node]] = {}
    reads: dict[str, set[str]] = {}  # group head -> values (node outputs) the group reads

    def size(values: set[str]) -> int:
        return sum(align(tg.tensor(v).nbytes) for v in values)

    for n in tg.nodes:
        t = _epilogue_input(tg, n, producer, consumers, start)
        if t is not None:
            h = head[producer[t].name]
            others = {r for r in n.inputs if r in producer and r != t}
            if size(reads[h] | others) > max(size(reads[h]), size(others) + align(tg.tensor(t).nbytes)):
                t = None
        if t is None:
            h = n.name
            reads[h] = set()
        head[n.name], start[n.name] = h, position[h]
        reads[h] |= {r for r in n.inputs if r in producer and head.get(producer[r].name) != h}
        groups.setdefault(h, []).append(n)
    return list(groups.values())


def input_node_name(x: str) -> str:
    return f"input:{x}"


def param_node_name(p: str) -> str:
    return f"param:{p}"


class ParamPlace(str, Enum):
    """Where the master copy of each trainable parameter lives between steps."""

    RAM = "ram"  # every parameter in RAM for the whole step (fixed RAM)
    STORAGE = "storage"  # every parameter in storage: loaded where forward, backward and its update need it
    AUTO = "auto"  # in RAM while the model fits that way; else the fewest bytes in storage that make it fit


PARAMS_HELP = (
    "where the trainable parameters live between steps: ram (the whole step, counted as fixed RAM), "
    "storage (a master copy in storage, loaded into the arena where the forward, backward and the update "
    "need it, written back after its update: storage reads and writes every step, and storage wear), or "
    "auto (default: ram when the model's floor fits the budget that way; else two choices are scheduled at "
    "--effort quick, the fewest largest parameters in storage that make the floor fit and all of them, "
    "and the one with less energy is planned at the asked effort)"
)


def stored_params(spec: ProblemSpec) -> tuple[str, ...]:
    """The trainable parameters ``spec`` keeps in storage (those with a load node), sorted."""
    prefix = param_node_name("")
    return tuple(sorted(n.name[len(prefix) :] for n in spec.nodes if n.kind == PARAM_KIND))


def _load_node(tg: Graph, p: str) -> NodeSpec:
    """Reads stored parameter ``p`` into the arena (again, after a drop, until its update has run)."""
    nbytes = align(tg.tensor(p).nbytes)
    return NodeSpec(
        param_node_name(p),
        nbytes,
        Work(OpClass.COPY, bytes_read=nbytes, bytes_written=nbytes),
        True,
        PARAM_KIND,
    )


def spec_from_graph(
    tg: Graph,
    reserve: int,
    input_place: InputPlace = InputPlace.RAM,
    stored: frozenset[str] = frozenset(),
    input_windows: bool = True,
) -> ProblemSpec:
    """``stored``: trainable parameters whose master copy is in storage. Each gets a load node (kind
    PARAM_KIND, placed just before its first reader) that its readers and its update depend on; the update
    rewrites the loaded copy in place and writes it back (``stores``); once it ran, no reader of the
    parameter, and not its load, may run again. With the batch in storage, each Slice of it
    (splitting.batch_windows) is a load of its box from storage, unless ``input_windows`` is False
    (--verify-paging: the batch is loaded whole, its CRC checked)."""
    unknown = sorted(stored - set(tg.trainable))
    if unknown:
        raise PoetError(f"only trainable parameters can be kept in storage: {', '.join(unknown)}")
    groups = fusion_groups(tg)
    nodes: list[NodeSpec] = []
    sources: dict[str, int] = {}  # tensor -> index of the scheduling node that produces it
    windows: Mapping[str, splitting.Box] = {}  # loads of boxes of the batch, by Slice node name
    if input_place == InputPlace.STORAGE:
        x = next(t for t in tg.inputs if tg.tensor(t).role == Role.INPUT)
        name = input_node_name(x)
        if any(n.name == name for n in tg.nodes):
            raise PoetError(f"a model node is named '{name}', which poet-edge reserves for the input load")
        found = splitting.batch_windows(tg) if input_windows else splitting.BatchWindows(x, {}, frozenset())
        windows = found.boxes
        loads_of = [(name, x, 1)] if any(x in n.inputs for n in tg.nodes if n.name not in windows) else []
        loads_of += [
            (n.name, n.outputs[0], found.runs(n.name, tg.shape(x)).count)
            for n in tg.nodes
            if n.name in windows and n.name not in found.virtual
        ]
        for lname, value, reads in loads_of:
            nbytes = align(tg.tensor(value).nbytes)
            sources[value] = len(nodes)
            work = Work(OpClass.COPY, bytes_read=nbytes, bytes_written=nbytes)
            nodes.append(NodeSpec(lname, nbytes, work, True, INPUT_KIND, reads=reads))
    edges: set[tuple[int, int]] = set()
    index: dict[str, int] = {}  # training-graph node -> scheduling node
    loads: dict[str, int] = {}  # stored parameter -> index of its load node
    for members in groups:
        if members[0].name in windows:  # a load of a box of the batch (above), or none (virtual)
            continue
        for p in sorted({t for n in members for t in n.inputs if t in stored and t not in loads}):
            loads[p] = sources[p] = len(nodes)
            nodes.append(_load_node(tg, p))
        k = len(nodes)
        works = [_work(tg, n) for n in members]
        first, last = members[0], members[-1]
        size = sum(align(tg.tensor(o).nbytes) for o in last.outputs)
        epi = tuple(n.name for n in members[1:])
        nodes.append(
            NodeSpec(
                first.name,
                size,
                works[0],
                first.phase != Phase.UPDATE,
                first.phase.value,
                epi,
                tuple(works[1:]),
                _stores(tg, first, stored),
            )
        )
        for n in members:
            index[n.name] = k
            edges.update((sources[t], k) for t in n.inputs if t in sources and sources[t] != k)
            sources.update((o, k) for o in n.outputs)
    readers = tg.consumers()
    invalid = {
        (index[r.name], index[u.name])
        for u in tg.nodes
        if u.phase == Phase.UPDATE
        for r in readers[u.inputs[0]]
        if r is not u
    }
    invalid |= {
        (loads[u.inputs[0]], index[u.name])
        for u in tg.nodes
        if u.phase == Phase.UPDATE and u.inputs[0] in loads
    }
    return ProblemSpec(
        tuple(nodes),
        tuple(sorted(edges)),
        tuple(sorted(invalid)),
        fixed_ram(tg, reserve, input_place, stored),
        sum(align(tg.tensor(t).nbytes) for t in tg.inputs if tg.tensor(t).role == Role.INPUT)
        if input_place == InputPlace.STORAGE
        else 0,
    )


def _stores(tg: Graph, n: Node, stored: frozenset[str]) -> int:
    """Bytes an update node writes back to storage: its parameter's, when that is stored."""
    return align(tg.tensor(n.inputs[0]).nbytes) if n.phase == Phase.UPDATE and n.inputs[0] in stored else 0


def _work(tg: Graph, n: Node) -> Work:
    return ops.get(n.op).work([tg.shape(t) for t in n.inputs], [tg.shape(t) for t in n.outputs], n.attrs)


def move_work(nbytes: int) -> Work:
    """A Move of a value of ``nbytes`` within the arena (schedule.Move, a memmove): priced as a copy."""
    return Work(OpClass.COPY, bytes_read=nbytes, bytes_written=nbytes)


def price(spec: ProblemSpec, profile: Profile, budget_bytes: int) -> SchedulingProblem:
    nodes = []
    for n in spec.nodes:
        out, inn = transfer_cost(profile, n.out_bytes, True), transfer_cost(profile, n.out_bytes, False)
        if n.kind in (INPUT_KIND, PARAM_KIND):
            c = inn
            if n.reads > 1:  # a window of the batch's rows: one read per (sample, channel)
                one = transfer_cost(profile, n.out_bytes // n.reads, False)
                c = Cost(n.reads * one.seconds, n.reads * one.joules)
        else:
            c = sum((node_cost(profile, w) for w in n.works), Cost(0.0, 0.0))
            c = c + transfer_cost(profile, n.stores, True)
        workspace = max(w.workspace_bytes for w in n.works)
        move = node_cost(profile, move_work(n.out_bytes))
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
                align(workspace) if workspace else 0,
                recomputable=n.recomputable,
                pageable=n.out_bytes > 0 and n.kind not in (INPUT_KIND, PARAM_KIND),
                kind=n.kind,
                stores_bytes=n.stores,
                move_s=move.seconds,
                move_j=move.joules,
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
