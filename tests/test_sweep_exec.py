"""`poet sweep` executors and result cache: Dask and Ray give the local executor's sweep.csv byte for byte;
a sweep killed midway resumes without recomputing what it finished; several models, devices and --train
values in one sweep, from flags or a TOML file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, need_module, poet

from poet_edge import sweep, sweep_exec
from poet_edge.compiler import CompileOptions
from poet_edge.errors import PoetError

MLP = EXAMPLES / "mlp.onnx"
# 4 budgets x 3 schedulers; at 20 KB mlp's step peaks above the budget without recomputation: one error
# row (--scheduler none), eleven compiles
GRID = ["--device", "cortex-m4", "--ram", "20KB..72KB", "--points", "4", "--schedulers", "none,greedy,scale"]
SMALL = [str(MLP), *GRID, "--batch", "8", "--no-report"]


def cache_entries(cache: Path) -> dict[str, tuple[int, int]]:
    """key -> (inode, mtime_ns) of every complete cache entry."""
    return {p.stem: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.glob("*/*.json")}


def summary_line(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if "points from the cache" in ln)


def plans(out: Path) -> dict[str, str]:
    return {p.parent.name: p.read_text() for p in sorted(out.glob("*/plan.json"))}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small sweep on the local executor (2 worker processes), with a fresh cache."""
    d = tmp_path_factory.mktemp("local")
    r = poet("sweep", *SMALL, "--jobs", "2", "--cache", d / "cache", "-o", d / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    assert summary_line(r.stdout) == f"0 of 12 points from the cache, 12 computed (cache {d / 'cache'})"
    rows = sweep.read_csv(d / "out" / sweep.CSV_NAME)
    assert [r["status"] == "ok" for r in rows] == [False, True, True, True] + [True] * 8
    assert len(cache_entries(d / "cache")) == 12  # the error is cached too
    return d


def test_second_run_computes_nothing(local: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    r = poet("sweep", *SMALL, "--jobs", "2", "--cache", local / "cache", "-o", out)
    assert r.returncode == 0, r.stderr
    assert summary_line(r.stdout).startswith("12 of 12 points from the cache, 0 computed")
    assert (out / sweep.CSV_NAME).read_bytes() == (local / "out" / sweep.CSV_NAME).read_bytes()
    assert plans(out) == plans(local / "out") and len(plans(out)) == 11


def _need(module: str) -> None:
    # the test extra installs it: in CI a missing package is a broken install, not a reason to skip
    need_module(module, f"pip install 'poet-edge[{module.replace('distributed', 'dask')}]'")


def test_dask_local_cluster_gives_the_same_csv(local: Path, tmp_path: Path) -> None:
    _need("distributed")
    from distributed import LocalCluster

    # an existing cluster, as a user's would be: the sweep connects to it with --address
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", processes=True) as cluster:
        r = poet(
            "sweep", *SMALL, "--executor", "dask", "--address", cluster.scheduler_address,
            "--cache", tmp_path / "cache", "-o", tmp_path / "out",
        )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "executor: dask, 2 workers" in r.stdout
    assert summary_line(r.stdout).startswith("0 of 12 points from the cache, 12 computed")
    assert (tmp_path / "out" / sweep.CSV_NAME).read_bytes() == (local / "out" / sweep.CSV_NAME).read_bytes()
    assert plans(tmp_path / "out") == plans(local / "out")
    # the driver cached what the workers computed, under the same keys as the local executor did
    assert set(cache_entries(tmp_path / "cache")) == set(cache_entries(local / "cache"))


def test_ray_local_instance_gives_the_same_csv(local: Path, tmp_path: Path) -> None:
    _need("ray")
    r = poet(
        "sweep", *SMALL, "--executor", "ray", "--jobs", "2", "--cache", tmp_path / "cache",
        "-o", tmp_path / "out",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "executor: ray, 2 workers" in r.stdout
    assert summary_line(r.stdout).startswith("0 of 12 points from the cache, 12 computed")
    assert (tmp_path / "out" / sweep.CSV_NAME).read_bytes() == (local / "out" / sweep.CSV_NAME).read_bytes()
    assert plans(tmp_path / "out") == plans(local / "out")


def test_killed_sweep_resumes_without_recomputing(local: Path, tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "poet_edge",
        "sweep",
        *SMALL,
        "--jobs",
        "1",
        "--cache",
        str(cache),
        "-o",
        str(out),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    rows = 0
    for line in proc.stdout:
        rows += " B  ok " in line or " B  error " in line
        if rows == 2:
            proc.send_signal(signal.SIGKILL)  # nothing gets to clean up
            break
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    before = cache_entries(cache)
    assert 2 <= len(before) < 12, "the sweep should have been killed midway"
    assert not (out / sweep.CSV_NAME).exists()

    r = poet("sweep", *SMALL, "--jobs", "1", "--cache", cache, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    k = len(before)
    assert summary_line(r.stdout).startswith(f"{k} of 12 points from the cache, {12 - k} computed")
    after = cache_entries(cache)
    assert len(after) == 12 and all(after[key] == v for key, v in before.items())  # untouched, not rewritten
    assert (out / sweep.CSV_NAME).read_bytes() == (local / "out" / sweep.CSV_NAME).read_bytes()
    assert plans(out) == plans(local / "out")
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no half-written folder left


def test_models_devices_and_train_values_from_a_sweep_file(local: Path, tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "mlp.onnx").write_bytes(MLP.read_bytes())
    (tmp_path / "m" / "mlp2.onnx").write_bytes(MLP.read_bytes())
    (tmp_path / "s.toml").write_text(
        'models = ["m/mlp.onnx", {path = "m/mlp2.onnx", ram = ["48KB"]}]\n'
        'devices = ["cortex-m4", "cortex-m7"]\n'
        'train = ["all", "bias"]\n'
        'ram = "20KB..72KB"\npoints = 4\nschedulers = ["none", "scale"]\nbatch = 8\n'
        'no_report = true\nno_projects = true\nout = "o"\njobs = 2\n'
    )
    r = poet("sweep", tmp_path / "s.toml", "--schedulers", "greedy,none", "--cache", tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = sweep.read_csv(tmp_path / "o" / sweep.CSV_NAME)
    # grid order: model, device, train, scheduler (the command line's), budget (mlp2: its own one)
    expect = [
        (m, d, t, s, b)
        for m, budgets in (("mlp.onnx", (20480, 31388, 48106, 73728)), ("mlp2.onnx", (49152,)))
        for d in ("cortex-m4", "cortex-m7")
        for t in ("all", "bias")
        for s in ("greedy", "none")
        for b in budgets
    ]
    assert [
        (r["model"], r["device"], r["train"], r["scheduler"], int(r["budget_bytes"])) for r in rows
    ] == expect
    assert all(r["dir"] == "" for r in rows)  # --no-projects: no point folders
    assert not [p for p in (tmp_path / "o").iterdir() if p.is_dir()]
    pngs = sorted(p.name for p in (tmp_path / "o").glob("*.png"))
    assert pngs == sorted(
        f"pareto-{m}-{d}-train-{t}.png"
        for m in ("mlp", "mlp2")
        for d in ("cortex-m4", "cortex-m7")
        for t in ("all", "bias")
    )
    # the oracle: a row equals the plain one-model sweep's row for the same point
    ref = {(r["scheduler"], r["budget_bytes"]): r for r in sweep.read_csv(local / "out" / sweep.CSV_NAME)}
    for row in rows:
        if (row["model"], row["device"], row["train"]) == ("mlp.onnx", "cortex-m4", "all"):
            want = ref[(row["scheduler"], row["budget_bytes"])]
            assert {k: v for k, v in row.items() if k != "dir"} == {
                k: v for k, v in want.items() if k != "dir"
            }
    # bias-only training needs less RAM than training everything: the floor moves
    by = {
        (r["device"], r["train"], r["scheduler"], r["budget_bytes"]): r
        for r in rows
        if r["model"] == "mlp.onnx"
    }
    assert by[("cortex-m4", "all", "none", "20480")]["status"] != "ok"
    assert by[("cortex-m4", "bias", "none", "20480")]["status"] == "ok"
    assert "mlp2.onnx on cortex-m7, --train bias: 2 of 2 points compiled" in r.stdout


def test_bad_sweep_files_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from poet_edge.cli import main

    cases = {
        'models = ["x.onnx"]\nram = "64KB"\ncolour = "red"\n': "unknown setting 'colour'",
        'models = ["x.onnx"]\nram = "64KB"\nscale = "cubic"\n': "'scale' = 'cubic'; choose one of log",
        'ram = "64KB"\n': "lists no models",
        "models = [\n": "invalid TOML",
        'models = [{file = "x.onnx"}]\n': "needs 'path'",
    }
    (tmp_path / "x.onnx").write_bytes(MLP.read_bytes())
    for text, message in cases.items():
        (tmp_path / "s.toml").write_text(text)
        assert main(["sweep", str(tmp_path / "s.toml"), "-o", str(tmp_path / "o")]) != 0
        err = capsys.readouterr().err
        assert message in err, (text, err)
    for argv, message in (
        ([*SMALL, "--address", "tcp://127.0.0.1:1"], "--address is for --executor dask or ray"),
        ([str(MLP), "--device", "cortex-m4"], "--ram is required"),
    ):
        assert main(["sweep", *argv, "-o", str(tmp_path / "o")]) != 0
        err = capsys.readouterr().err
        assert message in err, err
    assert not (tmp_path / "o").exists()


def test_keys_and_archives() -> None:
    opts = CompileOptions(MLP, "cortex-m4", 65536, Path("a"), batch=8, scheduler="greedy")
    key = sweep_exec.task_key("ab" * 32, "mlp.onnx", opts, False)
    assert key == sweep_exec.task_key(
        "ab" * 32, "mlp.onnx", opts.__class__(**{**opts.__dict__, "out": Path("b")}), False
    )
    others = [
        sweep_exec.task_key("cd" * 32, "mlp.onnx", opts, False),
        sweep_exec.task_key("ab" * 32, "mlp2.onnx", opts, False),
        sweep_exec.task_key("ab" * 32, "mlp.onnx", opts, True),
        sweep_exec.task_key(
            "ab" * 32, "mlp.onnx", opts.__class__(**{**opts.__dict__, "ram_bytes": 65537}), False
        ),
        sweep_exec.task_key(
            "ab" * 32, "mlp.onnx", opts.__class__(**{**opts.__dict__, "device": "cortex-m7"}), False
        ),
    ]
    assert len({key, *others}) == 6
    files = {"b/x.c": "int x;\n", "a.txt": b"\x00\x01", "plan.json": ROOT / "pyproject.toml"}
    archive = sweep_exec.pack(files)
    assert archive == sweep_exec.pack(dict(reversed(files.items())))  # the bytes depend on the files alone
    assert sweep_exec.unpack(archive) == {
        "a.txt": b"\x00\x01",
        "b/x.c": b"int x;\n",
        "plan.json": (ROOT / "pyproject.toml").read_bytes(),
    }
    with pytest.raises(PoetError, match="unexpected entry"):
        sweep_exec.unpack(sweep_exec.pack({"../evil": "x"}))


def test_cache_keeps_deterministic_outcomes_only(tmp_path: Path) -> None:
    cache = sweep_exec.ResultCache(tmp_path)
    ok = sweep_exec.Outcome("k1", "ok", 1, 0.5, 0.25, 0, 0, 64, archive=sweep_exec.pack({"plan.json": "{}"}))
    cache.put(ok)
    assert cache.get("k1", need_archive=True) == ok.__class__(
        **{**ok.__dict__, "code": sweep_exec.code_fingerprint()}
    )
    below = sweep_exec.Outcome("k2", "--ram 1 B is below the memory floor")
    bug = sweep_exec.Outcome("k3", "internal error: KeyError: 'x'")
    lost = sweep_exec.Outcome("k4", "lost: the worker failed (KilledWorker: ...)")
    for o in (below, bug, lost):
        cache.put(o)
    assert cache.get("k2", need_archive=True) is not None  # an error row needs no archive
    assert cache.get("k3", need_archive=False) is None and cache.get("k4", need_archive=False) is None
    summary_only = sweep_exec.Outcome("k5", "ok", 1, 0.5, 0.25, 0, 0, 64)
    cache.put(summary_only)
    assert cache.get("k5", need_archive=False) is not None and cache.get("k5", need_archive=True) is None
    (tmp_path / "k5"[:2] / "k5.json").write_text("{not json")
    assert cache.get("k5", need_archive=False) is None  # a damaged entry is a miss, not a crash
    assert json.loads((tmp_path / "k1"[:2] / "k1.json").read_text())["archive"] is True
