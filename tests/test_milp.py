"""The POET MILP: optimal on tiny problems (against an exhaustive search over per-stage decisions
written here, independently of milp.py), optimal on training chains without paging (against a
shortest path over all schedules), never worse than a baseline, every schedule replays in the
simulator with exactly the MILP's energy/latency, infeasibility says which bound, `poet solve`."""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from scaleutil import peak_ram

from poet_edge.cli import main
from poet_edge.errors import PoetError
from poet_edge.graphgen import random_layered_dag, training_chain
from poet_edge.graphio import write_graph
from poet_edge.memory_floor import memory_floor
from poet_edge.problem import ProblemNode, SchedulingProblem
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule, Step
from poet_edge.schedulers import BASELINES, SCHEDULERS
from poet_edge.schedulers.milp import MilpOptions, schedule_milp
from poet_edge.simulator import SimResult, simulate


def _metric(sim: SimResult, objective: str) -> float:
    return sim.latency_s if objective == "latency" else sim.energy_j


def _solve(problem: SchedulingProblem, **kw: object) -> tuple[Schedule, SimResult, dict[str, object]]:
    """MILP schedule, its simulation, its info; asserts the objective terms match the simulator."""
    options = MilpOptions(time_limit_s=60, threads=2, **kw)  # type: ignore[arg-type]
    schedule = schedule_milp(problem, options)
    sim = simulate(problem, schedule)
    info = schedule.report.to_json()
    assert sim.peak_ram_bytes <= problem.budget_bytes
    if info["fallback"] is None:
        value = _metric(sim, options.objective)
        assert value == pytest.approx(info["objective"], rel=1e-6, abs=1e-9)
        assert info["bound"] is not None and info["bound"] <= info["objective"] * (1 + 1e-6) + 1e-9
    return schedule, sim, info


# -- exhaustive search over per-stage decisions -----------------------------------------------------


@dataclass(frozen=True)
class _Stage:
    """Decisions of one stage: recomputed nodes, page-ins, page-outs, values kept for the next stage."""

    computes: tuple[int, ...]
    page_ins: tuple[int, ...]
    page_outs: tuple[int, ...]
    kept: frozenset[int]


class StageSearch:
    """Minimum cost over all schedules of the stage model, by memoised search over stage boundaries.

    State before stage t: values in RAM, values in storage. Stage t computes node t after recomputing
    any subset of earlier nodes (in node order; not resident, recomputable, no invalidator ran), pages
    in the missing inputs from storage, and then keeps, drops, or pages out and drops each value.
    RAM is checked at every page-in and compute with values freed right after their last use in the
    stage (resident values nobody uses and nobody keeps are freed at the stage start)."""

    def __init__(self, problem: SchedulingProblem, objective: str, paging: bool) -> None:
        self.p = problem
        self.n = len(problem.nodes)
        self.preds = [sorted(set(x)) for x in problem.preds()]
        self.succs = [sorted(set(x)) for x in problem.succs()]
        self.inval: dict[int, list[int]] = {}
        for a, b in problem.invalidated_by:
            self.inval.setdefault(a, []).append(b)
        nodes = problem.nodes
        lat = objective == "latency"
        self.c = [n.compute_s if lat else n.compute_j for n in nodes]
        self.cin = [n.page_in_s if lat else n.page_in_j for n in nodes]
        self.cout = [n.page_out_s if lat else n.page_out_j for n in nodes]
        self.paging = paging
        self.memo: dict[tuple[int, frozenset[int], frozenset[int]], tuple[float, tuple[_Stage, ...]]] = {}

    def may_run(self, i: int, t: int) -> bool:
        """Node i may be recomputed in stage t: it is recomputable and no invalidator of i ran yet."""
        return self.p.nodes[i].recomputable and all(b >= t for b in self.inval.get(i, []))

    def useful_later(self, i: int, t: int) -> bool:
        return any(j > t or self.p.nodes[j].recomputable for j in self.succs[i])

    def fits(self, ram: frozenset[int], st: _Stage, t: int) -> bool:
        p, b = self.p, [n.out_bytes for n in self.p.nodes]
        comps = list(st.computes) + [t]
        last = {u: k for k in comps for u in self.preds[k]}
        present = {i for i in ram if i in last or i in st.kept}
        for i in st.page_ins:
            if p.fixed_bytes + sum(b[j] for j in present) + b[i] > p.budget_bytes:
                return False
            present.add(i)
        for k in comps:
            if (
                p.fixed_bytes + sum(b[j] for j in present) + b[k] + p.nodes[k].workspace_bytes
                > p.budget_bytes
            ):
                return False
            present.add(k)
            present -= {u for u in present if last.get(u, k) == k and u not in st.kept}
        return True

    def options(self, t: int, ram: frozenset[int], stored: frozenset[int]) -> list[tuple[float, _Stage]]:
        out = []
        cands = [i for i in range(t) if i not in ram and self.may_run(i, t)]
        for r in range(len(cands) + 1):
            for re in itertools.combinations(cands, r):
                comps = set(re) | {t}
                need = {u for k in comps for u in self.preds[k]} - comps
                if not need <= ram | stored:
                    continue
                ins = tuple(sorted(need - ram))
                avail = sorted(ram | set(ins) | comps)
                out += self.keep_options(t, re, ins, avail, stored)
        return out

    def keep_options(
        self, t: int, re: tuple[int, ...], ins: tuple[int, ...], avail: list[int], stored: frozenset[int]
    ) -> list[tuple[float, _Stage]]:
        choices = []
        for i in avail:
            opts = ["drop"]
            if t < self.n - 1 and self.useful_later(i, t):
                opts.append("keep")
                node = self.p.nodes[i]
                if self.paging and node.pageable and node.out_bytes > 0 and i not in stored:
                    opts.append("out")
            choices.append(opts)
        base = sum(self.c[k] for k in (*re, t)) + sum(self.cin[i] for i in ins)
        result = []
        for pick in itertools.product(*choices):
            kept = frozenset(i for i, o in zip(avail, pick, strict=True) if o == "keep")
            outs = tuple(i for i, o in zip(avail, pick, strict=True) if o == "out")
            cost = base + sum(self.cout[i] for i in outs)
            result.append((cost, _Stage(re, ins, outs, kept)))
        return result

    def storage_ok(self, stored: frozenset[int], outs: tuple[int, ...]) -> bool:
        cap = self.p.storage_bytes
        return cap is None or sum(self.p.nodes[i].out_bytes for i in stored | set(outs)) <= cap

    def best(
        self, t: int = 0, ram: frozenset[int] = frozenset(), stored: frozenset[int] = frozenset()
    ) -> tuple[float, tuple[_Stage, ...]]:
        if t == self.n:
            return 0.0, ()
        key = (t, ram, stored)
        if key not in self.memo:
            best: tuple[float, tuple[_Stage, ...]] = (float("inf"), ())
            for cost, st in self.options(t, ram, stored):
                if cost >= best[0] or not self.storage_ok(stored, st.page_outs) or not self.fits(ram, st, t):
                    continue
                rest, path = self.best(t + 1, st.kept, stored | set(st.page_outs))
                if cost + rest < best[0]:
                    best = (cost + rest, (st, *path))
            self.memo[key] = best
        return self.memo[key]

    def schedule(self, path: tuple[_Stage, ...]) -> Schedule:
        """The steps of a path (same placement of frees as in fits), for the simulator."""
        names = [n.name for n in self.p.nodes]
        steps: list[Step] = []
        ram: frozenset[int] = frozenset()
        for t, st in enumerate(path):
            comps = list(st.computes) + [t]
            last = {u: k for k in comps for u in self.preds[k]}
            outs = set(st.page_outs)
            steps += [PageOut(names[i]) for i in sorted(ram & outs)]
            steps += [Free(names[i]) for i in sorted(ram) if i not in last and i not in st.kept]
            steps += [PageIn(names[i]) for i in st.page_ins]
            for k in comps:
                steps.append(Compute(names[k]))
                steps += [PageOut(names[k])] if k in outs else []
                gone = {u for u in (*self.preds[k], k) if last.get(u, k) == k and u not in st.kept}
                steps += [Free(names[u]) for u in sorted(gone)]
            ram = st.kept
        return Schedule(tuple(steps), "stage-search")


def _tiny(seed: int) -> SchedulingProblem:
    """A random problem of 3..7 nodes under memory pressure (budget drawn towards the floor)."""
    rng = random.Random(seed)
    flags = rng.choice([(0.0, 0.0, 0), (0.3, 0.0, 0), (0.0, 0.4, 0), (0.2, 0.2, 2)])
    if seed % 4 == 0:
        base = training_chain(rng.randint(2, 3), seed=seed)
    else:
        base = random_layered_dag(
            rng.randint(3, 7),
            seed,
            width=rng.randint(1, 3),
            skip_prob=0.6,
            fixed_bytes=rng.choice([0, 11]),
            unrecomputable_prob=flags[0],
            unpageable_prob=flags[1],
            n_invalidations=flags[2],
        )
    cheap = rng.choice([1.0, 0.1])  # cheap compute makes recomputation beat paging
    nodes = tuple(
        replace(n, compute_j=n.compute_j * cheap, compute_s=n.compute_s * cheap) for n in base.nodes
    )
    base = replace(base, nodes=nodes)
    floor, peak = memory_floor(base).bytes, peak_ram(base)
    storage = rng.choice([None, None, 60, 150])
    return replace(base, budget_bytes=floor + int(rng.random() ** 2 * (peak - floor)), storage_bytes=storage)


@pytest.mark.parametrize("seed", range(30))
def test_milp_matches_exhaustive_stage_search(seed: int) -> None:
    problem = _tiny(seed)
    paging = seed % 3 != 2
    objective = "latency" if seed % 4 == 3 else "energy"
    search = StageSearch(problem, objective, paging)
    optimum, path = search.best()
    if optimum == float("inf"):
        with pytest.raises(PoetError):
            schedule_milp(problem, MilpOptions(objective=objective, paging=paging))
        return
    assert _metric(simulate(problem, search.schedule(path)), objective) == pytest.approx(optimum, rel=1e-9)
    _, sim, info = _solve(problem, objective=objective, paging=paging)
    assert info["fallback"] is None
    assert info["status"] == "Optimal"
    assert info["objective"] == pytest.approx(optimum, rel=1e-6)
    for name in BASELINES:  # no baseline beats the optimum of the stage model
        try:
            base = simulate(problem, SCHEDULERS[name](problem))
        except PoetError:
            continue
        uses_paging = base.n_page_outs > 0
        if paging or not uses_paging:
            assert optimum <= _metric(base, objective) * (1 + 1e-9), name


# -- chains without paging: shortest path over all schedules -----------------------------------------


def _all_schedules_optimum(problem: SchedulingProblem) -> float:
    """Cheapest energy over every schedule of Compute/Free steps (Dijkstra over (RAM set, done set))."""
    n = len(problem.nodes)
    preds = [sum(1 << u for u in set(ps)) for ps in problem.preds()]
    size = [node.out_bytes for node in problem.nodes]
    full = (1 << n) - 1
    dist = {(0, 0): 0.0}
    heap = [(0.0, 0, 0)]
    while heap:
        d, ram, done = heapq.heappop(heap)
        if done == full:
            return d
        if d > dist[(ram, done)]:
            continue
        live = problem.fixed_bytes + sum(size[v] for v in range(n) if ram >> v & 1)
        for v in range(n):
            bit = 1 << v
            if ram & bit:
                nxt, cost = (ram & ~bit, done), 0.0
            elif (
                preds[v] & ram == preds[v]
                and live + size[v] + problem.nodes[v].workspace_bytes <= problem.budget_bytes
                and (problem.nodes[v].recomputable or not done & bit)
            ):
                nxt, cost = (ram | bit, done | bit), problem.nodes[v].compute_j
            else:
                continue
            if d + cost < dist.get(nxt, float("inf")):
                dist[nxt] = d + cost
                heapq.heappush(heap, (d + cost, *nxt))
    return float("inf")


def _unit_chain(layers: int, seed: int | None) -> SchedulingProblem:
    base = training_chain(layers, seed=seed or 0)
    rng = random.Random(seed)
    nodes = tuple(
        replace(node, out_bytes=1 if seed is None else rng.randint(1, 4), compute_j=1.0, compute_s=1.0)
        for node in base.nodes
    )
    return replace(base, nodes=nodes)


@pytest.mark.parametrize(("layers", "seed"), [(3, None), (4, None), (5, None), (4, 1), (5, 2)])
def test_chain_without_paging_matches_shortest_path(layers: int, seed: int | None) -> None:
    base = _unit_chain(layers, seed)
    floor, peak = memory_floor(base).bytes, peak_ram(base)
    for budget in range(floor, peak + 1):
        problem = replace(base, budget_bytes=budget)
        optimum = _all_schedules_optimum(problem)
        assert optimum < float("inf")
        _, sim, info = _solve(problem, paging=False)
        assert info["objective"] == pytest.approx(optimum, rel=1e-9), budget
        assert sim.n_page_outs == 0


# -- validity, options, bounds ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_schedules_replay_with_matching_terms(seed: int) -> None:
    rng = random.Random(seed)
    base = random_layered_dag(
        14, seed, fixed_bytes=7, unrecomputable_prob=0.2, unpageable_prob=0.2, n_invalidations=2
    )
    floor, peak = memory_floor(base).bytes, peak_ram(base)
    problem = replace(base, budget_bytes=floor + (peak - floor) * rng.choice([1, 2]) // 3)
    for kw in ({}, {"objective": "latency"}, {"remat": False}, {"paging": False}, {"solver": "cbc"}):
        try:
            _, sim, info = _solve(problem, **kw)
        except PoetError as err:
            assert "no schedule" in str(err)
            continue
        if kw.get("remat") is False:
            assert sim.n_recomputations == 0
        if kw.get("paging") is False:
            assert sim.n_page_ins == sim.n_page_outs == 0
        assert {
            "status",
            "objective",
            "bound",
            "gap",
            "seconds",
            "binaries",
            "rows",
            "solver",
            "warm_start",
            "fallback",
        } <= info.keys()


@pytest.mark.parametrize(("n", "seed", "share"), [(14, 8, 2), (14, 10, 2), (20, 10, 1)])
def test_objective_matches_the_schedule_after_a_mip_start(n: int, seed: int, share: int) -> None:
    """The best baseline is HiGHS's MIP start. HiGHS 1.16.0 returns, on these three problems, the
    start's column values with an objective that is not theirs (poet_edge.highs.Solver.run); the schedule
    must still cost what its info says, and the bound must not exceed it."""
    base = random_layered_dag(n, seed)
    floor, peak = memory_floor(base).bytes, peak_ram(base)
    problem = replace(base, budget_bytes=floor + (peak - floor) * share // 3)
    _, sim, info = _solve(problem)
    assert info["fallback"] is None
    assert str(info["warm_start"]).startswith("baseline")
    assert float(info["bound"]) <= sim.energy_j * (1 + 1e-9)  # type: ignore[arg-type]


def test_highs_and_cbc_agree() -> None:
    base = random_layered_dag(16, 5)
    problem = replace(base, budget_bytes=(memory_floor(base).bytes + peak_ram(base)) // 2)
    a = _solve(problem, solver="highs")[2]
    b = _solve(problem, solver="cbc")[2]
    assert a["objective"] == pytest.approx(b["objective"], rel=1e-6)


def test_runtime_budget_is_respected() -> None:
    base = random_layered_dag(12, 3)
    floor, peak = memory_floor(base).bytes, peak_ram(base)
    problem = replace(base, budget_bytes=floor + (peak - floor) // 4)
    _, cheap, _ = _solve(problem, objective="energy")
    _, fast, _ = _solve(problem, objective="latency")
    assert fast.latency_s <= cheap.latency_s * (1 + 1e-9) and cheap.energy_j <= fast.energy_j * (1 + 1e-9)
    limit = (fast.latency_s + cheap.latency_s) / 2
    _, sim, _ = _solve(replace(problem, max_latency_s=limit))
    assert sim.latency_s <= limit * (1 + 1e-9) and sim.energy_j >= cheap.energy_j * (1 - 1e-9)
    plain = sum(n.compute_s for n in problem.nodes)
    with pytest.raises(PoetError, match="runtime budget"):
        schedule_milp(replace(problem, max_latency_s=plain * 0.9))
    if fast.latency_s > plain * 1.001:
        with pytest.raises(PoetError, match="runtime budget"):
            schedule_milp(replace(problem, max_latency_s=(plain + fast.latency_s) / 2))


def test_invalidation_forbids_late_recomputation() -> None:
    # a -> x -> y -> loss -> u (update, invalidates a); ga(a, loss) runs after u. At budget 21, a
    # can stay resident neither while y is computed nor while u runs (workspace 10), so it must come
    # back for ga: recomputed after u (allowed only without the invalidation) or paged in.
    names = ("a", "x", "y", "loss", "u", "ga")
    sizes = (10, 10, 10, 1, 1, 1)
    nodes = tuple(
        ProblemNode(n, b, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, workspace_bytes=10 * (n == "u"))
        for n, b in zip(names, sizes, strict=True)
    )
    edges = ((0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (3, 5))
    free = SchedulingProblem(nodes, edges, budget_bytes=21)
    schedule, _, _ = _solve(free, paging=False)
    assert [s.node for s in schedule.steps if isinstance(s, Compute)].count("a") == 2
    bound = replace(free, invalidated_by=((0, 4),))
    with pytest.raises(PoetError, match="no schedule"):
        schedule_milp(bound, MilpOptions(paging=False))
    schedule, sim, _ = _solve(bound)
    assert [s.node for s in schedule.steps if isinstance(s, Compute)].count("a") == 1
    assert sim.n_page_ins == 1


def test_time_limit_returns_a_valid_schedule_with_its_gap() -> None:
    base = random_layered_dag(40, 9)
    problem = replace(base, budget_bytes=(memory_floor(base).bytes + peak_ram(base)) // 2)
    schedule = schedule_milp(problem, MilpOptions(time_limit_s=2, threads=1))
    info = schedule.report.to_json()
    sim = simulate(problem, schedule)
    assert sim.peak_ram_bytes <= problem.budget_bytes
    assert info["bound"] <= sim.energy_j * (1 + 1e-9)
    if info["status"] != "Optimal":
        assert info["fallback"] is not None or info["gap"] > 0


def test_progress_callback_reports_incumbent_bound_and_gap() -> None:
    base = random_layered_dag(30, 1)
    problem = replace(base, budget_bytes=peak_ram(base) * 7 // 10)
    calls: list[tuple[float, float | None, float | None, float | None]] = []
    options = MilpOptions(time_limit_s=20, threads=1, on_progress=lambda *a: calls.append(a))
    assert options == MilpOptions(time_limit_s=20, threads=1)  # the callback is not part of eq/hash
    info = schedule_milp(problem, options).report.to_json()
    assert any(inc is not None and math.isfinite(inc) for _, inc, _, _ in calls)
    for _, inc, bound, gap in calls:
        assert gap is None or 0.0 <= gap <= 1.0
        if inc is not None and bound is not None:
            assert bound <= inc
    if info["fallback"] is None:  # the last incumbent reported is the final objective
        last = [inc for _, inc, _, _ in calls if inc is not None][-1]
        assert last == pytest.approx(info["objective"], rel=1e-6)


def test_infeasible_bounds_are_named() -> None:
    base = random_layered_dag(8, 2)
    with pytest.raises(PoetError, match="floor"):
        schedule_milp(replace(base, budget_bytes=memory_floor(base).bytes - 1))
    # a chain that cannot recompute must page, and storage holds nothing
    chain = training_chain(4, seed=1)
    stiff = replace(chain, nodes=tuple(replace(n, recomputable=False) for n in chain.nodes))
    tight = replace(stiff, budget_bytes=memory_floor(stiff).bytes, storage_bytes=0)
    if SCHEDULERS["page-all"](replace(tight, storage_bytes=None)):
        with pytest.raises(PoetError, match="storage capacity"):
            schedule_milp(tight)


# -- poet solve ----------------------------------------------------------------------------------------


def test_solve_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = random_layered_dag(10, 4)
    path = tmp_path / "g.json"
    write_graph(base, path)
    budget = (memory_floor(base).bytes + peak_ram(base)) // 2
    args = ["solve", str(path), "--ram", str(budget), "--json", "--time-limit", "30", "--threads", "2"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("status", "valid", "compute_cost", "peak_ram_bytes", "bound", "gap", "seconds", "schedule"):
        assert key in out
    assert out["valid"] is True and out["peak_ram_bytes"] <= budget
    names = {n.name for n in base.nodes}
    assert all(
        kind in ("compute", "free", "page_in", "page_out") and node in names for kind, node in out["schedule"]
    )
    assert main(["solve", str(path), "--ram", str(budget), "--scheduler", "greedy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    assert main(["solve", str(path), "--ram", "1", "--json"]) == 2
    assert "floor" in capsys.readouterr().err


def test_gap_is_on_the_whole_cost() -> None:
    # the MILP's objective leaves out the plain pass; --gap is on the whole cost, as info's gap
    base = random_layered_dag(40, 9)
    problem = replace(base, budget_bytes=(memory_floor(base).bytes + peak_ram(base)) // 2)
    exact = simulate(problem, schedule_milp(problem, MilpOptions(time_limit_s=60, threads=1))).energy_j
    for gap in (0.3, 0.02):
        schedule = schedule_milp(problem, MilpOptions(time_limit_s=60, threads=1, gap_rel=gap))
        info = schedule.report.to_json()
        cost = simulate(problem, schedule).energy_j
        assert info["status"] == "Optimal"  # HiGHS's word for "within the gap asked for"
        assert float(info["gap"]) <= gap + 1e-9  # type: ignore[arg-type]
        assert cost <= exact / (1 - gap) * (1 + 1e-9)


def test_gap_conversion_holds_on_the_whole_cost() -> None:
    # whichever of its two gaps HiGHS reaches (relative on its objective, or absolute), the whole cost
    # (its objective + the plain pass, m.offset) is within the gap asked for
    import pulp

    from poet_edge.schedulers.milp import GAP_REL, MilpModel, solver_gaps

    m = MilpModel(pulp.LpProblem("gaps"))
    m.offset = 3.0
    assert solver_gaps(m, MilpOptions()) == {"gapRel": GAP_REL, "gapAbs": 1e-9}
    g = solver_gaps(m, MilpOptions(gap_rel=0.02))
    for ub in (0.0, 0.5, 10.0, 1e3):
        for lb in (ub - g["gapAbs"], ub * (1 - g["gapRel"])):
            assert (ub - lb) / (ub + m.offset) <= 0.02 + 1e-12
    assert g["gapAbs"] == pytest.approx(0.02 * m.offset)  # not looser than it may be
