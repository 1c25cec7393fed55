"""The interval model's refinement in a child process (proof_process.start_refine) against the same in
this process; the split model's child (proof_process.start_split) against split_model and its cutoff
proofs, on the strict model, then the split model, in this process (lp_model.solve_lp); a child
stopped at its limit gives only the bounds it reported; a child that fails raises; a job stopped early
leaves no process and no files behind."""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from poet_edge.graphgen import training_chain
from poet_edge.highs import TIME_LIMIT
from poet_edge.schedulers import interval_bound, proof_process
from poet_edge.schedulers.engine import analyse
from poet_edge.schedulers.lp_model import solve_lp
from poet_edge.schedulers.scale import ScaleOptions
from poet_edge.schedulers.segment_strict import split_model

OPTIONS = ScaleOptions(threads=1)


def test_a_failing_child_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "false")
    problem, an, plain = _chain()
    job = proof_process.start_refine(_refine(problem, an, plain), OPTIONS, 10.0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the proof process failed"):
        proof_process.refined(job)


def _chain() -> tuple[object, object, float]:
    problem = replace(training_chain(8, seed=0), budget_bytes=220)  # three rounds of refinement
    return problem, analyse(problem, True), sum(n.compute_j for n in problem.nodes)


def _refine(problem: object, an: object, plain: float) -> object:
    """interval_bound.refine with the chain's problem arguments bound, as the child is given it."""
    return partial(interval_bound.refine, problem, an, False, plain)


def test_the_childs_refinement_is_this_process_refinement() -> None:
    """Refined to the end (no stage overfilled): the same bound, bottlenecks, rounds and point; the
    bounds the child reported rise to that bound, as on_bound reports them here."""
    problem, an, plain = _chain()
    told: list[float] = []
    here = interval_bound.refine(problem, an, False, plain, OPTIONS, 60.0, on_bound=told.append)  # type: ignore[arg-type]
    job = proof_process.start_refine(_refine(problem, an, plain), OPTIONS, 60.0)  # type: ignore[arg-type]
    there, bound = proof_process.refined(job)
    assert there is not None and not here.stopped and here.rounds >= 3
    assert (there.bound, there.stages, there.rounds, there.stopped) == (
        here.bound,
        here.stages,
        here.rounds,
        here.stopped,
    )
    assert there.point is not None and here.point is not None
    assert np.array_equal(there.point, here.point)
    assert bound == here.bound == told[-1] and told == sorted(set(told))
    assert job.bounds == told and job.last == told[-1]


def test_a_refinement_stopped_at_its_limit_gives_its_last_reported_bound() -> None:
    problem, an, plain = _chain()
    job = proof_process.start_refine(_refine(problem, an, plain), OPTIONS, 0.0)  # type: ignore[arg-type]
    job.grace = 0.0  # stopped at its deadline
    assert proof_process.refined(job) == (None, 0.0)
    assert not Path(job.tmp.name).exists()


def test_a_stopped_job_leaves_no_process_and_no_files() -> None:
    problem, an, plain = _chain()
    job = proof_process.start_refine(_refine(problem, an, plain), OPTIONS, 60.0)  # type: ignore[arg-type]
    job.stop()
    assert job.child.returncode is not None
    assert not Path(job.tmp.name).exists()
    job.stop()  # again: nothing left to do


def _split_args() -> tuple[object, object, object, float, np.ndarray]:
    from poet_edge.schedulers.segment_cover import build_cover

    problem, an, plain = _chain()
    cover = build_cover(problem, an, False)  # type: ignore[arg-type]
    return problem, an, cover, plain, np.full(len(problem.nodes), problem.budget_bytes, dtype=np.int64)  # type: ignore[attr-defined]


def test_the_split_child_reports_its_relaxation_and_proves_the_last_cutoff_it_was_sent() -> None:
    """The split model's child reports first the bound of the strict model's LP relaxation, as
    split_model gives it here; sent two cutoffs (above the strict model's optimum, then below), it
    proves the last on the strict model, as solve_lp does here."""
    problem, an, cover, plain, budget = _split_args()
    models = split_model(problem, an, cover, False, plain, budget, 10.0, OPTIONS)  # type: ignore[arg-type]
    assert models.strict is not None
    optimum = solve_lp(models.strict, 10.0, OPTIONS).objective
    assert optimum is not None and optimum > 0
    cutoffs = (1.1 * optimum, 0.9 * optimum)
    job = proof_process.start_split(
        partial(split_model, problem, an, cover, False, plain, budget), OPTIONS, 60.0
    )  # type: ignore[arg-type]
    for cutoff in cutoffs:
        proof_process.send(job, cutoff)
    assert proof_process.split_relaxed(job, wait=True) == pytest.approx(models.bound, abs=1e-9)
    there = proof_process.split_proved(job)
    here = solve_lp(models.strict, 10.0, OPTIONS, cutoff=cutoffs[-1])
    assert there.status == here.status and there.bound == pytest.approx(here.bound, abs=1e-9)
    assert there.bound == pytest.approx(cutoffs[-1], abs=1e-6) and there.objective is None
    assert not Path(job.tmp.name).exists()


def test_where_the_strict_model_has_a_point_below_the_cutoff_the_child_proves_on_the_split_model() -> None:
    problem, an, cover, plain, budget = _split_args()
    models = split_model(problem, an, cover, False, plain, budget, 10.0, OPTIONS)  # type: ignore[arg-type]
    split = models.split()
    assert models.strict is not None and split is not None and split is not models.strict
    optimum = solve_lp(models.strict, 10.0, OPTIONS).objective
    assert optimum is not None
    cutoff = 1.1 * optimum
    job = proof_process.start_split(
        partial(split_model, problem, an, cover, False, plain, budget), OPTIONS, 60.0
    )  # type: ignore[arg-type]
    proof_process.send(job, cutoff)
    there = proof_process.split_proved(job)
    here = solve_lp(split, 10.0, OPTIONS, cutoff=cutoff)
    assert here.objective is not None and here.objective < cutoff
    assert (there.status, there.objective) == (here.status, pytest.approx(here.objective, abs=1e-9))


def test_a_proof_given_the_relaxations_reduced_costs_is_the_proof_that_solves_the_lp_again() -> None:
    """solve_lp(with_reduced=True) on the LP relaxation returns its safe bound (at most the LP optimum) and
    reduced costs; a cutoff proof given them ends as one that solves the LP itself."""
    problem, an, cover, plain, budget = _split_args()
    models = split_model(problem, an, cover, False, plain, budget, 10.0, OPTIONS)  # type: ignore[arg-type]
    assert models.strict is not None and models.reduced is not None
    z, d = models.reduced
    assert z == pytest.approx(models.bound, abs=1e-7) and z <= models.bound + 1e-9
    assert len(d) == len(models.strict.cost)
    optimum = solve_lp(models.strict, 10.0, OPTIONS).objective
    assert optimum is not None
    for cutoff in (0.9 * optimum, 1.1 * optimum):
        again = solve_lp(models.strict, 10.0, OPTIONS, cutoff=cutoff)
        given = solve_lp(models.strict, 10.0, OPTIONS, cutoff=cutoff, reduced=models.reduced)
        assert (given.status, given.objective, given.bound) == (again.status, again.objective, again.bound)


def test_a_split_child_sent_no_cutoff_gives_its_relaxation_when_stopped() -> None:
    """Without a cutoff the child waits after its relaxation; stopped at its limit, its result is that
    bound alone (no point), and nothing is left behind."""
    problem, an, cover, plain, budget = _split_args()
    job = proof_process.start_split(
        partial(split_model, problem, an, cover, False, plain, budget), OPTIONS, 15.0
    )  # type: ignore[arg-type]  # seconds enough for the relaxation on a loaded machine
    job.grace = 0.0  # stopped at its deadline
    relaxed = proof_process.split_relaxed(job, wait=True)
    assert relaxed is not None and relaxed > 0
    solved = proof_process.split_proved(job)
    assert (solved.status, solved.values, solved.bound) == (TIME_LIMIT, None, relaxed)
    assert job.child.returncode is not None and not Path(job.tmp.name).exists()
