"""The schedule IR every scheduler returns and the simulator replays.

A schedule is a sequence of steps over the *values* of a :class:`SchedulingProblem`;
each problem node produces exactly one value (its output), named like the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


Step = Compute | Free | PageOut | PageIn

STEP_NAMES: dict[type, str] = {Compute: "compute", Free: "free", PageOut: "page_out", PageIn: "page_in"}
STEP_TYPES: dict[str, type] = {v: k for k, v in STEP_NAMES.items()}


@dataclass(frozen=True)
class Schedule:
    """Ordered steps plus who made them; solver details go in ``info`` (status, bound, gap...)."""

    steps: tuple[Step, ...]
    solver: str
    info: tuple[tuple[str, object], ...] = field(default=())

    def to_json(self) -> list[list[str]]:
        return [[STEP_NAMES[type(s)], s.node] for s in self.steps]

    @staticmethod
    def from_json(rows: list[list[str]], solver: str = "file") -> Schedule:
        return Schedule(tuple(STEP_TYPES[kind](node) for kind, node in rows), solver)
