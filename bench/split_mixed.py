"""Operator splitting with mixed tile sizes (issue 57): tiles only as small as the floor needs.

For every zoo model (examples/zoo) and the users' models (a folder of .onnx files from
examples/user_models/export.py, as bench/split_users.py), `--train all` and `bias`, `--input ram` and
`--input storage` (the batch read through row windows, `split_graph(input_rows=True)`): batch 1, the
default exact rewrites, every trainable parameter in storage, 8 KB reserve, SGD, the host profile.

- uniform: the lowest memory floor over `splitting.splits` (one tile size for the whole graph, TILE_SIZES
  largest first, while the split graph has at most MAX_NODES nodes), the largest size that reaches it, and
  its node count;
- mixed: `splitting.split_for_floor` with that floor as its target, each node's need counted as the
  memory floor counts it (planning's fusion groups, `memory_floor.node_need`): its floor (at most the
  uniform one) and node count, and the ratio of the node counts;
- beyond MAX_NODES: where `splits` stopped before 1 KB (a graph of more than MAX_NODES nodes), the
  uniform 1 KB split's floor (when lower) and node count, and the mixed split at that floor;
- one size up: the floor of the uniform split one tile size coarser (a target with some room above the
  lowest floor, as a budget would give), when it is between the lowest and the unsplit floor, and the node
  counts of that uniform split and of the mixed split at its floor.

For a few cases (C_CASES; `--no-c` skips them), the generated C (host gcc, `--kernels fast`, `--scheduler
none`, 2 steps) of the mixed split against the unsplit C program: the same losses and parameters bit for
bit, or not; and the numpy step (3 SGD steps, max |a - b| / max |b| over losses and parameters).

    .venv/bin/python bench/split_mixed.py /work/um

Writes bench/results/split_mixed.md and .json (machine, commit, date).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provenance import markdown_table as markdown  # noqa: E402
from provenance import provenance  # noqa: E402
from split_users import numpy_error  # noqa: E402

from poet_edge import autodiff, frontend, planning, runner, splitting, trainable  # noqa: E402
from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.memory_floor import memory_floor, node_need  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ZOO = ROOT / "examples" / "zoo"
RESERVE = 8192
TRAIN = ("all", "bias")
INPUTS = ("ram", "storage")
LOSSES = {"autoencoder": Loss.MSE}
C_CASES = (  # (model file stem, train, input): the mixed split's C program against the unsplit one
    ("resnet8", "all", "ram"),
    ("squeezenet1_1_32-torchscript-op17", "all", "ram"),
    ("mobilenetv3_small_32-torchscript-op17", "all", "ram"),
)
NUMPY_STEPS, C_STEPS, LR = 3, 2, 0.01


def place(inp: str) -> planning.InputPlace:
    return planning.InputPlace.STORAGE if inp == "storage" else planning.InputPlace.RAM


def problem(g: Graph, inp: str) -> planning.SchedulingProblem:
    spec = planning.spec_from_graph(g, RESERVE, place(inp), frozenset(g.trainable))
    return planning.price(spec, load_profile("host"), 1 << 40)


def planning_need(inp: str) -> Callable[[splitting.Split], Mapping[str, int]]:
    """Each node's need as the memory floor counts it (fixed bytes included): a fused group's for each of
    its members. What the compile would pass to split_for_floor."""

    def need(split: splitting.Split) -> Mapping[str, int]:
        kept = frozenset(split.graph.trainable)
        spec = planning.spec_from_graph(split.graph, RESERVE, place(inp), kept)
        p = planning.price(spec, load_profile("host"), 1 << 40)
        preds = p.preds()
        out: dict[str, int] = {}
        for v, ns in enumerate(spec.nodes):
            b = node_need(p, v, preds)
            out |= {name: b for name in (ns.name, *ns.epilogue)}
        return out

    return need


def training_graph(path: Path, train: str) -> Graph:
    g = frontend.load(path, 1)
    loss = LOSSES.get(path.stem, Loss.CROSS_ENTROPY)
    return autodiff.training_graph(g, loss, trainable.select(g, train), options=autodiff.DEFAULT_OPTIONS)


def row(path: Path, train: str, inp: str) -> dict[str, Any]:
    began = time.perf_counter()
    tg = training_graph(path, train)
    rows_in = inp == "storage"
    unsplit = memory_floor(problem(tg, inp)).bytes
    best: tuple[splitting.Split, int] | None = None
    tried: dict[int, tuple[int, int]] = {}  # tile size -> (floor, nodes)
    for s in splitting.splits(tg, rows_in):
        f = memory_floor(problem(s.graph, inp)).bytes
        tried[s.tile_bytes] = (f, len(s.graph.nodes))
        if best is None or f < best[1]:
            best = (s, f)
    assert best is not None
    uniform, floor = best
    t0 = time.perf_counter()
    mixed = splitting.split_for_floor(tg, floor, input_rows=rows_in, need=planning_need(inp))
    search_s = time.perf_counter() - t0
    mf = memory_floor(problem(mixed.graph, inp))
    sizes = Counter(mixed.sizes.values())
    up = tried.get(2 * uniform.tile_bytes)  # one size coarser: a target with some room above the lowest
    step: dict[str, Any] = {}
    if up is not None and floor < up[0] < unsplit:
        m2 = splitting.split_for_floor(tg, up[0], input_rows=rows_in, need=planning_need(inp))
        step = {
            "up_tile": 2 * uniform.tile_bytes,
            "up_floor": up[0],
            "up_nodes": up[1],
            "up_mixed_floor": memory_floor(problem(m2.graph, inp)).bytes,
            "up_mixed_nodes": len(m2.graph.nodes),
        }
    finest = splitting.TILE_SIZES[-1]
    if finest not in tried:  # splits stopped at MAX_NODES: the finest size's floor, and mixed there
        u = splitting.split_graph(tg, finest, input_rows=rows_in)
        uf = memory_floor(problem(u.graph, inp)).bytes
        if uf < floor:
            m3 = splitting.split_for_floor(tg, uf, input_rows=rows_in, need=planning_need(inp))
            step |= {
                "cap_floor": uf,
                "cap_nodes": len(u.graph.nodes),
                "cap_mixed_floor": memory_floor(problem(m3.graph, inp)).bytes,
                "cap_mixed_nodes": len(m3.graph.nodes),
            }
    return {
        **step,
        "model": path.stem,
        "train": train,
        "input": inp,
        "unsplit_floor": unsplit,
        "floor": floor,
        "tile": uniform.tile_bytes,
        "nodes": len(uniform.graph.nodes),
        "mixed_floor": mf.bytes,
        "mixed_node": mf.node,
        "mixed_nodes": len(mixed.graph.nodes),
        "mixed_sizes": {str(k): v for k, v in sorted(sizes.items(), reverse=True)},
        "search_s": round(search_s, 1),
        "seconds": round(time.perf_counter() - began, 1),
    }


def c_check(path: Path, train: str, inp: str) -> dict[str, Any]:
    """The mixed split of the lowest uniform floor: numpy error and C bits against the unsplit step."""
    tg = training_graph(path, train)
    rows_in = inp == "storage"
    floor = min(memory_floor(problem(s.graph, inp)).bytes for s in splitting.splits(tg, rows_in))
    mixed = splitting.split_for_floor(tg, floor, input_rows=rows_in, need=planning_need(inp))
    err = numpy_error(tg, mixed)
    assert mixed.asked is not None
    sizes = mixed.asked
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = CompileOptions(
            path, "host", 64 << 20, work / "plain", 1, Loss.CROSS_ENTROPY, LR, RESERVE, "none"
        )
        base = replace(base, train=train, training=autodiff.DEFAULT_OPTIONS, kernels="fast")
        compile_model(replace(base, split="off"))
        c = compile_model(replace(base, out=work / "split", split="auto", tiles=sizes))
        assert c.split is not None and len(c.split.graph.nodes) == len(mixed.graph.nodes)
        plain = runner.run_project(work / "plain", "host", C_STEPS)
        split = runner.run_project(work / "split", "host", C_STEPS)
    same = [s.loss for s in plain.steps] == [s.loss for s in split.steps] and all(
        np.array_equal(v, split.params[k]) for k, v in plain.params.items()
    )
    return {
        "model": path.stem,
        "train": train,
        "input": inp,
        "nodes": len(mixed.graph.nodes),
        "numpy_err": err,
        "c_host": "bit-identical" if same else "differ",
    }


def shown(r: dict[str, Any]) -> dict[str, object]:
    kb = 1024
    return {
        "model": r["model"],
        "train": r["train"],
        "input": r["input"],
        "floor unsplit KB": f"{r['unsplit_floor'] / kb:,.1f}",
        "uniform floor KB": f"{r['floor'] / kb:,.1f}",
        "uniform tile": f"{r['tile'] // kb} KB",
        "uniform nodes": f"{r['nodes']:,}",
        "mixed floor KB": f"{r['mixed_floor'] / kb:,.1f}",
        "mixed nodes": f"{r['mixed_nodes']:,}",
        "mixed / uniform nodes": f"{r['mixed_nodes'] / r['nodes']:.2f}",
        "mixed sizes (KB: tensors)": ", ".join(f"{int(k) // kb}: {v}" for k, v in r["mixed_sizes"].items())
        or "-",
        "search s": r["search_s"],
        **up_columns(r),
    }


def up_columns(r: dict[str, Any]) -> dict[str, str]:
    out = {"one size up: floor KB (tile)": "-", "uniform / mixed nodes there": "-"}
    if r.get("up_tile"):
        out = {
            "one size up: floor KB (tile)": f"{r['up_floor'] / 1024:,.1f} ({r['up_tile'] // 1024} KB)",
            "uniform / mixed nodes there": f"{r['up_nodes']:,} / {r['up_mixed_nodes']:,} "
            f"({r['up_mixed_nodes'] / r['up_nodes']:.2f})",
        }
    out["1 KB beyond MAX_NODES: floor KB, uniform / mixed nodes"] = (
        f"{r['cap_floor'] / 1024:,.1f}, {r['cap_nodes']:,} / {r['cap_mixed_nodes']:,}"
        if r.get("cap_floor")
        else "-"
    )
    return out


def geomean(xs: list[float]) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", type=Path, help="a folder of .onnx files from examples/user_models/export.py")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--no-c", action="store_true", help="skip the C checks")
    ap.add_argument("--only", default="", help="models whose file name contains this (default: all)")
    args = ap.parse_args(argv)
    files = sorted(ZOO.glob("*.onnx")) + sorted(args.models.glob("*.onnx"))
    files = [f for f in files if args.only in f.name]
    rows = []
    for path in files:
        for train in TRAIN:
            for inp in INPUTS:
                rows.append(row(path, train, inp))
                print(" ".join(f"{k}={v}" for k, v in shown(rows[-1]).items()), flush=True)
    checks = []
    if not args.no_c:
        by_stem = {p.stem: p for p in files}
        for stem, train, inp in C_CASES:
            if stem in by_stem:
                checks.append(c_check(by_stem[stem], train, inp))
                print(checks[-1], flush=True)
    split = [r for r in rows if r["nodes"] > 0 and r["floor"] < r["unsplit_floor"]]
    ratio = geomean([r["mixed_nodes"] / r["nodes"] for r in split])
    ups = [r for r in rows if r.get("up_tile")]
    up_ratio = geomean([r["up_mixed_nodes"] / r["up_nodes"] for r in ups])
    meta = provenance()
    lines = [
        "# Operator splitting with mixed tile sizes (issue 57)",
        "",
        f"Measured by `bench/split_mixed.py` on {meta['machine']}, commit {meta['commit']}, {meta['date']}.",
        "",
        (__doc__ or "").split("    .venv")[0].strip(),
        "",
        f"Over the {len(split)} cases where splitting lowers the floor, the mixed split has "
        f"{ratio:.2f}x the uniform split's nodes (geometric mean); its floor is never above the uniform "
        "one (checked). One tile size up (a target with room: "
        f"{len(ups)} cases), the mixed split has {up_ratio:.2f}x the uniform split's nodes.",
        "",
        markdown([shown(r) for r in rows]),
        "",
        "## C and numpy: the mixed split against the unsplit step",
        "",
        markdown(
            [
                {
                    "model": c["model"],
                    "train": c["train"],
                    "input": c["input"],
                    "nodes": f"{c['nodes']:,}",
                    "numpy mixed vs unsplit": f"{c['numpy_err']:.1e}",
                    "C mixed vs unsplit (host, fast kernels)": c["c_host"],
                }
                for c in checks
            ]
        )
        if checks
        else "(not run)",
        "",
    ]
    args.results.mkdir(parents=True, exist_ok=True)
    out = {**meta, "rows": rows, "c_checks": checks}
    (args.results / "split_mixed.json").write_text(json.dumps(out, indent=1) + "\n")
    (args.results / "split_mixed.md").write_text("\n".join(lines))
    print("\n".join(lines))
    bad = [r for r in rows if r["mixed_floor"] > r["floor"]]
    bad += [r for r in rows if r.get("up_tile") and r["up_mixed_floor"] > r["up_floor"]]
    bad += [r for r in rows if r.get("cap_floor") and r["cap_mixed_floor"] > r["cap_floor"]]
    bad += [c for c in checks if c["c_host"] != "bit-identical" or c["numpy_err"] > 1e-6]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
