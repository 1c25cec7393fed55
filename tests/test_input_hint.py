"""`poet compile` suggests --input storage where the batch in RAM costs the step more than moving it would
(compiler.input_hint), and only there: checked against what --input storage then gives. `--input auto`
(compiler.plan_input) compiles the batch in storage too where it may pay, and keeps the cheaper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import poet

ZOO = Path(__file__).resolve().parent.parent / "examples" / "zoo"
MOBILENET = ZOO / "mobilenetv1_025.onnx"  # a 96x96x3 batch: 108 KiB


def compile_energy(tmp_path: Path, name: str, *args: str) -> tuple[float, list[str]]:
    out = tmp_path / name
    common = ("--device", "cortex-m4", "--train", "bias", "--scheduler", "greedy", "-o", out)
    r = poet("compile", MOBILENET, *common, *args)
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    hints = [line for line in r.stdout.splitlines() if line.startswith("hint: the input")]
    return plan["simulation"]["energy_j"], hints


def auto(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, Any], str]:
    """plan.json and poet_model.h of a compile with --input auto (which gives no hint)."""
    _, hints = compile_energy(tmp_path, name, "--input", "auto", *args)
    assert not hints
    return json.loads((tmp_path / name / "plan.json").read_text()), (
        tmp_path / name / "poet_model.h"
    ).read_text()


def test_the_hint_where_the_batch_crowds_the_schedule_out(tmp_path: Path) -> None:
    energy, hints = compile_energy(tmp_path, "ram", "--ram", "256KB")
    assert len(hints) == 1 and "--input storage may cost less" in hints[0], hints
    assert "110592 B" in hints[0]
    assert json.loads((tmp_path / "ram" / "plan.json").read_text())["hints"] == hints
    plan, header = auto(tmp_path, "auto", "--ram", "256KB")  # compiles both: the one with the batch in
    stored = plan["input_compared"]["storage"]  # storage as --input storage does
    assert plan["input"] == "storage" and plan["simulation"]["energy_j"] == stored
    assert plan["input_compared"]["ram"] == energy
    assert stored < energy / 2  # the hint was right: 25.3 mJ against 103.3 mJ
    assert "#define POET_INPUT_IN_STORAGE 1" in header


def test_no_hint_where_moving_the_batch_costs_more_than_it_saves(tmp_path: Path) -> None:
    energy, hints = compile_energy(tmp_path, "ram", "--ram", "344KB", "--split", "off")
    assert not hints  # two values paged: less than writing and reading 108 KiB
    stored, _ = compile_energy(tmp_path, "storage", "--ram", "344KB", "--split", "off", "--input", "storage")
    assert stored > energy  # and indeed: 25.3 mJ against 20.0 mJ
    plan, header = auto(tmp_path, "auto", "--ram", "344KB", "--split", "off")
    assert plan["input"] == "ram" and plan["input_compared"] == {
        "ram": energy,
        "storage": None,
    }  # not planned
    assert "#define POET_INPUT_IN_STORAGE 0" in header


def test_auto_puts_the_batch_in_storage_where_it_does_not_fit_in_ram(tmp_path: Path) -> None:
    r = poet("compile", MOBILENET, "--device", "cortex-m4", "--ram", "96KB", "-o", tmp_path / "ram")
    assert r.returncode != 0 and "110592 B" in r.stderr and not (tmp_path / "ram").exists()
    plan, header = auto(tmp_path, "auto", "--ram", "96KB")
    assert plan["input"] == "storage" and plan["input_compared"]["ram"] is None
    assert plan["input_compared"]["storage"] == plan["simulation"]["energy_j"]
    assert plan["peak_ram_bytes"] <= 96 * 1024 and "#define POET_INPUT_IN_STORAGE 1" in header
