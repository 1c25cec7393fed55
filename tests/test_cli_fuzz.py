"""Property test of the command line (issue 59): random bad options, mutated ONNX files (flipped bytes,
random attributes, shapes, names, op types, opsets) and mutated graph files for ``poet solve``.

Whatever the input, a command either succeeds (and then wrote a whole output folder) or fails with a
non-zero exit and a message starting with "poet" — never a Python traceback, never "internal error"
(cli.main's label for an unclassified exception, that is a bug), never a half-written output folder or
a hidden .X.tmp-*/.X.old-* folder. In-process (cli.main with argv) for speed, plus a few subprocesses.

Size: POET_FUZZ_CLI_EXAMPLES examples per property (default 15, derandomized: the same cases every run,
60 in all); ``make fuzz`` runs more with random seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from io import StringIO
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poet_edge.cli import main

EXAMPLES = int(os.environ.get("POET_FUZZ_CLI_EXAMPLES", "15"))
RANDOM = os.environ.get("POET_FUZZ_CLI_RANDOM") == "1"  # make fuzz: new cases each run
MLP = Path(__file__).resolve().parent.parent / "examples" / "mlp.onnx"

fuzz = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="poet-fuzz-") as d:
        yield Path(d)


def _check(code: int, err: str, folder: Path, out: Path | None) -> None:
    """The property: success with a whole output, or a clean failure; no traceback, nothing half-written."""
    assert "Traceback" not in err and "internal error" not in err, err
    hidden = [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert hidden == [], hidden
    if code == 0:
        assert out is None or (out / "plan.json").is_file()
    else:
        assert err.startswith("poet") or "\npoet" in err or err.startswith("usage:"), err
        assert out is None or not out.exists(), "a failed compile left its output folder"


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with redirect_stdout(StringIO()):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse's own refusals (usage, --help)
            code = e.code if isinstance(e.code, int) else 2
    return code, capsys.readouterr().err


# ---- options ----
NUMBERS = st.sampled_from(
    ["nan", "-nan", "inf", "-inf", "-1", "0", "1e400", "1e-400", "1e30", "0x10", "", " ", "abc", "1.5x",
     "nanx", "-0", "3", "64KB", "1GB", "2**31", "1e9", "١٢", "5s", "-5KB", "NaN KB"]
)  # fmt: skip
COMPILE_OPTIONS = st.sampled_from(
    ["--ram", "--batch", "--lr", "--reserve", "--time-limit", "--gap", "--threads", "--max-latency",
     "--train", "--device", "--scheduler", "--loss", "--input", "--kernels", "--objective"]
)  # fmt: skip


@fuzz
@given(st.lists(st.tuples(COMPILE_OPTIONS, NUMBERS), min_size=1, max_size=3))
def test_compile_with_random_options(capsys, options):
    with _folder() as folder:
        out = folder / "o.poet"
        argv = ["compile", MLP, "--ram", "64KB", "-o", out, "-q", "--no-report", "--scheduler", "none"]
        for opt, value in options:
            argv += [opt, value]
        code, err = _main(argv, capsys)
        _check(code, err, folder, out)


RUN_OPTIONS = st.sampled_from(
    ["--steps", "--lr", "--timeout", "--target", "--data", "--json", "--dump-params"]
)


@pytest.fixture(scope="module")
def compiled() -> Iterator[Path]:
    with _folder() as folder:
        out = folder / "mlp.poet"
        assert main(["compile", str(MLP), "--ram", "64KB", "-o", str(out), "-q", "--no-report"]) == 0
        yield out


@fuzz
@given(
    st.lists(st.tuples(RUN_OPTIONS, NUMBERS), min_size=1, max_size=2), st.sampled_from(["run", "simulate"])
)
def test_run_and_simulate_with_random_options(capsys, compiled, options, command):
    """Only options that make the command fail before it builds anything are drawn often; a run that
    passes every check trains one host step."""
    with _folder() as folder:
        argv = [command, compiled, *(["--steps", "1"] if command == "run" else [])]
        for opt, value in options:
            argv += [opt, value if opt not in ("--json", "--dump-params") else folder / "sub" / value]
        code, err = _main(argv, capsys)
        _check(code, err, folder, None)


# ---- mutated ONNX files ----
OPS = ["Relu", "Gemm", "Conv", "Flatten", "Softmax", "MatMul", "Add", "Reshape", "Nope", ""]
NAMES = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
INTS = st.one_of(st.integers(-3, 70), st.sampled_from([0, -1, 2**31, 2**40, 10**12, -(2**62)]))


def _mutate(model: onnx.ModelProto, kind: str, data: st.DataObject) -> None:
    g = model.graph
    node = g.node[data.draw(st.integers(0, len(g.node) - 1))]
    if kind == "attribute":
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT:
                a.i = data.draw(INTS)
        node.attribute.append(
            onnx.helper.make_attribute(data.draw(st.sampled_from(["axis", "alpha", "x"])), 3)
        )
    elif kind == "shape":
        dims = g.input[0].type.tensor_type.shape.dim
        dim = dims[data.draw(st.integers(0, len(dims) - 1))]
        value = data.draw(st.one_of(INTS, NAMES))
        if isinstance(value, int):
            dim.dim_value = value
        else:
            dim.dim_param = value
    elif kind == "name":
        which = data.draw(st.sampled_from(["input", "output", "node"]))
        name = data.draw(NAMES)
        if which == "node":
            node.name = name
        elif which == "input" and node.input:
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = name
        elif node.output:
            node.output[0] = name
    elif kind == "op":
        node.op_type = data.draw(st.sampled_from(OPS))
    elif kind == "initializer":
        t = g.initializer[data.draw(st.integers(0, len(g.initializer) - 1))]
        t.dims[0] = data.draw(INTS)
    elif kind == "opset":
        model.opset_import[0].version = data.draw(st.integers(-2, 40))
    elif kind == "remove":
        del g.node[data.draw(st.integers(0, len(g.node) - 1))]


MUTATIONS = ["attribute", "shape", "name", "op", "initializer", "opset", "remove", "bytes"]


@fuzz
@given(st.data(), st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3))
def test_compile_mutated_onnx(capsys, data, kinds):
    model = onnx.load(str(MLP))
    for kind in kinds:
        if kind != "bytes":
            _mutate(model, kind, data)
    raw = bytearray(model.SerializeToString())
    if "bytes" in kinds:
        for i in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=8)):
            raw[i] ^= data.draw(st.integers(1, 255))
    with _folder() as folder:
        path, out = folder / "m.onnx", folder / "o.poet"
        path.write_bytes(bytes(raw))
        code, err = _main(
            ["compile", path, "--ram", "64KB", "-o", out, "-q", "--no-report", "--scheduler", "none"], capsys
        )
        _check(code, err, folder, out)
        code, err = _main(["inspect", path], capsys)
        _check(code, err, folder, None)


# ---- mutated graph files ----
GRAPH = {
    "graph": {"cost_unit": "cost"},
    "nodes": [{"id": i, "cost_ram": 100 * (i + 1), "cost_cpu": 1.0 + i} for i in range(4)],
    "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 0, "target": 3}],
}
NODE_KEYS = ["id", "cost_ram", "cost_cpu", "out_bytes", "compute_s", "pageable", "page_in_s", "name"]
GRAPH_KEYS = ["budget_bytes", "fixed_bytes", "max_latency_s", "invalidated_by", "storage_bytes"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@fuzz
@given(st.data(), st.integers(1, 4), st.sampled_from(["scale", "none", "greedy", "page-all", "milp"]))
def test_solve_mutated_graph(capsys, data, mutations, scheduler):
    graph = json.loads(json.dumps(GRAPH))
    for _ in range(mutations):
        where = data.draw(st.sampled_from(["node", "link", "graph", "top"]))
        value = data.draw(JSON)
        nodes, links, attrs = graph.get("nodes"), graph.get("links"), graph.get("graph")
        if where == "node" and isinstance(nodes, list) and nodes:
            node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
            if isinstance(node, dict):
                node[data.draw(st.sampled_from(NODE_KEYS))] = value
        elif where == "link" and isinstance(links, list):
            links.append(data.draw(st.one_of(JSON, st.lists(st.integers(-1, 5), max_size=3))))
        elif where == "graph" and isinstance(attrs, dict):
            attrs[data.draw(st.sampled_from(GRAPH_KEYS))] = value
        elif where == "top":
            graph[data.draw(st.sampled_from(["nodes", "links", "graph"]))] = value
    with _folder() as folder:
        path = folder / "g.json"
        path.write_text(json.dumps(graph))
        argv = [
            "solve",
            path,
            "--ram",
            data.draw(st.sampled_from(["1KB", "300", "0", "1GB"])),
            "--time-limit",
            "2",
        ]
        code, err = _main([*argv, "--scheduler", scheduler], capsys)
        _check(code, err, folder, None)


# ---- the real entry point ----
@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "{folder}/m.onnx", "--ram", "64KB", "-o", "{folder}/o"],
        ["compile", str(MLP), "--ram", "64KB", "--max-latency", "nan", "-o", "{folder}/o"],
        ["solve", "{folder}/g.json", "--ram", "1KB"],
        ["simulate", "{folder}"],
    ],
)
def test_subprocess_cases(argv):
    with _folder() as folder:
        raw = bytearray(MLP.read_bytes())
        for i in range(40, 400, 37):
            raw[i] ^= 0x5A
        (folder / "m.onnx").write_bytes(bytes(raw))
        (folder / "g.json").write_text('{"nodes": [{"id": 0, "cost_ram": 1e999, "cost_cpu": 1}]}')
        (folder / "plan.json").write_text('{"device": "host", "problem": ')
        r = subprocess.run(
            [sys.executable, "-m", "poet_edge", *(a.format(folder=folder) for a in argv)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode != 0
        _check(r.returncode, r.stderr, folder, folder / "o")
