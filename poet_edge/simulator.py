"""Replay a schedule step by step: validate it and measure RAM, latency, energy and storage traffic.

The simulator is the only source of the reported numbers. Rules it enforces (each violation raises
:class:`InvalidSchedule` with the step index, the step and the reason):

* ``Compute(v)``: v is a known node; all of v's inputs are in RAM; v is not already in RAM; v is
  recomputable if it ran before; no node b with (v, b) in ``invalidated_by`` has run yet; and
  ``fixed_bytes + live + out_bytes(v) + workspace_bytes(v) <= budget_bytes``.
* ``PageOut(v)``: v is in RAM and pageable; storage stays within ``storage_bytes`` (a value occupies
  storage once, from its first page-out to the end of the step; storage is never freed).
* ``PageIn(v)``: v is in storage and not in RAM; ``fixed_bytes + live + out_bytes(v) <= budget``.
* ``Free(v)``: v is in RAM.
* ``Move(v)``: v is in RAM (the arena planner's memmove; it costs the node's ``move_s`` / ``move_j``).
* At the end every node has been computed at least once.

Integrity work of the generated runtime (:class:`Integrity`, priced only with a ``profile``; the scheduler
does not see it): the undo journal's writes (parameters updated before the step's last storage access), the
CRC-32 of every paged value at page-out and page-in (``--verify-paging``, and of journal entries), and the
NaN/Inf scan of the inputs (``--check-inputs``). Its time and energy are ``latency_checks_s`` and
``energy_checks_j``; journal bytes count in ``storage_bytes_written``.

RAM in use during a step (one entry of ``ram_curve``): ``fixed + live`` before the step, plus the
value being created (and, for Compute, its transient workspace). Peak RAM is the maximum of the curve.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from poet_edge.cost import Cost, erase_blocks, node_cost, steps_until_endurance, transfer_cost
from poet_edge.errors import PoetError
from poet_edge.problem import INPUT_KIND, PARAM_KIND, SchedulingProblem
from poet_edge.profiles import Profile
from poet_edge.schedule import STEP_NAMES, Compute, Free, Move, PageIn, PageOut, Schedule, Step
from poet_edge.work import OpClass, Work

# Instructions per unit of the runtime's integrity loops, counted in their arm-none-eabi-gcc -O2 Thumb-2
# code: poet_crc32_update 7 per byte, poet_all_finite 8 per float. They are priced as reduce-class work,
# whose profile rate is per element of a loop of REDUCE_INSTRUCTIONS_PER_ELEMENT instructions (the
# Cortex-M4 kernel fit, profiles/cortex-m4.toml).
CRC32_INSTRUCTIONS_PER_BYTE = 7
FINITE_CHECK_INSTRUCTIONS_PER_ELEMENT = 8
REDUCE_INSTRUCTIONS_PER_ELEMENT = 4.184


@dataclass(frozen=True)
class Integrity:
    """What the generated step does besides the schedule to stay transactional and checked."""

    checked_elements: int = 0  # floats scanned for NaN/Inf once per step (x in RAM, float targets)
    checked_per_load: int = 0  # floats scanned at each load of the batch from storage
    verify_paging: bool = False  # CRC-32 of each paged value at page-out and page-in
    journal_bytes: tuple[int, ...] = ()  # undo-journal writes, one per journaled parameter

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "journal_bytes": list(self.journal_bytes)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Integrity:
        return cls(
            int(d.get("checked_elements", 0)),
            int(d.get("checked_per_load", 0)),
            bool(d.get("verify_paging", False)),
            tuple(int(n) for n in d.get("journal_bytes", ())),
        )

    def scan(self, profile: Profile, elements: int) -> Cost:
        w = FINITE_CHECK_INSTRUCTIONS_PER_ELEMENT / REDUCE_INSTRUCTIONS_PER_ELEMENT
        return (
            node_cost(profile, Work(OpClass.REDUCE, elements=elements, weight=w)) if elements else Cost(0, 0)
        )

    def crc(self, profile: Profile, nbytes: int) -> Cost:
        w = CRC32_INSTRUCTIONS_PER_BYTE / REDUCE_INSTRUCTIONS_PER_ELEMENT
        return node_cost(profile, Work(OpClass.REDUCE, elements=nbytes, weight=w))

    def step_cost(self, profile: Profile) -> Cost:
        """The per-step part: the scan of inputs in RAM and the journal writes (and their CRCs)."""
        total = self.scan(profile, self.checked_elements)
        for n in self.journal_bytes:
            total = total + transfer_cost(profile, n, True)
            if self.verify_paging:
                total = total + self.crc(profile, n)
        return total


class InvalidSchedule(PoetError):
    """A schedule broke a rule at step ``index`` (``index`` is -1 for end-of-schedule checks)."""

    def __init__(self, index: int, step: Step | None, reason: str) -> None:
        where = "at end of schedule" if step is None else f"at step {index} ({_step_text(step)})"
        super().__init__(f"invalid schedule {where}: {reason}")
        self.index = index
        self.step = step
        self.reason = reason


def _step_text(step: Step) -> str:
    return f"{STEP_NAMES[type(step)]} {step.node}"


@dataclass(frozen=True)
class SimResult:
    """What one training step costs under a schedule. Times in seconds and energies in joules when
    the problem's ``cost_unit`` is "J"; otherwise both are in the problem's own ``cost_unit``."""

    solver: str
    n_steps: int
    budget_bytes: int
    fixed_bytes: int
    peak_ram_bytes: int
    peak_step: int
    peak_node: str
    latency_compute_s: float
    latency_recompute_s: float
    latency_page_in_s: float
    latency_page_out_s: float
    latency_move_s: float  # memmoves the arena planner inserted (schedule.Move)
    energy_compute_j: float
    energy_recompute_j: float
    energy_page_in_j: float
    energy_page_out_j: float
    energy_move_j: float
    cost_unit: str
    n_computes: int
    n_recomputations: int
    n_page_outs: int
    n_page_ins: int
    n_frees: int
    n_moves: int
    moved_bytes: int  # bytes the moves copy within RAM
    storage_bytes_written: int
    storage_bytes_read: int
    storage_peak_bytes: int
    latency_checks_s: float  # Integrity: journal writes, CRCs, input scans
    energy_checks_j: float
    crc_bytes: int  # bytes the step runs through CRC-32 (--verify-paging)
    journal_bytes_written: int  # undo-journal bytes (included in storage_bytes_written)
    param_bytes_read: int  # loads of parameters kept in storage (included in storage_bytes_read)
    param_bytes_written: int  # their write-backs after the update (included in storage_bytes_written)
    erase_blocks_per_step: float | None
    steps_until_endurance: float | None
    ram_curve: tuple[int, ...]

    @property
    def latency_s(self) -> float:
        return (
            self.latency_compute_s
            + self.latency_recompute_s
            + self.latency_page_in_s
            + self.latency_page_out_s
            + self.latency_move_s
            + self.latency_checks_s
        )

    @property
    def energy_j(self) -> float:
        return (
            self.energy_compute_j
            + self.energy_recompute_j
            + self.energy_page_in_j
            + self.energy_page_out_j
            + self.energy_move_j
            + self.energy_checks_j
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ram_curve"] = list(self.ram_curve)
        out["latency_s"] = self.latency_s
        out["energy_j"] = self.energy_j
        return out


@dataclass
class _Replay:
    """Mutable replay state (local to one :func:`simulate` call)."""

    problem: SchedulingProblem
    in_ram: set[int]
    in_storage: set[int]
    runs: list[int]
    live: int = 0
    stored: int = 0

    def ram_with(self, extra: int) -> int:
        return self.problem.fixed_bytes + self.live + extra


def _check_compute(st: _Replay, v: int, preds: list[int], inval: dict[int, list[int]]) -> str | None:
    p = st.problem
    node = p.nodes[v]
    missing = [p.nodes[u].name for u in preds if u not in st.in_ram]
    if missing:
        return f"input(s) not resident in RAM: {', '.join(missing)}"
    if v in st.in_ram:
        return f"value {node.name} is already resident in RAM"
    if st.runs[v] and not node.recomputable:
        return f"node {node.name} is not recomputable and already ran"
    ran = [p.nodes[b].name for b in inval.get(v, []) if st.runs[b]]
    if ran:
        return f"node {node.name} may not run after its invalidator(s) {', '.join(ran)} ran"
    return None


def _over_budget(st: _Replay, extra: int) -> str | None:
    need = st.ram_with(extra)
    if need > st.problem.budget_bytes:
        return (
            f"budget exceeded by {need - st.problem.budget_bytes} bytes "
            f"({need} bytes in use > budget {st.problem.budget_bytes})"
        )
    return None


def _index_of(index: dict[str, int], i: int, step: Step) -> int:
    if not isinstance(step, (Compute, Free, PageIn, PageOut, Move)):
        raise InvalidSchedule(i, None, f"unknown step type {type(step).__name__}")
    if step.node not in index:
        raise InvalidSchedule(i, step, f"unknown node {step.node!r}")
    return index[step.node]


def simulate(
    problem: SchedulingProblem,
    schedule: Schedule,
    profile: Profile | None = None,
    integrity: Integrity | None = None,
) -> SimResult:
    """Replay ``schedule`` on ``problem``; raise :class:`InvalidSchedule` on the first broken rule.

    With a ``profile``, storage wear (erase blocks per training step, steps until endurance) is
    reported too, and the ``integrity`` work is priced; all other times and energies come from the
    problem itself."""
    index = problem.index()
    preds = [sorted(set(ps)) for ps in problem.preds()]
    inval: dict[int, list[int]] = {}
    for a, b in problem.invalidated_by:
        inval.setdefault(a, []).append(b)
    st = _Replay(problem, set(), set(), [0] * len(problem.nodes))
    acc = dict.fromkeys(("cs", "rs", "is", "os", "ms", "cj", "rj", "ij", "oj", "mj"), 0.0)
    counts = dict.fromkeys(("compute", "recompute", "page_out", "page_in", "free", "move"), 0)
    moved = 0
    written: list[int] = []
    read = param_read = param_written = 0
    curve: list[int] = []
    checks = _Checks(profile, integrity)
    for i, step in enumerate(schedule.steps):
        v = _index_of(index, i, step)
        node = problem.nodes[v]
        if isinstance(step, Compute):
            reason = _check_compute(st, v, preds[v], inval)
            reason = reason or _over_budget(st, node.out_bytes + node.workspace_bytes)
            if reason:
                raise InvalidSchedule(i, step, reason)
            curve.append(st.ram_with(node.out_bytes + node.workspace_bytes))
            kind = "r" if st.runs[v] else "c"
            counts["recompute" if st.runs[v] else "compute"] += 1
            acc[kind + "s"] += node.compute_s
            acc[kind + "j"] += node.compute_j
            st.runs[v] += 1
            st.in_ram.add(v)
            st.live += node.out_bytes
            if node.kind == INPUT_KIND:  # the batch is read from storage
                read += node.out_bytes
                checks.load(node.out_bytes // 4)
            elif node.kind == PARAM_KIND:  # a parameter kept in storage is loaded
                read += node.out_bytes
                param_read += node.out_bytes
                checks.paged(node.out_bytes)
            if node.stores_bytes:  # a stored parameter's update writes it back
                written.append(node.stores_bytes)
                param_written += node.stores_bytes
                read += checks.written_back(node.stores_bytes)
        elif isinstance(step, Free):
            if v not in st.in_ram:
                raise InvalidSchedule(i, step, f"free of {node.name}, which is not resident in RAM")
            curve.append(st.ram_with(0))
            counts["free"] += 1
            st.in_ram.discard(v)
            st.live -= node.out_bytes
        elif isinstance(step, Move):
            if v not in st.in_ram:
                raise InvalidSchedule(i, step, f"move of {node.name}, which is not resident in RAM")
            curve.append(st.ram_with(0))
            counts["move"] += 1
            acc["ms"] += node.move_s
            acc["mj"] += node.move_j
            moved += node.out_bytes
        elif isinstance(step, PageOut):
            if v not in st.in_ram:
                raise InvalidSchedule(i, step, f"page-out of {node.name}, which is not in RAM")
            if not node.pageable:
                raise InvalidSchedule(i, step, f"node {node.name} is not pageable")
            if v not in st.in_storage:
                cap = problem.storage_bytes
                if cap is not None and st.stored + node.out_bytes > cap:
                    raise InvalidSchedule(
                        i,
                        step,
                        f"storage capacity exceeded by "
                        f"{st.stored + node.out_bytes - cap} bytes (capacity {cap})",
                    )
                st.stored += node.out_bytes
                st.in_storage.add(v)
            curve.append(st.ram_with(0))
            counts["page_out"] += 1
            acc["os"] += node.page_out_s
            acc["oj"] += node.page_out_j
            written.append(node.out_bytes)
            checks.paged(node.out_bytes)
        else:  # PageIn
            if v not in st.in_storage:
                raise InvalidSchedule(i, step, f"page-in of {node.name}, which is not in storage")
            if v in st.in_ram:
                raise InvalidSchedule(i, step, f"value {node.name} is already resident in RAM")
            reason = _over_budget(st, node.out_bytes)
            if reason:
                raise InvalidSchedule(i, step, reason)
            curve.append(st.ram_with(node.out_bytes))
            counts["page_in"] += 1
            acc["is"] += node.page_in_s
            acc["ij"] += node.page_in_j
            read += node.out_bytes
            st.in_ram.add(v)
            st.live += node.out_bytes
            checks.paged(node.out_bytes)
    never = [n.name for n, r in zip(problem.nodes, st.runs, strict=True) if not r]
    if never:
        shown = ", ".join(never[:10]) + (" ..." if len(never) > 10 else "")
        raise InvalidSchedule(-1, None, f"{len(never)} node(s) never computed: {shown}")
    peak = max(curve, default=problem.fixed_bytes)
    peak_step = curve.index(peak) if curve else -1
    journal = list(integrity.journal_bytes) if integrity and profile is not None else []
    written += journal
    blocks = erase_blocks(profile, written) if profile is not None else None
    endurance = steps_until_endurance(profile, blocks) if profile is not None and blocks is not None else None
    return SimResult(
        solver=schedule.solver,
        n_steps=len(schedule.steps),
        budget_bytes=problem.budget_bytes,
        fixed_bytes=problem.fixed_bytes,
        peak_ram_bytes=peak,
        peak_step=peak_step,
        peak_node=schedule.steps[peak_step].node if peak_step >= 0 else "",
        latency_compute_s=acc["cs"],
        latency_recompute_s=acc["rs"],
        latency_page_in_s=acc["is"],
        latency_page_out_s=acc["os"],
        latency_move_s=acc["ms"],
        energy_compute_j=acc["cj"],
        energy_recompute_j=acc["rj"],
        energy_page_in_j=acc["ij"],
        energy_page_out_j=acc["oj"],
        energy_move_j=acc["mj"],
        cost_unit=problem.cost_unit,
        n_computes=counts["compute"],
        n_recomputations=counts["recompute"],
        n_page_outs=counts["page_out"],
        n_page_ins=counts["page_in"],
        n_frees=counts["free"],
        n_moves=counts["move"],
        moved_bytes=moved,
        storage_bytes_written=sum(written),
        storage_bytes_read=read,
        storage_peak_bytes=st.stored,
        latency_checks_s=checks.cost.seconds,
        energy_checks_j=checks.cost.joules,
        crc_bytes=checks.crc_bytes,
        journal_bytes_written=sum(journal),
        param_bytes_read=param_read,
        param_bytes_written=param_written,
        erase_blocks_per_step=blocks,
        steps_until_endurance=endurance,
        ram_curve=tuple(curve),
    )


class _Checks:
    """Accumulates the :class:`Integrity` cost of one replay (nothing without a profile)."""

    def __init__(self, profile: Profile | None, integrity: Integrity | None) -> None:
        self.profile, self.integrity = profile, integrity
        self.cost, self.crc_bytes = Cost(0.0, 0.0), 0
        if profile is not None and integrity is not None:
            self.cost = integrity.step_cost(profile)
            if integrity.verify_paging:
                self.crc_bytes = sum(integrity.journal_bytes)

    def load(self, elements: int) -> None:
        """A load of the batch (or of a window of its rows, ``elements`` floats): its NaN/Inf scan."""
        if self.profile is not None and self.integrity is not None:
            n = min(self.integrity.checked_per_load, elements)
            self.cost = self.cost + self.integrity.scan(self.profile, n)

    def written_back(self, nbytes: int) -> int:
        """A stored parameter's write-back: with verify_paging, a CRC-32 before the write, and a read-back
        with its CRC-32 after it. Returns the bytes read."""
        if self.profile is None or self.integrity is None or not self.integrity.verify_paging:
            return 0
        self.paged(nbytes)
        self.paged(nbytes)
        self.cost = self.cost + transfer_cost(self.profile, nbytes, False)
        return nbytes

    def paged(self, nbytes: int) -> None:
        if self.profile is not None and self.integrity is not None and self.integrity.verify_paging:
            self.cost = self.cost + self.integrity.crc(self.profile, nbytes)
            self.crc_bytes += nbytes


def _units(sim: SimResult) -> tuple[str, str]:
    return ("s", "J") if sim.cost_unit == "J" else (sim.cost_unit, sim.cost_unit)


def format_report(sim: SimResult) -> str:
    """A plain-text table of a :class:`SimResult`."""
    tu, eu = _units(sim)
    rows = [
        ("solver", sim.solver, ""),
        ("steps", f"{sim.n_steps}", ""),
        ("peak RAM", f"{sim.peak_ram_bytes}", f"bytes (budget {sim.budget_bytes}, fixed {sim.fixed_bytes})"),
        ("peak at step", f"{sim.peak_step}", sim.peak_node),
        ("computes", f"{sim.n_computes}", f"+ {sim.n_recomputations} recomputations"),
        ("page-outs / page-ins", f"{sim.n_page_outs} / {sim.n_page_ins}", ""),
        *([("moves in RAM", f"{sim.n_moves}", f"({sim.moved_bytes} bytes)")] if sim.n_moves else []),
        ("storage written / read", f"{sim.storage_bytes_written} / {sim.storage_bytes_read}", "bytes"),
    ]
    if sim.param_bytes_read or sim.param_bytes_written:
        rows.append(
            (
                "parameters read / written",
                f"{sim.param_bytes_read} / {sim.param_bytes_written}",
                "bytes (stored)",
            )
        )
    if sim.journal_bytes_written or sim.crc_bytes:
        rows.append(("journal / CRC bytes", f"{sim.journal_bytes_written} / {sim.crc_bytes}", "bytes"))
    if sim.erase_blocks_per_step is not None:
        rows.append(("erase blocks per step", f"{sim.erase_blocks_per_step:.4g}", "erase-block cycles"))
        left = sim.steps_until_endurance
        shown = "unlimited" if left is None else f"{left:.4g}"
        rows.append(("steps until endurance", shown, "training steps"))
    parts = (
        ("compute", sim.latency_compute_s, sim.energy_compute_j),
        ("recompute", sim.latency_recompute_s, sim.energy_recompute_j),
        ("page-in", sim.latency_page_in_s, sim.energy_page_in_j),
        ("page-out", sim.latency_page_out_s, sim.energy_page_out_j),
        *([("moves", sim.latency_move_s, sim.energy_move_j)] if sim.n_moves else []),
        ("checks", sim.latency_checks_s, sim.energy_checks_j),
        ("total", sim.latency_s, sim.energy_j),
    )
    width = max(len(r[0]) for r in rows)
    lines = [f"{name:{width}s}  {value:>14s}  {note}".rstrip() for name, value, note in rows]
    lines.append("")
    lines.append(f"{'':{width}s}  {'latency (' + tu + ')':>14s}  {'energy (' + eu + ')':>14s}")
    lines += [f"{name:{width}s}  {t:14.6g}  {e:14.6g}" for name, t, e in parts]
    return "\n".join(lines)
