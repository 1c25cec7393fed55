"""bench/solver.py's checks of issue 7's criteria: every row that breaks one is named as a miss."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from solver import checks, checks_text, saturated, short_status, spread_table, zoo_graphs  # noqa: E402


def _rec(
    cost: float, gap: float = 0.0, total: float = 1.0, first: float = 0.0, peak: float = 0.9, digest: str = ""
) -> dict:
    return {
        "digest": digest,
        "cost_pct": cost,
        "peak_ratio": peak,
        "first_s": first,
        "total_s": total,
        "bound_pct": None,
        "gap_pct": gap,
        "status": "",
        "note": "",
    }


def _row(graph: str, nodes: int, budget: str, **solvers: dict) -> dict[str, object]:
    raw = {"graph": graph, "nodes": nodes, "budget": budget, "solvers": solvers}
    return {"graph": graph, "_raw": {**raw, "solvers": {k.replace("_", "-"): v for k, v in solvers.items()}}}


def test_checks_name_the_rows_that_miss() -> None:
    rows = [
        _row("resnet8", 54, "80%", scale=_rec(11.47), best_base=_rec(76.27), poet_milp=_rec(12.0)),
        _row(
            "bert_tiny", 166, "1.1xfloor", scale=_rec(130.58, gap=18.79, total=28.5), best_base=_rec(344.86)
        ),
        _row("dscnn", 45, "50%", scale=_rec(49.34, gap=0.5, total=31.0), best_base=_rec(522.41)),
        _row("layered-1000", 1000, "80%", scale=_rec(0.97, total=61.0, first=0.05), best_base=_rec(0.96)),
        _row("layered-100", 100, "50%", scale=_rec(5.10, first=5.5), best_base=_rec(5.11)),
        {"graph": "mlp", "budget": "80%", "scale %": "below floor"},  # no measurement: not checked
    ]
    found = {what.split(":")[0]: (good, total, misses) for what, good, total, misses in checks(rows)}
    assert found["zoo rows"] == (
        1,
        3,
        ["bert_tiny 1.1xfloor (gap 18.79%, 28.5 s)", "dscnn 50% (gap 0.50%, 31.0 s)"],
    )
    assert found["layered-1000 at 80%"] == (0, 1, ["layered-1000 80% (61.0 s)"])
    assert found["layered rows"][:2] == (1, 2)
    assert found["every row"][:2] == (4, 5)
    assert found["every row"][2][0].startswith("layered-1000 80%")
    assert found["rows where poet-milp ran"] == (1, 1, [])
    text = checks_text(checks(rows))
    assert "1/3; misses: bert_tiny 1.1xfloor (gap 18.79%, 28.5 s)" in text


def test_a_schedule_over_the_budget_is_no_valid_schedule() -> None:
    rows = [_row("lenet5", 37, "90%", scale=_rec(0.0, peak=1.01), best_base=_rec(5.0))]
    found = {what.split(":")[0]: (good, total) for what, good, total, _ in checks(rows)}
    assert found["zoo rows"] == (0, 1)
    assert found["every row"] == (0, 1)


def _repeated(runs: list[dict]) -> dict[str, object]:
    row = _row("bert_tiny", 166, "50%", scale=runs[0], best_base=_rec(255.6))
    row["_raw"]["scale_runs"] = runs  # type: ignore[index]
    return row


def test_checks_count_every_run_of_scale() -> None:
    runs = [_rec(29.35, gap=0.66, total=28.5), _rec(29.63, gap=1.2, total=28.6), _rec(300.0, gap=0.5)]
    found = {
        what.split(":")[0]: (good, total, misses) for what, good, total, misses in checks([_repeated(runs)])
    }
    assert found["zoo rows"] == (2, 3, ["bert_tiny 50% run 2 (gap 1.20%, 28.6 s)"])
    assert found["every row"][:2] == (2, 3)
    assert found["every row"][2][0].startswith("bert_tiny 50% run 3")


def test_spread_table_gives_the_range_over_runs_and_the_schedules_returned() -> None:
    runs = [
        _rec(29.35, gap=0.66, total=28.5, digest="a"),
        _rec(29.63, gap=1.2, total=28.6, digest="b"),
        _rec(29.35, gap=0.66, total=28.4, digest="a"),
    ]
    for r, st in zip(runs, ("feasible, time-dependent", "feasible, time-dependent", "optimal"), strict=True):
        r["status"] = st
    text = spread_table([_repeated(runs), _row("lenet5", 37, "90%", scale=_rec(0.0))])
    lines = text.splitlines()
    assert len(lines) == 4  # title, header, rule and one row: lenet5 ran once
    assert lines[3].split() == [
        "bert_tiny", "50%", "3", "29.35", "29.63", "0.66", "1.20", "2/3", "2", "opt", "x1", "time", "x2"
    ]  # fmt: skip
    assert spread_table([_row("lenet5", 37, "90%", scale=_rec(0.0))]) == ""
    runs[1]["peak_ratio"] = 1.01  # over the budget: no valid schedule, a miss, not left out
    assert spread_table([_repeated(runs)]).splitlines()[3].split()[2:8] == [
        "3",
        "29.35",
        "29.35",
        "0.66",
        "0.66",
        "2/3",
    ]


def test_checks_on_no_rows_say_not_run() -> None:
    assert checks_text(checks([])).count("not run") == 5


@pytest.mark.parametrize(
    ("status", "cell"),
    [
        ("optimal", "opt"),
        ("Optimal", "opt"),
        ("feasible, time-dependent", "time"),
        ("Time limit reached", "time"),
        ("feasible", "feas"),
        ("Infeasible", "infeasible"),
    ],
)
def test_short_status(status: str, cell: str) -> None:
    assert short_status(status) == cell


def test_train_option_trains_every_parameter_of_each_zoo_model() -> None:
    # dscnn is benchmarked with its biases trained; --train all adds the weight gradients and updates
    ((_, own),) = zoo_graphs("cortex-m4", ["dscnn"])
    ((_, whole),) = zoo_graphs("cortex-m4", ["dscnn"], "all")
    assert (len(own.nodes), len(whole.nodes)) == (45, 65)
    assert sum(n.name.startswith("update/") for n in whole.nodes) > sum(
        n.name.startswith("update/") for n in own.nodes
    )


def test_load_keeps_every_core_busy_only_inside_the_block() -> None:
    """--load's spinners: one process per core while the block runs, none before or after."""
    before = len(multiprocessing.active_children())
    with saturated(True):
        spinning = multiprocessing.active_children()
        assert len(spinning) - before == (os.cpu_count() or 1)
        assert all(p.is_alive() for p in spinning)
    assert len(multiprocessing.active_children()) == before
    with saturated(False):
        assert len(multiprocessing.active_children()) == before
