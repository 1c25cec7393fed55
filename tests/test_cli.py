"""The command line: exit codes, one-line errors, nothing half-written."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import need_tools, poet
from onnx import TensorProto, helper, save

from poet_edge.paths import MANIFEST


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
    r = poet("compile", mlp_path, "--ram", "3KB", "-o", out, "--reserve", "1KB")
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


def test_recompile_replaces_output_atomically_and_keeps_user_files(mlp_path, tmp_path):
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out, "--no-report").returncode == 0
    listed = (out / MANIFEST).read_text().split()
    assert sorted(p.name for p in out.iterdir()) == listed and "plan.json" in listed
    (out / "run-host").mkdir()  # poet run's work folder is poet's: replaced
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out).returncode == 0
    assert not (out / "run-host").exists() and (out / "report.html").is_file()
    (out / "notes.txt").write_text("mine")
    r = poet("compile", mlp_path, "--ram", "64KB", "-o", out)
    assert r.returncode == 2 and "holds files poet did not write (notes.txt)" in r.stderr, r.stderr
    assert (out / "notes.txt").read_text() == "mine" and (out / "report.html").is_file()
    (out / "notes.txt").unlink()
    r = poet("compile", mlp_path, "--ram", "1KB", "-o", out)
    assert r.returncode != 0 and (out / "plan.json").exists()  # a failed compile leaves the old output intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no hidden .out.tmp-* / .out.old-*


def test_leftovers_of_an_interrupted_swap_are_cleaned(mlp_path, tmp_path):
    """A crash between the two renames of the swap leaves hidden folders; the next compile removes those
    whose process is gone (a dead pid, or a name without one), never a live compile's."""
    dead = _dead_pid()
    names = [
        f".out.old-{dead}-abcd1234",
        f".out.tmp-{dead}-zz",
        ".out.tmp-legacy12",
        f".out.tmp-{os.getppid()}-x",
    ]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "plan.json").write_text("{}")
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", tmp_path / "out", "-q").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", names[3]])


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_failed_write_is_one_line_and_leaves_nothing(mlp_path, tmp_path):
    """A real write failure at the OS boundary without root: a 16 KB file-size limit (RLIMIT_FSIZE; Python
    ignores SIGXFSZ, so write() fails with EFBIG) stops the project's larger files: one line, exit 2, no
    output folder, no hidden temporary folder."""
    limit = 16 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run(
        [sys.executable, "-m", "poet_edge", "compile", mlp_path, "--ram", "64KB", "-o", tmp_path / "o"],
        capture_output=True, text=True, preexec_fn=small_files,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith(f"poet: error: -o {tmp_path / 'o'}: cannot write "), (
        r.stderr
    )
    assert r.stderr.endswith(": File too large\n")
    assert r.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
@pytest.mark.parametrize(
    ("options", "message"), [("size=64k", "No space left on device"), ("ro", "cannot write in")]
)
def test_a_real_full_or_read_only_filesystem(mlp_path, tmp_path, options, message):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], check=True)
    try:
        r = poet("compile", mlp_path, "--ram", "64KB", "-o", mnt / "out", "-q")
        assert r.returncode != 0 and r.stderr.startswith("poet: error:") and message in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _session(pid: int) -> list[str]:
    """The live processes of session ``pid`` (the command runs in a session of its own)."""
    alive = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text() if d.name.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and fields[0] != "Z" and int(fields[3]) == pid:
            alive.append(stat[stat.find("(") + 1 : stat.rfind(")")])
    return alive


def _signal_when(argv: list[str], marker: str, signum: int, tmp: Path) -> tuple[int, str, list[str]]:
    """Starts ``poet argv`` (own session, TMPDIR ``tmp``), sends ``signum`` to its pid alone once
    ``marker`` is printed; returns its exit code, stderr and the processes of its session still alive."""
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen(
        [sys.executable, "-m", "poet_edge", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            time.sleep(1.0)
            os.kill(proc.pid, signum)
            break
    rest = proc.communicate(timeout=60)[0]
    left = _session(proc.pid)
    for _ in range(30):
        left = _session(proc.pid)
        if not left:
            break
        time.sleep(0.1)
    return proc.returncode, "".join(lines) + rest, left


@pytest.mark.parametrize(("target", "signum"), [("host", signal.SIGTERM), ("qemu-cortex-m4", signal.SIGINT)])
def test_a_signal_during_run_ends_the_training_program(mlp_path, tmp_path, target, signum):
    need_tools("gcc", *(("arm-none-eabi-gcc", "qemu-system-arm") if target != "host" else ()))
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out, "--no-report").returncode == 0
    argv = ["run", str(out), "--target", target, "--steps", "1000000"]
    code, text, left = _signal_when(argv, "step    0", signum, tmp_path)
    assert code == 128 + signum and f"poet: interrupted ({signal.Signals(signum).name})" in text, text
    assert "Traceback" not in text and left == []


def test_a_signal_during_the_solve_removes_temporary_folders(tmp_path):
    """mobilenetv1_025 at 1.1x its floor: scale runs its proof processes (poet-proof-* folders)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    model = Path(__file__).resolve().parent.parent / "examples" / "zoo" / "mobilenetv1_025.onnx"
    argv = ["compile", str(model), "--ram", "1423382", "--device", "host", "-o", str(tmp_path / "out"), "-v"]
    code, text, left = _signal_when(argv, "incumbent", signal.SIGTERM, tmp)
    assert code == 143 and "poet: interrupted (SIGTERM)" in text and "Traceback" not in text, text
    assert left == [] and list(tmp.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


_ENTRY_SCRIPT = """
import atexit, sys
from poet_edge import highs
from poet_edge.cli import entry
if sys.argv[1] == "highs":  # HiGHS loaded: its thread pool must not be torn down under a run
    import highspy
else:  # (the profiles command itself loads it)
    highs.loaded = lambda: False
atexit.register(lambda: print("teardown", flush=True))
sys.argv = ["poet", "profiles"]
entry()
"""


@pytest.mark.parametrize("loaded", ["highs", "none"])
def test_the_process_skips_the_teardown_once_highs_is_loaded(loaded):
    """Once HiGHS is loaded (a SIGTERM during a solve: HiGHS's thread pool was destroyed under the run by
    the interpreter's teardown, std::terminate, exit -6 instead of 143), the process exits with the
    command's code and skips the teardown (no atexit handler runs); otherwise it exits as usual."""
    done = subprocess.run(
        [sys.executable, "-c", _ENTRY_SCRIPT, loaded], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert ("teardown" in done.stdout) == (loaded == "none")


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


def test_solve_reports_progress_on_stderr(tmp_path):
    # a solve that takes a while says how it goes on stderr (its cheapest schedule, its bound); stdout
    # keeps the report or the JSON alone; -q silences it, -v adds the problem and the phase's seconds
    from poet_edge.graphgen import random_layered_dag
    from poet_edge.graphio import write_graph

    graph = tmp_path / "g.json"
    write_graph(random_layered_dag(30, 0, budget_bytes=1 << 62), graph)
    runs = {flag: poet("solve", graph, "--ram", "300", "--json", "--time-limit", "20", *flag) for flag in
            ((), ("-q",), ("-v",))}  # fmt: skip
    for r in runs.values():
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["valid"] is True
    plain, quiet, verbose = runs[()].stderr, runs[("-q",)].stderr, runs[("-v",)].stderr
    assert quiet == ""
    assert plain.startswith("schedule ") and "incumbent 173.755" in plain, plain
    assert verbose.startswith("poet: scale on 30 nodes, 47 edges within 300 B, --effort default\n"), verbose
    assert verbose.count("incumbent") >= plain.count("incumbent") and "  schedule " in verbose, verbose
    r = poet("solve", graph, "--ram", "100", "-v")  # an error stays the last line
    assert r.returncode != 0 and r.stderr.splitlines()[-1].startswith("poet: error: RAM budget 100 bytes")


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
    from poet_edge.commands.compile import bound_lines
    from poet_edge.schedule import SolveReport

    timed = {"status": "feasible, time-dependent", "bound": 0.012, "gap": 0.4}
    lines = bound_lines(SolveReport.of(**timed), 0.01, "energy", 30.0, None)
    assert lines[0].startswith("lower bound: 12.0000 mJ (+20.00% energy)")
    assert lines[0].endswith("costs at most 66.67% more than the best")  # cost = bound / (1 - gap)
    assert lines[1].startswith("hint: the 30 s time limit left the gap open")
    assert bound_lines(
        SolveReport.of(**{**timed, "status": "Time limit reached"}), 0.01, "latency", 5.0, None
    )[0].startswith("lower bound: 12.0000 ms (+20.00% latency)")
    assert (
        len(bound_lines(SolveReport.of(**{**timed, "status": "feasible"}), 0.01, "energy", 30.0, None)) == 1
    )  # time was not it
    assert (
        len(bound_lines(SolveReport.of(**{**timed, "gap": 0.005}), 0.01, "energy", 30.0, None)) == 1
    )  # within the default 1%
    assert len(bound_lines(SolveReport.of(**timed), 0.01, "energy", 30.0, 0.5)) == 1  # within the asked --gap
    for info in (
        {},
        {**timed, "gap": 0.0},
        {**timed, "gap": 1.0},
        {**timed, "bound": None},
        {"status": "heuristic"},
    ):
        assert bound_lines(SolveReport.of(**info), 0.01, "energy", 30.0, None) == []
