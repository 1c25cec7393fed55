"""The cost model, checked against costs worked out by hand."""

from __future__ import annotations

import dataclasses

import pytest

from poet_edge.cost import (
    Cost,
    erase_blocks,
    moved_bytes,
    node_cost,
    node_cycles,
    steps_until_endurance,
    transfer_cost,
)
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.profiles import Profile, load_profile
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule
from poet_edge.simulator import simulate
from poet_edge.work import OpClass, Work


def _profile() -> Profile:
    """The host profile with round numbers that make hand computation easy."""
    p = load_profile("host")
    mcu = dataclasses.replace(p.mcu, clock_hz=1e6, active_power_w=0.01)
    compute = dataclasses.replace(
        p.compute,
        cycles_per_mac_dense=2.0,
        cycles_per_element_elementwise=3.0,
        cycles_per_byte_copy=0.5,
        cycles_per_call=100.0,
    )
    storage = dataclasses.replace(
        p.storage,
        block_bytes=512,
        read_latency_s=1e-4,
        write_latency_s=2e-4,
        read_throughput_bytes_per_s=1.024e6,
        write_throughput_bytes_per_s=0.512e6,
        erase_bytes=4096,
        erase_time_s=1e-3,
        endurance_cycles=1000,
        capacity_bytes=4096 * 100,
        active_power_w=0.33,
    )
    return dataclasses.replace(p, mcu=mcu, compute=compute, storage=storage)


# A 3-node graph: x = dense(1000 MACs) -> y = relu(500 elements) -> z = reshape(copy of 256 bytes)
WORKS = (
    Work(OpClass.DENSE, macs=1000),
    Work(OpClass.ELEMENTWISE, elements=500),
    Work(OpClass.COPY, bytes_written=256, bytes_read=256),
)
# cycles: 2*1000+100 = 2100, 3*500+100 = 1600, 0.5*256+100 = 228; clock 1 MHz; power 10 mW
HAND = ((2.1e-3, 2.1e-5), (1.6e-3, 1.6e-5), (2.28e-4, 2.28e-6))


def test_node_costs_match_hand_computation() -> None:
    p = _profile()
    assert [node_cycles(p, w) for w in WORKS] == [2100.0, 1600.0, 228.0]
    for work, (seconds, joules) in zip(WORKS, HAND, strict=True):
        cost = node_cost(p, work)
        assert cost.seconds == pytest.approx(seconds, rel=1e-12)
        assert cost.joules == pytest.approx(joules, rel=1e-12)


def test_every_op_class_is_priced() -> None:
    p = load_profile("cortex-m4")
    for op in OpClass:
        assert node_cost(p, Work(op, macs=10, elements=10, bytes_written=10)).seconds > 0


def test_transfer_costs_match_hand_computation() -> None:
    p = _profile()
    assert moved_bytes(p, 1000) == 1024 and moved_bytes(p, 512) == 512 and moved_bytes(p, 0) == 0
    # read 1000 B: 1e-4 + 1024/1.024e6 = 1.1e-3 s; power 0.33 + 0.01 W
    rd = transfer_cost(p, 1000, write=False)
    assert rd.seconds == pytest.approx(1.1e-3, rel=1e-12)
    assert rd.joules == pytest.approx(0.34 * 1.1e-3, rel=1e-12)
    # write 1000 B: 2e-4 + 1024/0.512e6 + 1e-3 * 1024/4096 = 2.45e-3 s
    wr = transfer_cost(p, 1000, write=True)
    assert wr.seconds == pytest.approx(2.45e-3, rel=1e-12)
    assert wr.joules == pytest.approx(0.34 * 2.45e-3, rel=1e-12)
    assert transfer_cost(p, 0, write=True) == Cost(0.0, 0.0)


def test_erase_accounting() -> None:
    p = _profile()
    blocks = erase_blocks(p, [1000, 3000, 0])  # 1024 + 3072 = 4096 bytes = 1 erase block
    assert blocks == 1.0
    assert steps_until_endurance(p, blocks) == pytest.approx(1000 * 100)
    assert steps_until_endurance(p, 0.0) is None


def test_simulated_totals_of_a_3_node_graph_match_hand_computation() -> None:
    p = _profile()
    sizes = (1000, 1000, 1000)
    nodes = []
    for i, (work, size) in enumerate(zip(WORKS, sizes, strict=True)):
        c, o, n = node_cost(p, work), transfer_cost(p, size, True), transfer_cost(p, size, False)
        nodes.append(
            ProblemNode(f"v{i}", size, c.seconds, c.joules, o.seconds, o.joules, n.seconds, n.joules)
        )
    problem = SchedulingProblem(tuple(nodes), ((0, 1), (1, 2)), budget_bytes=10_000)
    steps = (
        Compute("v0"),
        PageOut("v0"),
        Free("v0"),
        PageIn("v0"),
        Compute("v1"),
        Free("v0"),
        Compute("v2"),
        Free("v1"),
        Free("v2"),
    )
    sim = simulate(problem, Schedule(steps, "hand"), profile=p)
    assert sim.latency_compute_s == pytest.approx(2.1e-3 + 1.6e-3 + 2.28e-4, rel=1e-12)
    assert sim.energy_compute_j == pytest.approx(2.1e-5 + 1.6e-5 + 2.28e-6, rel=1e-12)
    assert sim.latency_page_out_s == pytest.approx(2.45e-3, rel=1e-12)
    assert sim.latency_page_in_s == pytest.approx(1.1e-3, rel=1e-12)
    assert sim.energy_j == pytest.approx(2.1e-5 + 1.6e-5 + 2.28e-6 + 0.34 * (2.45e-3 + 1.1e-3), rel=1e-12)
    assert sim.erase_blocks_per_step == 0.25
    assert sim.steps_until_endurance == pytest.approx(1000 * 100 / 0.25)
