"""Memory floors of every zoo model, --train all and bias, batch 1, float32: before, and with each exact
training-graph rewrite of issue 56 (fused weight-gradient updates, 1-bit Relu/Clip masks) and both, and
with operator splitting (issue 57) on top of all three.

The floor (poet_edge.memory_floor) is the RAM no schedule goes below: fixed bytes (trainable parameters,
optimizer state, inputs, the 8 KB reserve) + the largest node's inputs, output and workspace. The
no-remat peak (every node once, in the given order, each value freed after its last use) is shown for the
plain graph and with both rewrites. SGD, --input ram unless a column says storage, the host profile (the
floor is device-independent). Every rewrite column is one function of the training graph's options
(COLUMNS): a new technique is one more function. The splitting columns (SPLIT_COLUMNS) take the lowest floor
over the tile sizes SPLIT_TILES of poet_edge.splitting.split_graph, in both orders (channels first, and rows
first: --tile-order), applied to the "all three" training graph (every trainable parameter in storage), and
name the tile size, the order and the node (and its op) that sets it.
Writes bench/results/floor.json and floor.md (machine, commit, date).

Run: .venv/bin/python bench/floor.py"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import markdown_table as markdown  # noqa: E402
from provenance import provenance  # noqa: E402
from zoo import ROOT, ZOO, table  # noqa: E402

from poet_edge import autodiff, frontend, planning, splitting, trainable  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.problem import SchedulingProblem  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers import get_scheduler  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

RESULTS = ROOT / "bench" / "results"
RESERVE = 8192
TRAIN = ("all", "bias")
LOSSES = {"autoencoder": autodiff.Loss.MSE}  # the others: cross-entropy


@dataclass(frozen=True)
class Case:
    model: str
    train: str
    graph: Graph
    chosen: frozenset[str]

    @property
    def loss(self) -> autodiff.Loss:
        return LOSSES.get(self.model, autodiff.Loss.CROSS_ENTROPY)


def _priced(
    tg: Graph, stored: bool, place: planning.InputPlace = planning.InputPlace.RAM
) -> SchedulingProblem:
    spec = planning.spec_from_graph(tg, RESERVE, place, frozenset(tg.trainable) if stored else frozenset())
    return planning.price(spec, load_profile("host"), 1 << 62)


def _problem(
    case: Case,
    options: autodiff.TrainingOptions,
    stored: bool = False,
    place: planning.InputPlace = planning.InputPlace.RAM,
) -> SchedulingProblem:
    tg = autodiff.training_graph(case.graph, case.loss, case.chosen, options=options)
    return _priced(tg, stored, place)


def floor_with(
    options: autodiff.TrainingOptions,
    stored: bool = False,
    place: planning.InputPlace = planning.InputPlace.RAM,
) -> Callable[[Case], int]:
    def column(case: Case) -> int:
        return memory_floor(_problem(case, options, stored, place)).bytes

    return column


def before(case: Case) -> int:
    """The training graph as the backward rules build it."""
    return floor_with(autodiff.PLAIN)(case)


def fused_updates(case: Case) -> int:
    """--fused-updates: each Conv / Gemm / MatMul weight updated tile by tile, its gradient never whole."""
    return floor_with(autodiff.TrainingOptions(fused_updates=True))(case)


def relu_masks(case: Case) -> int:
    """--relu-masks: ReluGrad / ClipGrad read a 1-bit mask where nothing else needs the float tensor."""
    return floor_with(autodiff.TrainingOptions(relu_masks=True))(case)


def both(case: Case) -> int:
    return floor_with(autodiff.TrainingOptions(fused_updates=True, relu_masks=True))(case)


def params_in_storage(case: Case) -> int:
    """--params storage: every trainable parameter in storage, loaded where forward, backward and its
    update need it (the plain graph)."""
    return floor_with(autodiff.PLAIN, stored=True)(case)


def all_three(case: Case) -> int:
    """Fused updates, 1-bit masks and every trainable parameter in storage (the defaults of `poet compile`
    with --params storage; --params auto picks this where the budget needs it)."""
    return floor_with(autodiff.TrainingOptions(fused_updates=True, relu_masks=True), stored=True)(case)


def all_three_input_storage(case: Case) -> int:
    """All three, and the batch x in storage (--input storage): loaded into the arena where read, so the
    input image is no longer fixed bytes (mobilenets at 96x96: 108 KB)."""
    return floor_with(autodiff.DEFAULT_OPTIONS, stored=True, place=planning.InputPlace.STORAGE)(case)


# floor columns, in order: (header, function of the case)
COLUMNS: tuple[tuple[str, Callable[[Case], int]], ...] = (
    ("before", before),
    ("fused updates", fused_updates),
    ("1-bit masks", relu_masks),
    ("both", both),
    ("params in storage", params_in_storage),
    ("all three", all_three),
    ("all three, input storage", all_three_input_storage),
)

# Operator splitting on top of all three: the tile sizes tried (the lowest floor is kept; the floor is not
# monotone in the tile size, because part chains and Concat joins add inputs), and where x lives.
SPLIT_TILES = (32 * 1024, 16 * 1024, 8 * 1024, 4 * 1024, 2 * 1024, 1024)
SPLIT_COLUMNS: tuple[tuple[str, planning.InputPlace], ...] = (
    ("split", planning.InputPlace.RAM),
    ("split, input storage", planning.InputPlace.STORAGE),
)


def split_floors(case: Case) -> dict[str, dict[str, Any]]:
    """Per SPLIT_COLUMNS header: the lowest floor over SPLIT_TILES, in both orders, of the "all three" graph
    split into tiles, the tile size, order and node that give it (on ties the largest tile size, channels
    first), the split graph's node count, and the floor at every tile size and order."""
    tg = autodiff.training_graph(case.graph, case.loss, case.chosen, options=autodiff.DEFAULT_OPTIONS)
    out: dict[str, dict[str, Any]] = {}
    for header, place in SPLIT_COLUMNS:
        rows = place == planning.InputPlace.STORAGE  # the batch read in windows of rows, as the compile does
        sizes = [splitting.TileSizes(t, rows_first=r) for t in SPLIT_TILES for r in (False, True)]
        splits = {(t.default, t.rows_first): splitting.split_graph(tg, t, input_rows=rows) for t in sizes}
        floors = {key: memory_floor(_priced(sp.graph, True, place)) for key, sp in splits.items()}
        tile = min(floors, key=lambda k: (floors[k].bytes, -k[0], k[1]))  # ties: the larger tile, channels
        ops = {n.name: n.op for n in splits[tile].graph.nodes}
        out[header] = {
            "bytes": floors[tile].bytes,
            "tile": tile[0],
            "rows_first": tile[1],
            "tiled_tensors": len(splits[tile].tiles),
            "blocked_params": len(splits[tile].blocks),
            "node": floors[tile].node,
            "op": ops[floors[tile].node],
            "nodes": len(splits[tile].graph.nodes),
            "by_tile": {f"{t}{' rows' if r else ''}": f.bytes for (t, r), f in floors.items()},
        }
    return out


def peak(case: Case, options: autodiff.TrainingOptions) -> int:
    problem = _problem(case, options)
    return simulate(problem, get_scheduler("none")(problem)).peak_ram_bytes


def row(case: Case) -> dict[str, Any]:
    floors = {name: f(case) for name, f in COLUMNS}
    return {
        "model": case.model,
        "train": case.train,
        "floor": floors,
        "split": split_floors(case),
        "peak": {
            "before": peak(case, autodiff.PLAIN),
            "both": peak(case, autodiff.DEFAULT_OPTIONS),
        },
    }


def cases() -> list[Case]:
    out = []
    for path in sorted(ZOO.glob("*.onnx")):
        g = frontend.load(path, 1)
        for train in TRAIN:
            out.append(Case(path.stem, train, g, trainable.select(g, train)))
    return out


def kb(n: int) -> str:
    return f"{n / 1024:,.1f}"


def flat(r: dict[str, Any]) -> dict[str, object]:
    base = r["floor"]["before"]
    cells: dict[str, object] = {"model": r["model"], "train": r["train"]}
    for name, _ in COLUMNS:
        v = r["floor"][name]
        cells[f"floor {name} KB"] = kb(v) + ("" if name == "before" else f" ({100 * (v / base - 1):+.1f}%)")
    for name, _ in SPLIT_COLUMNS:
        sp = r["split"][name]
        cells[f"floor {name} KB"] = kb(sp["bytes"]) + f" ({100 * (sp['bytes'] / base - 1):+.1f}%)"
        cut = sp["tiled_tensors"] or sp.get("blocked_params")
        first = ", rows first" if sp.get("rows_first") else ""
        tile = f"{sp['tile'] // 1024} KB{first}" if cut else "nothing tiled"
        if sp.get("blocked_params") and not sp["tiled_tensors"]:
            tile += " (weight blocks only)"
        cells[f"{name}: tile, node (op), nodes"] = f"{tile}, {sp['node']} ({sp['op']}), {sp['nodes']:,}"
    cells["peak before KB"] = kb(r["peak"]["before"])
    cells["peak both KB"] = kb(r["peak"]["both"])
    return cells


REPORT = """# Memory floors: fused updates, 1-bit masks, params in storage, operator splitting (issues 56-57)

Measured by `bench/floor.py` on {machine}, commit {commit}, {date}.

Every zoo model at batch 1, float32, SGD, `--train all` and `--train bias`, 8 KB reserve. The floor is the
RAM no schedule can go below (fixed bytes + the largest node's inputs, output and workspace); the peaks are
the no-recomputation run in the given order (every value freed after its last use), plain and with both
rewrites. KB = 1024 bytes; percentages against the floor before. Both rewrites are exact (parameters
bit-identical to the plain graph: tests/test_fused_updates.py, tests/test_masks.py), and so is keeping
parameters in storage (tests/test_params_storage.py); the last costs storage reads and writes every step
(bench/results/tight.md has the energy, traffic and endurance of runs at these floors).

What each column assumes (all: batch 1, float32, SGD, 8 KB reserve, `--input ram` unless it says storage):
"before" is the plain training graph with every parameter in RAM; "fused updates", "1-bit masks" and "both"
are the exact rewrites, parameters in RAM; "params in storage" is the plain graph with every trainable
parameter in storage; "all three" is both rewrites and every trainable parameter in storage (the compile's
defaults when the budget needs it); "all three, input storage" adds `--input storage` (the batch x loaded
into the arena where read, so the input image is no longer a fixed byte: 108 KB for the mobilenets at
96x96). "split" is "all three" with operator splitting (`--split SIZE`, poet_edge/splitting.py: channel
tiles, and row tiles with halos where one channel tile still exceeds the tile size; or, rows first
(`--tile-order rows`), bands of rows of all channels, cut in channels too only where a band is still too
big): the lowest floor over the tile sizes {tiles} in both orders (the largest size, channels first, on
ties), with the tile size and ", rows first" when that order gives it ("nothing tiled": the
lowest floor is already reached at a size that tiles no tensor and cuts no weight, so no tile size lowers
it; "weight blocks only": only Gemm / MatMul weights are cut, into blocks of their output columns), the node
that sets it (its op) and the split graph's node count; "split, input storage" the same with `--input
storage` (convolutions then read the batch in windows of rows, each loaded from storage on its own). A split
floor above "all three" means splitting alone does not lower that model's floor: `--split
auto` then keeps the unsplit graph, whose floor is the "all three" column (or "all three, input storage").
Splitting is exact at batch 1 (bit-identical parameters: tests/test_splitting.py). Run time of the whole
table: {seconds:.0f} s on this machine.

{table}

Where the floor does not move, the largest node is not a weight gradient (fused updates) or its float
input has another backward reader (masks: e.g. the next layer's weight gradient reads the ReLU output when
that layer trains); the fixed bytes (every trainable parameter in RAM) are unchanged by both rewrites, and
fall to the optimizer state, inputs and reserve with parameters in storage. Below "all three", the floor is
set by one operator's inputs, output and workspace, which splitting cuts where that operator is a
convolution, a channelwise op, a pool or a global average pool on a big activation (along rows too, with
the halo rows read from the neighbouring row tiles); with `--train all` a
convolution's trainable weight is cut into blocks along the tiles, each updated from its own input and
output-gradient tiles (docs/splitting.md). The split floors that stay high are set by nodes the rewrite
leaves whole: Gemm weight updates (GemmGradUpdate), Gemm / GRU gradients, a first convolution
reading the whole input image (fixed bytes with `--input ram`), and the Concat that joins a tiled tensor
for an unsplit reader (its tiles and the whole tensor at once: twice the tensor).
"""


def main() -> int:
    began = time.monotonic()
    rows = [row(c) for c in cases()]
    seconds = time.monotonic() - began
    shown = [flat(r) for r in rows]
    print(table(shown, list(shown[0])))
    worse = [
        (r["model"], r["train"], name)
        for r in rows
        for name, v in [*r["floor"].items(), *((k, sp["bytes"]) for k, sp in r["split"].items())]
        if v > r["floor"]["before"]
    ]
    print("floors above 'before':", worse or "none")
    raised = [
        (r["model"], r["train"]) for r in rows if r["split"]["split"]["bytes"] > r["floor"]["all three"]
    ]
    print("split floors above 'all three':", raised or "none")
    print(f"{seconds:.0f} s")
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    data = {**meta, "seconds": round(seconds, 1), "split_tiles": list(SPLIT_TILES), "rows": rows}
    (RESULTS / "floor.json").write_text(json.dumps(data, indent=1) + "\n")
    tiles = ", ".join(f"{t // 1024} KB" for t in SPLIT_TILES)
    (RESULTS / "floor.md").write_text(
        REPORT.format(**meta, table=markdown(shown), tiles=tiles, seconds=seconds)
    )
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
