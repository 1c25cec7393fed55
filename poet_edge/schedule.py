"""The schedule IR every scheduler returns and the simulator replays.

A schedule is a sequence of steps over the *values* of a :class:`SchedulingProblem`;
each problem node produces exactly one value (its output), named like the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class Compute:
    """Run node ``node``; all its predecessors' values must be resident in RAM.

    Computing a node whose value was computed before is a recomputation."""

    node: str


@dataclass(frozen=True)
class Free:
    """Release the RAM copy of ``node``'s value."""

    node: str


@dataclass(frozen=True)
class PageOut:
    """Copy ``node``'s value from RAM to storage (the RAM copy stays until freed)."""

    node: str


@dataclass(frozen=True)
class PageIn:
    """Copy ``node``'s value from storage back into RAM (it occupies RAM from this step)."""

    node: str


@dataclass(frozen=True)
class Move:
    """Move ``node``'s RAM copy to another place in the arena (a memmove; it stays resident). Schedulers
    never make these: the arena planner inserts them where the static plan would fragment past the budget
    (:func:`poet_edge.arena.plan_moves`)."""

    node: str


Step = Compute | Free | PageOut | PageIn | Move

STEP_NAMES: dict[type, str] = {
    Compute: "compute",
    Free: "free",
    PageOut: "page_out",
    PageIn: "page_in",
    Move: "move",
}
STEP_TYPES: dict[str, type] = {v: k for k, v in STEP_NAMES.items()}


@dataclass(frozen=True)
class SolveReport:
    """What a scheduler says about its schedule, typed (issue 55: every scheduler returns the same
    :class:`Schedule` with this report). Only the fields named in ``keys`` are reported, in that order
    (plan.json's ``schedule.info`` and ``poet solve --json`` list them so); the others are None. Build
    one with :meth:`of` (the keys in the order given) and change it with :meth:`with_` (a new key goes
    last, as in a dict) and :meth:`without`.

    The fields, by who reports them:

    * every solver: ``status`` (``optimal``, ``optimal for this order``, ``feasible``, HiGHS's or CBC's
      status), ``objective`` (the schedule's cost), ``bound`` (a lower bound on it), ``gap``
      ((objective - bound) / objective), ``seconds``;
    * scale: ``bound_from`` (what proved the bound), ``effort``, ``cut_by_time_limit`` and ``cut_phase``
      (the phase the safety time limit cut; then the run may differ between runs), ``first_valid_s``,
      ``within_1pct_s``, ``schedule_from`` (the phase that found the schedule), ``primal`` (the primal
      rounds' status), ``segments``, ``options`` (bound-model and primal-model option columns),
      ``search_replays``;
    * the order wrapper (:mod:`~poet_edge.schedulers.ordering`): ``bound_covers`` ("all orders" or
      "this order"), ``order_bound`` (scale's bound for the order when the inserted recomputations
      won), ``order``, ``orders_compared``, ``order_evaluations``, ``order_s``;
    * the MILP: ``solver_gap``, ``binaries``, ``columns``, ``rows``, ``solver``, ``objective_kind``,
      ``warm_start``, ``fallback``, ``schedule_from``;
    * greedy: ``variant``, ``work``; a plan's exact replay: ``cost``.
    """

    status: str | None = None
    objective: float | None = None
    bound: float | None = None
    bound_from: str | None = None
    bound_covers: str | None = None
    order_bound: float | None = None
    gap: float | None = None
    solver_gap: float | None = None
    effort: str | None = None
    cut_by_time_limit: bool | None = None
    cut_phase: str | None = None
    seconds: float | None = None
    first_valid_s: float | None = None
    within_1pct_s: float | None = None
    schedule_from: str | None = None
    primal: str | None = None
    segments: int | None = None
    options: tuple[int, int] | None = None
    search_replays: int | None = None
    binaries: int | None = None
    columns: int | None = None
    rows: int | None = None
    solver: str | None = None
    objective_kind: str | None = None
    warm_start: str | None = None
    fallback: str | None = None
    variant: str | None = None
    work: int | None = None
    cost: float | None = None
    order: str | None = None
    orders_compared: list[list[object]] | None = field(default=None, hash=False)
    order_evaluations: int | None = None
    order_s: float | None = None
    keys: tuple[str, ...] = ()  # the fields reported, in order

    @staticmethod
    def of(**values: Any) -> SolveReport:
        """A report of ``values``, listed in the order given."""
        return SolveReport().with_(**values)

    def with_(self, **values: Any) -> SolveReport:
        """This report with ``values`` set: a key already reported keeps its place, a new one goes last."""
        unknown = set(values) - REPORT_FIELDS
        if unknown:
            raise TypeError(f"SolveReport has no field(s) {sorted(unknown)}")
        added = tuple(k for k in values if k not in self.keys)
        return replace(self, **values, keys=self.keys + added)

    def without(self, *names: str) -> SolveReport:
        """This report with ``names`` no longer reported (their fields None)."""
        return replace(self, **dict.fromkeys(names), keys=tuple(k for k in self.keys if k not in names))

    def cut_at(self, phase: str) -> SolveReport:
        """This report saying the safety time limit cut the run in ``phase`` (both keys reported last)."""
        marked = self.without("cut_by_time_limit", "cut_phase")
        return marked.with_(cut_by_time_limit=True, cut_phase=phase)

    @property
    def replayed_cost(self) -> float:
        """``cost``, which a plan's exact replay reports (ValueError when this report has none)."""
        if self.cost is None:
            raise ValueError("this report has no cost (only a plan's exact replay reports one)")
        return self.cost

    def has(self, name: str) -> bool:
        """Whether ``name`` is reported."""
        return name in self.keys

    def items(self) -> tuple[tuple[str, object], ...]:
        """(key, value) of the reported fields, in order."""
        return tuple((k, getattr(self, k)) for k in self.keys)

    def to_json(self, only: tuple[str, ...] | None = None) -> dict[str, object]:
        """The reported fields as a JSON object, in order; ``only``: just these keys."""
        return {k: v for k, v in self.items() if only is None or k in only}


REPORT_FIELDS = frozenset(f.name for f in fields(SolveReport)) - {"keys"}


@dataclass(frozen=True)
class Schedule:
    """Ordered steps plus who made them; the solver's :class:`SolveReport` in ``report`` (status, bound,
    gap...)."""

    steps: tuple[Step, ...]
    solver: str
    report: SolveReport = field(default_factory=SolveReport)

    def to_json(self) -> list[list[str]]:
        return [[STEP_NAMES[type(s)], s.node] for s in self.steps]

    @staticmethod
    def from_json(rows: list[list[str]], solver: str = "file") -> Schedule:
        return Schedule(tuple(STEP_TYPES[kind](node) for kind, node in rows), solver)
