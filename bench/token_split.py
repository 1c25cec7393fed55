"""A sequence's positions in parts at batch 1 (issue 57; poet_edge/batch_split.py split_tokens).

Per model (bert_tiny from the zoo, and every tiny ViT file in the folder given, as exported by
examples/user_models/export.py by both torch exporters), `--train bias` and `all`, `--input ram` and
`storage`: the memory floors `poet inspect` reports (every trainable parameter in storage; the lowest over
tile sizes: operator splitting alone, then with the positions in one-position parts too), the node that
sets each, and the numpy reference after 3 SGD steps with the positions in the most parts against the
unsplit graph (the parameters' max relative error, max|a - b| / max|b| per tensor). Then one compile of
bert_tiny `--train bias --input storage` at 28 KB (below its 41.5 KB floor with tiles alone, cortex-m4,
`--effort quick`), run 3 steps on the host and on qemu-cortex-m4 next to the unsplit program: the parts and
tiles `--split auto` chose, the energy against the unconstrained step, the RAM measured on QEMU against
the budget, host = QEMU bits, and the first loss against the unsplit program's.

    /work/torch-venv/bin/python examples/user_models/export.py -o build/vit tiny_vit
    .venv/bin/python bench/token_split.py build/vit

Writes bench/results/token_split.json and .md (machine, commit, date)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import markdown_table, provenance  # noqa: E402

from poet_edge import autodiff, batch_split, frontend, planning, reference, runner, trainable  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.inspect_model import inspect  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BERT = ROOT / "examples" / "zoo" / "bert_tiny.onnx"
LR = 0.05
STEPS = 3
RAM = 28 * 1024


def _training(g: Graph, train: str) -> Graph:
    return autodiff.training_graph(g, Loss.CROSS_ENTROPY, trainable.select(g, train), options=autodiff.PLAIN)


def numpy_error(path: Path, train: str, parts: int) -> float:
    """The parameters' max relative error after 3 SGD steps with the positions in ``parts`` parts."""
    g = frontend.load(path, 1)
    split = batch_split.split_parts(g, parts, trainable.select(g, train))
    tg, ts = _training(g, train), _training(split.graph, train)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    y = rng.integers(0, 2, tg.shape(tg.inputs[1])).astype(np.int32)
    _, a = reference.train(tg, [(x, y)] * STEPS, LR)
    _, b = reference.train(ts, [(x, y)] * STEPS, LR)
    return max(float(np.max(np.abs(b[k] - a[k])) / max(float(np.max(np.abs(a[k]))), 1e-30)) for k in a)


def floors(path: Path) -> list[dict[str, Any]]:
    rows = []
    parts = batch_split.sequence_length(frontend.load(path, 1))
    for train in ("bias", "all"):
        for place in (planning.InputPlace.RAM, planning.InputPlace.STORAGE):
            r = inspect(path, train=train, input_place=place, options=autodiff.DEFAULT_OPTIONS)
            rows.append(
                {
                    "model": path.stem,
                    "train": train,
                    "input": place.value,
                    "positions": parts,
                    "floor tiles KB": round(r.floor_split_bytes / 1024, 1),
                    "set by": r.floor_split_node,
                    "floor parts + tiles KB": round(r.floor_parts_bytes / 1024, 1),
                    "set by (parts)": r.floor_parts_node,
                    "change": f"{100 * (r.floor_parts_bytes / r.floor_split_bytes - 1):+.1f}%",
                    "numpy err": f"{numpy_error(path, train, parts):.1e}" if place.value == "ram" else "",
                }
            )
            print(rows[-1], flush=True)
    return rows


def tight(work: Path) -> dict[str, Any]:
    """bert_tiny --train bias --input storage at 28 KB on qemu-cortex-m4 against the unsplit program."""
    base = CompileOptions(BERT, "cortex-m4", RAM, work / "tight", 1, Loss.CROSS_ENTROPY, LR, None, "scale")
    base = replace(
        base,
        train="bias",
        input=planning.InputPlace.STORAGE,
        training=autodiff.DEFAULT_OPTIONS,
        milp=MilpOptions(effort="quick"),
        split="auto",
    )
    began = time.perf_counter()
    c = compile_model(base)
    seconds = time.perf_counter() - began
    free = compile_model(replace(base, ram_bytes=1 << 20, out=work / "free"))
    host = runner.run_project(work / "tight", "host", STEPS)
    qemu = runner.run_project(work / "tight", "qemu-cortex-m4", STEPS)
    plain = runner.run_project(work / "free", "host", STEPS)
    same = [s.loss for s in host.steps] == [s.loss for s in qemu.steps] and all(
        np.array_equal(v, qemu.params[k]) for k, v in host.params.items()
    )
    err = max(
        float(np.max(np.abs(host.params[k] - v)) / max(float(np.max(np.abs(v))), 1e-30))
        for k, v in plain.params.items()
    )
    plan = json.loads((work / "tight" / "plan.json").read_text())
    return {
        "budget B": RAM,
        "parts": c.batch.parts if c.batch else 1,
        "tiles": "yes" if plan["tiles"] else "no",
        "nodes": len(c.split.graph.nodes) if c.split else len(c.training.nodes),
        "energy mJ": round(c.sim.energy_j * 1e3, 3),
        "unconstrained mJ": round(free.sim.energy_j * 1e3, 3),
        "cost": f"{100 * (c.sim.energy_j / free.sim.energy_j - 1):+.1f}%",
        "QEMU RAM B": qemu.measured_ram_bytes,
        "host = QEMU": "yes" if same else "NO",
        "first loss = unsplit": "yes" if host.steps[0].loss == plain.steps[0].loss else "no",
        "params vs unsplit C": f"{err:.1e}",
        "compile s": round(seconds, 1),
    }


def main(argv: list[str]) -> int:
    paths = [BERT] + sorted(p for d in argv for p in Path(d).glob("tiny_vit*.onnx"))
    meta = provenance()
    rows = [r for p in paths for r in floors(p)]
    with tempfile.TemporaryDirectory() as tmp:
        run = tight(Path(tmp))
    print(run, flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "token_split.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "tight": run}, indent=1) + "\n"
    )
    text = (
        "# A sequence's positions in parts at batch 1 (issue 57)\n\n"
        f"Measured by `bench/token_split.py` on {meta['machine']}, commit {meta['commit']}, "
        f"{meta['date']}.\n\n"
        + __doc__.split("\n\n")[1].replace("\n", " ")
        + "\n\n"
        + markdown_table(rows)
        + "\n\n"
        + markdown_table([run])
        + "\n"
    )
    (RESULTS / "token_split.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
