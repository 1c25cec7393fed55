"""The cutoff proof in a child process (proof_process.prove) against the same proof in this process
(segment_lp._solve) on random covering MIPs, with cutoffs above and below their optimum; a child
stopped at its limit returns no point and no bound it did not report; a child that fails raises. The
interval model's refinement in a child (proof_process.start_refine) against the same in this process;
a job stopped early leaves no process and no files behind."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from poet_edge.graphgen import training_chain
from poet_edge.schedulers import interval_bound, proof_process
from poet_edge.schedulers.engine import analyse
from poet_edge.schedulers.highs_run import TIME_LIMIT
from poet_edge.schedulers.scale import ScaleOptions
from poet_edge.schedulers.segment_lp import _Lp, _solve

OPTIONS = ScaleOptions(threads=1)


def _covering(seed: int) -> _Lp:
    """min c.x over 24 binary columns and 4 continuous ones in [0, 2], 10 covering rows."""
    rng = np.random.default_rng(seed)
    lp = _Lp()
    for _ in range(24):
        lp.col(float(rng.uniform(0.5, 3.0)))
    for _ in range(4):
        lp.col(float(rng.uniform(2.0, 4.0)), continuous=True, bounds=(0.0, 2.0))
    for _ in range(10):
        cols = sorted(int(j) for j in rng.choice(len(lp.cost), 6, replace=False))
        lp.rows.append(
            (float(rng.uniform(1.0, 3.0)), math.inf, cols, [float(v) for v in rng.uniform(0.5, 2.0, 6)])
        )
    return lp


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("above", [True, False])
def test_the_child_proves_what_this_process_proves(seed: int, above: bool) -> None:
    lp = _covering(seed)
    optimum = _solve(lp, 10.0, OPTIONS).objective
    assert optimum is not None
    cutoff = optimum * (1.1 if above else 0.9)
    here = _solve(lp, 10.0, OPTIONS, cutoff=cutoff)
    there = proof_process.prove(lp, 10.0, OPTIONS, cutoff)
    assert (there.status, there.feasible, there.optimal) == (here.status, here.feasible, here.optimal)
    assert there.bound == pytest.approx(here.bound, abs=1e-9)
    assert there.bound == pytest.approx(optimum if above else cutoff, abs=1e-6)
    assert (there.objective is None) == (here.objective is None)


def test_a_child_stopped_at_its_limit_returns_no_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """No time at all (limit and grace 0): the child is stopped before it reports anything."""
    monkeypatch.setattr(proof_process, "GRACE", 0.0)
    stopped = proof_process.prove(_covering(0), 0.0, OPTIONS, 100.0)
    assert (stopped.status, stopped.optimal, stopped.objective, stopped.values) == (
        TIME_LIMIT,
        False,
        None,
        None,
    )
    assert stopped.bound == 0.0


def test_a_failing_child_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "false")
    with pytest.raises(RuntimeError, match="the proof process failed"):
        proof_process.prove(_covering(0), 10.0, OPTIONS, 100.0)


def _chain() -> tuple[object, object, float]:
    problem = replace(training_chain(8, seed=0), budget_bytes=220)  # three rounds of refinement
    return problem, analyse(problem, True), sum(n.compute_j for n in problem.nodes)


def test_the_childs_refinement_is_this_process_refinement() -> None:
    """Refined to the end (no stage overfilled): the same bound, bottlenecks, rounds and point; the
    bounds the child reported rise to that bound, as on_bound reports them here."""
    problem, an, plain = _chain()
    told: list[float] = []
    here = interval_bound.refine(problem, an, False, plain, OPTIONS, 60.0, on_bound=told.append)  # type: ignore[arg-type]
    job = proof_process.start_refine(problem, an, False, plain, OPTIONS, 60.0)  # type: ignore[arg-type]
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
    assert job.bound[0] == told[-1]


def test_a_refinement_stopped_at_its_limit_gives_its_last_reported_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(proof_process, "GRACE", 0.0)
    problem, an, plain = _chain()
    job = proof_process.start_refine(problem, an, False, plain, OPTIONS, 0.0)  # type: ignore[arg-type]
    assert proof_process.refined(job) == (None, 0.0)
    assert not Path(job.tmp.name).exists()


def test_a_stopped_job_leaves_no_process_and_no_files() -> None:
    problem, an, plain = _chain()
    job = proof_process.start_refine(problem, an, False, plain, OPTIONS, 60.0)  # type: ignore[arg-type]
    job.stop()
    assert job.child.returncode is not None
    assert not Path(job.tmp.name).exists()
    job.stop()  # again: nothing left to do
