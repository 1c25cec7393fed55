"""The work scheduler "scale" does, counted, never timed (``--effort quick|default|max``).

A run is a sequence of levels, each a :class:`Budget` of counts: local-search perturbations and the
replays a stalled search may take, HiGHS branch-and-bound nodes per solve (``mip_max_nodes``: HiGHS's
own deterministic limit), large-neighbourhood windows, refinement and repair rounds. ``quick`` runs
the first level, ``default`` the first two, ``max`` all three, each level on the incumbent and bound
the ones before left: a larger effort does the smaller one's work first, in the same order, and goes
on, so it never returns a costlier schedule. The wall-clock ``--time-limit`` is only a safety stop
(:data:`SAFETY_S` by default); where it cuts a phase the run's report says so
(``cut_by_time_limit``, ``cut_phase``) and only then may two runs differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from poet_edge import highs
from poet_edge.schedule import SolveReport

SAFETY_S = 600.0  # scale's default --time-limit: a safety stop, not a budget


@dataclass(frozen=True)
class Budget:
    """The counts of one level of a run."""

    kicks: int  # local search: perturb-and-descend rounds (fixed seed per level)
    stall: int  # ... it stops once this much replay work brought no improvement (PlanSearch.work)
    nodes: int  # HiGHS branch-and-bound nodes per bound, stage-model or proof solve; the segment cover's
    # bound and primal MIPs, which every graph runs, also stop after as many HiGHS interrupt checks (their
    # root: highs.Options.check_limit); the mid-size path's bound models keep their roots whole
    window_nodes: int  # ... per large-neighbourhood window
    windows: int  # large-neighbourhood windows per sweep phase (near, main, second start)
    window_stall: int  # windows without improvement before the second start takes over (and back)
    rounds: int  # interval-model refinement rounds
    cut_rounds: int  # stage-model re-solves with the gaps' configurations cut off; repair windows
    split: bool  # mid-size graphs: the split model's cutoff proof runs in a child process
    sequences: int = 0  # evaluations of the sequence search (seq_search) where recomputations were inserted
    anneal: int = 0  # ... then annealing moves (anneal) per node of the graph, from that search's best
    strict: bool = True  # mid-size graphs: the strict bound model may run (when the gap is wide)


LEVELS = (
    Budget(kicks=60, stall=1000, nodes=100, window_nodes=5, windows=20, window_stall=10, rounds=6,
           cut_rounds=2, split=False, sequences=1000, anneal=100),
    Budget(kicks=300, stall=3000, nodes=500, window_nodes=20, windows=300, window_stall=60, rounds=12,
           cut_rounds=8, split=True, sequences=2000, anneal=300),
    Budget(kicks=1500, stall=10000, nodes=5000, window_nodes=100, windows=1500, window_stall=200,
           rounds=24, cut_rounds=30, split=True, sequences=7000, anneal=1000),
)  # fmt: skip
EFFORTS: Mapping[str, int] = {"quick": 1, "default": 2, "max": 3}  # the levels each effort runs


SIZE_PAIRS = 10000  # value-stage pairs up to which the levels' window counts and split proof stand


def sized(budget: Budget, pairs: int, level: int) -> Budget:
    """Level ``level``'s ``budget`` for a graph of ``pairs`` value-stage pairs. The first level stands
    as written (``quick`` is the same run on every graph). Beyond it, on graphs of more than
    ``SIZE_PAIRS`` pairs, where every HiGHS window is a larger model: the windows per sweep phase (and
    the window stall) shrink as ``SIZE_PAIRS / pairs`` (never below the first level's), so the windows'
    work stays about what it is at ``SIZE_PAIRS``; the split model's cutoff proof and the strict bound
    model, whose root LPs alone grow faster than the graph and are bounded by no count, do not run (the
    strict model already ran at the first level, with fewer nodes). bert_tiny with every parameter
    trained and stored (17,328 pairs) at --effort default is the case that needed this: the split proof
    ran until the safety stop, and the strict model took long at each level. Deterministic: a function
    of the graph's size only."""
    if level == 0 or pairs <= SIZE_PAIRS:
        return budget
    share = SIZE_PAIRS / pairs
    first = LEVELS[0]
    return replace(
        budget,
        windows=max(first.windows, round(budget.windows * share)),
        window_stall=max(first.window_stall, round(budget.window_stall * share)),
        split=False,
        strict=False,
    )


def sequence_work(effort: str) -> int:
    """The sequence search's evaluations at ``effort``: the sum over its levels (one search, the
    smaller effort's run its prefix); ValueError naming the efforts."""
    return sum(b.sequences for b in levels(effort))


def anneal_moves(effort: str) -> tuple[int, ...]:
    """The annealing moves per node of each level ``effort`` runs (one anneal per level, each from the
    best sequence of the ones before: the smaller effort's runs are the prefix); ValueError naming the
    efforts."""
    return tuple(b.anneal for b in levels(effort))


def levels(effort: str) -> tuple[Budget, ...]:
    """The levels ``effort`` runs (a prefix of :data:`LEVELS`); ValueError naming the efforts."""
    if effort not in EFFORTS:
        raise ValueError(f"unknown effort '{effort}'; use {', '.join(EFFORTS)}")
    return LEVELS[: EFFORTS[effort]]


def cut_warning(report: SolveReport, limit: float | None) -> str | None:
    """The warning line for a run the safety time limit cut (``report`` a schedule's), None otherwise."""
    if not report.cut_by_time_limit:
        return None
    shown = f"{limit:g} s" if limit is not None else f"{SAFETY_S:g} s (default)"
    return (
        f"poet: warning: the --time-limit {shown} safety stop cut the scheduler in phase "
        f"'{report.cut_phase}'; this schedule may differ between runs (raise --time-limit, or use "
        "a smaller --effort)"
    ) + (HIGHS_LEFT if highs.stuck() else "")


HIGHS_LEFT = (
    "; a HiGHS solve did not stop at its time limit (a HiGHS presolve bug, ERGO-Code/HiGHS#2226) and "
    "was left running, so no MILP was solved after it"
)
