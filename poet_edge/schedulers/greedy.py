"""Baseline "greedy": DTR-style eviction (Kirisame et al., ICLR 2021) with recomputation and paging.

Nodes run in the problem's order. When the next step would exceed the budget, of the ``SAMPLE`` least
recently used resident values (all, when there are fewer) the one minimising  cost / (bytes x staleness)
is evicted (DTR's sampling, which keeps each eviction's work bounded), where staleness counts the steps
since the value was last used and cost is the cheaper (in energy, ``compute_j`` / ``page_*_j``) of

* dropping it: recomputing it later, including its currently missing ancestors, or
* paging it: page-out (unless storage holds a copy) plus page-in.

Dropped values are recomputed on demand, paged values paged in before their next use. Only values
that stay recomputable until their last possible use may be dropped; only pageable values paged.

Three variants run: DTR as above, DTR preferring paging (values are dropped only when they cannot
be paged), and DTR with paging only (no recomputation: values that are not recomputable then need not
be kept for their consumers' recomputation). Recomputing a dropped value needs its missing ancestors
in RAM at once, which can fail near the memory floor. The cheapest schedule (simulated energy, then
latency) wins; its variant is in ``Schedule.report``, with the engine's work (nodes looked at: a count that
``engine.RECOMPUTE_VISITS`` bounds per question). If all three fail, the first error is reported.
"""

from __future__ import annotations

from dataclasses import replace

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Schedule, SolveReport
from poet_edge.schedulers.engine import DROP, PAGE, Engine
from poet_edge.simulator import simulate


def _option(engine: Engine, u: int, prefer_paging: bool) -> tuple[float, str]:
    node = engine.problem.nodes[u]
    options: list[tuple[float, str]] = []
    if engine.can_page(u):
        out = 0.0 if u in engine.in_storage else node.page_out_j
        options.append((out + node.page_in_j, PAGE))
    if engine.an.droppable[u] and not (prefer_paging and options):
        options.append((engine.recompute_cost(u), DROP))
    return min(options)


SAMPLE = 16  # DTR scores only this many candidates per eviction: the least recently used


def dtr_policy(engine: Engine, candidates: list[int], prefer_paging: bool = False) -> tuple[int, str]:
    """The DTR eviction rule as an :class:`~poet_edge.schedulers.engine.Engine` policy: of the ``SAMPLE``
    least recently used candidates, the value with the least cost / (bytes x staleness), and how to
    evict it (PAGE or DROP, the cheaper; PAGE when ``prefer_paging`` and it can be paged). Ties: larger
    value first, then lower index. Also the repair rule of
    :func:`~poet_edge.schedulers.plan_replay.decode`."""
    best: tuple[float, int, int, str] | None = None
    if len(candidates) > SAMPLE:
        candidates = sorted(candidates, key=lambda u: (-engine.staleness(u), u))[:SAMPLE]
        engine.work += len(candidates)
    for u in candidates:
        cost, mode = _option(engine, u, prefer_paging)
        size = engine.problem.nodes[u].out_bytes
        score = cost / (size * engine.staleness(u))
        key = (score, -size, u, mode)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2], best[3]


def _dtr_paging_first(engine: Engine, candidates: list[int]) -> tuple[int, str]:
    return dtr_policy(engine, candidates, prefer_paging=True)


def schedule_greedy(problem: SchedulingProblem) -> Schedule:
    variants = (
        ("dtr", dtr_policy, True),
        ("dtr-paging-first", _dtr_paging_first, True),
        ("dtr-paging-only", dtr_policy, False),
    )
    errors: list[PoetError] = []
    best: tuple[float, float, int, Schedule] | None = None
    for i, (label, policy, recompute) in enumerate(variants):
        try:
            engine = Engine(problem, "greedy", policy=policy, allow_recompute=recompute, allow_paging=True)
            schedule = replace(engine.run(), report=SolveReport.of(variant=label, work=engine.work))
        except PoetError as err:
            errors.append(err)
            continue
        sim = simulate(problem, schedule)
        key = (sim.energy_j, sim.latency_s, i, schedule)
        if best is None or key[:3] < best[:3]:
            best = key
    if best is None:
        raise errors[0]
    return best[3]
