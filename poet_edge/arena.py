"""Static arena planning: every value instance of a schedule gets an offset in one buffer.

An instance is born by Compute or PageIn and dies at the Free of its value (or at the end of the step).
Recomputed and paged-in copies are new instances and may land at a different offset, and so does a value
that a Move step relocates: its instance ends before the Move and a new one begins at it
(:func:`plan_moves`, where no static plan fits the budget).

With RAM banks (``--ram 128KB+64KB``) there is one buffer per bank: the first bank holds the fixed RAM
(stack, heap, parameters, inputs: the linker puts them there) and as much of the arena as fits beside it,
later banks the rest; each instance lies wholly inside one bank (:func:`plan_banks`)."""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from poet_edge import highs
from poet_edge.errors import PoetError
from poet_edge.schedule import Compute, Free, Move, PageIn, PageOut, Schedule, Step
from poet_edge.units import ALIGN, align, fmt_bytes


@dataclass(frozen=True)
class Instance:
    value: str  # problem node whose output this is (or "<node>#ws" for kernel workspace)
    size: int  # aligned bytes
    start: int  # first schedule step at which it occupies memory
    end: int  # last schedule step at which it occupies memory (inclusive)


@dataclass(frozen=True)
class ArenaPlan:
    instances: tuple[Instance, ...]
    offsets: tuple[int, ...]
    arena_bytes: int
    peak_live_bytes: int
    planner: str
    # with RAM banks: each instance's bank (its offset is inside that bank's buffer) and each bank's
    # buffer size, arena_bytes being their sum; empty: one bank, one buffer of arena_bytes
    banks: tuple[int, ...] = ()
    bank_bytes: tuple[int, ...] = ()

    @property
    def overhead(self) -> float:
        return self.arena_bytes / self.peak_live_bytes if self.peak_live_bytes else 1.0

    def bank(self, i: int) -> int:
        """The bank of instance ``i`` (0 without banks)."""
        return self.banks[i] if self.banks else 0

    @property
    def tops(self) -> tuple[int, ...]:
        """Each bank's buffer size (one bank: the arena)."""
        return self.bank_bytes or (self.arena_bytes,)


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
        elif isinstance(step, Move) and step.node in open_:  # the old place is left before the Move
            i, start = open_[step.node]
            out[i] = Instance(step.node, out[i].size, start, k - 1)
            open_[step.node] = (len(out), k)
            out.append(Instance(step.node, out[i].size, k, last))
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


SMALL_CONFLICTS = 48  # shorter conflict lists are placed in plain Python, longer ones with numpy


class Conflicts:
    """The conflict lists (as lists and as arrays) with the instance sizes: what placement reads."""

    def __init__(self, insts: list[Instance], conf: list[list[int]]) -> None:
        self.sizes = [i.size for i in insts]
        self.size = np.array(self.sizes, dtype=np.int64)
        self.lists = conf
        self.of = [np.array(c, dtype=np.int64) for c in conf]
        self.peak = peak_live(insts)
        self.work = 0  # conflict entries visited by placements (a count, not a time)


def _offset_small(offsets: list[int], conf: Conflicts, i: int, best_fit: bool) -> int:
    size = conf.sizes
    busy = sorted((offsets[j], offsets[j] + size[j]) for j in conf.lists[i] if offsets[j] >= 0)
    gaps = _gaps(busy, size[i])
    return min(gaps, key=lambda g: (g[1], g[0]))[0] if best_fit else gaps[0][0]


UNPLACED = 1 << 60  # _offset_large's offset of an unplaced instance: above every hole, never in one


def _offset_large(offsets: np.ndarray, conf: Conflicts, i: int, best_fit: bool) -> int:
    """As :func:`_offset_small`, vectorised: hole k lies between the highest end of the busy ranges
    sorted before k (``prev``) and the start of range k. ``offsets`` holds ``UNPLACED`` for instances
    not placed yet: they sort last, the first of them opens the unbounded hole above all placed ranges
    (as wide as no bounded hole is) and the rest open none."""
    js = conf.of[i]
    if not len(js):
        return 0
    lo = offsets[js]
    order = lo.argsort(kind="stable")
    lo = lo[order]
    hi = np.maximum.accumulate(lo + conf.size[js[order]])
    prev = np.empty_like(hi)
    prev[0] = 0
    prev[1:] = hi[:-1]  # ends are positive: the running maximum of ends is the old max(0, ...)
    room = lo - prev
    fits = (room >= conf.sizes[i]).nonzero()[0]
    if not len(fits):  # all placed and no hole between them: on top
        return int(hi[-1])
    if not best_fit:
        return int(prev[fits[0]])
    # the tightest hole; the unbounded one above all ranges only when none fits; ties: the lowest
    return int(prev[fits[room[fits].argmin()]])


def _place(
    order: list[int],
    insts: list[Instance],
    conf: Conflicts,
    best_fit: bool,
    fixed: list[int] | None = None,
) -> list[int]:
    """Place in ``order`` at the lowest (or the tightest, ``best_fit``) hole that no placed,
    lifetime-overlapping instance occupies; ``fixed`` (-1: not placed) holds offsets placed beforehand."""
    offsets = list(fixed) if fixed is not None else [-1] * len(insts)
    arr = np.array(offsets, dtype=np.int64)
    arr[arr < 0] = UNPLACED
    for i in order:
        n = len(conf.lists[i])
        conf.work += 1 + n
        o = (
            _offset_small(offsets, conf, i, best_fit)
            if n < SMALL_CONFLICTS
            else _offset_large(arr, conf, i, best_fit)
        )
        offsets[i] = arr[i] = o
    return offsets


def _plan(
    insts: list[Instance],
    conf: Conflicts,
    order: list[int],
    best_fit: bool,
    name: str,
    fixed: list[int] | None = None,
) -> ArenaPlan:
    offsets = _place(order, insts, conf, best_fit, fixed)
    top = max((o + s.size for o, s in zip(offsets, insts, strict=False)), default=0)
    return ArenaPlan(tuple(insts), tuple(offsets), top, conf.peak, name)


def plan_greedy_by_size(insts: list[Instance]) -> ArenaPlan:
    """TensorFlow Lite Micro's greedy planner: largest first, lowest fitting offset (the baseline)."""
    order = sorted(range(len(insts)), key=lambda i: (-insts[i].size, insts[i].start, i))
    return _plan(insts, Conflicts(insts, conflicts(insts)), order, False, "greedy-by-size")


def _breadth(insts: list[Instance]) -> list[int]:
    """For each instance, the most bytes live at any step of its lifetime (the pressure it sits in): live
    bytes at every birth and death by one sweep, then a range maximum per instance (sparse table)."""
    if not insts:
        return []
    steps = np.array(sorted({i.start for i in insts} | {i.end for i in insts}), dtype=np.int64)
    starts = np.searchsorted(steps, [i.start for i in insts])
    ends = np.searchsorted(steps, [i.end for i in insts])
    size = np.array([i.size for i in insts], dtype=np.int64)
    delta = np.zeros(len(steps) + 1, dtype=np.int64)
    np.add.at(delta, starts, size)
    np.add.at(delta, ends + 1, -size)
    table = [np.cumsum(delta[:-1])]
    while 1 << len(table) <= len(table[0]):  # table[j][k]: max of live[k : k + 2**j]
        half = 1 << (len(table) - 1)
        table.append(np.maximum(table[-1][:-half], table[-1][half:]))
    j = np.floor(np.log2(ends - starts + 1)).astype(np.int64)
    out = [max(table[a][s], table[a][e - (1 << a) + 1]) for s, e, a in zip(starts, ends, j, strict=True)]
    return [int(v) for v in out]


REFINE_ROUNDS = 100  # iterated-greedy moves per start (a count, not a time: plans stay deterministic)
REFINE_WORK = 8_000_000  # conflict entries all refinements of one plan_best may visit (a count, not a time)


def _refine(
    insts: list[Instance],
    conf: Conflicts,
    order: list[int],
    best_fit: bool,
    floor: int,
    rounds: int,
    work: int,
    check: Callable[[], None] = lambda: None,
    start: ArenaPlan | None = None,
) -> ArenaPlan:
    """Iterated greedy: move an instance that reaches the top of the arena halfway to the front of the
    placement order and re-place it and every instance after it (those before keep their offsets: the
    placement of a prefix does not depend on what follows); keep the new order when the arena does not
    grow. Round k moves the (k mod m)-th of the m instances at the top, so ties rotate. Stops after
    ``rounds`` rounds or once the placements have visited ``work`` conflict entries. ``check`` is called
    every round: it may raise (a time limit), it cannot change the plan. ``start``: the plan of ``order``
    when it is known already."""
    best = start if start is not None else _plan(insts, conf, order, best_fit, "")
    stop = conf.work + work
    for k in range(rounds):
        if best.arena_bytes <= floor or conf.work >= stop:
            break
        check()
        top = [i for i, o in enumerate(best.offsets) if o + insts[i].size == best.arena_bytes]
        moved = top[k % len(top)]
        at = order.index(moved) // 2
        cand = [i for i in order if i != moved]
        cand.insert(at, moved)
        fixed = [-1] * len(insts)
        for i in order[:at]:
            fixed[i] = best.offsets[i]
        plan = _plan(insts, conf, cand[at:], best_fit, "", fixed)
        if plan.arena_bytes <= best.arena_bytes:
            best, order = plan, cand
    return best


SLOT_SKIP = 1.005  # a plan within 0.5% of the live peak does not try the slot stage
SLOT_MAX = 256  # the most unit slots the slot stage searches over
SLOT_WORK = 4_000_000  # slot-search budget in slot visits (a count, not a time: plans stay deterministic)
SLOT_ATTEMPT = 1_000_000  # at most this much of it per search (one unit, slot count and direction)
EXACT_NODES = (
    500  # branch-and-bound nodes of the exact slot model (a count: HiGHS on one thread is deterministic)
)
# the exact slot model is only built below this many binaries: HiGHS's MIP root is bounded by no count
# (as schedulers' Policy.mip_cols). The mlp at batch 8 in 16 KB, its dense weights in blocks, is the case
# that needed this: its models of 2,371 to 5,391 binaries stay in the root, are left behind by the
# watchdog or fail late; bert_tiny's, of 1,965 binaries, is solved (tests/test_arena.py)
EXACT_MAX_VARS = 2_000
EXACT_WATCHDOG_S = 120.0  # a run past this is left behind as unsolved (highs.stuck: HiGHS's presolve can
# loop without looking at any limit)


def slot_units(insts: list[Instance]) -> list[int]:
    """Slot units for :func:`plan_slots`, largest first: each gcd ``u`` of the largest sizes while the
    multiples of ``u`` need at most ``SLOT_MAX`` slots. Every such unit is tried, however many bytes are
    off its grid (row tiles and their halo windows: many on the grid, a few bytes off it): the small
    instances then go around the slots, and :func:`plan_best` keeps the smallest arena."""
    out: list[int] = []
    u = 0
    for size in sorted({i.size for i in insts}, reverse=True):
        if math.gcd(u, size) == u:
            continue
        u = math.gcd(u, size)
        if peak_live([i for i in insts if i.size % u == 0]) > SLOT_MAX * u:
            break  # a smaller unit only needs more slots
        out.append(u)
    return out


class Slots:
    """Contiguous slot assignment of interval items (start, end, width) into ``k`` slots, items in order
    of birth. A greedy sweep places each item, at its birth, in the free slots that score best: not
    splitting a free run, the shortest run, then next to an item that dies in the same epoch (between the
    same two births of wide items) and as close in time as possible, so that slots freed together are
    adjacent when a wide item is born. When the sweep gets stuck (a wide item finds no adjacent free
    slots), the search tries each other choice of one earlier item, latest first, each completed by the
    greedy sweep, and keeps the first that gets further (one-discrepancy repair, repeated)."""

    def __init__(self, items: list[tuple[int, int, int]], k: int) -> None:
        self.items, self.k = items, k
        wide = sorted({s for s, _, w in items if w > 1})
        self.epoch = {e: bisect_right(wide, e) for _, e, _ in items}
        self.work = 0

    def choices(self, ends: list[int], level: int) -> list[int]:
        """Positions where item ``level`` fits, best first; ``ends[x]``: the death of slot x's occupant."""
        s, e, w = self.items[level]
        k, epoch = self.k, self.epoch
        ep = epoch[e]
        self.work += k
        scored = []
        p = 0
        while p < k:
            if ends[p] >= s:
                p += 1
                continue
            q = p
            while q < k and ends[q] < s:
                q += 1
            if q - p >= w:
                for pos in range(p, q - w + 1):
                    free_sides = (pos > p) + (pos + w < q)
                    match = (2, 0)
                    for x in (pos - 1, pos + w):
                        if x < 0 or x >= k:
                            match = (0, 0)
                        elif ends[x] >= s:
                            match = min(match, (int(epoch[ends[x]] != ep), abs(ends[x] - e)))
                    scored.append((free_sides, q - p, match, pos))
            p = q
        scored.sort()
        return [t[3] for t in scored]

    def sweep(self, ends: list[int], lo: int, snaps: list[list[int]]) -> tuple[int, list[int]]:
        """Greedy from item ``lo``; the depth reached (the first item that found no room, or all), the
        positions chosen and (appended to ``snaps``) the slot state before each item."""
        ends = list(ends)
        path: list[int] = []
        for level in range(lo, len(self.items)):
            snaps.append(list(ends))
            c = self.choices(ends, level)
            if not c:
                return level, path
            _, e, w = self.items[level]
            path.append(c[0])
            ends[c[0] : c[0] + w] = [e] * w
        return len(self.items), path

    def search(self, budget: int) -> list[int] | None:
        """Slot positions of the items (their lowest slot), or None once ``budget`` slot visits are spent
        or no single change gets further."""
        n = len(self.items)
        snaps: list[list[int]] = []
        depth, path = self.sweep([-1] * self.k, 0, snaps)
        while depth < n:
            improved = False
            for level in range(depth - 1, -1, -1):
                _, e, w = self.items[level]
                for pos in self.choices(snaps[level], level):
                    if self.work >= budget:
                        return None
                    if pos == path[level]:
                        continue
                    ends = list(snaps[level])
                    ends[pos : pos + w] = [e] * w
                    more: list[list[int]] = []
                    d, rest = self.sweep(ends, level + 1, more)
                    if d > depth:
                        depth, path, snaps = d, [*path[:level], pos, *rest], snaps[: level + 1] + more
                        improved = True
                        break
                if improved:
                    break
            if not improved:
                return None
        return path


def exact_slots(items: list[tuple[int, int, int]], k: int, nodes: int = EXACT_NODES) -> list[int] | None:
    """The lowest slot of each item (start, end, width) in a packing into ``k`` contiguous slots, found by
    a MILP (x[i, p] = item i starts at slot p; at every birth each slot holds at most one live item)
    solved by HiGHS on one thread with a node limit and no time limit, so the answer is deterministic;
    None if it proves there is none, hits the limit, or the model would be too large (or the run outlives
    ``EXACT_WATCHDOG_S`` and is left behind)."""
    nvars = sum(max(0, k - w + 1) for _, _, w in items)
    if nvars == 0 or nvars > EXACT_MAX_VARS or any(w > k for _, _, w in items):
        return None
    first: list[int] = []
    ncol = 0
    for _, _, w in items:
        first.append(ncol)
        ncol += k - w + 1
    rows: list[highs.Row] = [
        (1.0, 1.0, list(range(first[i], first[i] + k - w + 1)), [1.0] * (k - w + 1))
        for i, (_, _, w) in enumerate(items)
    ]
    for t in sorted({s for s, _, _ in items}):
        alive = [i for i, (s, e, _) in enumerate(items) if s <= t <= e]
        for q in range(k):
            cols = [
                first[i] + p
                for i in alive
                for p in range(max(0, q - items[i][2] + 1), min(q, k - items[i][2]) + 1)
            ]
            if len(cols) > 1:
                rows.append((0.0, 1.0, cols, [1.0] * len(cols)))
    opts = highs.Options(threads=1, node_limit=nodes, watchdog=EXACT_WATCHDOG_S)
    got = highs.solve(highs.Model.of([0.0] * ncol, rows), opts)
    if not got.optimal or got.values is None:
        return None
    x = got.values
    return [max(range(k - w + 1), key=lambda p: x[first[i] + p]) for i, (_, _, w) in enumerate(items)]


def plan_slots(
    insts: list[Instance],
    conf: list[list[int]] | Conflicts,
    ceiling: int,
    budget: int = SLOT_WORK,
    check: Callable[[], None] = lambda: None,
    exact: bool = True,
) -> ArenaPlan | None:
    """When the large instances' sizes are multiples of one unit, pack them into unit slots (by gravity,
    slot-aligned offsets lose nothing among them) with :class:`Slots`, forwards in time and, if that
    fails, backwards (a packing read backwards is a packing), at the fewest slots their live peak allows
    and more while under ``ceiling`` bytes; then place the small instances around them (first and best
    fit, the better). Each unit of :func:`slot_units` is tried, until one reaches the live peak; the smallest
    arena under ``ceiling`` wins, None if none is. ``budget`` (slot visits) bounds the whole search;
    ``exact`` lets :func:`exact_slots` try where the search fails (its HiGHS root is bounded by no count)."""
    conf = conf if isinstance(conf, Conflicts) else Conflicts(insts, conf)
    floor = peak_live(insts)
    last = max((i.end for i in insts), default=0)
    best: ArenaPlan | None = None
    for u in slot_units(insts):
        small = sorted(
            (i for i, x in enumerate(insts) if x.size % u), key=lambda i: (-insts[i].size, insts[i].start, i)
        )
        large = [i for i, x in enumerate(insts) if x.size % u == 0]
        k = -(-peak_live([insts[i] for i in large]) // u)
        path: list[int] | None = None
        while path is None and k * u < (best.arena_bytes if best else ceiling) and budget > 0:
            check()
            for backwards in (False, True):
                span = {
                    i: (last - insts[i].end, last - insts[i].start)
                    if backwards
                    else (insts[i].start, insts[i].end)
                    for i in large
                }
                order = sorted(large, key=lambda i: (span[i][0], -insts[i].size, -span[i][1], i))
                slots = Slots([(*span[i], insts[i].size // u) for i in order], k)
                path = slots.search(min(budget, SLOT_ATTEMPT))
                budget -= slots.work
                if path is not None:
                    break
            if path is None and exact:  # the exact model, forwards in time
                order = sorted(large, key=lambda i: (insts[i].start, -insts[i].size, -insts[i].end, i))
                path = exact_slots([(insts[i].start, insts[i].end, insts[i].size // u) for i in order], k)
            k += 1
        if path is None:
            continue
        fixed = [-1] * len(insts)
        for i, pos in zip(order, path, strict=True):
            fixed[i] = pos * u
        for best_fit in (False, True):
            offsets = _place(small, insts, conf, best_fit, fixed)
            top = max((o + x.size for o, x in zip(offsets, insts, strict=True)), default=0)
            if top < (best.arena_bytes if best else ceiling):
                best = ArenaPlan(tuple(insts), tuple(offsets), top, floor, f"slots {u} B x {k - 1}")
        if best is not None and best.arena_bytes <= floor:
            break
    return best


def plan_best(
    insts: list[Instance], check: Callable[[], None] = lambda: None, exact: bool = True
) -> ArenaPlan:
    """Several orderings (size, breadth, size × lifetime, birth, size then lifetime) with first-fit and
    best-fit placement; the smallest arena (ties: the first listed) unless one reaches the live peak.
    If the smallest is more than 0.5% over the live peak, the slot stage (:func:`plan_slots`) comes next
    and is taken if it reaches the peak. Otherwise each ordering is refined by iterated greedy
    (:func:`_refine`), best first, until one reaches the live peak; the smallest of all wins ("+ig" in its
    name for a refined one, "slots" for the slot stage). ``check`` is called between steps: it may raise
    (a time limit), it cannot change the plan, which depends on work counts only. ``exact=False`` leaves
    out the slot stage's exact model (:func:`exact_slots`): for callers that can move values instead."""
    n = range(len(insts))
    conf = Conflicts(insts, conflicts(insts))
    breadth = _breadth(insts)
    orders = {
        "size": sorted(n, key=lambda i: (-insts[i].size, insts[i].start, i)),
        "breadth": sorted(n, key=lambda i: (-breadth[i], -insts[i].size, insts[i].start, i)),
        "area": sorted(n, key=lambda i: (-insts[i].size * (insts[i].end - insts[i].start + 1), i)),
        "birth": sorted(n, key=lambda i: (insts[i].start, -insts[i].size, i)),
        "size-life": sorted(n, key=lambda i: (-insts[i].size, insts[i].start - insts[i].end, i)),
    }
    floor = peak_live(insts)
    tried: list[tuple[int, int, str, list[int], bool, ArenaPlan]] = []
    for name, order in orders.items():
        for best_fit in (False, True):
            label = f"{name}/{'best' if best_fit else 'first'}-fit"
            check()
            plan = _plan(insts, conf, order, best_fit, label)
            if plan.arena_bytes <= floor:
                return plan
            tried.append((plan.arena_bytes, len(tried), label, order, best_fit, plan))
    tried.sort()
    best: ArenaPlan | None = None
    if tried[0][0] > SLOT_SKIP * floor:
        best = plan_slots(insts, conf, tried[0][0], check=check, exact=exact)
        if best is not None and best.arena_bytes <= floor:
            return best
    stop = conf.work + REFINE_WORK
    for _, _, label, order, best_fit, start in tried:
        plan = _refine(insts, conf, order, best_fit, floor, REFINE_ROUNDS, stop - conf.work, check, start)
        if best is None or plan.arena_bytes < best.arena_bytes:
            best = replace(plan, planner=f"{label}+ig")
        if best.arena_bytes <= floor:
            break
    assert best is not None
    return best


def bank_rooms(banks: tuple[int, ...], ram_bytes: int, fixed_bytes: int) -> tuple[int, ...]:
    """The arena bytes each bank may hold: the first bank what the fixed RAM leaves of it (the linker puts
    stack, heap, .data and .bss there), later banks all of theirs. ``banks`` empty or one size: one bank,
    ``ram_bytes`` minus the fixed RAM."""
    if len(banks) <= 1:
        return (ram_bytes - fixed_bytes,)
    if fixed_bytes > banks[0]:
        raise PoetError(
            f"the first RAM bank ({fmt_bytes(banks[0])}) cannot hold the fixed RAM "
            f"({fmt_bytes(fixed_bytes)}: parameters, optimizer state, inputs and the stack/runtime "
            "reserve), which the linker places there; give the larger bank first, a larger first bank, or "
            "--params storage (trainable parameters out of RAM)"
        )
    return (banks[0] - fixed_bytes, *banks[1:])


def excess(plan: ArenaPlan, rooms: tuple[int, ...]) -> int:
    """Bytes by which the plan overflows its banks (the sum over the banks that overflow), or, when all
    fit, minus the smallest slack (one bank: arena minus room)."""
    over = [t - r for t, r in zip(plan.tops, rooms, strict=True)]
    beyond = sum(o for o in over if o > 0)
    return beyond if beyond > 0 else max(over)


def bank_report(plan: ArenaPlan, rooms: tuple[int, ...]) -> str:
    """Each bank's arena against its room, naming the banks that overflow."""
    return "; ".join(
        f"bank {b} arena {fmt_bytes(t)} of {fmt_bytes(r)}{' (overflows)' if t > r else ''}"
        for b, (t, r) in enumerate(zip(plan.tops, rooms, strict=True))
    )


def _banked(
    insts: list[Instance], offsets: list[int], banks: list[int], k: int, peak: int, name: str
) -> ArenaPlan:
    tops = [0] * k
    for inst, off, b in zip(insts, offsets, banks, strict=True):
        tops[b] = max(tops[b], off + inst.size)
    return ArenaPlan(tuple(insts), tuple(offsets), sum(tops), peak, name, tuple(banks), tuple(tops))


def _spill(
    insts: list[Instance], rooms: tuple[int, ...], whole: ArenaPlan, check: Callable[[], None]
) -> ArenaPlan:
    """Bank by bank: the instances a plan places inside the bank's room stay there at their offsets, the
    rest are planned again (:func:`plan_best`) for the next bank; the last bank takes all that is left."""
    offsets, banks = list(whole.offsets), [0] * len(insts)
    idx, plan, names = list(range(len(insts))), whole, [whole.planner]
    for b, room in enumerate(rooms):
        last = b == len(rooms) - 1 or plan.arena_bytes <= room
        rest = []
        for k, i in enumerate(idx):
            if last or plan.offsets[k] + insts[i].size <= room:
                offsets[i], banks[i] = plan.offsets[k], b
            else:
                rest.append(i)
        if last:
            break
        idx = rest
        plan = plan_best([insts[i] for i in idx], check)
        names.append(plan.planner)
    return _banked(insts, offsets, banks, len(rooms), whole.peak_live_bytes, f"banks: {' / '.join(names)}")


def _first_fit_banks(
    insts: list[Instance], conf: Conflicts, order: list[int], rooms: tuple[int, ...]
) -> tuple[list[int], list[int]] | None:
    """First fit by bank: each instance in ``order`` at the lowest hole of the first bank where it fits
    under the room, among the lifetime-overlapping instances of that bank; None if one fits no bank."""
    offsets, banks = [-1] * len(insts), [-1] * len(insts)
    size = conf.sizes
    for i in order:
        conf.work += 1 + len(conf.lists[i])
        for b, room in enumerate(rooms):
            busy = sorted((offsets[j], offsets[j] + size[j]) for j in conf.lists[i] if banks[j] == b)
            o = _gaps(busy, size[i])[0][0]
            if o + size[i] <= room:
                offsets[i], banks[i] = o, b
                break
        else:
            return None
    return offsets, banks


def plan_banks(
    insts: list[Instance],
    rooms: tuple[int, ...],
    check: Callable[[], None] = lambda: None,
    exact: bool = True,
) -> ArenaPlan:
    """The arena in RAM banks of ``rooms`` bytes (one room: :func:`plan_best`, unchanged). One plan over
    all instances; if it fits the first bank, that is the plan (the later banks stay empty). Else
    :func:`_spill` moves what lies above the first bank's room to the next bank, planned again; if a bank
    still overflows, first fit by bank with lifetimes (:func:`_first_fit_banks`) over three orderings of
    :func:`plan_best` is tried, the first that fits taken; else the spilled plan, whose last bank
    overflows (:func:`excess` tells by how much: the caller reschedules or evicts). ``exact`` as in
    :func:`plan_best`."""
    whole = plan_best(insts, check, exact)
    if len(rooms) == 1:
        return whole
    if whole.arena_bytes <= rooms[0]:
        empty = (0,) * (len(rooms) - 1)
        return replace(whole, banks=(0,) * len(insts), bank_bytes=(whole.arena_bytes, *empty))
    spilled = _spill(insts, rooms, whole, check)
    if excess(spilled, rooms) <= 0:
        return spilled
    conf = Conflicts(insts, conflicts(insts))
    n = range(len(insts))
    breadth = _breadth(insts)
    orders = {
        "size": sorted(n, key=lambda i: (-insts[i].size, insts[i].start, i)),
        "breadth": sorted(n, key=lambda i: (-breadth[i], -insts[i].size, insts[i].start, i)),
        "birth": sorted(n, key=lambda i: (insts[i].start, -insts[i].size, i)),
    }
    for name, order in orders.items():
        check()
        found = _first_fit_banks(insts, conf, order, rooms)
        if found is not None:
            peak = whole.peak_live_bytes
            return _banked(insts, *found, len(rooms), peak, f"banks: {name}/first-fit")
    return spilled


def _hole(busy: list[tuple[int, int]], want: int, size: int, room: int) -> int | None:
    """An offset for ``size`` bytes that no range of ``busy`` (sorted (start, end)) overlaps, below
    ``room``: ``want`` when it is free, else the lowest hole; None when there is none."""
    if 0 <= want and want + size <= room and all(want + size <= a or b <= want for a, b in busy):
        return want
    o = _gaps(busy, size)[0][0]
    return o if o + size <= room else None


MOVE_WINDOWS = 16  # windows _make_room tries for one instance, fewest bytes to move first (a count)


def _make_room(
    live: dict[int, int], born: dict[int, int], sizes: Mapping[int, int], size: int, room: int
) -> tuple[int, list[tuple[int, int]]] | None:
    """A window of ``size`` bytes below ``room`` for a new instance, made by moving the ``live``
    instances in it (instance -> offset) to holes elsewhere below ``room``; ``born`` (placed at this
    step) stay. The windows start at 0 or at the end of a range; those that would move the fewest bytes are
    tried first. (the window's offset, [(instance, its new offset)]) or None. A new offset overlaps no live
    instance's old or new range nor the window, so the moves may run in any order."""
    ranges = sorted((o, o + sizes[j], j) for j, o in {**live, **born}.items())
    los, his = [lo for lo, _, _ in ranges], [hi for _, hi, _ in ranges]  # disjoint: both ascending
    bytes_before = [0, *np.cumsum([hi - lo for lo, hi, _ in ranges]).tolist()]
    fixed_before = [0, *np.cumsum([j in born for _, _, j in ranges]).tolist()]
    cands = []
    for a in sorted({0, *his}):
        if a + size > room:
            break
        first, end = bisect_right(his, a), bisect_right(los, a + size - 1)  # the ranges the window meets
        if fixed_before[end] == fixed_before[first]:
            cands.append((bytes_before[end] - bytes_before[first], a, first, end))
    for _, a, first, end in sorted(cands)[:MOVE_WINDOWS]:
        inside = [j for _, _, j in ranges[first:end]]
        busy = sorted([(lo, hi) for lo, hi, _ in ranges] + [(a, a + size)])
        moved = []
        for j in sorted(inside, key=lambda j: (-sizes[j], j)):
            o = _hole(busy, -1, sizes[j], room)
            if o is None:
                break
            moved.append((j, o))
            insort(busy, (o, o + sizes[j]))
        else:
            return a, moved
    return None


def _relocate(
    insts: list[Instance], members: list[int], offsets: Sequence[int], room: int
) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]] | None:
    """The instances ``members`` of ``insts`` (one bank) placed step by step within ``room``: each new one at
    its static offset (``offsets``) when that is free, else the lowest hole, else in the window that moves
    the fewest bytes (:func:`_make_room`), else on top of the live ones compacted. Returns each member's
    birth offset and, per step, the (instance, new offset) moves before it; None when the live bytes do not
    fit ``room``."""
    if peak_live([insts[j] for j in members]) > room:
        return None
    sizes_of = {j: insts[j].size for j in members}
    born: dict[int, list[int]] = {}
    for j in members:
        born.setdefault(insts[j].start, []).append(j)
    live: dict[int, int] = {}  # alive instance -> its offset now
    placed: dict[int, int] = {}  # instance -> the offset it was born at
    moves: dict[int, list[tuple[int, int]]] = {}  # step -> (instance, new offset), in order
    for k in sorted(born):
        live = {j: o for j, o in live.items() if insts[j].end >= k}
        before: dict[int, int] = dict(live)
        new: dict[int, int] = {}  # instance born at this step -> offset
        shifted: list[tuple[int, int]] = []
        for j in born[k]:
            busy = sorted((o, o + sizes_of[i]) for i, o in {**live, **new}.items())
            o = _hole(busy, offsets[j], sizes_of[j], room)
            if o is None and (made := _make_room(live, new, sizes_of, sizes_of[j], room)) is not None:
                o, relocated = made
                shifted += relocated
                live.update(relocated)
            if o is None:
                break
            new[j] = o
        else:
            live.update(new)
            placed.update(new)
            moves[k] = shifted
            continue
        live, top, shifted = before, 0, []
        for j in sorted(live, key=lambda j: (live[j], j)):
            if live[j] != top:
                shifted.append((j, top))
                live[j] = top
            top += sizes_of[j]
        moves[k] = shifted
        for j in born[k]:
            live[j] = placed[j] = top
            top += sizes_of[j]
    return placed, moves


def _live_banks(insts: list[Instance], static: ArenaPlan, rooms: tuple[int, ...]) -> list[int] | None:
    """A bank for each instance such that each bank's live bytes stay within its room at every step. In
    each of a few orders (birth, size, size x lifetime), each instance goes to the bank the static plan
    gave it when its live bytes leave room there, else to the first bank that does; then the same with
    the banks in order. The first order that places all wins; None when none does."""
    last = max((i.end for i in insts), default=0) + 1
    n = range(len(insts))
    orders = [
        sorted(n, key=lambda j: (insts[j].start, j)),
        sorted(n, key=lambda j: (-insts[j].size, j)),
        sorted(n, key=lambda j: (-insts[j].size * (insts[j].end - insts[j].start + 1), j)),
    ]
    for keep in (True, False):
        for order in orders:
            load = [np.zeros(last, dtype=np.int64) for _ in rooms]
            out = [-1] * len(insts)
            for j in order:
                a, b, size = insts[j].start, insts[j].end + 1, insts[j].size
                first = static.bank(j) if keep else 0
                for bank in (first, *(k for k in range(len(rooms)) if k != first)):
                    if int(load[bank][a:b].max()) + size <= rooms[bank]:
                        load[bank][a:b] += size
                        out[j] = bank
                        break
                else:
                    break
            else:
                return out
    return None


def plan_moves(
    schedule: Schedule,
    static: ArenaPlan,
    rooms: int | tuple[int, ...],
    sizes: Mapping[str, int],
    workspace: Mapping[str, int],
) -> tuple[Schedule, ArenaPlan] | None:
    """Where the static plan of ``schedule`` (``static``) overflows its ``rooms`` (one per RAM bank) although
    the live bytes fit: the schedule with Move steps and an arena within the rooms. Each instance gets a bank
    whose live bytes leave it room (:func:`_live_banks`: the static plan's bank where it can), then, bank by
    bank, step by step, each new instance takes
    its static offset when that is free and below the room, else the lowest hole below the room; else the
    instances in the window that moves the fewest bytes go to holes elsewhere (:func:`_make_room`); when
    there is no such window for every new instance, the bank's instances alive are compacted instead: slid
    down in the order of their offsets to lie end to end from offset 0 (each lands below where it was and
    above all it passed, so a memmove never overwrites a value still to move), and the new instances fit
    on top, since the live bytes fit (:func:`_relocate`). A Move step before the step relocates each moved
    value. None when the live bytes (aligned) do not fit the rooms that way. Deterministic: it depends only
    on the schedule and the static plan."""
    rooms = (rooms,) if isinstance(rooms, int) else rooms
    insts = list(static.instances)
    bank_of = _live_banks(insts, static, rooms) if len(rooms) > 1 else [0] * len(insts)
    if bank_of is None:
        return None
    placed: dict[int, int] = {}
    moves: dict[int, list[tuple[int, int]]] = {}
    for b, room in enumerate(rooms):
        got = _relocate(insts, [j for j in range(len(insts)) if bank_of[j] == b], static.offsets, room)
        if got is None:
            return None
        placed.update(got[0])
        for k, shifted in got[1].items():
            moves.setdefault(k, []).extend(shifted)
    born: dict[int, list[int]] = {}
    for j, inst in enumerate(insts):
        born.setdefault(inst.start, []).append(j)
    steps: list[Step] = []
    at: dict[tuple[int, str], tuple[int, int]] = {}  # (new step, value) -> its instance's offset and bank
    for k, step in enumerate(schedule.steps):
        for j, o in moves.get(k, []):
            at[(len(steps), insts[j].value)] = o, bank_of[j]
            steps.append(Move(insts[j].value))
        for j in born.get(k, []):
            at[(len(steps), insts[j].value)] = placed[j], bank_of[j]
        steps.append(step)
    moved = Schedule(tuple(steps), schedule.solver, schedule.report)
    new_insts = instances(moved, sizes, workspace)
    offsets = [at[(i.start, i.value)][0] for i in new_insts]
    n = sum(map(len, moves.values()))
    name, peak = f"{static.planner} + {n} moves", peak_live(new_insts)
    if not static.banks:
        top = max((o + i.size for o, i in zip(offsets, new_insts, strict=True)), default=0)
        return moved, ArenaPlan(tuple(new_insts), tuple(offsets), top, peak, name)
    banks = [at[(i.start, i.value)][1] for i in new_insts]
    return moved, _banked(new_insts, offsets, banks, len(rooms), peak, name)


def evict_above(
    schedule: Schedule,
    plan: ArenaPlan,
    room: int | tuple[int, ...],
    preds: Mapping[str, set[str]],
    consumers: Mapping[str, set[str]],
    recomputable: set[str],
    pageable: set[str],
    once: bool = False,
) -> Schedule | None:
    """Absorbs fragmentation without a new schedule: each value whose instance the plan placed above
    ``room`` bytes is freed when it is born and brought back just before each run of steps that read it,
    then freed after the run: recomputed where it may be (``recomputable``) and its inputs are in RAM there
    (and not evicted themselves), else paged in (a page-out after its birth, unless it was paged in: storage
    holds it). Its RAM lifetime shrinks to those runs, a subset of the old one, so no step's live bytes grow
    (but a recomputation's workspace: the caller replays the result in the simulator), and short lifetimes
    fit holes a long one did not. Numerics do not change (the same kernel on the same inputs, or a copy). None
    when no instance above ``room`` can be evicted so (a workspace, a value never freed, or one neither
    recomputable there nor ``pageable``). ``once``: a value that would be paged in is paged out and in only
    once, around the longest stretch without reads (cheaper where a page-in costs more than the RAM saved).
    With RAM banks ``room`` holds each bank's room."""
    rooms = (room,) if isinstance(room, int) else room
    above = [
        (inst, _reads(schedule.steps, inst, consumers[inst.value]))
        for k, (inst, off) in enumerate(zip(plan.instances, plan.offsets, strict=True))
        if off + inst.size > rooms[plan.bank(k)] and schedule.steps[inst.end] == Free(inst.value)
    ]
    evicted = {inst.value for inst, _ in above}
    resident = _resident_before(schedule.steps, {run[0] for _, runs in above for run in runs})
    steps: list[Step | None] = list(schedule.steps)
    before: dict[int, list[Step]] = {}
    after: dict[int, list[Step]] = {}
    for inst, runs in above:
        v = inst.value
        back: list[Step] = []
        for run in runs:
            ins = preds[v]
            again = v in recomputable and ins <= resident[run[0]] and not ins & evicted
            back.append(Compute(v) if again else PageIn(v))
        if PageIn(v) in back and v not in pageable:
            continue
        stored = isinstance(schedule.steps[inst.start], PageIn) or PageIn(v) not in back
        if once and PageIn(v) in back:
            idle = [(runs[0][0] - inst.start, 0)] + [
                (runs[j][0] - runs[j - 1][-1], j) for j in range(1, len(runs))
            ]
            j = max(idle, key=lambda t: (t[0], -t[1]))[1]
            after.setdefault(runs[j - 1][-1] if j else inst.start, []).extend(
                [Free(v)] if stored else [PageOut(v), Free(v)]
            )
            before.setdefault(runs[j][0], []).append(PageIn(v))
            continue
        steps[inst.end] = None  # freed after each run of reads instead
        after.setdefault(inst.start, []).extend([Free(v)] if stored else [PageOut(v), Free(v)])
        for run, bring in zip(runs, back, strict=True):
            before.setdefault(run[0], []).append(bring)
            after.setdefault(run[-1], []).append(Free(v))
    if not before and not after:
        return None
    out: list[Step] = []
    for k, kept in enumerate(steps):
        out += before.get(k, [])
        out += [kept] if kept is not None else []
        out += after.get(k, [])
    return Schedule(tuple(out), schedule.solver, schedule.report)


def _resident_before(steps: tuple[Step, ...], at: set[int]) -> dict[int, set[str]]:
    """The values in RAM just before each step index in ``at``."""
    out: dict[int, set[str]] = {}
    ram: set[str] = set()
    for k, step in enumerate(steps):
        if k in at:
            out[k] = set(ram)
        if isinstance(step, (Compute, PageIn)):
            ram.add(step.node)
        elif isinstance(step, Free):
            ram.discard(step.node)
    return out


def _reads(steps: tuple[Step, ...], inst: Instance, consumers: set[str]) -> list[list[int]]:
    """The steps inside ``inst``'s lifetime that need its value in RAM (a consumer's Compute, its own
    PageOut), grouped in runs with nothing but Free and PageOut steps between (they add no RAM)."""
    runs: list[list[int]] = []
    for k in range(inst.start + 1, inst.end):
        step = steps[k]
        if not (isinstance(step, Compute) and step.node in consumers) and step != PageOut(inst.value):
            continue
        if runs and all(isinstance(steps[j], (Free, PageOut)) for j in range(runs[-1][-1] + 1, k)):
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs


def verify(plan: ArenaPlan) -> None:
    """Raises if two lifetime-overlapping instances share bytes or an offset is misaligned (every pair
    of :func:`conflicts`, the lifetime-overlapping ones, is checked)."""
    insts, offsets = list(plan.instances), plan.offsets
    if plan.banks and (len(plan.banks) != len(insts) or sum(plan.bank_bytes) != plan.arena_bytes):
        raise PoetError("arena plan: the banks do not match the instances or the arena size")
    for k, (ia, oa) in enumerate(zip(insts, offsets, strict=True)):
        if oa % ALIGN or oa < 0 or oa + ia.size > plan.tops[plan.bank(k)]:
            raise PoetError(f"arena plan: instance {ia.value} at {oa} is misaligned or outside the arena")
    for a, others in enumerate(conflicts(insts)):
        ia, oa = insts[a], offsets[a]
        for b in others:
            ib, ob = insts[b], offsets[b]
            if b > a and plan.bank(a) == plan.bank(b) and oa < ob + ib.size and ob < oa + ia.size:
                raise PoetError(
                    f"arena plan: {ia.value} [{oa},{oa + ia.size}) and {ib.value} "
                    f"[{ob},{ob + ib.size}) overlap while both alive"
                )
