"""The simulator: it rejects every kind of invalid schedule with the right reason and measures peaks."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.profiles import load_profile
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step
from poet_edge.simulator import InvalidSchedule, SimResult, format_report, simulate

# a -> b -> c and a -> c; b has 7 bytes of workspace; 3 fixed bytes.
NODES = (
    ProblemNode(
        "a", 10, compute_s=1.0, compute_j=2.0, page_out_s=0.5, page_out_j=0.25, page_in_s=0.4, page_in_j=0.2
    ),
    ProblemNode("b", 20, compute_s=3.0, compute_j=4.0, workspace_bytes=7),
    ProblemNode("c", 5, compute_s=5.0, compute_j=6.0),
)
PROBLEM = SchedulingProblem(NODES, ((0, 1), (1, 2), (0, 2)), budget_bytes=100, fixed_bytes=3)
# two independent nodes of 10 bytes: paging x back in while y is resident needs 3 + 20 = 23 > 22
TWO = SchedulingProblem((ProblemNode("x", 10), ProblemNode("y", 10)), (), budget_bytes=22, fixed_bytes=3)


def C(n: str) -> Compute:
    return Compute(n)


def F(n: str) -> Free:
    return Free(n)


def run(steps: list[Step], problem: SchedulingProblem = PROBLEM) -> SimResult:
    return simulate(problem, Schedule(tuple(steps), "test"))


def test_plain_schedule_peak_and_curve() -> None:
    sim = run([C("a"), C("b"), C("c"), F("a"), F("b"), F("c")])
    # during b: fixed 3 + a 10 + b 20 + workspace 7 = 40; during c: 3 + 30 + 5 = 38
    assert sim.ram_curve == (13, 40, 38, 38, 28, 8)
    assert (sim.peak_ram_bytes, sim.peak_step, sim.peak_node) == (40, 1, "b")
    counts = (sim.n_computes, sim.n_recomputations, sim.n_page_outs, sim.n_page_ins, sim.n_frees)
    assert counts == (3, 0, 0, 0, 3)
    assert sim.latency_s == 9.0 and sim.energy_j == 12.0
    assert sim.erase_blocks_per_step is None and sim.steps_until_endurance is None


def test_recompute_and_paging_accounting() -> None:
    steps: list[Step] = [C("a"), PageOut("a"), F("a"), PageIn("a"), C("b"), F("a"), C("a"), C("c")]
    sim = run(steps)
    assert (sim.n_computes, sim.n_recomputations, sim.n_page_outs, sim.n_page_ins) == (3, 1, 1, 1)
    assert (sim.latency_compute_s, sim.latency_recompute_s) == (9.0, 1.0)
    assert (sim.energy_compute_j, sim.energy_recompute_j) == (12.0, 2.0)
    assert (sim.latency_page_out_s, sim.latency_page_in_s, sim.energy_page_out_j, sim.energy_page_in_j) == (
        0.5,
        0.4,
        0.25,
        0.2,
    )
    assert (sim.storage_bytes_written, sim.storage_bytes_read, sim.storage_peak_bytes) == (10, 10, 10)
    assert len(sim.ram_curve) == len(steps)
    assert sim.ram_curve[3] == 13  # page-in of a: 3 + 10


def test_wear_reported_with_profile() -> None:
    host = load_profile("host")
    sim = simulate(PROBLEM, Schedule((C("a"), PageOut("a"), C("b"), C("c")), "t"), profile=host)
    assert sim.erase_blocks_per_step == host.storage.block_bytes / host.storage.erase_bytes
    assert sim.steps_until_endurance is not None and sim.steps_until_endurance > 0


def test_json_and_report() -> None:
    sim = run([C("a"), C("b"), C("c")])
    data = sim.to_json()
    assert data["peak_ram_bytes"] == 40 and data["ram_curve"] == [13, 40, 38]
    assert json.loads(json.dumps(data))["energy_j"] == 12.0
    text = format_report(sim)
    assert "peak RAM" in text and "40" in text and "recompute" in text


INVALID: list[tuple[str, list[Step], SchedulingProblem, int, str]] = [
    ("input missing", [C("b")], PROBLEM, 0, "input(s) not resident in RAM: a"),
    ("input freed", [C("a"), C("b"), F("a"), C("c")], PROBLEM, 3, "not resident in RAM: a"),
    ("compute resident", [C("a"), C("a")], PROBLEM, 1, "already resident"),
    ("page-in resident", [C("a"), PageOut("a"), PageIn("a")], PROBLEM, 2, "already resident"),
    ("budget", [C("a"), C("b")], replace(PROBLEM, budget_bytes=39), 1, "budget exceeded by 1 bytes"),
    (
        "budget page-in",
        [C("x"), PageOut("x"), F("x"), C("y"), PageIn("x")],
        TWO,
        4,
        "budget exceeded by 1 bytes",
    ),
    ("page-out absent", [PageOut("a")], PROBLEM, 0, "not in RAM"),
    ("page-in absent", [C("a"), PageIn("a")], PROBLEM, 1, "not in storage"),
    (
        "storage",
        [C("a"), PageOut("a")],
        replace(PROBLEM, storage_bytes=9),
        1,
        "storage capacity exceeded by 1",
    ),
    ("free absent", [C("a"), F("a"), F("a")], PROBLEM, 2, "not resident"),
    ("unknown", [C("a"), C("zz")], PROBLEM, 1, "unknown node 'zz'"),
    (
        "invalidated",
        [C("a"), C("b"), F("a"), C("a")],
        replace(PROBLEM, invalidated_by=((0, 1),)),
        3,
        "invalidator(s) b ran",
    ),
    (
        "not recomputable",
        [C("a"), F("a"), C("a")],
        replace(PROBLEM, nodes=(replace(NODES[0], recomputable=False),) + NODES[1:]),
        2,
        "not recomputable",
    ),
    (
        "not pageable",
        [C("a"), PageOut("a")],
        replace(PROBLEM, nodes=(replace(NODES[0], pageable=False),) + NODES[1:]),
        1,
        "not pageable",
    ),
    ("never computed", [C("a"), C("b")], PROBLEM, -1, "1 node(s) never computed: c"),
]


@pytest.mark.parametrize("label,steps,problem,index,reason", INVALID, ids=[c[0] for c in INVALID])
def test_rejects_invalid_schedules(
    label: str, steps: list[Step], problem: SchedulingProblem, index: int, reason: str
) -> None:
    with pytest.raises(InvalidSchedule) as err:
        run(steps, problem)
    assert err.value.index == index
    assert reason in err.value.reason
    assert err.value.step == (steps[index] if index >= 0 else None)
    assert (f"step {index}" in str(err.value)) == (index >= 0)


def test_budget_is_inclusive_and_invalidator_order_allowed() -> None:
    exact = replace(PROBLEM, budget_bytes=40, invalidated_by=((0, 1),))
    assert run([C("a"), C("b"), C("c")], exact).peak_ram_bytes == 40


def test_page_out_twice_uses_storage_once() -> None:
    steps: list[Step] = [C("a"), PageOut("a"), F("a"), PageIn("a"), PageOut("a"), C("b"), C("c")]
    sim = run(steps, replace(PROBLEM, storage_bytes=10))
    assert sim.storage_peak_bytes == 10 and sim.storage_bytes_written == 20 and sim.n_page_outs == 2
