"""Scheduler "scale"'s split proof: the split model (the strict model with gap rows and split ends) built
and relaxed in a child process (:func:`split_start`), sent one cutoff to prove at the first window where
it is due (:func:`split_poll`) and collected after the windows (:func:`split_collect`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from poet_edge.schedulers import proof_process
from poet_edge.schedulers.board import (
    Run,
    closed,
    cutoff_of,
    full_budget,
    proven_bound,
    seconds_left,
)
from poet_edge.schedulers.segment_strict import split_model


def split_due(run: Run, bound: float) -> bool:
    """Whether the incumbent is above ``bound`` by more than ``ScaleOptions.prove_gap`` and at most
    ``Policy.strict_gap``: the gaps :func:`split_poll` takes."""
    best = run.best
    wide = not closed(best.cost, bound, run.options.prove_gap)
    return best.schedule is not None and wide and closed(best.cost, bound, run.options.policy.strict_gap)


@dataclass
class SplitProof:
    """The split model's child process (:func:`split_start`) and what became of its proof."""

    job: proof_process.Job
    plain: float  # the cost of the plain pass
    sent: float | None = None  # the cutoff it was told to prove (scaled)
    collected: bool = False  # its result taken


def split_start(run: Run, plain: float) -> Run:
    """The split model (:func:`~poet_edge.schedulers.segment_strict.split_model`: the strict model with
    gap rows and the split ends its LP relaxation asks for) built, and that relaxation solved, in a
    child process (:func:`proof_process.start_split`, proofs of ``Budget.nodes`` nodes); returns
    ``run`` with that child."""
    problem, options = run.problem, run.options
    build = partial(split_model, problem, run.an, run.cover, run.latency, run.norm, full_budget(problem))
    job = proof_process.start_split(build, options, seconds_left(run.best, options), run.budget.nodes)
    return replace(run, split=SplitProof(job, plain))


def split_poll(run: Run, bound: float) -> float:
    """Asked between windows: at the first window where the gap is one the split proof takes
    (:func:`split_due`), waits for the split model's LP relaxation (a bound too) and, where it is
    within ``Policy.strict_gap`` of the cutoff (1 - prove_gap) x the incumbent, sends the child that cutoff
    to prove while the windows search on (once: its result is taken at the end, :func:`split_collect`,
    so it does not depend on when it ends). Returns ``bound``, raised by what is proven."""
    split, best = run.split, run.best
    bound = proven_bound(run, bound)
    if split is None or split.sent is not None or split.collected or not split_due(run, bound):
        return bound
    relaxed = proof_process.split_relaxed(split.job, wait=True)
    if relaxed is None:
        return bound
    norm, plain = run.norm, split.plain
    bound = best.proved((plain + relaxed * norm, "split segment cover"))[0]
    cutoff = cutoff_of(run, plain)
    if split_due(run, bound) and closed(
        plain + cutoff * norm, plain + relaxed * norm, run.options.policy.strict_gap
    ):
        proof_process.send(split.job, cutoff)
        split.sent = cutoff
    return bound


def split_collect(run: Run) -> float:
    """The split model's relaxation bound and, once its cutoff was sent, its proof's result (each
    waited for; the safety stop kills the child); the run's highest bound."""
    split, best = run.split, run.best
    assert split is not None
    if not split.collected:
        split.collected = True
        relaxed = proof_process.split_relaxed(split.job, wait=True)
        if relaxed is not None:
            best.proved((split.plain + relaxed * run.norm, "split segment cover"))
        if split.sent is not None:
            solved = proof_process.split_proved(split.job)
            best.clock(solved.status)
            best.proved((split.plain + solved.bound * run.norm, "split segment cover"))
    assert best.proven is not None
    return best.proven[0]
