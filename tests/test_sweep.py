"""`poet sweep`: rows agree exactly with individual `poet compile` runs; infeasible budgets are rows."""

from __future__ import annotations

import json
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import EXAMPLES, poet

from poet_edge import sweep
from poet_edge.errors import PoetError

MLP = EXAMPLES / "mlp.onnx"


def test_spaced_budgets() -> None:
    assert sweep.spaced(32768, 262144, 4, "log") == (32768, 65536, 131072, 262144)
    assert sweep.spaced(32768, 73728, 4, "linear") == (32768, 46421, 60075, 73728)
    assert sweep.spaced(1000, 1000, 1, "log") == (1000,)
    assert sweep.parse_budgets("32KB..256KB", 4, "log") == (32768, 65536, 131072, 262144)
    assert sweep.parse_budgets("64KB,32KB,64KB", 8, "log") == (32768, 65536)
    for bad in (
        lambda: sweep.spaced(2, 1, 3, "log"),
        lambda: sweep.spaced(1, 2, 1, "log"),
        lambda: sweep.spaced(1, 2, 3, "cubic"),
    ):
        with pytest.raises(PoetError):
            bad()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "mlp"
    r = poet(
        "sweep",
        MLP,
        "--device",
        "cortex-m4",
        "--ram",
        "16KB..72KB",
        "--points",
        "4",
        "--scale",
        "linear",
        "--schedulers",
        "none,greedy",
        "--batch",
        "8",
        "--jobs",
        "2",
        "--no-report",
        "--cache",
        out.parent / "cache",
        "-o",
        out,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "linear spacing: 16384, 35499, 54613, 73728 bytes" in r.stdout
    return out


def test_sweep_outputs(swept: Path) -> None:
    rows = sweep.read_csv(swept / sweep.CSV_NAME)
    assert [(int(r["budget_bytes"]), r["scheduler"]) for r in rows] == [
        (b, s) for s in ("none", "greedy") for b in (16384, 35499, 54613, 73728)
    ]
    assert list(rows[0]) == list(sweep.COLUMNS)
    assert {(r["model"], r["device"], r["train"]) for r in rows} == {("mlp.onnx", "cortex-m4", "all")}
    # 16 KB: above the floor with operator splitting (14,912 B), below the peak without recomputation
    none, greedy = [r for r in rows if r["budget_bytes"] == "16384"]
    assert "without recomputation or paging" in none["status"] and none["peak_ram_bytes"] == ""
    assert greedy["status"] == "ok" and int(greedy["peak_ram_bytes"]) <= 16384
    assert not (swept / "none-16384").exists()
    png = (swept / sweep.PARETO_NAME).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24])[0] >= 600


def tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def compile_like(row: dict[str, str], out: Path) -> subprocess.CompletedProcess[str]:
    return poet(
        "compile",
        MLP,
        "--device",
        "cortex-m4",
        "--ram",
        row["budget_bytes"],
        "--batch",
        "8",
        "--scheduler",
        row["scheduler"],
        "--no-report",
        "-q",
        "-o",
        out,
    )


def test_sweep_rows_equal_individual_compiles(swept: Path, tmp_path: Path) -> None:
    rows = sweep.read_csv(swept / sweep.CSV_NAME)
    outs = [tmp_path / f"{row['scheduler']}-{row['budget_bytes']}" for row in rows]
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(compile_like, rows, outs))
    for row, out, r in zip(rows, outs, runs, strict=True):
        if row["status"] != "ok":
            assert r.returncode != 0 and r.stderr.strip() == f"poet: error: {row['status']}"
            continue
        assert r.returncode == 0, r.stderr
        plan_text = (out / "plan.json").read_text()
        assert tree(swept / row["dir"]) == tree(out)  # the folder written from the worker's archive
        plan = json.loads(plan_text)
        sim = plan["simulation"]
        assert int(row["peak_ram_bytes"]) == plan["peak_ram_bytes"]
        assert float(row["energy_j"]) == sim["energy_j"]
        assert float(row["latency_s"]) == sim["latency_s"]
        assert int(row["recomputations"]) == sim["n_recomputations"]
        assert int(row["page_outs"]) == sim["n_page_outs"]
        assert int(row["arena_bytes"]) == plan["arena"]["arena_bytes"]


def test_sweep_passes_the_solver_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from poet_edge.cli import main

    seen = []
    monkeypatch.setattr(
        sweep, "run", lambda spec, *a: seen.append(spec.base.milp) or ([], sweep.Stats(0, 0, 0, 0))
    )
    monkeypatch.setattr(sweep, "write_outputs", lambda *a: [])
    monkeypatch.setattr(sweep, "floor_bytes", lambda opts: None)
    argv = ["sweep", str(MLP), "--ram", "32KB", "-q", "-o", str(tmp_path / "s")]
    assert main([*argv, "--time-limit", "7", "--gap", "2%"]) == 0
    assert main(argv) == 0
    # no --time-limit: None, each solver its own default (scale 600 s, the MILP 60 s; see --help)
    assert [(m.time_limit_s, m.gap_rel) for m in seen] == [(7.0, 0.02), (None, None)]
