"""schedulers.restrict: a schedule cut down to a subgraph (poet_predict / poet_eval_step from the
training step) replays on the subgraph's problem, within the RAM the whole schedule used, and widening
undoes paging and recomputation only where the RAM allows."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from poet_edge import graphgen
from poet_edge.errors import PoetError
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule
from poet_edge.schedulers import get_scheduler
from poet_edge.schedulers.restrict import restrict
from poet_edge.simulator import simulate


def _ancestors(problem: SchedulingProblem, roots: set[int]) -> SchedulingProblem:
    """The subproblem of ``roots`` and every node they depend on, nodes in the same order and names."""
    preds = problem.preds()
    keep, todo = set(roots), list(roots)
    while todo:
        for u in preds[todo.pop()]:
            if u not in keep:
                keep.add(u)
                todo.append(u)
    order = sorted(keep)
    pos = {v: i for i, v in enumerate(order)}
    edges = tuple((pos[a], pos[b]) for a, b in problem.edges if a in pos and b in pos)
    inval = tuple((pos[a], pos[b]) for a, b in problem.invalidated_by if a in pos and b in pos)
    return SchedulingProblem(
        tuple(problem.nodes[v] for v in order),
        edges,
        problem.budget_bytes,
        problem.fixed_bytes,
        invalidated_by=inval,
    )


@pytest.mark.parametrize("scheduler, share", [("greedy", 0.7), ("page-all", 0.7), ("recompute-all", 0.95)])
def test_restriction_replays_within_the_whole_schedules_ram(scheduler, share):
    """Random layered DAGs at a budget that forces recomputation or paging: the schedule restricted to
    the ancestors of a few random nodes replays (every node computed, every read resident) and peaks no
    higher than the whole schedule; widened, it may hold more, but within the budget, and costs no
    more."""
    restricted = 0
    for seed in range(30):
        whole = graphgen.random_layered_dag(40, seed, width=4, max_in_degree=3, skip_prob=0.3)
        free = simulate(whole, get_scheduler("none")(whole))
        problem = replace(whole, budget_bytes=int(free.peak_ram_bytes * share))
        try:
            schedule = get_scheduler(scheduler)(problem)
        except PoetError:  # this seed's budget is below what the baseline reaches
            continue
        peak = simulate(problem, schedule).peak_ram_bytes
        rng = random.Random(seed)
        sub = _ancestors(problem, set(rng.sample(range(20, 40), 3)))
        cut = restrict(sub, schedule, "test", widened=False)
        wide = restrict(sub, schedule, "test")
        sim, sim_wide = simulate(sub, cut), simulate(sub, wide)
        for c in (cut, wide):
            assert {s.node for s in c.steps if isinstance(s, Compute)} == {n.name for n in sub.nodes}
        assert sim.peak_ram_bytes <= peak <= problem.budget_bytes
        assert sim_wide.peak_ram_bytes <= problem.budget_bytes
        assert sim_wide.energy_j <= sim.energy_j
        assert "test, restricted" in (cut.report.schedule_from or "")
        restricted += 1
    assert restricted >= 8


def _node(name: str, size: int) -> ProblemNode:
    return ProblemNode(name, size, compute_s=1.0, compute_j=1.0, page_in_j=5.0, page_out_j=5.0)


def _problem(budget: int) -> SchedulingProblem:
    """a (100 B) -> x (100 B) -> y (50 B) -> b (10 B), and b also reads a."""
    nodes = (_node("a", 100), _node("x", 100), _node("y", 50), _node("b", 10))
    return SchedulingProblem(nodes, ((0, 1), (1, 2), (2, 3), (0, 3)), budget)


PAGED = Schedule(
    (
        *(Compute("a"), PageOut("a"), Compute("x"), Free("a")),
        *(Compute("y"), Free("x"), PageIn("a"), Compute("b"), Free("a"), Free("y"), Free("b")),
    ),
    "test",
)
RECOMPUTED = Schedule(
    (
        *(Compute("a"), Compute("x"), Free("a"), Compute("y"), Free("x"), Compute("a")),
        *(Compute("b"), Free("a"), Free("y"), Free("b")),
    ),
    "test",
)


@pytest.mark.parametrize("schedule", [PAGED, RECOMPUTED], ids=["paged", "recomputed"])
def test_widening_keeps_a_value_resident_only_where_it_fits(schedule):
    """With room for a over the stretch (a + x + y = 250 B), the page pair or the recomputation is
    undone; at 249 B it stays, and the schedule replays within the budget either way."""
    roomy = restrict(_problem(250), schedule, "test")
    assert [type(s) for s in roomy.steps].count(Compute) == 4
    assert not any(isinstance(s, (PageIn, PageOut)) for s in roomy.steps)
    assert simulate(_problem(250), roomy).peak_ram_bytes == 250
    tight = restrict(_problem(249), schedule, "test")
    assert [s for s in tight.steps if not isinstance(s, Free)] == [
        s for s in schedule.steps if not isinstance(s, Free)
    ]
    assert simulate(_problem(249), tight).peak_ram_bytes <= 249


def test_steps_nothing_reads_are_dropped():
    """A page-out never paged in again and a recomputation nothing reads are left out; each value is freed
    after its last read."""
    schedule = Schedule(
        (
            *(Compute("a"), PageOut("a"), Compute("x"), Compute("y"), Free("x"), Compute("x")),
            *(Compute("b"), Free("x"), Free("a"), Free("y"), Free("b")),
        ),
        "test",
    )
    cut = restrict(_problem(1000), schedule, "test")
    assert cut.steps == (
        *(Compute("a"), Compute("x"), Compute("y"), Free("x"), Compute("b")),
        *(Free("b"), Free("a"), Free("y")),
    )


def test_a_schedule_of_another_graph_is_refused():
    """A step reading a value the schedule never made: ValueError, not a schedule."""
    schedule = Schedule((Compute("b"),), "test")
    with pytest.raises(ValueError, match="b reads a, never made"):
        restrict(_problem(1000), schedule, "test")
