"""Operator splitting on models users bring (issue 57): torchvision architectures, the tiny ViT and M5
(raw audio, 1-D), exported by both torch exporters, split as `--split auto` would, against the unsplit
training step.

For each file and --train all / bias (batch 1, the default rewrites, every trainable parameter in
storage, 8 KB reserve, `--input ram`): the memory floor unsplit and the lowest split floor over
splitting.all_splits (TILE_SIZES, largest first, while the split graph has at most MAX_NODES nodes, in
both tile orders, rows first and channels first, as `--tile-order auto` compares them; a tie keeps rows
first), with the tile size and order, the node that sets it and the split graph's node count; the numpy
step of the split graph against the unsplit one (3 SGD steps: max |a - b| / max |b| over the losses and
every parameter); and the generated C (host gcc, --kernels fast, --scheduler none, 2 steps) of the split
graph at that tile size and order against the unsplit C program: the same losses and parameters bit for
bit, or not.

The models come from examples/user_models/export.py (torch and torchvision are not poet-edge
dependencies; see examples/user_models/README.md):

    /tmp/torchenv/bin/python examples/user_models/export.py -o build/um mobilenetv3_small_32 \\
        squeezenet1_1_32 shufflenetv2_x0_5_32 mnasnet0_5_32 tiny_vit m5_audio --exporter dynamo --opset 18
    ... the same with --exporter torchscript --opset 17
    .venv/bin/python bench/split_users.py build/um

Writes bench/results/split_users.md and .json (machine, commit, date).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provenance import markdown_table as markdown  # noqa: E402
from provenance import provenance  # noqa: E402
from tight import max_rel_err  # noqa: E402

from poet_edge import autodiff, frontend, planning, reference, runner, splitting, trainable  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import Floor, memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402

RESULTS = ROOT / "bench" / "results"
RESERVE = 8192
TRAIN = ("all", "bias")
NUMPY_STEPS, C_STEPS, LR = 3, 2, 0.01


def floor(tg: Graph) -> Floor:
    spec = planning.spec_from_graph(tg, RESERVE, stored=frozenset(tg.trainable))
    return memory_floor(planning.price(spec, load_profile("host"), 1 << 40))


def numpy_error(tg: Graph, split: splitting.Split) -> float:
    """max |split - unsplit| / max |unsplit| over the losses and parameters after NUMPY_STEPS steps."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    y = rng.integers(0, 10, tg.shape(tg.inputs[1])).astype(np.int32)
    la, a = reference.train(tg, [(x, y)] * NUMPY_STEPS, LR)
    lb, b = reference.train(split.graph, [(x, y)] * NUMPY_STEPS, LR)
    b = split.join_params(b)
    return max([max_rel_err(np.array(lb), np.array(la))] + [max_rel_err(b[k], a[k]) for k in a])


def c_bits(path: Path, train: str, split: splitting.Split, work: Path) -> str:
    """Whether the split C program gives the unsplit one's losses and parameters bit for bit."""
    base = CompileOptions(path, "host", 64 << 20, work / "plain", 1, Loss.CROSS_ENTROPY, LR, RESERVE, "none")
    base = replace(base, train=train, training=autodiff.DEFAULT_OPTIONS, kernels="fast")
    compile_model(replace(base, split="off"))
    order = "rows" if split.rows_first else "channels"
    compile_model(replace(base, out=work / "split", split=f"{split.tile_bytes}B", tile_order=order))
    plain = runner.run_project(work / "plain", "host", C_STEPS)
    split = runner.run_project(work / "split", "host", C_STEPS)
    same = [s.loss for s in plain.steps] == [s.loss for s in split.steps] and all(
        np.array_equal(v, split.params[k]) for k, v in plain.params.items()
    )
    return "bit-identical" if same else "differ"


def row(path: Path, train: str) -> dict[str, Any]:
    began = time.perf_counter()
    g = frontend.load(path, 1)
    tg = autodiff.training_graph(
        g, Loss.CROSS_ENTROPY, trainable.select(g, train), options=autodiff.DEFAULT_OPTIONS
    )
    unsplit = floor(tg)
    best: tuple[splitting.Split, Floor] | None = None
    for s in splitting.all_splits(tg):
        f = floor(s.graph)
        if best is None or f.bytes < best[1].bytes:
            best = (s, f)
    assert best is not None
    split, f = best
    ops = {n.name: n.op for n in split.graph.nodes}
    with tempfile.TemporaryDirectory() as tmp:
        bits = c_bits(path, train, split, Path(tmp))
    return {
        "model": path.stem,
        "train": train,
        "floor": unsplit.bytes,
        "floor_node": unsplit.node,
        "split_floor": f.bytes,
        "tile": split.tile_bytes,
        "rows_first": split.rows_first,
        "node": f.node,
        "op": ops[f.node],
        "nodes": len(split.graph.nodes),
        "numpy_err": numpy_error(tg, split),
        "c_host": bits,
        "seconds": round(time.perf_counter() - began, 1),
    }


def shown(r: dict[str, Any]) -> dict[str, object]:
    return {
        "model": r["model"],
        "train": r["train"],
        "floor unsplit KB": f"{r['floor'] / 1024:,.1f}",
        "floor split KB": f"{r['split_floor'] / 1024:,.1f} ({r['split_floor'] / r['floor'] - 1:+.1%})",
        "tile": f"{r['tile'] // 1024} KB",
        "order": "rows first" if r.get("rows_first") else "channels first",
        "split floor set by": f"{r['node']} ({r['op']})",
        "nodes": f"{r['nodes']:,}",
        "numpy split vs unsplit": f"{r['numpy_err']:.1e}",
        "C split vs unsplit (host)": r["c_host"],
        "s": r["seconds"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", type=Path, help="a folder of .onnx files from examples/user_models/export.py")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    files = sorted(args.models.glob("*.onnx"))
    if not files:
        ap.error(f"no .onnx files in {args.models}")
    rows = []
    for path in files:
        for train in TRAIN:
            rows.append(row(path, train))
            print(" ".join(f"{k}={v}" for k, v in shown(rows[-1]).items()), flush=True)
    meta = provenance()
    lines = [
        "# Operator splitting on models users bring (issue 57)",
        "",
        f"Measured by `bench/split_users.py` on {meta['machine']}, commit {meta['commit']}, {meta['date']}.",
        "",
        (__doc__ or "").split("The models come from")[0].strip(),
        "",
        markdown([shown(r) for r in rows]),
        "",
    ]
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "split_users.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    (args.results / "split_users.md").write_text("\n".join(lines))
    print("\n".join(lines))
    bad = [r for r in rows if r["c_host"] != "bit-identical" or r["numpy_err"] > 1e-6]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
