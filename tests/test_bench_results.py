"""bench/results/RESULTS.md is generated from the tables next to it: it lists every table, with the
provenance each table's JSON records, and is up to date with them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_results_index_is_up_to_date() -> None:
    index = ROOT / "bench" / "results_index.py"
    done = subprocess.run([sys.executable, str(index), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_results_index_lists_every_table() -> None:
    text = (ROOT / "bench" / "results" / "RESULTS.md").read_text()
    tables = sorted(p.name for p in (ROOT / "bench" / "results").glob("*.md") if p.name != "RESULTS.md")
    assert tables and all(f"]({name})" in text for name in tables)
    assert "| ? | ? | ? |" not in text  # every table's JSON records its machine, commit and date
