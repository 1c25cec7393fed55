"""highs_run's reduced-cost fixing against a cutoff: its bound is HiGHS's LP optimum, it never cuts off a
point below the cutoff, it narrows as much given the LP's reduced costs as when it solves the LP, and
it does narrow columns (random covering MIPs, fixed seeds)."""

from __future__ import annotations

import highspy
import numpy as np
import pytest

from poet_edge.schedulers.highs_run import fix_by_reduced_cost, run_highs, safe_bound


def _mip(seed: int) -> highspy.Highs:
    """min c.x, A x >= b: 30 columns (binary, integer in [0, 3], continuous in [0, 2]), 12 rows."""
    rng = np.random.default_rng(seed)
    n, m = 30, 12
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    kinds = rng.integers(0, 3, n)
    up = np.where(kinds == 0, 1.0, np.where(kinds == 1, 3.0, 2.0))
    h.addVars(n, np.zeros(n), up)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), rng.uniform(0.5, 3.0, n))
    ints = np.flatnonzero(kinds < 2).astype(np.int32)
    h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
    for _ in range(m):
        cols = np.sort(rng.choice(n, 6, replace=False)).astype(np.int32)
        h.addRow(rng.uniform(1.0, 4.0), highspy.kHighsInf, len(cols), cols, rng.uniform(0.5, 2.0, 6))
    return h


def _optimum(h: highspy.Highs) -> float:
    run_highs(h)
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return float(h.getInfo().objective_function_value)


@pytest.mark.parametrize("seed", range(8))
def test_fixing_keeps_every_point_below_the_cutoff(seed: int) -> None:
    optimum = _optimum(_mip(seed))
    lp = _mip(seed)
    fixed = fix_by_reduced_cost(lp, np.inf)  # nothing is narrowed with no cutoff; the LP is solved
    assert fixed is not None and fixed[1] == 0
    assert fixed[0] == pytest.approx(_relaxed(seed)[0], abs=1e-9)
    assert fixed[0] <= optimum + 1e-9
    assert lp.getInfo().primal_solution_status == 0  # its solution cleared: HiGHS would take it as a start
    for share in (1.0, 1.01, 1.1):  # the optimum itself, just below the cutoff, stays
        h = _mip(seed)
        got = fix_by_reduced_cost(h, share * optimum)
        assert got is not None
        assert _optimum(h) == pytest.approx(optimum, abs=1e-9)
    h = _mip(seed)  # below the optimum: nothing left, however much was narrowed
    got = fix_by_reduced_cost(h, 0.999 * optimum)
    assert got is not None
    h.setOptionValue("objective_bound", 0.999 * optimum)
    run_highs(h)  # HiGHS may still report a point above its objective_bound as optimal
    status = h.getModelStatus()
    assert status == highspy.HighsModelStatus.kInfeasible or (
        status == highspy.HighsModelStatus.kOptimal and h.getInfo().objective_function_value >= optimum - 1e-9
    )


def _relaxed(seed: int) -> tuple[float, np.ndarray]:
    """The LP relaxation's optimum and safe_bound (with its reduced costs) of _mip(seed)."""
    h = _mip(seed)
    ints = np.flatnonzero(np.asarray(h.getLp().integrality_, dtype=int)).astype(np.int32)
    h.changeColsIntegrality(len(ints), ints, np.zeros(len(ints), dtype=np.uint8))
    run_highs(h)
    got = safe_bound(h)
    assert got is not None and got[0] == pytest.approx(h.getInfo().objective_function_value, abs=1e-9)
    return got


@pytest.mark.parametrize("seed", range(4))
def test_fixing_given_the_lps_reduced_costs_narrows_as_solving_it_does(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poet_edge.schedulers import highs_run

    optimum = _optimum(_mip(seed))
    relaxed = _relaxed(seed)
    solves: list[int] = []
    monkeypatch.setattr(highs_run, "run_highs", lambda h: (solves.append(1), run_highs(h)))
    solved, given = _mip(seed), _mip(seed)
    first = fix_by_reduced_cost(solved, 1.01 * optimum)
    assert first is not None and len(solves) == 1
    assert fix_by_reduced_cost(given, 1.01 * optimum, relaxed) == first and len(solves) == 1  # no LP
    for a, b in (
        (solved.getLp().col_lower_, given.getLp().col_lower_),
        (solved.getLp().col_upper_, given.getLp().col_upper_),
    ):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert _optimum(given) == pytest.approx(optimum, abs=1e-9)


def test_fixing_narrows_columns() -> None:
    narrowed = []
    for seed in range(8):
        h = _mip(seed)
        optimum = _optimum(_mip(seed))
        got = fix_by_reduced_cost(h, optimum)
        assert got is not None
        narrowed.append(got[1])
    assert sum(narrowed) > 0 and max(narrowed) >= 3, narrowed


def test_safe_bound_holds_for_any_duals() -> None:
    """The Lagrangian bound is valid for duals other than HiGHS's (perturbed, sign-clamped) and equals
    the LP optimum for HiGHS's own."""
    h = _mip(3)
    optimum = _optimum(_mip(3))
    ints = np.flatnonzero(np.asarray(h.getLp().integrality_, dtype=int)).astype(np.int32)
    h.changeColsIntegrality(len(ints), ints, np.zeros(len(ints), dtype=np.uint8))
    run_highs(h)
    z, d = safe_bound(h)  # type: ignore[misc]
    assert z == pytest.approx(h.getInfo().objective_function_value, abs=1e-9)
    assert np.allclose(d, h.getSolution().col_dual, atol=1e-9)
    rng = np.random.default_rng(0)
    solution = h.getSolution()
    for _ in range(20):
        solution.row_dual = list(np.asarray(solution.row_dual) + rng.normal(0, 0.5, len(solution.row_dual)))
        h.setSolution(solution)
        got = safe_bound(h)
        if got is not None:
            assert got[0] <= z + 1e-9 <= optimum + 2e-9
