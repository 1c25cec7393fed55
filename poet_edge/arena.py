"""Static arena planning: every value instance of a schedule gets an offset in one buffer.

An instance is born by Compute or PageIn and dies at the Free of its value (or at the end of the step).
Recomputed and paged-in copies are new instances and may land at a different offset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from poet_edge.errors import PoetError
from poet_edge.schedule import Compute, Free, PageIn, Schedule

ALIGN = 16


def align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class Instance:
    value: str  # problem node whose output this is (or "<node>#ws" for kernel workspace)
    size: int  # aligned bytes
    start: int  # first schedule step at which it occupies memory
    end: int  # last schedule step at which it occupies memory (inclusive)

    def overlaps(self, other: Instance) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class ArenaPlan:
    instances: tuple[Instance, ...]
    offsets: tuple[int, ...]
    arena_bytes: int
    peak_live_bytes: int
    planner: str

    @property
    def overhead(self) -> float:
        return self.arena_bytes / self.peak_live_bytes if self.peak_live_bytes else 1.0


def instances(schedule: Schedule, sizes: Mapping[str, int], workspace: Mapping[str, int]) -> list[Instance]:
    """Value instances (and per-compute workspace) of a schedule, in order of birth."""
    open_: dict[str, tuple[int, int]] = {}  # value -> (position in out, start)
    out: list[Instance] = []
    last = len(schedule.steps) - 1
    for k, step in enumerate(schedule.steps):
        if isinstance(step, (Compute, PageIn)):
            if sizes[step.node] > 0:
                open_[step.node] = (len(out), k)
                out.append(Instance(step.node, align(sizes[step.node]), k, last))
            if isinstance(step, Compute) and workspace.get(step.node, 0) > 0:
                out.append(Instance(f"{step.node}#ws", align(workspace[step.node]), k, k))
        elif isinstance(step, Free) and step.node in open_:
            i, start = open_.pop(step.node)
            out[i] = Instance(step.node, out[i].size, start, k)
    return out


def peak_live(insts: list[Instance]) -> int:
    events: dict[int, int] = {}
    for i in insts:
        events[i.start] = events.get(i.start, 0) + i.size
        events[i.end + 1] = events.get(i.end + 1, 0) - i.size
    live = peak = 0
    for k in sorted(events):
        live += events[k]
        peak = max(peak, live)
    return peak


def _gaps(busy: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """(offset, gap length) of every hole that fits ``size`` between sorted busy ranges;
    the last one is unbounded."""
    out, off = [], 0
    for lo, hi in busy:
        if off + size <= lo:
            out.append((off, lo - off))
        off = max(off, hi)
    out.append((off, 1 << 62))
    return out


def conflicts(insts: list[Instance]) -> list[list[int]]:
    """For each instance, the instances whose lifetimes overlap it (a sweep over births, not all pairs)."""
    out: list[list[int]] = [[] for _ in insts]
    by_start = sorted(range(len(insts)), key=lambda i: (insts[i].start, i))
    alive: list[int] = []
    for i in by_start:
        alive = [j for j in alive if insts[j].end >= insts[i].start]
        for j in alive:
            out[i].append(j)
            out[j].append(i)
        alive.append(i)
    return out


def _place(order: list[int], insts: list[Instance], conf: list[list[int]], best_fit: bool) -> list[int]:
    """Place in ``order`` at the lowest (or the tightest, ``best_fit``) hole that no placed,
    lifetime-overlapping instance occupies."""
    offsets = [-1] * len(insts)
    for i in order:
        busy = sorted((offsets[j], offsets[j] + insts[j].size) for j in conf[i] if offsets[j] >= 0)
        gaps = _gaps(busy, insts[i].size)
        offsets[i] = min(gaps, key=lambda g: (g[1], g[0]))[0] if best_fit else gaps[0][0]
    return offsets


def _plan(
    insts: list[Instance], conf: list[list[int]], order: list[int], best_fit: bool, name: str
) -> ArenaPlan:
    offsets = _place(order, insts, conf, best_fit)
    top = max((o + s.size for o, s in zip(offsets, insts, strict=False)), default=0)
    return ArenaPlan(tuple(insts), tuple(offsets), top, peak_live(insts), name)


def plan_greedy_by_size(insts: list[Instance]) -> ArenaPlan:
    """TensorFlow Lite Micro's greedy planner: largest first, lowest fitting offset (the baseline)."""
    order = sorted(range(len(insts)), key=lambda i: (-insts[i].size, insts[i].start, i))
    return _plan(insts, conflicts(insts), order, False, "greedy-by-size")


def _breadth(insts: list[Instance]) -> list[int]:
    """For each instance, the most bytes live at any step of its lifetime (the pressure it sits in)."""
    steps = sorted({i.start for i in insts} | {i.end for i in insts})
    live = {k: sum(i.size for i in insts if i.start <= k <= i.end) for k in steps}
    return [max(v for k, v in live.items() if i.start <= k <= i.end) for i in insts]


REFINE_ROUNDS = 100  # iterated-greedy moves per start (a count, not a time: plans stay deterministic)


def _refine(
    insts: list[Instance], conf: list[list[int]], order: list[int], best_fit: bool, floor: int, rounds: int
) -> ArenaPlan:
    """Iterated greedy: move an instance that reaches the top of the arena halfway to the front of the
    placement order and re-place everything; keep the new order when the arena does not grow. Round k
    moves the (k mod m)-th of the m instances at the top, so ties rotate."""
    best = _plan(insts, conf, order, best_fit, "")
    for k in range(rounds):
        if best.arena_bytes <= floor:
            break
        top = [i for i, o in enumerate(best.offsets) if o + insts[i].size == best.arena_bytes]
        moved = top[k % len(top)]
        cand = [i for i in order if i != moved]
        cand.insert(order.index(moved) // 2, moved)
        plan = _plan(insts, conf, cand, best_fit, "")
        if plan.arena_bytes <= best.arena_bytes:
            best, order = plan, cand
    return best


def plan_best(insts: list[Instance]) -> ArenaPlan:
    """Several orderings (size, breadth, size × lifetime, birth, size then lifetime) with first-fit and
    best-fit placement; the smallest arena (ties: the first listed) unless one reaches the live peak.
    Otherwise each is refined by iterated greedy (:func:`_refine`), best first, until one reaches the live
    peak; the smallest wins ("+ig" in its name)."""
    n = range(len(insts))
    conf = conflicts(insts)
    breadth = _breadth(insts)
    orders = {
        "size": sorted(n, key=lambda i: (-insts[i].size, insts[i].start, i)),
        "breadth": sorted(n, key=lambda i: (-breadth[i], -insts[i].size, insts[i].start, i)),
        "area": sorted(n, key=lambda i: (-insts[i].size * (insts[i].end - insts[i].start + 1), i)),
        "birth": sorted(n, key=lambda i: (insts[i].start, -insts[i].size, i)),
        "size-life": sorted(n, key=lambda i: (-insts[i].size, insts[i].start - insts[i].end, i)),
    }
    floor = peak_live(insts)
    tried: list[tuple[int, int, str, list[int], bool]] = []
    for name, order in orders.items():
        for best_fit in (False, True):
            label = f"{name}/{'best' if best_fit else 'first'}-fit"
            plan = _plan(insts, conf, order, best_fit, label)
            if plan.arena_bytes <= floor:
                return plan
            tried.append((plan.arena_bytes, len(tried), label, order, best_fit))
    tried.sort()
    best: ArenaPlan | None = None
    for _, _, label, order, best_fit in tried:
        plan = _refine(insts, conf, order, best_fit, floor, REFINE_ROUNDS)
        if best is None or plan.arena_bytes < best.arena_bytes:
            best = replace(plan, planner=f"{label}+ig")
        if best.arena_bytes <= floor:
            break
    assert best is not None
    return best


def verify(plan: ArenaPlan) -> None:
    """Raises if two lifetime-overlapping instances share bytes or an offset is misaligned."""
    items = list(zip(plan.instances, plan.offsets, strict=False))
    for a, (ia, oa) in enumerate(items):
        if oa % ALIGN or oa < 0 or oa + ia.size > plan.arena_bytes:
            raise PoetError(f"arena plan: instance {ia.value} at {oa} is misaligned or outside the arena")
        for ib, ob in items[a + 1 :]:
            if ia.overlaps(ib) and oa < ob + ib.size and ob < oa + ia.size:
                raise PoetError(
                    f"arena plan: {ia.value} [{oa},{oa + ia.size}) and {ib.value} "
                    f"[{ob},{ob + ib.size}) overlap while both alive"
                )
