"""The topological order as a decision (issue 55): candidate orders are valid and deterministic, the RAM
curve they are compared by is the simulator's, reordering lowers the peak where it can, a shuffled file
gets a good order back, and the baselines' work stays bounded on a 2,000-node, 12,000-edge graph."""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial

import numpy as np
import pytest

from poet_edge.errors import CutError, PoetError
from poet_edge.graphgen import dense_layered, random_layered_dag, shuffled, training_chain
from poet_edge.memory_floor import memory_floor
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedule import Schedule
from poet_edge.schedulers import configured, engine
from poet_edge.schedulers.fit import ROUND_WORK as INSERT_WORK
from poet_edge.schedulers.fit import Unfit, fit_sequences
from poet_edge.schedulers.greedy import SAMPLE, schedule_greedy
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.schedulers.none import schedule_none
from poet_edge.schedulers.ordering import (
    ALL_ORDERS,
    ORDER_WORK,
    THIS_ORDER,
    Curves,
    candidates,
    choose_order,
    forced,
    insert_recomputations,
    levels,
    precedence,
    reorder,
    sequence_schedule,
)
from poet_edge.schedulers.recompute_all import schedule_recompute_all
from poet_edge.simulator import simulate


def _valid(problem: SchedulingProblem, order: list[int]) -> bool:
    pos = {v: i for i, v in enumerate(order)}
    prec = precedence(problem)
    return sorted(order) == list(range(len(problem.nodes))) and all(
        pos[u] < pos[v] for v in range(len(prec)) for u in prec[v]
    )


def _peak(problem: SchedulingProblem) -> int:
    return int(Curves(problem).curve(range(len(problem.nodes))).max())


PROBLEMS = [
    dense_layered(120, seed=1),
    random_layered_dag(80, 4, width=5, n_invalidations=3, workspace_prob=0.5),
    training_chain(12, seed=2),
]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_candidate_orders_are_valid_and_their_curve_is_the_simulators(problem: SchedulingProblem) -> None:
    roomy = replace(problem, budget_bytes=10**12)
    for name, order in (*candidates(roomy), *levels(precedence(roomy))):
        assert _valid(roomy, order), name
        again = reorder(roomy, order)
        # oracle: the simulator replaying the baseline "none" on the reordered problem, checked against
        # the original problem (a schedule names nodes, so it is one of the original problem's too)
        sim = simulate(roomy, schedule_none(again))
        assert Curves(roomy).curve(order).max() == sim.peak_ram_bytes == _peak(again), name


def test_choice_is_deterministic_and_counted_in_evaluations() -> None:
    problem = dense_layered(300, seed=5)
    budget = int(0.8 * _peak(problem))
    first, second = choose_order(problem, budget), choose_order(problem, budget)
    assert first.order == second.order and first.compared == second.compared
    assert first.evaluations == second.evaluations <= ORDER_WORK + len(first.compared)
    assert _valid(problem, list(first.order))
    assert first.problem == reorder(problem, first.order)


def test_reordering_strictly_lowers_the_peak() -> None:
    # a, b big; x = f(a), y = f(b) small; z = f(x, y). Given order a b x y z holds a and b together
    # (peak 201); a x b y z holds one big value at a time (peak 102)
    nodes = tuple(
        ProblemNode(name, size, compute_s=1.0, compute_j=1.0, pageable=False)
        for name, size in (("a", 100), ("b", 100), ("x", 1), ("y", 1), ("z", 1))
    )
    problem = SchedulingProblem(nodes, ((0, 2), (1, 3), (2, 4), (3, 4)), budget_bytes=150)
    assert _peak(problem) == 201
    with pytest.raises(PoetError):
        schedule_none(problem)  # no schedule without recomputation in the given order
    choice = choose_order(problem, 150)
    assert choice.peak == _peak(choice.problem) == 102
    schedule = configured("scale", MilpOptions(time_limit_s=10.0, threads=1))(problem)
    info = schedule.report.to_json()
    assert simulate(problem, schedule).energy_j == 5.0  # every node once: the least in any order
    assert (info["status"], info["bound_covers"], info["bound"]) == ("optimal", ALL_ORDERS, 5.0)


def test_shuffled_input_gets_a_good_order_back() -> None:
    given = dense_layered(250, seed=250)
    reference = _peak(given)
    mixed = shuffled(given, 251)
    assert mixed.nodes != given.nodes and _peak(mixed) != reference
    choice = choose_order(mixed, int(0.9 * reference))
    assert choice.origin != "given"
    assert choice.peak <= 0.92 * reference  # below the given order's peak, whatever the file's order
    assert choice.peak == choose_order(given, int(0.9 * reference)).peak


def test_recomputations_inserted_into_an_order_fit_the_budget() -> None:
    problem = dense_layered(250, seed=250)
    budget = int(0.8 * _peak(problem))
    ordered = choose_order(problem, budget).problem
    costs = [n.compute_j for n in ordered.nodes]
    seq, evaluations = insert_recomputations(ordered, budget, INSERT_WORK, costs)
    assert seq is not None and evaluations <= INSERT_WORK
    again, _ = insert_recomputations(ordered, budget, INSERT_WORK, costs)
    assert again is not None and np.array_equal(seq, again)
    sim = simulate(replace(problem, budget_bytes=budget), sequence_schedule(ordered, seq, "x"))
    assert sim.peak_ram_bytes <= budget and sim.n_recomputations == len(seq) - len(problem.nodes) > 0
    assert sim.energy_j == pytest.approx(sum(costs[v] for v in seq.tolist()))  # one cost per compute


def test_orders_without_a_fitting_sequence_say_the_lowest_peak_reached() -> None:
    """At its memory floor, dense_layered(60, 2) gets no sequence in the given order or the chosen one:
    the result names the lowest peak the lowered construction reached, between the budget and the
    order's own peak, and the order it reached it in (for the error a user reads: how far off it was)."""
    problem = dense_layered(60, seed=2)
    budget = memory_floor(problem).bytes
    costs = [n.compute_j for n in problem.nodes]
    given, chosen = tuple(range(60)), tuple(choose_order(problem, budget).order)
    unfit = fit_sequences(problem, budget, costs, [given, chosen])
    assert isinstance(unfit, Unfit) and unfit.peak is not None and unfit.evaluations > 0
    peaks = {o: _peak(reorder(problem, o)) for o in (given, chosen)}
    assert unfit.order in peaks and budget < unfit.peak < peaks[unfit.order]
    assert fit_sequences(problem, budget, costs, []) == Unfit(None, (), 0)


def test_bound_labels_say_which_orders_they_cover() -> None:
    chain = training_chain(20, seed=3)
    assert forced(chain) and not forced(dense_layered(60, seed=1))
    problem = random_layered_dag(40, 3, width=4)
    tight = replace(problem, budget_bytes=int(0.75 * _peak(problem)))
    info = configured("scale", MilpOptions(time_limit_s=20.0, threads=1))(tight).report.to_json()
    assert info["bound_covers"] in (ALL_ORDERS, THIS_ORDER)
    if info["bound_covers"] == THIS_ORDER:
        assert info["status"] != "optimal"  # "optimal for this order" at most
    else:
        assert info["bound_from"] == "plain pass" or forced(tight)
    assert info["order"] and info["orders_compared"]


def test_reorder_refuses_an_invalid_order() -> None:
    problem = training_chain(3)
    with pytest.raises(PoetError, match="must run first"):
        reorder(problem, [1, 0, 2, 3, 4, 5, 6])
    with pytest.raises(PoetError, match="each of the"):
        reorder(problem, [0, 1])


def test_dense_generator_parameters() -> None:
    problem = dense_layered(2000, seed=3)
    assert problem == dense_layered(2000, seed=3)
    assert 11_000 <= len(problem.edges) <= 12_500  # about 6 in-edges per node
    indeg = np.bincount([v for _, v in problem.edges], minlength=2000)
    assert indeg[:20].min() == 0 and 4 <= indeg[indeg > 0].min() and indeg.max() <= 8
    assert all(not n.pageable and 10 <= n.out_bytes <= 1000 for n in problem.nodes)


def test_baselines_work_is_bounded_on_2000_nodes_12000_edges() -> None:
    problem = dense_layered(2000, seed=3)
    budget = int(0.95 * _peak(problem))
    schedule = schedule_greedy(replace(problem, budget_bytes=budget))
    work = schedule.report.work
    evictions = sum(1 for s in schedule.steps if type(s).__name__ == "Free")
    # per eviction: SAMPLE candidates, each looking at most RECOMPUTE_VISITS ancestors (+ their inputs)
    assert isinstance(work, int) and work <= evictions * SAMPLE * (engine.RECOMPUTE_VISITS + 1 + 8)
    assert simulate(replace(problem, budget_bytes=budget), schedule).peak_ram_bytes <= budget
    choice = choose_order(problem, int(0.8 * _peak(problem)))
    assert choice.evaluations <= ORDER_WORK + len(choice.compared)


def test_the_given_order_is_scheduled_too_unless_no_time_is_left() -> None:
    """When another order is chosen, the inner scheduler also runs on the file's order and the cheaper
    schedule wins; when the time left is shorter than the first run took, the run is marked cut."""
    from poet_edge.schedulers.ordered import schedule_ordered

    base = shuffled(dense_layered(120, seed=3), 4)
    peak = int(simulate(base, schedule_none(base)).peak_ram_bytes)
    problem = replace(base, budget_bytes=int(0.6 * peak))
    choice = choose_order(problem, problem.budget_bytes)
    assert choice.origin != "given" and choice.peak > problem.budget_bytes
    calls: list[list[str]] = []
    aboves: list[float | None] = []

    def inner(p: SchedulingProblem, _limit: float, above: float | None) -> Schedule:
        calls.append([n.name for n in p.nodes])
        aboves.append(above)
        return schedule_greedy(p)

    both = schedule_ordered(problem, inner, 1e9)
    assert calls == [[n.name for n in choice.problem.nodes], [n.name for n in problem.nodes]]
    costs = [simulate(problem, schedule_greedy(p)).energy_j for p in (choice.problem, problem)]
    # each run may stop above the cheapest schedule before it: the sequences', then the chosen order's
    assert aboves[0] is not None and aboves[1] == pytest.approx(min(aboves[0], costs[0]), rel=1e-12)
    assert simulate(problem, both).energy_j <= min(costs) * (1 + 1e-12)
    assert not both.report.cut_by_time_limit
    calls.clear()
    cut = schedule_ordered(problem, inner, 0.0).report.to_json()
    assert len(calls) == 1 and cut["cut_by_time_limit"] is True
    assert cut["cut_phase"] == "order search"  # the first phase the safety stop cut (the given order not run)


def test_sequences_proven_within_the_gap_end_the_solve() -> None:
    """--gap: where the sequences' schedule is already within the gap of the plain pass (a bound for
    every order), scale does not run; with a narrower gap it runs on both orders, as before."""
    from poet_edge.schedulers.ordered import schedule_ordered

    base = shuffled(dense_layered(120, seed=3), 4)
    peak = int(simulate(base, schedule_none(base)).peak_ram_bytes)
    problem = replace(base, budget_bytes=int(0.6 * peak))
    calls: list[float | None] = []

    def inner(p: SchedulingProblem, _limit: float, above: float | None) -> Schedule:
        calls.append(above)
        return schedule_recompute_all(p)

    full = schedule_ordered(problem, inner, 1e9)
    assert len(calls) == 2
    gap = float(full.report.to_json()["gap"])  # the sequences' schedule against the plain pass
    assert 0.0 < gap < 1.0 and str(full.report.to_json()["schedule_from"]).startswith("recomput")
    calls.clear()
    narrow = schedule_ordered(problem, inner, 1e9, gap_rel=0.99 * gap)
    assert len(calls) == 2 and narrow.steps == full.steps
    calls.clear()
    within = schedule_ordered(problem, inner, 1e9, gap_rel=gap * (1 + 1e-9))
    assert calls == [] and within.steps == full.steps
    assert within.report.to_json()["gap"] == pytest.approx(gap, rel=1e-12)
    assert within.report.to_json()["bound_covers"] == ALL_ORDERS


def test_a_cut_run_that_is_not_kept_marks_the_result_cut() -> None:
    """A run the safety stop cut could have won had it run to its end: where the sequences' schedule
    is cheaper than the chosen order's run and that run was cut, the result says it was cut, in "the
    chosen order's schedule" (a dense graph of 500 nodes at 80% once returned the sequences' schedule
    after its time limit cut that run, unmarked); where the given order's run was cut and not kept,
    in "the given order's schedule"; the same runs, uncut, leave it unmarked."""
    from poet_edge.schedulers.ordered import schedule_ordered

    base = shuffled(dense_layered(120, seed=3), 4)
    peak = int(simulate(base, schedule_none(base)).peak_ram_bytes)
    problem = replace(base, budget_bytes=int(0.6 * peak))
    given = [n.name for n in problem.nodes]

    def inner(p: SchedulingProblem, _limit: float, _above: float | None, cut: str) -> Schedule:
        s = schedule_recompute_all(p)  # costlier than the sequences' schedule (checked below)
        run = "given" if [n.name for n in p.nodes] == given else "chosen"
        if cut == f"{run} without a schedule":
            raise CutError("found no schedule before its time limit cut it")
        return replace(s, report=s.report.cut_at("local search")) if cut == run else s

    uncut = schedule_ordered(problem, partial(inner, cut=""), 1e9)
    assert not uncut.report.cut_by_time_limit
    assert str(uncut.report.to_json()["schedule_from"]).startswith(("recomputed", "recomputations"))
    for run in ("chosen", "given", "chosen without a schedule", "given without a schedule"):
        phase = f"the {run.split()[0]} order's schedule"
        marked = schedule_ordered(problem, partial(inner, cut=run), 1e9)
        assert marked.steps == uncut.steps
        assert marked.report.to_json()["cut_by_time_limit"] is True
        assert marked.report.to_json()["cut_phase"] == phase


def test_the_given_orders_run_beside_the_chosen_ones_returns_the_same_schedule() -> None:
    """With ``beside``, the given order's run goes to a child process while the chosen order's runs (here
    from the start): the same schedule and report fields as one run after the other; when the chosen
    order's run ends first, no child is started."""
    from poet_edge.schedulers import scale_beside
    from poet_edge.schedulers.ordered import Started, schedule_ordered
    from poet_edge.schedulers.scale import ScaleOptions, schedule_scale

    base = shuffled(dense_layered(60, seed=3), 4)
    peak = int(simulate(base, schedule_none(base)).peak_ram_bytes)
    problem = replace(base, budget_bytes=int(0.6 * peak))
    scale = ScaleOptions(effort="quick")
    started: list[float] = []

    def inner(p: SchedulingProblem, seconds: float, above: float | None) -> Schedule:
        return schedule_scale(p, replace(scale, time_limit_s=seconds, stop_above=above))

    def beside(p: SchedulingProblem, seconds: float, above: float | None) -> Started:
        started.append(seconds)
        assert [n.name for n in p.nodes] == [n.name for n in problem.nodes]  # the given order
        return scale_beside(scale)(p, seconds, above)

    after = schedule_ordered(problem, inner, 600.0)
    both = schedule_ordered(problem, inner, 600.0, beside=beside, later_s=0.0)
    assert len(started) == 1 and 0 < started[0] <= 600.0
    assert both.steps == after.steps
    fields = ("status", "objective", "bound", "order", "bound_covers", "cut_by_time_limit")
    assert {k: both.report.to_json().get(k) for k in fields} == {
        k: after.report.to_json().get(k) for k in fields
    }
    started.clear()
    schedule_ordered(problem, inner, 600.0, beside=beside, later_s=600.0)  # the chosen run ends first
    assert not started
    stopped: list[bool] = []

    def stopping(p: SchedulingProblem, seconds: float, above: float | None) -> Started:
        run = beside(p, seconds, above)
        return Started(run.wait, lambda: (stopped.append(True), run.stop())[1])

    def failing(p: SchedulingProblem, seconds: float, above: float | None) -> Schedule:
        for _ in range(1000):  # until the child has started
            if started:
                raise RuntimeError("a bug in the chosen order's run")
            time.sleep(0.01)
        raise AssertionError("the run beside never started")

    with pytest.raises(RuntimeError, match="a bug"):
        schedule_ordered(problem, failing, 600.0, beside=stopping, later_s=0.0)
    assert stopped == [True]  # not left running


def test_progress_reports_the_cheapest_incumbent_across_both_orders_runs() -> None:
    """scale runs on the chosen order, then on the given one, each with its own board: what --progress
    shows is the cheapest incumbent so far, never the second run's worse one (a compile showed
    "incumbent 0.0194" and then "incumbent 0.0538" for the same step), with bounds no higher."""
    base = shuffled(dense_layered(60, seed=3), 4)
    peak = int(simulate(base, schedule_none(base)).peak_ram_bytes)
    problem = replace(base, budget_bytes=int(0.6 * peak))
    told: list[tuple[float | None, float | None]] = []
    options = MilpOptions(effort="quick", on_progress=lambda _t, inc, bnd, _g: told.append((inc, bnd)))
    schedule = configured("scale", options)(problem)
    incumbents = [inc for inc, _ in told if inc is not None]
    assert len(incumbents) >= 2 and incumbents == sorted(incumbents, reverse=True)
    assert all(b is None or inc is None or b <= inc for inc, b in told)
    assert incumbents[-1] == pytest.approx(simulate(problem, schedule).energy_j, rel=1e-9)
