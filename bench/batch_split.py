"""Batch splitting (issue 57, poet_edge/batch_split.py) on the zoo models at batch 8.

Per model (its loss and trainable set of bench/zoo.py; every zoo model takes a --batch): the memory floor
unsplit and with the batch in 2, 4 and 8 parts (every trainable parameter in storage, the default exact
rewrites, --input ram, the host profile: compiler.parts_floor), the lowest floor of 8 parts with channel /
row tiles (splitting.splits) next to tiles alone, the training graph's node counts, and the numpy reference
after 3 SGD steps with 8 parts against the unsplit graph: the first step's loss bit-identical or not (the
same parameters), how many of the 3 losses are, and the parameters' max relative error (max|a - b| /
max|b| per tensor). Then one compile of resnet8 --train bias at batch 4 at a budget only 4 parts reach
(below the 3-part floor), run 3 steps on the host and on qemu-cortex-m4: the batch parts --split auto
chose, the RAM measured on QEMU (static + stack high-water) against the budget, and whether the host and
QEMU give the same bits. Writes bench/results/batch_split.json and .md (machine, commit, date).

Run: .venv/bin/python bench/batch_split.py"""

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

from provenance import markdown_table as markdown  # noqa: E402
from provenance import provenance  # noqa: E402
from zoo import MODELS, ROOT, ZOO, ZooModel, table  # noqa: E402

from poet_edge import autodiff, frontend, planning, reference, runner, splitting  # noqa: E402
from poet_edge.compiler import CompileOptions, Training, compile_model, parts_floor  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions  # noqa: E402

RESULTS = ROOT / "bench" / "results"
BATCH = 8
PARTS = (2, 4, 8)
RESERVE = 8192
STEPS = 3
LR = 0.01
QEMU_MODEL, QEMU_BATCH = "resnet8", 4
# the zoo models bench/zoo.py leaves out (every one takes a --batch)
EXTRA = (
    ZooModel("accel_cnn1d", ZOO / "accel_cnn1d.onnx", train="bias"),
    ZooModel("gru_kws", ZOO / "gru_kws.onnx", train="bias"),
    ZooModel("gru_unrolled", ZOO / "gru_unrolled.onnx", train="bias"),
)


def _opts(m: ZooModel, batch: int, out: Path, ram: int = 1 << 40) -> CompileOptions:
    base = CompileOptions(m.path, "host", ram, out, batch, autodiff.Loss(m.loss), LR, RESERVE, "scale")
    return replace(base, train=m.train, training=autodiff.DEFAULT_OPTIONS, split="auto")


def _tiles_floor(training: Training, opts: CompileOptions, parts: int) -> int:
    """The lowest floor of the training graph with the batch in ``parts`` parts cut into tiles (with
    ``--input storage``: the batch read in boxes from storage, splitting.batch_windows)."""
    tg = training.graph(parts)[1]
    keep = frozenset(tg.trainable)
    host = load_profile("host")
    rows = opts.input == planning.InputPlace.STORAGE
    return min(
        (parts_floor_of(s.graph, s.param_names(keep), opts, host) for s in splitting.splits(tg, rows)),
        default=0,
    )


def parts_floor_of(tg: Graph, stored: frozenset[str], opts: CompileOptions, profile: Any) -> int:
    spec = planning.spec_from_graph(tg, RESERVE, opts.input, stored)
    return memory_floor(planning.price(spec, profile, 1 << 40)).bytes


def _numpy(training: Training, parts: int) -> tuple[bool, int, float]:
    """(the first step's loss bit-identical (the same parameters), how many of the 3 steps' losses are,
    max relative parameter error after the 3 steps) of ``parts`` parts vs unsplit."""
    tg, ts = training.graph(1)[1], training.graph(parts)[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    lab = tg.tensor(tg.inputs[1])
    if lab.dtype == "int32":
        classes = tg.shape(training.g.outputs[0])[1]
        y = rng.integers(0, classes, lab.shape).astype(np.int32)
    else:
        y = rng.standard_normal(lab.shape).astype(np.float32)
    la, a = reference.train(tg, [(x, y)] * STEPS, LR)
    lb, b = reference.train(ts, [(x, y)] * STEPS, LR)
    err = max(float(np.max(np.abs(b[k] - a[k])) / max(float(np.max(np.abs(a[k]))), 1e-30)) for k in a)
    return la[0] == lb[0], sum(a == b for a, b in zip(la, lb, strict=True)), err


def row(m: ZooModel) -> dict[str, Any]:
    began = time.monotonic()
    opts = _opts(m, BATCH, Path("unused"))
    training = Training(frontend.load(m.path, BATCH), opts)
    host = load_profile("host")
    floors = {k: parts_floor(training, RESERVE, host, opts, k) for k in (1, *PARTS)}
    nodes = {k: len(training.graph(k)[1].nodes) for k in (1, *PARTS)}
    s = training.split(BATCH)
    same, equal, err = _numpy(training, BATCH)
    return {
        "model": m.name,
        "train": m.train,
        "floor": {str(k): v for k, v in floors.items()},
        "floor_tiles": _tiles_floor(training, opts, 1),
        "floor_parts_tiles": _tiles_floor(training, opts, BATCH),
        "floor_parts_tiles_storage": _tiles_floor(
            training, replace(opts, input=planning.InputPlace.STORAGE), BATCH
        ),
        "nodes": {str(k): v for k, v in nodes.items()},
        "replicated": len(s.replicated),
        "joined": list(s.joined),
        "loss_bits": same,
        "equal_losses": equal,
        "max_rel_err": err,
        "seconds": round(time.monotonic() - began, 1),
    }


def qemu_run() -> dict[str, Any]:
    """resnet8 --train bias at batch 4, at a budget between the 4-part floor and the 3-part floor."""
    m = next(z for z in MODELS if z.name == QEMU_MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        opts = replace(_opts(m, QEMU_BATCH, out), device="cortex-m4", milp=MilpOptions(effort="quick"))
        training = Training(frontend.load(m.path, QEMU_BATCH), opts)
        profile = load_profile("cortex-m4")
        unsplit = parts_floor(training, RESERVE, profile, opts, 1)
        four = parts_floor(training, RESERVE, profile, opts, QEMU_BATCH)
        three = parts_floor(training, RESERVE, profile, opts, QEMU_BATCH - 1)
        budget = (four + three) // 2 // 1024 * 1024  # only 4 parts fit, unsplit and 2 or 3 parts do not
        c = compile_model(replace(opts, ram_bytes=budget))
        host = runner.run_project(out, "host", STEPS)
        qemu = runner.run_project(out, "qemu-cortex-m4", STEPS)
    same = [s.loss for s in host.steps] == [s.loss for s in qemu.steps] and all(
        np.array_equal(v, qemu.params[k]) for k, v in host.params.items()
    )
    return {
        "model": f"{m.name} --train {m.train}",
        "batch": QEMU_BATCH,
        "floor_unsplit": unsplit,
        "floor_parts": four,
        "floor_parts_less": three,
        "budget": budget,
        "parts": c.batch.parts if c.batch else 1,
        "tiles": c.split is not None,
        "predicted_ram": c.predicted_ram_bytes,
        "measured_ram": qemu.measured_ram_bytes,
        "host_bits": same,
        "losses": [s.loss for s in qemu.steps],
    }


def flat(r: dict[str, Any]) -> dict[str, object]:
    f, n = r["floor"], r["nodes"]
    return {
        "model": f"{r['model']} ({r['train']})",
        "floor unsplit": f"{f['1']:,}",
        **{f"{k} parts": f"{f[str(k)]:,}" for k in PARTS},
        "tiles": f"{r['floor_tiles']:,}",
        f"{BATCH} parts + tiles": f"{r['floor_parts_tiles']:,}",
        f"{BATCH} parts + tiles, input storage": f"{r['floor_parts_tiles_storage']:,}",
        "nodes 1/2/4/8": "/".join(str(n[str(k)]) for k in (1, *PARTS)),
        "per part": r["replicated"],
        "step-1 loss": "same bits" if r["loss_bits"] else "DIFFERS",
        "same losses": f"{r['equal_losses']}/{STEPS}",
        "max rel err": f"{r['max_rel_err']:.1e}",
    }


REPORT = """# Batch splitting at batch {batch} (issue 57)

Measured by `bench/batch_split.py` on {machine}, commit {commit}, {date} ({seconds:.0f} s).

Memory floors in bytes (every trainable parameter in storage, the default exact rewrites, --input ram,
8 KB reserve, host profile): unsplit, with the batch in 2, 4 and 8 parts, channel / row tiles alone
(the lowest over the tile sizes), and 8 parts with tiles, with the batch in RAM and with `--input storage`
(each part's samples, and each row window of them, loaded from storage: x is never whole in RAM). Nodes:
the training graph's, with 1, 2, 4 and 8 parts; "per part": forward nodes run once per part. numpy
reference, 3 SGD steps (lr {lr}), 8 parts vs unsplit: the first step's loss (the same parameters) bit for
bit, how many of the 3 losses have the same bits (from step 2 the parameters differ within rounding), and
the parameters' max relative error after 3 steps (the weight and bias gradients sum the parts in another
order; docs/batch_split.md).

{table}

One compile and run (qemu-cortex-m4, `--split auto`, `--effort quick`, 3 steps): {q[model]} at batch
{q[batch]}, budget {q[budget]:,} B between the {q[batch]}-part floor ({q[floor_parts]:,} B) and the 3-part
floor ({q[floor_parts_less]:,} B; unsplit: {q[floor_unsplit]:,} B): {q[parts]} batch parts{tiles}; RAM
predicted {q[predicted_ram]:,} B,
measured on QEMU {q[measured_ram]:,} B; host and QEMU bits {bits}.
"""


def main() -> int:
    began = time.monotonic()
    rows = []
    for m in (*MODELS, *EXTRA):
        rows.append(row(m))
        print(json.dumps(rows[-1]), flush=True)
    shown = [flat(r) for r in rows]
    print(table(shown, list(shown[0])))
    q = qemu_run()
    print(json.dumps(q))
    seconds = time.monotonic() - began
    meta = provenance()
    RESULTS.mkdir(exist_ok=True)
    data = {**meta, "seconds": round(seconds, 1), "batch": BATCH, "rows": rows, "qemu": q}
    (RESULTS / "batch_split.json").write_text(json.dumps(data, indent=1) + "\n")
    text = REPORT.format(
        **meta,
        batch=BATCH,
        seconds=seconds,
        lr=LR,
        table=markdown(shown),
        q=q,
        tiles=" with tiles" if q["tiles"] else ", no tiles",
        bits="identical" if q["host_bits"] else "DIFFER",
    )
    (RESULTS / "batch_split.md").write_text(text)
    ok = q["host_bits"] and q["measured_ram"] <= q["budget"] and all(r["loss_bits"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
