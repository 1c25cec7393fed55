"""Annealing over compute sequences (issue 55): the RAM it keeps move by move equals the RAM curve of
the sequence, its result fits and replays in the simulator, costs no more than its start, and is the
same on every run."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from poet_edge.graphgen import dense_layered
from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.anneal import Axis, anneal_sequence, remove, shift, split
from poet_edge.schedulers.fit import Fitted, fit_sequences
from poet_edge.schedulers.ordering import Curves, Sequences, choose_order, sequence_schedule
from poet_edge.simulator import simulate


def _at(n: int, seed: int, frac: float) -> SchedulingProblem:
    given = dense_layered(n, seed=seed)
    return replace(given, budget_bytes=int(frac * Curves(given).curve(range(n)).max()))


def _fitted(problem: SchedulingProblem) -> Fitted:
    choice = choose_order(problem, problem.budget_bytes)
    costs = [n.compute_j for n in problem.nodes]
    fitted = fit_sequences(problem, problem.budget_bytes, costs, [choice.order])
    assert isinstance(fitted, Fitted)
    return fitted


def test_the_axis_ram_is_the_sequence_curve_after_every_move() -> None:
    problem = _at(120, 7, 0.8)
    fitted = _fitted(problem)
    seq = fitted.sequences[0][0]
    axis = Axis(fitted.problem, seq.tolist(), problem.budget_bytes)
    seqs = Sequences(fitted.problem)
    rng = random.Random(3)
    allowed, frozen = [True] * len(problem.nodes), [False] * len(problem.nodes)
    applied = undone = 0
    for i in range(3000):
        pick = i % 3
        again = [v for v in range(axis.n) if len(axis.inst[v]) > 1]
        changes = (
            split(axis, rng, allowed)
            if pick == 0
            else remove(axis, rng, again)
            if pick == 1
            else shift(axis, rng, frozen)
        )
        if changes is None:
            continue
        before = axis.overflow()
        result = axis.apply(changes)
        if result is None:
            continue
        delta, undo = result
        assert axis.overflow() - before == delta
        if rng.random() < 0.5:
            axis.undo(undo)
            assert axis.overflow() == before
            undone += 1
        applied += 1
        if i % 100 == 0:
            mem, _ = seqs.curve(axis.sequence())
            assert np.array_equal(axis.mem[axis.used > 0], mem)
    mem, _ = seqs.curve(axis.sequence())
    assert np.array_equal(axis.mem[axis.used > 0], mem)
    assert applied > 500 and undone > 200  # the moves ran


def test_annealing_fits_costs_no_more_and_is_deterministic() -> None:
    problem = _at(250, 250, 0.8)
    fitted = _fitted(problem)
    costs = np.array([n.compute_j for n in fitted.problem.nodes])
    start = min((s for s, _ in fitted.sequences), key=lambda s: float(costs[s].sum()))
    out = anneal_sequence(fitted.problem, problem.budget_bytes, start, costs, 40 * len(problem.nodes))
    assert out.seq is not None and out.moves == 40 * len(problem.nodes)
    assert out.cost == pytest.approx(float(costs[out.seq].sum()), rel=1e-12)
    assert out.cost < float(costs[start].sum())
    sim = simulate(problem, sequence_schedule(fitted.problem, out.seq, "x"))  # the oracle
    assert sim.peak_ram_bytes <= problem.budget_bytes
    assert sorted(set(out.seq.tolist())) == list(range(len(problem.nodes)))
    again = anneal_sequence(fitted.problem, problem.budget_bytes, start, costs, 40 * len(problem.nodes))
    assert again.seq is not None and np.array_equal(out.seq, again.seq)


def test_an_overflowing_start_is_pushed_to_fit() -> None:
    problem = _at(120, 7, 0.85)
    n = len(problem.nodes)
    costs = [node.compute_j for node in problem.nodes]
    start = np.arange(n)  # the given order, no recomputation: over the budget
    assert int(Sequences(problem).curve(start)[0].max()) > problem.budget_bytes
    out = anneal_sequence(problem, problem.budget_bytes, start, costs, 300 * n)
    assert out.seq is not None
    assert int(Sequences(problem).curve(out.seq)[0].max()) <= problem.budget_bytes


def test_pinned_nodes_stay_put() -> None:
    """A node that may not be recomputed runs once; an ``invalidated_by`` pair keeps its order."""
    problem = _at(80, 3, 0.8)
    nodes = list(problem.nodes)
    nodes[5] = replace(nodes[5], recomputable=False)
    readers = [v for v, p in enumerate(problem.preds()) if 10 in p]
    pair = (10, max(readers))  # 10 may not run once its last reader has run
    pinned = replace(problem, nodes=tuple(nodes), invalidated_by=(pair,))
    costs = [node.compute_j for node in pinned.nodes]
    out = anneal_sequence(pinned, pinned.budget_bytes, np.arange(80), costs, 200 * 80)
    assert out.seq is not None
    seq = out.seq
    assert int(np.count_nonzero(seq == 5)) == 1 and int(np.count_nonzero(seq == 10)) == 1
    assert int(np.flatnonzero(seq == 10)[0]) < int(np.flatnonzero(seq == pair[1])[0])
    Sequences(pinned).curve(seq)  # raises where an invalidated node runs after its invalidator
