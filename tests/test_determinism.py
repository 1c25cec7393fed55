"""Scheduler "scale" is deterministic: its budgets are counts of work, not seconds (issue 55).

The same compile, run twice, once while both cores are saturated by busy loops this test starts, writes
byte-identical plan.json and C files; and a larger --effort does the smaller one's work first, so it is
never worse."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from poet_edge.graphgen import random_layered_dag
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.scale import ScaleOptions, schedule_scale
from poet_edge.simulator import simulate

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "examples" / "zoo"
OUTPUTS = ("plan.json", "poet_model.c", "poet_model.h")

# (model, --train, --ram): resnet8 at about 1.02x its memory floor (below its no-remat peak), dscnn at
# about 60% (both the stage model's path), bert_tiny at 80KB (the mid-size path: interval model, windows)
ROWS = (("resnet8", "bias", "216KB"), ("dscnn", "all", "290KB"), ("bert_tiny", "bias", "80KB"))


def _spin() -> None:
    while True:
        pass


def _compile(model: str, train: str, ram: str, out: Path) -> dict[str, bytes]:
    cmd = [sys.executable, "-m", "poet_edge", "compile", str(ZOO / f"{model}.onnx"), "--device", "cortex-m4"]
    cmd += ["--ram", ram, "--train", train, "--effort", "quick", "--no-report", "-q", "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return {name: (out / name).read_bytes() for name in OUTPUTS}


@pytest.mark.parametrize(("model", "train", "ram"), ROWS)
def test_a_compile_is_the_same_on_a_loaded_machine(model: str, train: str, ram: str, tmp_path: Path) -> None:
    quiet = _compile(model, train, ram, tmp_path / "quiet")
    plan = json.loads(quiet["plan.json"])
    info = plan["schedule"]["info"]
    assert info["cut_by_time_limit"] is False and info["effort"] == "quick"
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(2)]
    for p in busy:
        p.start()
    try:
        loaded = _compile(model, train, ram, tmp_path / "loaded")
    finally:
        for p in busy:
            p.kill()
            p.join()
    for name in OUTPUTS:
        assert quiet[name] == loaded[name], f"{model}: {name} differs between the two runs"


def test_quick_is_a_prefix_of_default() -> None:
    """The default effort runs quick's level first, then more: never a costlier schedule; each effort
    gives the same schedule twice."""
    problem = random_layered_dag(100, seed=0)
    peak = simulate(problem, schedule_none(problem)).peak_ram_bytes
    problem = replace(problem, budget_bytes=int(0.6 * peak))
    efforts = ("quick", "default")
    runs = {
        e: [schedule_scale(problem, ScaleOptions(threads=1, effort=e)) for _ in range(2)] for e in efforts
    }
    for first, second in runs.values():
        assert first.steps == second.steps and first.report.objective == second.report.objective
    quick, default = (runs[e][0].report.to_json() for e in ("quick", "default"))
    assert not quick["cut_by_time_limit"] and not default["cut_by_time_limit"]
    assert default["objective"] <= quick["objective"]
