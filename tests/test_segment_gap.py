"""The gap rows and split ends of the strict bound model (poet_edge.schedulers.segment_gap), and the
cutoff of lp_model.solve_lp. Soundness on random problems: test_scheduler_scale.py (_strict_bound)."""

from __future__ import annotations

import numpy as np
import pytest
from scaleutil import scale_budgets
from test_scheduler_scale import OPTS, _residual_chain, _stacked_chain

from poet_edge.graphgen import training_chain
from poet_edge.problem import SchedulingProblem
from poet_edge.schedulers.engine import DROP, Analysis, analyse
from poet_edge.schedulers.lp_model import solve_lp
from poet_edge.schedulers.milp import MilpOptions, schedule_milp
from poet_edge.schedulers.segment_cover import Cover, build_cover
from poet_edge.schedulers.segment_gap import option_end, option_ranges, split_ends
from poet_edge.schedulers.segment_strict import strict_model
from poet_edge.simulator import simulate

# found by a search of 4 generators x 40 seeds x 8 budgets against POET's MILP: the instances where the
# gap rows raise the bound of the fully split model (none where a bound exceeded the optimum)
GAINS = [
    ("chain", 3, 0.6),
    ("chain", 3, 0.0),
    ("residual", 22, 0.6),
    ("residual", 22, 0.5),
    ("stacked", 1, 0.8),
    ("stacked", 25, 0.8),
]


def _base(kind: str, seed: int) -> SchedulingProblem:
    if kind == "chain":
        return training_chain(4 + seed % 3, seed=seed)
    if kind == "residual":
        return _residual_chain(2, seed)
    return _stacked_chain(2 + seed % 2, 1 + seed % 3, seed)


def _setup(problem: SchedulingProblem) -> tuple[Analysis, Cover, np.ndarray]:
    """The problem's analysis, segment cover and budget array (what strict_model takes)."""
    an = analyse(problem, True)
    return an, build_cover(problem, an), np.full(len(problem.nodes), problem.budget_bytes, dtype=np.int64)


def _bound(problem: SchedulingProblem, gaps: bool) -> float:
    """The plain pass plus the fully split strict model's optimum."""
    an, cover, budget = _setup(problem)
    every = {s: set(range(g.start + 1, g.end)) for s, g in enumerate(cover.segs)}
    lp = strict_model(problem, an, cover, False, 1.0, budget, every, gaps)
    assert lp is not None
    solved = solve_lp(lp, 60.0, OPTS)
    assert solved.optimal
    return sum(n.compute_j for n in problem.nodes) + solved.bound


@pytest.mark.parametrize(("kind", "seed", "fraction"), GAINS)
def test_gap_rows_raise_the_bound_and_stay_below_the_optimum(kind: str, seed: int, fraction: float) -> None:
    (problem,) = scale_budgets(_base(kind, seed), (fraction,))
    exact = schedule_milp(problem, MilpOptions(time_limit_s=None, threads=1))
    assert exact.report.status == "Optimal"
    optimum = simulate(problem, exact).energy_j
    with_rows, without = _bound(problem, True), _bound(problem, False)
    assert with_rows <= optimum * (1 + 1e-7)
    assert with_rows > without * (1 + 1e-6)


def test_split_ends_halve_the_ranges_of_the_drops_a_solution_uses() -> None:
    (problem,) = scale_budgets(_base("chain", 3), (0.6,))
    an, cover, budget = _setup(problem)
    lp = strict_model(problem, an, cover, False, 1.0, budget)
    assert lp is not None
    values = np.zeros(len(lp.cost))
    lo_of = option_ranges(cover, lp)
    wide = [j for j, o in enumerate(lp.opts) if o.mode == DROP and lo_of[j] < option_end(cover, o) - 1]
    assert wide
    values[wide[0]] = 0.5
    j = wide[0]
    assert split_ends(cover, lp, values) == {
        lp.opts[j].seg: {(lo_of[j] + option_end(cover, lp.opts[j])) // 2}
    }
    values[wide[0]] = 0.05  # below SPLIT_SHARE
    assert split_ends(cover, lp, values) == {}
    split = strict_model(problem, an, cover, False, 1.0, budget, {lp.opts[j].seg: {lo_of[j] + 1}})
    assert split is not None
    assert any(o.seg == lp.opts[j].seg and o.end == lo_of[j] + 1 for o in split.opts)


def test_cutoff_bounds_by_the_cutoff_only_what_it_proves() -> None:
    (problem,) = scale_budgets(_base("residual", 22), (0.5,))
    an, cover, budget = _setup(problem)
    lp = strict_model(problem, an, cover, False, 1.0, budget)
    assert lp is not None
    optimum = solve_lp(lp, 60.0, OPTS)
    assert optimum.optimal and optimum.bound > 0
    below = solve_lp(lp, 60.0, OPTS, cutoff=0.5 * optimum.bound)  # no point below: proven
    assert below.feasible and below.bound == pytest.approx(0.5 * optimum.bound)
    above = solve_lp(lp, 60.0, OPTS, cutoff=2.0 * optimum.bound)  # the optimum is below: found
    assert above.optimal and above.bound == pytest.approx(optimum.bound, rel=1e-6)
    assert above.objective == pytest.approx(optimum.bound, rel=1e-6)
