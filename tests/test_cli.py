"""The command line: exit codes, one-line errors, nothing half-written."""

from __future__ import annotations

import json

import numpy as np
from conftest import need_tools, poet
from onnx import TensorProto, helper, save


def test_compile_run_and_simulate(mlp_path, tmp_path):
    need_tools("gcc")
    out = tmp_path / "out"
    r = poet("compile", mlp_path, "--device", "host", "--ram", "64KB", "-o", out, "--batch", "2")
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["peak_ram_bytes"] <= 64 * 1024
    assert plan["training_graph"]["nodes_by_phase"]["update"] == 6
    assert plan["schedule"]["steps"][0] == ["compute", "flatten"]
    r = poet("run", out, "--steps", "3", "--dump-params", tmp_path / "p.npz")
    assert r.returncode == 0, r.stderr
    assert [line.split()[1] for line in r.stdout.splitlines() if line.startswith("step")] == ["0", "1", "2"]
    with np.load(tmp_path / "p.npz") as z:
        assert set(z.files) == set(plan_names(plan))
    r = poet("simulate", out, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["peak_ram_bytes"] == plan["simulated_peak_ram_bytes"]


def plan_names(plan):
    return [p["name"] for p in plan["parameters"]]


def test_run_with_data_file(mlp_path, tmp_path):
    need_tools("gcc")
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out).returncode == 0
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "d.npz", x=rng.standard_normal((3, 1, 8, 8)).astype(np.float32), y=np.array([1, 2, 3])
    )
    r = poet("run", out, "--steps", "4", "--data", tmp_path / "d.npz")
    assert r.returncode == 0, r.stderr
    np.savez(tmp_path / "bad.npz", x=np.zeros((3, 5)), y=np.zeros(3))
    r = poet("run", out, "--data", tmp_path / "bad.npz")
    assert r.returncode != 0 and "do not match" in r.stderr


def _assert_clean_failure(r, out, *needles):
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("poet: error:"), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


def test_not_onnx(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello")
    out = tmp_path / "out"
    _assert_clean_failure(poet("compile", bad, "--ram", "64KB", "-o", out), out, "not a valid ONNX model")


def test_unsupported_op(tmp_path):
    g = helper.make_graph(
        [helper.make_node("Celu", ["x"], ["y"], name="act1")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, str(tmp_path / "celu.onnx"))
    out = tmp_path / "out"
    _assert_clean_failure(
        poet("compile", tmp_path / "celu.onnx", "--ram", "64KB", "-o", out),
        out,
        "Celu",
        "act1",
        "supported:",
        "Gemm",
    )


def test_ram_below_peak(mlp_path, tmp_path):
    out = tmp_path / "out"
    r = poet("compile", mlp_path, "--ram", "20KB", "-o", out, "--reserve", "1KB")
    _assert_clean_failure(r, out, "B (")
    assert "floor" in r.stderr or "needs" in r.stderr


def test_unknown_device(mlp_path, tmp_path):
    out = tmp_path / "out"
    _assert_clean_failure(
        poet("compile", mlp_path, "--ram", "64KB", "--device", "z80", "-o", out), out, "z80"
    )


def test_bad_size(mlp_path, tmp_path):
    out = tmp_path / "out"
    _assert_clean_failure(poet("compile", mlp_path, "--ram", "lots", "-o", out), out, "cannot read size")


def test_recompile_replaces_output_atomically(mlp_path, tmp_path):
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out).returncode == 0
    (out / "stale.txt").write_text("old")
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out).returncode == 0
    assert not (out / "stale.txt").exists()
    r = poet("compile", mlp_path, "--ram", "1KB", "-o", out)
    assert r.returncode != 0 and (out / "plan.json").exists()  # a failed compile leaves the old output intact


def test_refuses_to_overwrite_foreign_folder(mlp_path, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    r = poet("compile", mlp_path, "--ram", "64KB", "-o", out)
    assert r.returncode != 0 and "refusing" in r.stderr and (out / "thesis.tex").exists()


def test_machine_readable_output_has_no_solver_banner(mlp_path, tmp_path):
    # HiGHS prints a banner to the process's stdout when its first instance is made; each poet process
    # below makes one (the MILP, scale's models), so a banner would break the JSON and -q
    from poet_edge.graphgen import random_layered_dag
    from poet_edge.graphio import write_graph

    graph = tmp_path / "g.json"
    write_graph(random_layered_dag(30, 0, budget_bytes=1 << 62), graph)
    for scheduler in ("milp", "scale"):
        r = poet("solve", graph, "--ram", "600", "--json", "--time-limit", "5", "--scheduler", scheduler)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["valid"] is True, r.stdout[:200]
    out = tmp_path / "out"
    r = poet(
        "compile",
        mlp_path,
        "--device",
        "cortex-m4",
        "--ram",
        "36KB",
        "--batch",
        "8",
        "-q",
        "-o",
        out,
        "--scheduler",
        "scale",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


def test_scale_is_the_default_and_milp_solver_needs_the_milp(mlp_path, tmp_path):
    out = tmp_path / "out"
    r = poet("compile", mlp_path, "--device", "cortex-m4", "--ram", "36KB", "--batch", "8", "-o", out)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "plan.json").read_text())["schedule"]["solver"] == "scale"
    r = poet("compile", mlp_path, "--ram", "64KB", "--milp-solver", "cbc", "-o", tmp_path / "cbc")
    assert r.returncode == 2 and "add --scheduler milp" in r.stderr, r.stderr
    assert not (tmp_path / "cbc").exists()
    r = poet("compile", mlp_path, "--ram", "64KB", "--milp-solver", "cbc", "--scheduler", "milp", "-o", out)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "plan.json").read_text())["schedule"]["solver"] == "milp"


def test_gap_option_and_option_errors(tmp_path):
    from poet_edge.graphgen import random_layered_dag
    from poet_edge.graphio import write_graph
    from poet_edge.units import parse_gap

    assert [parse_gap(t) for t in ("1%", "0.01", " 2.5 % ", "1e-3", "0")] == [0.01, 0.01, 0.025, 0.001, 0.0]
    graph = tmp_path / "g.json"
    write_graph(random_layered_dag(30, 0, budget_bytes=1 << 62), graph)
    for scheduler in ("scale", "milp"):
        r = poet("solve", graph, "--ram", "600", "--json", "--gap", "5%", "--scheduler", scheduler)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["gap"] <= 0.05 + 1e-9
    # an option's own parser fails with one line and exit code 2, not a traceback
    for args, needle in (
        (("--gap", "100%"), "gap '100%' must be below 1"),
        (("--gap=-1%",), "cannot read gap '-1%'"),
        (("--gap", "abc"), "cannot read gap 'abc': use a fraction or a percentage"),
    ):
        r = poet("solve", graph, "--ram", "600", *args)
        assert r.returncode == 2 and r.stderr.startswith(f"poet: error: {needle}"), r.stderr
        assert "Traceback" not in r.stderr
    r = poet("solve", graph, "--ram", "abc")
    assert r.returncode == 2 and r.stderr.startswith("poet: error: cannot read size 'abc'"), r.stderr


def test_open_gap_is_explained():
    from poet_edge.commands.compile import _bound_lines

    timed = {"status": "feasible, time-dependent", "bound": 0.012, "gap": 0.4}
    lines = _bound_lines(timed, 0.01, "energy", 30.0, None)
    assert lines[0].startswith("lower bound: 12.0000 mJ (+20.00% energy)")
    assert lines[0].endswith("costs at most 66.67% more than the best")  # cost = bound / (1 - gap)
    assert lines[1].startswith("hint: the 30 s time limit left the gap open")
    assert _bound_lines({**timed, "status": "Time limit reached"}, 0.01, "latency", 5.0, None)[0].startswith(
        "lower bound: 12.0000 ms (+20.00% latency)"
    )
    assert (
        len(_bound_lines({**timed, "status": "feasible"}, 0.01, "energy", 30.0, None)) == 1
    )  # time was not it
    assert (
        len(_bound_lines({**timed, "gap": 0.005}, 0.01, "energy", 30.0, None)) == 1
    )  # within the default 1%
    assert len(_bound_lines(timed, 0.01, "energy", 30.0, 0.5)) == 1  # within the asked --gap
    for info in (
        {},
        {**timed, "gap": 0.0},
        {**timed, "gap": 1.0},
        {**timed, "bound": None},
        {"status": "heuristic"},
    ):
        assert _bound_lines(info, 0.01, "energy", 30.0, None) == []
