"""First fitting sequences (issue 55): recomputation on demand and the lowered insertion, checked by the
simulator on the original problem, deterministic, where going straight at the budget gets stuck."""

from __future__ import annotations

import bisect
from dataclasses import replace

import numpy as np
import pytest

from poet_edge.errors import PoetError
from poet_edge.graphgen import dense_layered
from poet_edge.memory_floor import memory_floor
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedulers import configured
from poet_edge.schedulers.fit import ROUND_WORK, Fitted, Unfit, fit_sequences
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.schedulers.on_demand import on_demand_sequence
from poet_edge.schedulers.ordering import (
    Curves,
    Deadline,
    Sequences,
    block_gain,
    candidates,
    choose_order,
    insert_recomputations,
    sequence_schedule,
)
from poet_edge.simulator import simulate


def _at(n: int, seed: int, frac: float) -> SchedulingProblem:
    given = dense_layered(n, seed=seed)
    return replace(given, budget_bytes=int(frac * Curves(given).curve(range(n)).max()))


def _checked(problem: SchedulingProblem, ordered: SchedulingProblem, seq: np.ndarray) -> None:
    """The oracle: the simulator replays the sequence's steps on the original problem (nodes by name)."""
    sim = simulate(problem, sequence_schedule(ordered, seq, "x"))
    assert sim.peak_ram_bytes <= problem.budget_bytes
    assert sim.n_recomputations == len(seq) - len(problem.nodes) > 0
    assert sorted(set(seq.tolist())) == list(range(len(problem.nodes)))


def test_on_demand_fits_and_is_deterministic() -> None:
    problem = _at(250, 250, 0.8)
    choice = choose_order(problem, problem.budget_bytes)
    assert choice.peak > problem.budget_bytes  # recomputation is needed
    costs = [n.compute_j for n in choice.problem.nodes]
    seq = on_demand_sequence(choice.problem, problem.budget_bytes, costs, 10**5)
    assert seq is not None
    _checked(problem, choice.problem, seq)
    again = on_demand_sequence(choice.problem, problem.budget_bytes, costs, 10**5)
    assert again is not None and np.array_equal(seq, again)
    assert on_demand_sequence(choice.problem, problem.budget_bytes, costs, 10) is None  # the work is spent


def test_on_demand_fits_at_the_floor_and_says_none_below() -> None:
    # a chain a -> b -> c -> d with a skip a -> d (a is not recomputable): c and d each need three values
    nodes = tuple(
        ProblemNode(name=x, out_bytes=100, compute_j=1.0, compute_s=1.0, recomputable=x != "a")
        for x in "abcd"
    )
    problem = SchedulingProblem(nodes, ((0, 1), (1, 2), (2, 3), (0, 3)), 300)
    seq = on_demand_sequence(problem, 300, [1.0] * 4, 100)
    assert seq is not None and seq.tolist() == [0, 1, 2, 3]
    assert int(Sequences(problem).curve(seq)[0].max()) == 300
    assert on_demand_sequence(problem, 299, [1.0] * 4, 100) is None  # c needs a, b and itself


def test_lowered_target_then_on_demand_fits_where_the_straight_insertion_cannot() -> None:
    problem = _at(300, 1, 0.78)
    budget = problem.budget_bytes
    choice = choose_order(problem, budget)
    costs = np.array([n.compute_j for n in problem.nodes])
    straight, _ = insert_recomputations(choice.problem, budget, ROUND_WORK, costs[list(choice.order)])
    assert straight is None  # going straight at the budget gets stuck here
    fitted = fit_sequences(problem, budget, costs, [choice.order])
    assert isinstance(fitted, Fitted) and fitted.order == choice.order
    origins = [origin for _, origin in fitted.sequences]
    assert origins == ["recomputations inserted with the target lowered, then recomputed on demand"]
    for seq, _ in fitted.sequences:
        _checked(problem, fitted.problem, seq)
    again = fit_sequences(problem, budget, costs, [choice.order])
    assert isinstance(again, Fitted) and all(
        np.array_equal(a, b) for (a, _), (b, _) in zip(fitted.sequences, again.sequences, strict=True)
    )


def test_scale_reports_where_the_schedule_came_from() -> None:
    problem = _at(300, 1, 0.78)
    schedule = configured("scale", MilpOptions(time_limit_s=5.0, threads=1, effort="quick"))(problem)
    sim = simulate(problem, schedule)
    assert sim.peak_ram_bytes <= problem.budget_bytes
    assert "recomputed on demand" in str(schedule.report.schedule_from)


def test_a_sequence_may_not_run_a_node_after_its_invalidator() -> None:
    """A node read by an in-place update (``invalidated_by``) may not run, first or again, after it: the
    RAM curve of every construction and move refuses such a sequence (a move across the update was once
    kept: the digits fine-tuning compile then failed in the simulator)."""
    nodes = tuple(ProblemNode(name=x, out_bytes=10, compute_j=1.0) for x in ("w", "g", "u", "z"))
    problem = SchedulingProblem(nodes, ((0, 1), (0, 2), (1, 3)), 100, invalidated_by=((1, 2),))
    seqs = Sequences(problem)
    assert int(seqs.curve(np.array([0, 1, 2, 3]))[0].max()) == 30
    with pytest.raises(PoetError, match="runs g after its invalidator u"):
        seqs.curve(np.array([0, 2, 1, 3]))
    with pytest.raises(PoetError, match="runs g after its invalidator u"):
        seqs.curve(np.array([0, 1, 2, 1, 3]))  # recomputed after it


def test_no_sequence_says_so_with_the_order_peak() -> None:
    """a must stay resident from b to e (it can be neither recomputed nor paged), and c needs b: 300 B at
    c against a budget of 250 B, above the 200 B floor. The error says the sequences found none either."""
    sizes = {"a": 100, "b": 100, "c": 100, "d": 10, "e": 10}
    nodes = tuple(
        ProblemNode(name=x, out_bytes=b, compute_j=1.0, recomputable=x != "a", pageable=False)
        for x, b in sizes.items()
    )
    problem = SchedulingProblem(nodes, ((0, 1), (0, 4), (1, 2), (2, 3), (3, 4)), 250)
    with pytest.raises(PoetError, match="found no sequence within 250 B either"):
        configured("scale", MilpOptions(time_limit_s=5.0, threads=1, effort="quick"))(problem)


def test_the_safety_stop_cuts_the_sequence_construction() -> None:
    """A deadline already passed stops fit_sequences before any order (and says so); without one the
    same problem gets its sequences, the same with a deadline far ahead (the work is counted, not timed)."""
    problem = _at(250, 3, 0.8)
    orders = [tuple(range(250))]
    cut = Deadline(0.0)
    assert fit_sequences(problem, problem.budget_bytes, np.ones(250), orders, cut) == Unfit(None, (), 0)
    assert cut.hit
    free = fit_sequences(problem, problem.budget_bytes, np.ones(250), orders)
    far = Deadline(float("inf"))
    again = fit_sequences(problem, problem.budget_bytes, np.ones(250), orders, far)
    assert isinstance(free, Fitted) and isinstance(again, Fitted) and not far.hit
    assert [s.tolist() for s, _ in free.sequences] == [s.tolist() for s, _ in again.sequences]


def test_the_moves_read_check_agrees_with_the_ram_curve() -> None:
    """The lowered insertion's moves skip the RAM curve where a read would have no earlier instance
    (``Sequences.reads_after_move``): on sequences with recomputations of a dense graph, for moves both
    ways and both outcomes, the check says exactly what the curve's own check says."""
    problem = _at(120, 7, 0.8)
    seqs = Sequences(problem)
    seq, _ = insert_recomputations(problem, problem.budget_bytes, ROUND_WORK, np.ones(120))
    assert seq is not None and len(seq) > 120
    rng = np.random.default_rng(0)
    outcomes: set[tuple[bool, bool]] = set()
    for _ in range(3000):
        j, q = (int(x) for x in rng.integers(0, len(seq), 2))
        if j == q:
            continue
        moved = np.insert(np.delete(seq, j), q, seq[j])
        try:
            seqs.uses(moved)
            valid = True
        except PoetError:
            valid = False
        assert seqs.reads_after_move(seq, seqs.firsts(seq), j, q) == valid, (j, q)
        outcomes.add((q < j, valid))
        if valid and rng.random() < 0.1:
            seq = moved  # walk on, so later moves start from sequences moves made
    assert outcomes == {(False, False), (False, True), (True, False), (True, True)}


def test_a_blocks_gain_is_what_the_ram_curve_says() -> None:
    """The lowered insertion ranks a node recomputed with its dead inputs (a block) by
    ``ordering.block_gain``, not by the RAM curve of the sequence with the block inserted: on sequences
    with recomputations of a dense graph, for every idle stretch of every value (gains of both signs),
    the two give the same overflow change."""
    problem = _at(150, 3, 0.8)
    seqs = Sequences(problem)
    budget = problem.budget_bytes
    seq, _ = insert_recomputations(problem, budget, ROUND_WORK, np.ones(150))
    assert seq is not None and len(seq) > 150
    seen: dict[int, list[int]] = {}
    for k, v in enumerate(seq.tolist()):
        seen.setdefault(v, []).append(k)
    checked, signs = 0, set()
    for target in (budget, budget - 3000, budget - 6000):  # overflow where there is none at the budget
        mem, end = seqs.curve(seq)
        over = int(np.maximum(mem - target, 0).sum())
        inst, at = seqs.uses(seq)
        pairs = np.sort(inst * len(seq) + at)
        for p, q in zip(pairs[:-1].tolist(), pairs[1:].tolist(), strict=True):
            i, a, b = p // len(seq), p % len(seq), q % len(seq)
            if q // len(seq) != i or b <= a + 1:
                continue
            v = int(seq[i])
            ins = seqs.idx[seqs.ptr[v] : seqs.ptr[v] + seqs.deg[v]].tolist()
            missing = [u for u in ins if end[seen[u][bisect.bisect_left(seen[u], b) - 1]] < b]
            nodes = [*missing, v]
            new_mem, _ = seqs.curve(np.insert(seq, [b] * len(nodes), nodes))
            want = over - int(np.maximum(new_mem - target, 0).sum())
            assert block_gain(seq, end, mem, target, seqs, a, b, nodes, seen) == want, (a, b, nodes)
            checked += 1
            signs.add((want > 0) - (want < 0))
    assert checked > 500 and signs == {-1, 0, 1}


def test_orders_two_at_a_time_give_what_one_at_a_time_give() -> None:
    """With ``beside`` the orders after the first are tried two at a time, one in a child process: the
    same first fitting order (dense_layered(80, 3) at 1.2x its floor: the fourth candidate, dfs-last,
    after a pair that both fail), the same sequences and evaluations as one at a time; at the floor,
    where none fits, the same lowest peak and order."""
    problem = dense_layered(80, seed=3)
    floor = memory_floor(problem).bytes
    costs = [n.compute_j for n in problem.nodes]
    orders = [tuple(o) for _, o in candidates(problem)]
    alone = fit_sequences(problem, int(1.2 * floor), costs, orders)
    paired = fit_sequences(problem, int(1.2 * floor), costs, orders, beside=True)
    assert isinstance(alone, Fitted) and isinstance(paired, Fitted) and alone.order == orders[3]
    assert (paired.order, paired.evaluations) == (alone.order, alone.evaluations)
    assert [label for _, label in paired.sequences] == [label for _, label in alone.sequences]
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(alone.sequences, paired.sequences, strict=True))
    unfit = fit_sequences(problem, floor, costs, orders)
    assert isinstance(unfit, Unfit) and unfit.peak is not None
    assert fit_sequences(problem, floor, costs, orders, beside=True) == unfit
