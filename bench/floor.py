"""Memory floors of every zoo model, --train all and bias, batch 1, float32: before, and with each exact
training-graph rewrite of issue 56 (fused weight-gradient updates, 1-bit Relu/Clip masks) and both.

The floor (poet_edge.memory_floor) is the RAM no schedule goes below: fixed bytes (trainable parameters,
optimizer state, inputs, the 8 KB reserve) + the largest node's inputs, output and workspace. The
no-remat peak (every node once, in the given order, each value freed after its last use) is shown for the
plain graph and with both rewrites. SGD, --input ram, the host profile (the floor is device-independent).
Every rewrite column is one function of the training graph's options (COLUMNS): a new technique is one more
function. Writes bench/results/floor.json and floor.md (machine, commit, date).

Run: .venv/bin/python bench/floor.py"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import provenance  # noqa: E402
from zoo import ROOT, ZOO, table  # noqa: E402

from poet_edge import autodiff, frontend, planning, trainable  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
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


def _problem(case: Case, options: autodiff.TrainingOptions, stored: bool = False):
    tg = autodiff.training_graph(case.graph, case.loss, case.chosen, options=options)
    spec = planning.spec_from_graph(tg, RESERVE, stored=frozenset(tg.trainable) if stored else frozenset())
    return planning.price(spec, load_profile("host"), 1 << 62)


def floor_with(options: autodiff.TrainingOptions, stored: bool = False) -> Callable[[Case], int]:
    def column(case: Case) -> int:
        return memory_floor(_problem(case, options, stored)).bytes

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


# floor columns, in order: (header, function of the case)
COLUMNS: tuple[tuple[str, Callable[[Case], int]], ...] = (
    ("before", before),
    ("fused updates", fused_updates),
    ("1-bit masks", relu_masks),
    ("both", both),
    ("params in storage", params_in_storage),
    ("all three", all_three),
)


def peak(case: Case, options: autodiff.TrainingOptions) -> int:
    problem = _problem(case, options)
    return simulate(problem, get_scheduler("none")(problem)).peak_ram_bytes


def row(case: Case) -> dict[str, Any]:
    floors = {name: f(case) for name, f in COLUMNS}
    return {
        "model": case.model,
        "train": case.train,
        "floor": floors,
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
    cells["peak before KB"] = kb(r["peak"]["before"])
    cells["peak both KB"] = kb(r["peak"]["both"])
    return cells


def markdown(rows: list[dict[str, object]]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out)


REPORT = """# Memory floors with fused updates, 1-bit masks and parameters in storage (issue 56)

Measured by `bench/floor.py` on {machine}, commit {commit}, {date}.

Every zoo model at batch 1, float32, SGD, `--train all` and `--train bias`, 8 KB reserve. The floor is the
RAM no schedule can go below (fixed bytes + the largest node's inputs, output and workspace); the peaks are
the no-recomputation run in the given order (every value freed after its last use), plain and with both
rewrites. KB = 1024 bytes; percentages against the floor before. Both rewrites are exact (parameters
bit-identical to the plain graph: tests/test_fused_updates.py, tests/test_masks.py), and so is keeping
parameters in storage (tests/test_params_storage.py); the last costs storage reads and writes every step
(bench/results/tight.md has the energy, traffic and endurance of runs at these floors).

{table}

Where the floor does not move, the largest node is not a weight gradient (fused updates) or its float
input has another backward reader (masks: e.g. the next layer's weight gradient reads the ReLU output when
that layer trains); the fixed bytes (every trainable parameter in RAM) are unchanged by both rewrites, and
fall to the optimizer state, inputs and reserve with parameters in storage. Below "all three", the floor is
set by one operator's inputs, output and workspace: only operator splitting (issue 57) goes lower.
"""


def main() -> int:
    rows = [row(c) for c in cases()]
    shown = [flat(r) for r in rows]
    print(table(shown, list(shown[0])))
    worse = [
        (r["model"], r["train"], name)
        for r in rows
        for name, _ in COLUMNS
        if r["floor"][name] > r["floor"]["before"]
    ]
    print("floors above 'before':", worse or "none")
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "floor.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    (RESULTS / "floor.md").write_text(REPORT.format(**meta, table=markdown(shown)))
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
