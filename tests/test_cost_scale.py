"""Issue 55, POET's problem fast: HiGHS sees scale's objective scaled by a power of two
(:func:`poet_edge.schedulers.lp_model.cost_scale`), exact both ways, so the optimum and bound of a model
whose costs are tiny shares of the plain pass are the brute-force ones; and on the mid-size path the
interval model's result is taken before the near windows. Costs and phase order only, no timing."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from scaleutil import scale_budgets

from poet_edge.graphgen import random_layered_dag
from poet_edge.schedulers import scale
from poet_edge.schedulers.board import Run
from poet_edge.schedulers.lp_model import LpModel, cost_scale, solve_lp
from poet_edge.schedulers.scale import Policy, ScaleOptions, schedule_scale

OPTS = ScaleOptions(time_limit_s=60.0, threads=1, kicks=3)


def test_cost_scale_puts_the_largest_cost_in_half_to_one_by_a_power_of_two() -> None:
    for top in (6e-2, 0.5, 1.0, 3.0, 2e-7, 1e5):
        s = cost_scale([top / 7, -top, 0.0])
        assert 0.5 <= top * s < 1.0
        assert math.frexp(s)[0] == 0.5  # a power of two: scaling is exact
    assert cost_scale([]) == 1.0
    assert cost_scale([0.0, 0.0]) == 1.0


def _brute_force(cost: list[float], rows: list[tuple[float, float, list[int], list[float]]]) -> float:
    best = math.inf
    for x in itertools.product((0, 1), repeat=len(cost)):
        if all(lo <= sum(v * x[j] for j, v in zip(idx, val, strict=True)) <= up for lo, up, idx, val in rows):
            best = min(best, sum(c * xj for c, xj in zip(cost, x, strict=True)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_tiny_costs_solve_to_the_brute_force_optimum(seed: int) -> None:
    """Costs of 1e-9..2e-7 (POET's resnet18 problem's shares of the plain pass go down to 2e-7):
    covering rows over 12 binaries; solve_lp's objective is the exhaustive optimum, its bound that
    optimum (within HiGHS's gap), the point's own cost the objective. Unscaled, HiGHS stops at its
    absolute gap (1e-6, larger than the whole objective) on every seed."""
    rng = random.Random(seed)
    n = 12
    cost = [rng.uniform(1e-9, 2e-7) for _ in range(n)]
    rows: list[tuple[float, float, list[int], list[float]]] = []
    for _ in range(10):
        idx = sorted(rng.sample(range(n), rng.randint(2, 5)))
        rows.append((1.0, math.inf, idx, [1.0] * len(idx)))
    idx = sorted(rng.sample(range(n), 6))
    rows.append((-math.inf, 4.0, idx, [1.0] * len(idx)))  # and a packing row
    want = _brute_force(cost, rows)
    assert math.isfinite(want)
    lp = LpModel(cost=list(cost), rows=rows)
    got = solve_lp(lp, 60.0, OPTS)
    assert got.optimal and got.objective is not None and got.values is not None
    assert got.objective == pytest.approx(want, rel=1e-9)
    assert float(np.dot(cost, np.round(got.values))) == pytest.approx(want, rel=1e-9)
    assert want * (1 - 1e-4) <= got.bound <= want * (1 + 1e-9)


def test_mid_size_path_takes_the_interval_model_before_the_near_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mid-size run (forced onto a 30-node graph, every phase run) takes the interval model's bound
    and point before its first windows, the near windows (they ran while its child refined: POET's
    resnet18 problem then spent 6 s of CPU in windows the interval point made moot)."""
    calls: list[str] = []
    refined, lns = scale.interval_refined, scale.lns

    def spy_refined(run: Run, bound: float, **kwargs: Any) -> float:
        calls.append("interval model")
        return refined(run, bound, **kwargs)

    def spy_lns(run: Run, bound: float, *args: Any, **kwargs: Any) -> int:
        calls.append("windows")
        return lns(run, bound, *args, **kwargs)

    monkeypatch.setattr(scale, "interval_refined", spy_refined)
    monkeypatch.setattr(scale, "lns", spy_lns)
    opts = replace(OPTS, effort="quick", policy=Policy(stage_pairs=0, every_phase=True))
    (problem,) = scale_budgets(random_layered_dag(30, 105, n_invalidations=2), (0.6,))
    schedule_scale(problem, opts)
    assert calls[:2] == ["interval model", "windows"], calls
