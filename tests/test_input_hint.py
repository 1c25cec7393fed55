"""`poet compile` suggests --input storage where the batch in RAM costs the step more than moving it would
(compiler.input_hint), and only there: checked against what --input storage then gives."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_the_hint_where_the_batch_crowds_the_schedule_out(tmp_path: Path) -> None:
    energy, hints = compile_energy(tmp_path, "ram", "--ram", "256KB")
    assert len(hints) == 1 and "--input storage may cost less" in hints[0], hints
    assert "110592 B" in hints[0]
    assert json.loads((tmp_path / "ram" / "plan.json").read_text())["hints"] == hints
    stored, again = compile_energy(tmp_path, "storage", "--ram", "256KB", "--input", "storage")
    assert not again and stored < energy / 2  # the hint was right: 25.3 mJ against 103.3 mJ


def test_no_hint_where_moving_the_batch_costs_more_than_it_saves(tmp_path: Path) -> None:
    energy, hints = compile_energy(tmp_path, "ram", "--ram", "344KB", "--split", "off")
    assert not hints  # two values paged: less than writing and reading 108 KiB
    stored, _ = compile_energy(tmp_path, "storage", "--ram", "344KB", "--split", "off", "--input", "storage")
    assert stored > energy  # and indeed: 25.3 mJ against 20.0 mJ
