"""What `poet inspect` reports about a model's forward and training graphs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poet_edge import autodiff, batch_split, frontend, ops, planning, splitting, trainable
from poet_edge.ir import Graph, Phase
from poet_edge.memory_floor import Floor, memory_floor
from poet_edge.optimizer import PLAIN_SGD, STATE_NAMES, Optimizer
from poet_edge.profiles import load_profile
from poet_edge.schedulers import get_scheduler
from poet_edge.simulator import simulate


@dataclass(frozen=True)
class Inspection:
    model: str
    batch: int
    train: str
    forward_nodes: int
    training_nodes: dict[str, int]
    forward_ops: dict[str, int]
    backward_ops: dict[str, int]
    params_trainable: tuple[int, int]  # count, bytes (RAM for the whole step)
    gradient_bytes: (
        int  # one gradient per trainable parameter, in the arena from its backward node to its update
    )
    params_frozen: tuple[int, int]
    activation_bytes: int
    forward_macs: int
    backward_macs: int
    floor_bytes: int
    floor_node: str
    floor_explanation: str
    no_remat_peak_bytes: int
    floor_stored_bytes: int = 0  # the floor with every trainable parameter in storage (--params storage)
    floor_stored_node: str = ""
    optimizer: str = "sgd"  # the one the floor and the no-remat peak are computed with
    optimizer_state_bytes: dict[str, int] | None = None  # state RAM of each optimizer
    training_options: dict[str, bool] | None = None  # the rewrites the graph above is built with
    floor_by_options: dict[str, int] | None = None  # the floor with each rewrite off and on (floor_variants)
    floor_split_bytes: int = 0  # parameters in storage and operator splitting: the lowest over tile sizes
    floor_split_node: str = ""
    floor_split_tile: int = 0  # the tile size that gives it
    floor_split_order: str = "channels"  # ... cut rows or channels first (--tile-order)
    floor_parts: int = 0  # batch > 1: the batch in this many parts (one sample each, at most MAX_PARTS) ...
    floor_parts_bytes: int = 0  # ... with parameters in storage and operator splitting: the lowest floor
    floor_parts_node: str = ""
    floor_parts_tile: int = 0
    floor_parts_order: str = "channels"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _macs(g: Graph, phases: set[Phase]) -> int:
    total = 0
    for n in g.nodes:
        if n.phase in phases:
            w = ops.get(n.op).work([g.shape(t) for t in n.inputs], [g.shape(t) for t in n.outputs], n.attrs)
            total += w.macs
    return total


def inspect(
    path: Path,
    batch: int = 1,
    loss: autodiff.Loss = autodiff.Loss.CROSS_ENTROPY,
    train: str = "all",
    reserve: int = 8192,
    input_place: planning.InputPlace = planning.InputPlace.RAM,
    optimizer: Optimizer = PLAIN_SGD,
    options: autodiff.TrainingOptions = autodiff.PLAIN,
) -> Inspection:
    g = frontend.load(path, batch)
    chosen = trainable.select(g, train)
    tg = autodiff.training_graph(g, loss, chosen, optimizer, options)
    spec = planning.spec_from_graph(tg, reserve, input_place)
    per_param = spec.fixed.trainable_params  # every state tensor is laid out like its parameter
    problem = planning.price(spec, load_profile("host"), 1 << 62)
    floor = memory_floor(problem)
    peak = simulate(problem, get_scheduler("none")(problem)).peak_ram_bytes
    stored = planning.spec_from_graph(tg, reserve, input_place, frozenset(tg.trainable))
    floor_stored = memory_floor(planning.price(stored, load_profile("host"), 1 << 62))
    floor_split, split_tile, split_order = _split_floor(tg, reserve, input_place)
    parts = min(batch_split.parts_extent(g), batch_split.MAX_PARTS)
    if parts > 1:  # the batch (a sequence's positions) in parts too (compiler.batch_choices' last resort)
        cut = batch_split.split_parts(g, parts, chosen)
        tgk = autodiff.training_graph(cut.graph, loss, chosen, optimizer, options)
        floor_parts, parts_tile, parts_order = _split_floor(tgk, reserve, input_place)
    frozen = [p for p in g.params if p not in chosen]
    grads = [n.inputs[1] for n in tg.nodes if n.phase == Phase.UPDATE and not ops.get(n.op).fused]
    return Inspection(
        path.name,
        frontend.graph_batch(g),
        train,
        len(g.nodes),
        {p.value: sum(n.phase == p for n in tg.nodes) for p in Phase},
        dict(sorted(Counter(n.op for n in g.nodes).items())),
        dict(sorted(Counter(n.op for n in tg.nodes if n.phase == Phase.BACKWARD).items())),
        (len(chosen), sum(tg.tensor(p).nbytes for p in chosen)),
        sum(tg.tensor(t).nbytes for t in grads),
        (len(frozen), sum(tg.tensor(p).nbytes for p in frozen)),
        sum(tg.tensor(o).nbytes for n in g.nodes for o in n.outputs),
        _macs(tg, {Phase.FORWARD}),
        _macs(tg, {Phase.BACKWARD, Phase.UPDATE}),  # fused updates compute weight gradients
        floor.bytes,
        floor.node,
        floor.explanation,
        peak,
        floor_stored.bytes,
        floor_stored.node,
        optimizer.kind.value,
        {k.value: len(names) * per_param for k, names in STATE_NAMES.items()},
        options.to_json(),
        {
            label: floor_of(g, loss, chosen, optimizer, o, reserve, input_place)
            for label, o in FLOOR_VARIANTS.items()
        },
        floor_split.bytes,
        floor_split.node,
        split_tile,
        split_order,
        *((parts, floor_parts.bytes, floor_parts.node, parts_tile, parts_order) if parts > 1 else ()),
    )


def _split_floor(tg: Graph, reserve: int, input_place: planning.InputPlace) -> tuple[Floor, int, str]:
    """The lowest memory floor over the tile sizes and orders of splitting.all_splits, every trainable
    parameter in storage, with that tile size and order (on ties: the largest size, rows first)."""
    floors = [
        (memory_floor(planning.price(spec, load_profile("host"), 1 << 62)), sp.tile_bytes, sp.rows_first)
        for sp in splitting.all_splits(tg, input_place == planning.InputPlace.STORAGE)
        for spec in (
            planning.spec_from_graph(sp.graph, reserve, input_place, sp.param_names(frozenset(tg.trainable))),
        )
    ]
    low, tile, rows_first = min(floors, key=lambda f: (f[0].bytes, -f[1], not f[2]))
    return low, tile, "rows" if rows_first else "channels"


# the rewrites `poet inspect` shows the floor with: each alone, both, neither
FLOOR_VARIANTS = {
    "plain": autodiff.PLAIN,
    "fused-updates": autodiff.TrainingOptions(fused_updates=True),
    "relu-masks": autodiff.TrainingOptions(relu_masks=True),
    "both": autodiff.TrainingOptions(fused_updates=True, relu_masks=True),
}


def floor_of(
    g: Graph,
    loss: autodiff.Loss,
    chosen: frozenset[str],
    optimizer: Optimizer,
    options: autodiff.TrainingOptions,
    reserve: int,
    input_place: planning.InputPlace = planning.InputPlace.RAM,
) -> int:
    """The memory floor (bytes) of ``g``'s training graph built with ``options``."""
    tg = autodiff.training_graph(g, loss, chosen, optimizer, options)
    spec = planning.spec_from_graph(tg, reserve, input_place)
    return memory_floor(planning.price(spec, load_profile("host"), 1 << 62)).bytes


def format_inspection(r: Inspection) -> str:
    def kb(n: int) -> str:
        return f"{n:,} B ({n / 1024:.1f} KiB)"

    tn = r.training_nodes
    update = "SGD" if r.optimizer == "sgd" else r.optimizer
    lines = [
        f"model            {r.model} (batch {r.batch}, --train {r.train})",
        f"forward graph    {r.forward_nodes} nodes: "
        + ", ".join(f"{k} {v}" for k, v in r.forward_ops.items()),
        f"training graph   {sum(tn.values())} nodes: forward {tn['forward']}, loss {tn['loss']}, "
        f"backward {tn['backward']}, update {tn['update']}",
        "backward ops     " + (", ".join(f"{k} {v}" for k, v in r.backward_ops.items()) or "none"),
        f"parameters       trainable {r.params_trainable[0]} = {kb(r.params_trainable[1])} "
        "(RAM, the whole step); "
        f"frozen {r.params_frozen[0]} = {kb(r.params_frozen[1])} (flash)",
        f"gradients        {kb(r.gradient_bytes)} (RAM, each from its backward node to its {update} update; "
        "not in the parameter bytes)",
        f"activations      {kb(r.activation_bytes)} (all forward outputs)",
        f"MACs per step    forward {r.forward_macs:,}, backward {r.backward_macs:,}",
        "optimizer state  "
        + ", ".join(f"{k} {kb(v)}" for k, v in (r.optimizer_state_bytes or {}).items())
        + f" (RAM, the whole step; the floor below is with --optimizer {r.optimizer})",
        f"memory floor     {kb(r.floor_bytes)} at node {r.floor_node}",
        f"                 {r.floor_explanation}",
        f"                 {kb(r.floor_stored_bytes)} with --params storage (every trainable parameter "
        f"in storage, loaded where needed), at node {r.floor_stored_node}",
        f"                 {kb(r.floor_split_bytes)} with that and --split "
        f"{r.floor_split_tile // 1024}KB --tile-order {r.floor_split_order} (operator splitting: row or "
        f"channel tiles and weight blocks), at node {r.floor_split_node}",
        *(
            [
                f"                 {kb(r.floor_parts_bytes)} with that and the "
                f"{'batch' if r.batch > 1 else 'sequence'} in {r.floor_parts} "
                f"parts (--batch-parts {r.floor_parts} --split {r.floor_parts_tile // 1024}KB --tile-order "
                f"{r.floor_parts_order}), at node "
                f"{r.floor_parts_node}"
            ]
            if r.floor_parts > 1
            else []
        ),
        "floor by rewrite "
        + ", ".join(f"{k} {v:,} B" for k, v in (r.floor_by_options or {}).items())
        + " (--fused-updates, --relu-masks; "
        + ", ".join(f"{k} {'on' if v else 'off'}" for k, v in (r.training_options or {}).items())
        + " above)",
        f"no-remat peak    {kb(r.no_remat_peak_bytes)} (every node once, freed after last use)",
    ]
    return "\n".join(lines)
