"""Baseline schedulers: every schedule they return replays in the simulator within the budget; when
they give up they say why with a PoetError (never an invalid schedule)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poet_edge.errors import PoetError
from poet_edge.graphgen import chain, random_layered_dag, training_chain
from poet_edge.memory_floor import check_budget, memory_floor
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedulers import BASELINES, SCHEDULERS, configured, get_scheduler
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.simulator import InvalidSchedule, SimResult, simulate

NAMES = BASELINES  # the solvers have their own tests (tests/test_milp.py, tests/test_scheduler_scale.py)


def _unbounded_peak(problem: SchedulingProblem) -> int:
    roomy = replace(problem, budget_bytes=10**12)
    return simulate(roomy, SCHEDULERS["none"](roomy)).peak_ram_bytes


def _run(name: str, problem: SchedulingProblem) -> SimResult | None:
    """The simulated result, or None when the scheduler refused with a reason."""
    try:
        schedule = SCHEDULERS[name](problem)
    except InvalidSchedule:
        raise
    except PoetError as err:
        assert "no schedule" in str(err) or "floor" in str(err), str(err)
        return None
    assert schedule.solver == name
    sim = simulate(problem, schedule)
    assert sim.peak_ram_bytes <= problem.budget_bytes
    return sim


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 30),
    seed=st.integers(0, 10**6),
    frac=st.floats(0.0, 1.1),
    flags=st.sampled_from([(0.0, 0.0, 0), (0.3, 0.0, 0), (0.0, 0.5, 0), (0.2, 0.2, 3)]),
    fixed=st.sampled_from([0, 17]),
)
def test_every_scheduler_valid_on_random_dags(
    n: int, seed: int, frac: float, flags: tuple[float, float, int], fixed: int
) -> None:
    unrecomputable, unpageable, invalidations = flags
    base = random_layered_dag(
        n,
        seed,
        fixed_bytes=fixed,
        unrecomputable_prob=unrecomputable,
        unpageable_prob=unpageable,
        n_invalidations=invalidations,
    )
    floor = memory_floor(base).bytes
    peak = _unbounded_peak(base)
    assert floor <= peak
    problem = replace(base, budget_bytes=int(floor + frac * (peak - floor)))
    results = {name: _run(name, problem) for name in NAMES}
    if problem.budget_bytes >= peak:  # no pressure: none, page_all and greedy all succeed
        for name in ("none", "page-all", "greedy"):
            result = results[name]
            assert result is not None
            assert result.n_recomputations == 0 and result.n_page_outs == 0
    for sim in results.values():
        if sim is not None:
            assert len(sim.ram_curve) == sim.n_steps


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 25), seed=st.integers(0, 10**6), storage=st.integers(0, 300))
def test_storage_capacity_respected(n: int, seed: int, storage: int) -> None:
    base = random_layered_dag(n, seed)
    problem = replace(base, budget_bytes=memory_floor(base).bytes, storage_bytes=storage)
    for name in ("page-all", "greedy"):
        sim = _run(name, problem)
        assert sim is None or sim.storage_peak_bytes <= storage


@pytest.mark.parametrize("name", NAMES)
def test_below_floor_is_refused_with_the_floor(name: str) -> None:
    problem = training_chain(8, seed=3)
    floor = memory_floor(problem)
    with pytest.raises(PoetError) as err:
        SCHEDULERS[name](replace(problem, budget_bytes=floor.bytes - 1))
    assert str(floor.bytes) in str(err.value) and floor.node in str(err.value) and "floor" in str(err.value)


def test_the_order_wrapper_refuses_a_budget_below_the_floor_first() -> None:
    """``poet solve``'s scale (the order wrapper) says the floor and nothing else: no order or sequence
    is searched for a budget no schedule can meet (a dense 2,000-node file took 90 s to say so)."""
    problem = training_chain(8, seed=3)
    floor = memory_floor(problem)
    with pytest.raises(PoetError) as err:
        configured("scale", MilpOptions(effort="quick"))(replace(problem, budget_bytes=floor.bytes - 1))
    assert str(err.value) == f"RAM budget {floor.bytes - 1} bytes is below the memory floor " + (
        f"{floor.bytes} bytes, set by {floor.explanation}; no schedule exists"
    )


def test_memory_floor_hand_case() -> None:
    nodes = (ProblemNode("a", 10), ProblemNode("b", 20, workspace_bytes=7), ProblemNode("c", 5))
    problem = SchedulingProblem(nodes, ((0, 1), (1, 2), (0, 2)), budget_bytes=100, fixed_bytes=3)
    floor = memory_floor(problem)
    assert (floor.bytes, floor.node) == (40, "b")  # 3 + 20 + 10 + 7 (c: 3 + 5 + 30 = 38)
    assert check_budget(replace(problem, budget_bytes=40)) == floor
    with pytest.raises(PoetError, match="below the memory floor 40 bytes"):
        check_budget(replace(problem, budget_bytes=39))


def test_get_scheduler() -> None:
    assert get_scheduler("greedy") is SCHEDULERS["greedy"]
    with pytest.raises(PoetError) as err:
        get_scheduler("magic")
    assert all(name in str(err.value) for name in NAMES)


def test_none_frees_after_last_use_and_unused_values_at_once() -> None:
    nodes = (ProblemNode("x", 4), ProblemNode("y", 4), ProblemNode("upd", 0), ProblemNode("z", 4))
    problem = SchedulingProblem(nodes, ((0, 1), (0, 3), (1, 2)), budget_bytes=100)
    steps = [[kind, node] for kind, node in SCHEDULERS["none"](problem).to_json()]
    assert steps == [
        ["compute", "x"],
        ["compute", "y"],
        ["compute", "upd"],
        ["free", "y"],
        ["free", "upd"],
        ["compute", "z"],
        ["free", "x"],
        ["free", "z"],
    ]


def test_none_fails_with_reason_when_over_budget() -> None:
    problem = training_chain(10, seed=1)
    peak = _unbounded_peak(problem)
    with pytest.raises(PoetError, match="scheduler 'none' found no schedule.*over|by [0-9]+ bytes"):
        SCHEDULERS["none"](replace(problem, budget_bytes=peak - 1))


def test_page_all_pages_when_tight() -> None:
    problem = training_chain(16, seed=1)
    tight = replace(problem, budget_bytes=int(0.5 * _unbounded_peak(problem)))
    sim = _run("page-all", tight)
    assert sim is not None
    assert sim.n_page_outs > 0 and sim.n_page_ins > 0 and sim.n_recomputations == 0


def test_greedy_recomputes_without_storage_and_pages_with_it() -> None:
    problem = training_chain(16, seed=1)
    budget = int(0.5 * _unbounded_peak(problem))
    no_paging = replace(
        problem, budget_bytes=budget, nodes=tuple(replace(n, pageable=False) for n in problem.nodes)
    )
    sim = _run("greedy", no_paging)
    assert sim is not None and sim.n_recomputations > 0 and sim.n_page_outs == 0
    no_recompute = replace(
        problem, budget_bytes=budget, nodes=tuple(replace(n, recomputable=False) for n in problem.nodes)
    )
    sim = _run("greedy", no_recompute)
    assert sim is not None and sim.n_page_outs > 0 and sim.n_recomputations == 0


def test_recompute_all_checkpoints_training_chain() -> None:
    problem = training_chain(16, seed=2)
    sim = _run("recompute-all", problem)
    assert sim is not None and sim.n_recomputations > 0 and sim.n_page_outs == 0
    assert sim.peak_ram_bytes < _unbounded_peak(problem)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("maker,n", [(chain, 12), (chain, 40), (training_chain, 9), (training_chain, 25)])
def test_recompute_all_peak_not_above_none_on_chains(maker, n: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    problem = maker(n, seed=seed)
    none_peak = simulate(problem, SCHEDULERS["none"](problem)).peak_ram_bytes
    rec = simulate(problem, SCHEDULERS["recompute-all"](problem))
    assert rec.peak_ram_bytes <= none_peak


def test_invalidated_by_honoured() -> None:
    # backward g_i may not recompute f_i after the "update" that invalidates f_i ran
    problem = training_chain(6, seed=5)
    index = problem.index()
    inval = ((index["f5"], index["g3"]), (index["f4"], index["g2"]))
    tight = replace(problem, invalidated_by=inval, budget_bytes=int(0.6 * _unbounded_peak(problem)))
    for name in NAMES:
        _run(name, tight)  # valid or refused with a reason


def test_invalidator_before_node_is_refused() -> None:
    problem = replace(chain(4), invalidated_by=((2, 1),))
    for name in NAMES:
        with pytest.raises(PoetError, match="comes before it"):
            SCHEDULERS[name](problem)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name: str) -> None:
    problem = random_layered_dag(40, 7)
    problem = replace(problem, budget_bytes=int(0.7 * _unbounded_peak(problem)))
    try:
        first = SCHEDULERS[name](problem)
    except PoetError:
        return
    assert SCHEDULERS[name](problem) == first
