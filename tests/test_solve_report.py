"""SolveReport (poet_edge/schedule.py): the typed solve report every scheduler returns. It lists the
fields its scheduler set, in the order set, so plan.json and `poet solve --json` keep their keys."""

from __future__ import annotations

import json

import pytest

from poet_edge.graphgen import training_chain
from poet_edge.schedule import SolveReport
from poet_edge.schedulers import SCHEDULERS, configured
from poet_edge.schedulers.milp import MilpOptions


def test_keys_in_the_order_set_a_new_key_last_a_dropped_one_gone() -> None:
    r = SolveReport.of(status="feasible", objective=2.0, bound=1.0, gap=0.5)
    assert r.keys == ("status", "objective", "bound", "gap") and r.bound_from is None
    r = r.with_(status="optimal for this order", bound_covers="this order")  # status keeps its place
    assert r.items() == (
        ("status", "optimal for this order"),
        ("objective", 2.0),
        ("bound", 1.0),
        ("gap", 0.5),
        ("bound_covers", "this order"),
    )
    r = r.without("objective").with_(cut_by_time_limit=True, cut_phase=None)
    assert r.objective is None and not r.has("objective") and r.has("cut_phase")
    assert list(r.to_json()) == ["status", "bound", "gap", "bound_covers", "cut_by_time_limit", "cut_phase"]
    assert r.to_json(("gap", "status")) == {"status": "optimal for this order", "gap": 0.5}
    with pytest.raises(TypeError, match="no field"):
        r.with_(costt=1.0)
    with pytest.raises(ValueError, match="no cost"):
        _ = r.replayed_cost


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_every_scheduler_returns_a_report_that_serialises(name: str) -> None:
    problem = training_chain(5, seed=3)
    schedule = configured(name, MilpOptions(time_limit_s=30.0, threads=1, effort="quick"))(problem)
    report = schedule.report
    assert isinstance(report, SolveReport)
    json.dumps(report.to_json())  # every value JSON-serialisable
    assert all(report.has(k) for k in report.keys) and len(set(report.keys)) == len(report.keys)
    if name in ("milp", "poet-milp", "scale"):
        assert report.status and report.objective is not None and report.bound is not None
        assert report.bound <= report.objective * (1 + 1e-9)
    if name == "greedy":
        assert report.keys == ("variant", "work") and report.work is not None and report.work >= 0
