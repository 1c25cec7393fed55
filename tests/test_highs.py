"""The one HiGHS layer (poet_edge.highs), checked against oracles: brute force on small MIPs, and
highspy driven directly on the same models (tests may use highspy as an oracle; the package may not,
tools/check_highs_imports.py). Reduced-cost fixing against a cutoff: its bound is HiGHS's LP optimum,
it never cuts off a point below the cutoff, it narrows as much given the LP's reduced costs as when it
solves the LP, and it does narrow columns (random covering MIPs, fixed seeds)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import highspy
import numpy as np
import pytest

from poet_edge import highs

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "tools" / "check_highs_imports.py"
ONE = highs.Options(threads=1)


def _parts(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[highs.Row]]:
    """min c.x, A x >= b: 30 columns (binary, integer in [0, 3], continuous in [0, 2]), 12 rows."""
    rng = np.random.default_rng(seed)
    n, m = 30, 12
    kinds = rng.integers(0, 3, n)
    up = np.where(kinds == 0, 1.0, np.where(kinds == 1, 3.0, 2.0))
    cost = rng.uniform(0.5, 3.0, n)
    rows: list[highs.Row] = []
    for _ in range(m):
        cols = np.sort(rng.choice(n, 6, replace=False))
        rows.append((rng.uniform(1.0, 4.0), np.inf, [int(j) for j in cols], list(rng.uniform(0.5, 2.0, 6))))
    return cost, up, kinds < 2, rows


def _mip(seed: int, relaxed: bool = False) -> highs.Solver:
    cost, up, integer, rows = _parts(seed)
    solver = highs.Solver(ONE)
    solver.load(highs.Model.of(cost, rows, np.zeros(len(cost)), up, integer & (not relaxed)))
    return solver


def _oracle(seed: int, relaxed: bool = False) -> highspy.Highs:
    """The same model in highspy itself, solved."""
    cost, up, integer, rows = _parts(seed)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    n = len(cost)
    h.addVars(n, np.zeros(n), up)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
    if not relaxed:
        ints = np.flatnonzero(integer).astype(np.int32)
        h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), dtype=np.uint8))
    for low, upper, idx, val in rows:
        h.addRow(low, upper, len(idx), np.array(idx, dtype=np.int32), np.array(val))
    highspy.Highs.resetGlobalScheduler(True)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h


def _optimum(seed: int) -> float:
    return float(_oracle(seed).getInfo().objective_function_value)


@pytest.mark.parametrize("seed", range(4))
def test_result_is_highs_own_answer(seed: int) -> None:
    got = _mip(seed).run()
    oracle = _oracle(seed)
    assert (got.status, got.code, got.optimal, got.infeasible, got.limit, got.trusted) == (
        "Optimal",
        "kOptimal",
        True,
        False,
        None,
        True,
    )
    assert got.objective == pytest.approx(oracle.getInfo().objective_function_value, abs=1e-9)
    assert got.values is not None and float(np.dot(_parts(seed)[0], got.values)) == pytest.approx(
        got.objective
    )
    assert got.bound <= got.objective + 1e-9 and got.gap <= 1e-4
    lp = _mip(seed, relaxed=True).run()  # an LP: its bound is its objective
    assert lp.optimal and lp.bound == lp.objective
    assert lp.objective == pytest.approx(_oracle(seed, True).getInfo().objective_function_value, abs=1e-9)
    assert lp.objective <= got.objective + 1e-9


def test_small_mips_match_brute_force() -> None:
    """Knapsack-like covering MIPs of 10 binaries, every point enumerated."""
    rng = np.random.default_rng(7)
    for _ in range(6):
        n = 10
        cost = rng.uniform(0.1, 2.0, n)
        rows: list[highs.Row] = []
        for _ in range(4):
            idx = sorted(int(j) for j in rng.choice(n, 4, replace=False))
            rows.append((1.0, np.inf, idx, list(rng.uniform(0.3, 1.2, 4))))
        best = min(
            (
                float(np.dot(cost, x))
                for x in itertools.product((0, 1), repeat=n)
                if not highs.broken_rows(rows, x)
            ),
            default=None,
        )
        got = highs.solve(highs.Model.of(cost, rows), ONE)
        if best is None:
            assert got.infeasible and got.values is None and got.objective is None
        else:
            assert got.optimal and got.objective == pytest.approx(best, abs=1e-9)
            assert got.values is not None and not highs.broken_rows(rows, got.values)


def test_infeasible_start_and_refused_rows() -> None:
    rows: list[highs.Row] = [(1.0, np.inf, [0, 1], [1.0, 1.0]), (-np.inf, 0.5, [0, 1], [1.0, 1.0])]
    got = highs.solve(highs.Model.of([1.0, 1.0], rows), ONE)
    assert got.infeasible and not got.optimal and got.objective is None and got.values is None
    cost, up, integer, parts = _parts(0)
    start = np.asarray(_oracle(0).getSolution().col_value)
    solver = highs.Solver(ONE)
    solver.load(highs.Model.of(cost, parts, np.zeros(len(cost)), up, integer))
    started = solver.run(start)
    assert started.start == "kOk" and started.optimal and started.objective == pytest.approx(_optimum(0))
    with pytest.raises(highs.HighsError, match="refused the model's rows"):  # a row naming column 0 twice
        highs.Solver(ONE).load(highs.Model.of([1.0, 1.0], [(1.0, np.inf, [0, 0], [1.0, 1.0])]))
    with pytest.raises(highs.HighsError, match="refused option"):
        highs.Solver(highs.Options(extra=(("no_such_option", 1),)))


def test_limits_cut_and_say_so() -> None:
    """A node limit of 1, a limit of 3 interrupt checks and an iteration limit of 1 on a
    multi-dimensional knapsack HiGHS needs hundreds of nodes for: the result says which limit cut it,
    deterministically (the same counts twice), with a valid bound; the check limit cuts the root, which
    the node limit lets run."""
    rng = np.random.default_rng(3)
    n, m = 40, 5
    w = rng.integers(5, 30, (m, n))
    value = rng.integers(5, 30, n) + w.mean(0)
    rows: list[highs.Row] = [
        (-np.inf, float(w[i].sum() // 2), list(range(n)), list(map(float, w[i]))) for i in range(m)
    ]
    model = highs.Model.of(-value, rows)
    full = highs.solve(model, ONE)
    assert full.optimal and full.nodes > 10 and full.objective is not None, full
    runs = [highs.solve(model, highs.Options(threads=1, node_limit=1)) for _ in range(2)]
    assert all(r.limit == "nodes" and r.cut and not r.optimal for r in runs), runs
    counts = [(r.nodes, r.iterations, r.objective, r.bound) for r in runs]
    assert counts[0] == counts[1]
    assert runs[0].bound <= full.objective + 1e-9
    assert runs[0].objective is not None and runs[0].objective >= full.objective - 1e-9
    # the node limit leaves the root to run; HiGHS's interrupt checks bound it (check_limit)
    assert runs[0].checks > 3, runs[0]
    checked = [highs.solve(model, highs.Options(threads=1, check_limit=3)) for _ in range(2)]
    assert all(r.limit == "checks" and r.checks == 3 and r.nodes == 0 for r in checked), checked
    assert [(r.iterations, r.objective, r.bound) for r in checked[:1]] == [
        (r.iterations, r.objective, r.bound) for r in checked[1:]
    ]
    assert checked[0].bound <= full.objective + 1e-9 and checked[0].iterations < runs[0].iterations
    relaxed = highs.Model.of(-value, rows, integer=np.zeros(n, bool))
    lp = highs.solve(relaxed, highs.Options(threads=1, iteration_limit=1))
    assert lp.limit == "iterations" and not lp.optimal


@pytest.mark.parametrize("seed", range(8))
def test_fixing_keeps_every_point_below_the_cutoff(seed: int) -> None:
    optimum = _optimum(seed)
    lp = _mip(seed)
    fixed = lp.fix_by_reduced_cost(np.inf)  # nothing is narrowed with no cutoff; the LP is solved
    assert fixed is not None and fixed[1] == 0 and lp.runs == 1
    assert fixed[0] == pytest.approx(_oracle(seed, True).getInfo().objective_function_value, abs=1e-9)
    assert fixed[0] <= optimum + 1e-9
    assert lp.run().objective == pytest.approx(optimum, abs=1e-9)  # the LP's point is no start: cleared
    for share in (1.0, 1.01, 1.1):  # the optimum itself, just below the cutoff, stays
        h = _mip(seed)
        assert h.fix_by_reduced_cost(share * optimum) is not None
        assert h.run().objective == pytest.approx(optimum, abs=1e-9)
    h = _mip(seed)  # below the optimum: nothing left, however much was narrowed
    assert h.fix_by_reduced_cost(0.999 * optimum) is not None
    h.set([("objective_bound", 0.999 * optimum)])
    got = h.run()  # HiGHS may still report a point above its objective_bound as optimal
    assert got.infeasible or (got.optimal and got.objective is not None and got.objective >= optimum - 1e-9)


def _relaxed(seed: int) -> tuple[float, np.ndarray]:
    """The LP relaxation's optimum and safe bound (with its reduced costs) of _mip(seed)."""
    solver = _mip(seed, relaxed=True)
    solved = solver.run()
    got = solver.safe_bound()
    assert (
        got is not None
        and solved.objective is not None
        and got[0] == pytest.approx(solved.objective, abs=1e-9)
    )
    return got


@pytest.mark.parametrize("seed", range(4))
def test_fixing_given_the_lps_reduced_costs_narrows_as_solving_it_does(seed: int) -> None:
    optimum = _optimum(seed)
    relaxed = _relaxed(seed)
    solved, given = _mip(seed), _mip(seed)
    first = solved.fix_by_reduced_cost(1.01 * optimum)
    assert first is not None and solved.runs == 1
    assert given.fix_by_reduced_cost(1.01 * optimum, relaxed) == first and given.runs == 0  # no LP
    a, b = solved.lp(), given.lp()
    assert np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
    assert given.run().objective == pytest.approx(optimum, abs=1e-9)


def test_fixing_narrows_columns() -> None:
    narrowed = []
    for seed in range(8):
        got = _mip(seed).fix_by_reduced_cost(_optimum(seed))
        assert got is not None
        narrowed.append(got[1])
    assert sum(narrowed) > 0 and max(narrowed) >= 3, narrowed


def test_safe_bound_holds_for_any_duals() -> None:
    """The Lagrangian bound is valid for duals other than HiGHS's (perturbed, sign-clamped) and equals
    the LP optimum, with HiGHS's reduced costs, for HiGHS's own."""
    optimum = _optimum(3)
    solver = _mip(3, relaxed=True)
    solver.run()
    z, d = solver.safe_bound()  # type: ignore[misc]
    oracle = _oracle(3, relaxed=True)
    assert z == pytest.approx(oracle.getInfo().objective_function_value, abs=1e-9)
    assert np.allclose(d, oracle.getSolution().col_dual, atol=1e-9)
    lp = solver.lp()
    y = np.asarray(oracle.getSolution().row_dual)
    assert highs.lagrangian_bound(lp, y)[0] == pytest.approx(z, abs=1e-9)  # type: ignore[index]
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = y + rng.normal(0, 0.5, len(y))
        got = highs.lagrangian_bound(lp, y)
        assert got is not None and got[0] <= z + 1e-9 <= optimum + 2e-9


def test_no_banner_on_stdout() -> None:
    """HiGHS prints a banner on its first instance; the layer keeps it off standard output."""
    code = (
        "from poet_edge import highs; print(highs.solve(highs.Model.of([1.0], []), highs.Options()).status)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "Optimal\n", run.stdout + run.stderr


def _check(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_only_the_layer_imports_highspy() -> None:
    run = _check("poet_edge", "bench", "tools", "examples")
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def test_the_checker_finds_every_import_of_highspy(tmp_path: Path) -> None:
    pkg = tmp_path / "poet_edge"
    (pkg / "schedulers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "highs.py").write_text("import highspy\n")  # the layer: allowed
    (pkg / "schedulers" / "__init__.py").write_text("")
    (pkg / "schedulers" / "a.py").write_text(
        "import os\n\n\ndef f():\n    import highspy as h\n    from highspy import Highs\n"
    )
    (pkg / "schedulers" / "b.py").write_text("from highspy._core import HighsStatus\nimport highspyx\n")
    (pkg / "schedulers" / "c.py").write_text("import importlib\n\nh = importlib.import_module('highspy')\n")
    run = _check("--root", tmp_path, pkg, cwd=tmp_path)
    assert run.returncode == 1
    found = sorted(
        line.split(":")[0].rsplit("/", 1)[1] + ":" + line.split(":")[1] for line in run.stdout.splitlines()
    )
    assert found == ["a.py:5", "a.py:6", "b.py:1", "c.py:3"], run.stdout


PRESOLVE_LOOP = ROOT / "tests" / "data" / "highs_presolve_loop.lp.gz"
_LOOP_SCRIPT = """
import gzip, sys, tempfile
import highspy, numpy as np
from poet_edge import highs
with tempfile.NamedTemporaryFile(suffix=".lp") as f:
    f.write(gzip.decompress(open(sys.argv[1], "rb").read())); f.flush()
    h = highspy.Highs(); h.setOptionValue("output_flag", False); h.readModel(f.name)
lp = h.getLp(); a = lp.a_matrix_
n, m = lp.num_col_, lp.num_row_
col = np.repeat(np.arange(n), np.diff(np.asarray(a.start_)))
row = np.asarray(a.index_); order = np.lexsort((col, row))
start = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=m))))
rows = (np.asarray(lp.row_lower_), np.asarray(lp.row_upper_), start, col[order], np.asarray(a.value_)[order])
lower, upper = np.asarray(lp.col_lower_), np.asarray(lp.col_upper_)
scaled, limit = sys.argv[2] == "scaled", float(sys.argv[3])
model = highs.Model.of(np.asarray(lp.col_cost_), rows, lower, upper, scaled=scaled)
solver = highs.Solver(highs.Options(threads=1, node_limit=100, time_limit=limit))
solver.load(model)
r = solver.run()
print(r.status.replace(" ", "_"), r.objective, highs.stuck())
if not scaled:  # another solve while the looping one is left running: not started, cut at once
    again = highs.solve(highs.Model.of([1.0], []), highs.Options(threads=1, time_limit=limit))
    print(again.limit, again.objective, highs.stuck())
"""


def _loop(scaled: bool, limit: float) -> list[list[str]]:
    """Runs :data:`_LOOP_SCRIPT` in a child with a hard timeout (so that a regression fails instead of
    hanging the suite); its output lines, split."""
    how = "scaled" if scaled else "unscaled"
    done = subprocess.run(
        [sys.executable, "-c", _LOOP_SCRIPT, str(PRESOLVE_LOOP), how, str(limit)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def test_mip_rows_are_scaled_out_of_the_presolve_loop() -> None:
    """A segment-cover MIP (mobilenetv2_035 in 32 KB tiles, bias trained, 96 KB, input in storage) on
    which HiGHS 1.16.0's presolve loops in strengthenInequalities past any time limit: with its rows
    scaled by powers of two (highs.row_scaled) it is solved, within HiGHS's node limit. In a child with a
    hard timeout, so that a regression fails instead of hanging the suite."""
    status, objective, _ = _loop(True, 120.0)[-1]
    assert float(objective) == pytest.approx(23.76094842260797, rel=1e-9)


def test_watchdog_leaves_a_looping_presolve_behind() -> None:
    """The same MIP unscaled, on which HiGHS's presolve loops without looking at its clock (a 1 s time
    limit): the watchdog leaves the run behind after the limit and its grace, reads it as cut by the
    time limit with no point, starts no other run while it loops (the next solve is cut at once), and
    the process still exits."""
    first, again = _loop(False, 1.0)[-2:]  # after the banner of the script's own highspy instance
    assert first == [highs.TIME_LIMIT.replace(" ", "_"), "None", "True"]
    assert again == ["time", "None", "True"]


def test_row_scaling_is_by_powers_of_two() -> None:
    low, up = np.array([-np.inf, 1.0, 0.0]), np.array([3.0, np.inf, 0.0])
    start = np.array([0, 2, 3, 3])
    val = np.array([96.0, -0.5, 7e-5])
    sl, su, sv = highs.row_scaled(low, up, start, val)
    factors = np.array([1 / 128, 1 / 128, 2.0**14])
    assert np.array_equal(sv, val * factors) and np.array_equal(
        sl[:2], low[:2] * np.array([1 / 128, 2.0**14])
    )
    assert np.array_equal(su, up * np.array([1 / 128, 2.0**14, 1.0]))  # the empty row keeps its scale
    assert all(np.log2(f).is_integer() for f in factors)
