"""The cutoff proof in a child process (proof_process.prove) against the same proof in this process
(segment_lp._solve) on random covering MIPs, with cutoffs above and below their optimum; a child
stopped at its limit returns no point and no bound it did not report; a child that fails raises."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from poet_edge.schedulers import proof_process
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
