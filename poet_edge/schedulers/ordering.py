"""The topological order as a decision: memory-aware orders of a problem's nodes.

A schedule names nodes, not positions, so a schedule built on the problem with its nodes in another
valid topological order is a schedule of the same problem (the simulator checks the links).
:func:`choose_order` compares candidate orders by the RAM curve of their no-recomputation pass (every
node once, each value freed after its last consumer; :class:`Curves`), keyed by (overflow, peak):
overflow is the sum over steps of the bytes above the budget, a cheap stand-in for what
recomputation must make up, peak breaks ties. The candidates, in this fixed order of comparison (the
first of equal keys wins, so the given order is kept unless another is strictly better):

* ``given``: the problem's own order;
* ``min-net``: list scheduling that runs, among the ready nodes, the one whose run changes the live
  bytes least (frees the most / allocates the least; ties: the given order);
* ``dfs-first`` / ``dfs-last``: consumer-driven depth-first orders (from each sink in the given order,
  the inputs' subtrees first, postorder; inputs in the given order, or the last first);
* ``rpo``: the reverse postorder of a depth-first search from the sources.

The best of them is improved by a local search over orders (:func:`improve`): a node at or near a
step above the budget (or at the peak) moves across that step, anywhere between its last input and
its first consumer (so the order stays valid); a move is kept when the key does not grow. Moves are
drawn from a fixed seed and counted in evaluations (``work``), never in seconds: the same problem
gives the same order on any machine and load. ``invalidated_by`` pairs (a, b) count as links a -> b.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Compute, Free, Schedule, Step


@dataclass
class Deadline:
    """The safety stop of counted work (``--time-limit``): ``passed()`` once ``time.perf_counter()`` is
    beyond ``at``, and from then on (``hit`` says a phase was cut)."""

    at: float = math.inf
    hit: bool = False

    def passed(self) -> bool:
        if not self.hit and self.at < math.inf and time.perf_counter() > self.at:
            self.hit = True
        return self.hit


SEED = 55  # the local search's moves
NEAR = 50  # a moved node is within this many steps of the step it moves across
ORDER_WORK = 4000  # choose_order's default evaluations of the local search

Key = tuple[int, int]  # (overflow bytes x steps, peak bytes)


def precedence(problem: SchedulingProblem) -> list[list[int]]:
    """For every node, the nodes that must run before it: its inputs and, for each pair (a, b) of
    ``invalidated_by``, a before b. Sorted, without repeats."""
    out: list[set[int]] = [set() for _ in problem.nodes]
    for u, v in problem.edges:
        out[v].add(u)
    for a, b in problem.invalidated_by:
        out[b].add(a)
    return [sorted(s) for s in out]


def _successors(prec: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in prec]
    for v, ps in enumerate(prec):
        for u in ps:
            out[u].append(v)
    return out


def reorder(problem: SchedulingProblem, order: Sequence[int]) -> SchedulingProblem:
    """``problem`` with its nodes in ``order`` (indices of ``problem.nodes``); PoetError unless that
    is a permutation in which every link (and every ``invalidated_by`` pair) goes forward."""
    n = len(problem.nodes)
    if sorted(order) != list(range(n)):
        raise PoetError(f"an order must list each of the {n} nodes once")
    new = [0] * n
    for i, old in enumerate(order):
        new[old] = i
    for u, v in (*problem.edges, *problem.invalidated_by):
        if new[u] >= new[v]:
            names = problem.nodes[u].name, problem.nodes[v].name
            raise PoetError(f"the order puts {names[1]} before {names[0]}, which must run first")
    return replace(
        problem,
        nodes=tuple(problem.nodes[old] for old in order),
        edges=tuple(sorted((new[u], new[v]) for u, v in problem.edges)),
        invalidated_by=tuple(sorted((new[a], new[b]) for a, b in problem.invalidated_by)),
    )


class Curves:
    """The RAM curve of the no-recomputation pass in any order of one problem, vectorised: at the
    step of node v, fixed + live values + v's output + v's workspace, a value being live from its
    node's step until its last consumer's step (a value nobody consumes: its own step only). Equal
    to the simulator's curve of the baseline ``none`` at its Compute steps. ``evaluations`` counts
    the curves computed."""

    def __init__(self, problem: SchedulingProblem) -> None:
        self.n = len(problem.nodes)
        self.fixed = problem.fixed_bytes
        self.out = np.array([node.out_bytes for node in problem.nodes], dtype=np.int64)
        self.ws = np.array([node.workspace_bytes for node in problem.nodes], dtype=np.int64)
        edges = np.array(sorted(set(problem.edges)), dtype=np.int64).reshape(-1, 2)
        self.heads, starts = np.unique(edges[:, 0], return_index=True)
        self.starts = starts.astype(np.int64)
        self.tails = edges[:, 1]
        self.evaluations = 0

    def curve(self, order: Sequence[int] | np.ndarray) -> np.ndarray:
        self.evaluations += 1
        order = np.asarray(order, dtype=np.int64)
        pos = np.empty(self.n, dtype=np.int64)
        pos[order] = np.arange(self.n, dtype=np.int64)
        last = pos.copy()
        if len(self.tails):
            last[self.heads] = np.maximum.reduceat(pos[self.tails], self.starts)
        freed = np.bincount(last, weights=self.out, minlength=self.n).astype(np.int64)
        live = np.cumsum(self.out[order] - freed)  # after each step's frees
        before = np.concatenate(([0], live[:-1]))
        return self.fixed + before + self.out[order] + self.ws[order]

    def key(self, order: Sequence[int] | np.ndarray, budget: int) -> Key:
        mem = self.curve(order)
        return int(np.maximum(mem - budget, 0).sum()), int(mem.max(initial=0))


# -- candidate orders -----------------------------------------------------------------------------------


def min_net(problem: SchedulingProblem, prec: list[list[int]]) -> list[int]:
    """List scheduling: run the ready node whose run changes the live bytes least (its output, less
    the inputs it is the last consumer of; a node nobody consumes frees its own output at once);
    ties in the given order."""
    n = len(problem.nodes)
    out = [node.out_bytes for node in problem.nodes]
    inputs = problem.preds()
    consumers = problem.succs()
    left = [len(set(c)) for c in consumers]
    after = _successors(prec)
    waiting = [len(p) for p in prec]
    done = [False] * n

    def net(v: int) -> int:
        freed = sum(out[u] for u in set(inputs[v]) if left[u] == 1)
        return (0 if left[v] == 0 else out[v]) - freed

    heap = [(net(v), v) for v in range(n) if waiting[v] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        score, v = heapq.heappop(heap)
        if done[v] or score != net(v):
            continue  # stale: a cheaper entry was pushed when an input's last consumer changed
        done[v] = True
        order.append(v)
        for u in set(inputs[v]):
            left[u] -= 1
            if left[u] == 1:  # its last consumer now frees it
                w = next(c for c in consumers[u] if not done[c])
                if waiting[w] == 0:
                    heapq.heappush(heap, (net(w), w))
        for w in after[v]:
            waiting[w] -= 1
            if waiting[w] == 0:
                heapq.heappush(heap, (net(w), w))
    return order


def dfs_consumer(prec: list[list[int]], last_first: bool) -> list[int]:
    """Postorder of a depth-first search over the inputs, from each sink in the given order: every
    node right after its inputs' subtrees (inputs in the given order, or the last first)."""
    after = _successors(prec)
    seen = [False] * len(prec)
    order: list[int] = []
    for root in (v for v in range(len(prec)) if not after[v]):
        seen[root] = True
        stack = [(root, iter(reversed(prec[root]) if last_first else prec[root]))]
        while stack:
            v, todo = stack[-1]
            u = next((u for u in todo if not seen[u]), None)
            if u is None:
                stack.pop()
                order.append(v)
            else:
                seen[u] = True
                stack.append((u, iter(reversed(prec[u]) if last_first else prec[u])))
    return order


def reverse_postorder(prec: list[list[int]]) -> list[int]:
    """Reverse postorder of a depth-first search along the links from the sources (given order)."""
    after = _successors(prec)
    seen = [False] * len(prec)
    post: list[int] = []
    for root in reversed([v for v in range(len(prec)) if not prec[v]]):
        seen[root] = True
        stack = [(root, iter(after[root]))]
        while stack:
            v, todo = stack[-1]
            u = next((u for u in todo if not seen[u]), None)
            if u is None:
                stack.pop()
                post.append(v)
            else:
                seen[u] = True
                stack.append((u, iter(after[u])))
    return post[::-1]


def levels(prec: list[list[int]]) -> list[tuple[str, list[int]]]:
    """Level orders of list scheduling: ``asap``, the nodes by their longest path from a source (ties:
    the given order); ``mid-level``, by the centre of their mobility window (ASAP plus ALAP level, a
    node's longest paths from a source and to a sink; ties: ASAP level, then the given order). Both are
    topological: a link raises both levels."""
    after = _successors(prec)
    n = len(prec)
    depth = [0] * n
    for v in range(n):  # the given order is topological
        depth[v] = max((depth[u] + 1 for u in prec[v]), default=0)
    height = [0] * n
    for v in reversed(range(n)):
        height[v] = max((height[w] + 1 for w in after[v]), default=0)
    top = max(depth, default=0)
    return [
        ("asap", sorted(range(n), key=lambda v: (depth[v], v))),
        ("mid-level", sorted(range(n), key=lambda v: (depth[v] + top - height[v], depth[v], v))),
    ]


def candidates(problem: SchedulingProblem) -> list[tuple[str, list[int]]]:
    """The candidate orders, in the order of comparison (the module docstring)."""
    prec = precedence(problem)
    return [
        ("given", list(range(len(problem.nodes)))),
        ("min-net", min_net(problem, prec)),
        ("dfs-first", dfs_consumer(prec, last_first=False)),
        ("dfs-last", dfs_consumer(prec, last_first=True)),
        ("rpo", reverse_postorder(prec)),
    ]


# -- local search -------------------------------------------------------------------------------------


def improve(
    problem: SchedulingProblem,
    order: list[int],
    budget: int,
    work: int,
    curves: Curves,
    deadline: Deadline | None = None,
) -> list[int]:
    """The local search over orders (the module docstring), at most ``work`` evaluations; stops early
    once nothing is above the budget, or past ``deadline`` (the safety stop)."""
    deadline = deadline or Deadline()
    n = len(order)
    prec = precedence(problem)
    after = _successors(prec)
    rng = random.Random(SEED)
    order = list(order)
    mem = curves.curve(order)
    key = (int(np.maximum(mem - budget, 0).sum()), int(mem.max(initial=0)))
    pos = [0] * n
    for spent in range(work):
        if key[0] == 0 or n < 2 or (spent % 64 == 0 and deadline.passed()):
            break
        for i, v in enumerate(order):
            pos[v] = i
        hot = np.flatnonzero(mem > budget)
        t = int(mem.argmax()) if spent % 2 == 0 else int(hot[rng.randrange(len(hot))])
        v = order[rng.randrange(max(0, t - NEAR), min(n, t + NEAR + 1))]
        lo = max((pos[u] + 1 for u in prec[v]), default=0)
        hi = min((pos[w] - 1 for w in after[v]), default=n - 1)
        span = (max(t, pos[v] + 1), hi) if pos[v] <= t else (lo, min(t, pos[v] - 1))
        if span[0] > span[1]:
            continue
        moved = list(order)
        moved.insert(rng.randint(*span), moved.pop(pos[v]))
        new_mem = curves.curve(moved)
        new_key = (int(np.maximum(new_mem - budget, 0).sum()), int(new_mem.max(initial=0)))
        if new_key <= key:
            order, mem, key = moved, new_mem, new_key
    return order


# -- the choice ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderChoice:
    """The chosen order and what it was compared with.

    ``problem``: the input problem with its nodes in the chosen order; ``order``: that order as indices
    of the input problem's nodes; ``origin``: the candidate it came from (``+search`` when the local
    search improved it); ``compared``: (candidate, overflow, peak) in the order of comparison, the
    search's result last; ``evaluations``: RAM curves computed."""

    problem: SchedulingProblem
    order: tuple[int, ...]
    origin: str
    compared: tuple[tuple[str, int, int], ...]
    evaluations: int

    @property
    def peak(self) -> int:
        return self.compared_key[1]

    @property
    def compared_key(self) -> Key:
        best = min(self.compared, key=lambda c: (c[1], c[2]))
        return best[1], best[2]


def choose_order(
    problem: SchedulingProblem, budget_bytes: int, work: int = ORDER_WORK, deadline: Deadline | None = None
) -> OrderChoice:
    """The candidate order with the least (overflow, peak) at ``budget_bytes``, improved by at most
    ``work`` evaluations of the local search (cut at ``deadline``, the safety stop); deterministic when
    not cut."""
    curves = Curves(problem)
    compared: list[tuple[str, int, int]] = []
    best: tuple[Key, int, str, list[int]] | None = None
    for i, (name, order) in enumerate(candidates(problem)):
        key = curves.key(order, budget_bytes)
        compared.append((name, *key))
        if best is None or (key, i) < best[:2]:
            best = (key, i, name, order)
    assert best is not None
    key, _, origin, order = best
    searched = improve(problem, order, budget_bytes, work, curves, deadline)
    new_key = curves.key(searched, budget_bytes)
    compared.append(("search", *new_key))
    if new_key < key:
        order, origin = searched, f"{origin}+search"
    return OrderChoice(reorder(problem, order), tuple(order), origin, tuple(compared), curves.evaluations)


# -- recomputation inserted into an order -------------------------------------------------------------


class Sequences:
    """RAM curves of compute sequences in which a node may appear more than once (recomputations):
    each compute uses the latest earlier instance of each input; an instance is live from its step to
    its last such use (its own step when unused). ``evaluations`` counts the curves computed."""

    def __init__(self, problem: SchedulingProblem) -> None:
        inputs = [sorted(set(p)) for p in problem.preds()]
        self.deg = np.array([len(p) for p in inputs], dtype=np.int64)
        self.ptr = np.concatenate(([0], np.cumsum(self.deg)[:-1])).astype(np.int64)
        self.idx = np.array([u for p in inputs for u in p], dtype=np.int64)
        self.out = np.array([node.out_bytes for node in problem.nodes], dtype=np.int64)
        self.ws = np.array([node.workspace_bytes for node in problem.nodes], dtype=np.int64)
        self.fixed = problem.fixed_bytes
        self.evaluations = 0
        self.names = [node.name for node in problem.nodes]
        self.invalidated = np.array(problem.invalidated_by, dtype=np.int64).reshape(-1, 2)
        readers: list[list[int]] = [[] for _ in problem.nodes]
        for v, p in enumerate(inputs):
            for u in p:
                readers[u].append(v)
        self.readers = [frozenset(r) for r in readers]

    def uses(self, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the instance each input read of ``seq`` reads: the latest step before it that runs the read
        node, the step that reads), one row per read; PoetError where no instance precedes the read. A
        node run once is found by a lookup; only the reads of nodes run more than once are searched."""
        m = len(seq)
        d = self.deg[seq]
        at = np.repeat(np.arange(m, dtype=np.int64), d)
        used = self.idx[np.arange(len(at), dtype=np.int64) + (self.ptr[seq] - (np.cumsum(d) - d))[at]]
        count = np.bincount(seq, minlength=len(self.out))
        inst = self.firsts(seq)[used]
        if len(inst) and (inst >= at).any():  # a node read before it first runs (or never)
            raise PoetError("a compute sequence uses a value before any instance of it")
        again = np.flatnonzero(count[used] > 1)
        if len(again):
            runs = np.flatnonzero(count[seq] > 1)  # the steps of nodes run more than once
            keys = seq[runs] * m + runs
            by_key = np.argsort(keys, kind="stable")
            found = np.searchsorted(keys[by_key], used[again] * m + at[again]) - 1
            inst[again] = runs[by_key[found]]  # found >= 0: the first run precedes the read
        return inst, at

    def ends(self, seq: np.ndarray) -> np.ndarray:
        """The last step at which each step's instance is used (its own step when unused)."""
        inst, at = self.uses(seq)
        end = np.arange(len(seq), dtype=np.int64)
        np.maximum.at(end, inst, at)
        return end

    def firsts(self, seq: np.ndarray) -> np.ndarray:
        """Each node's first step in ``seq`` (``len(seq)`` where it does not run)."""
        first = np.full(len(self.out), len(seq), dtype=np.int64)
        first[seq[::-1]] = np.arange(len(seq) - 1, -1, -1, dtype=np.int64)
        return first

    def reads_after_move(self, seq: np.ndarray, first: np.ndarray, j: int, q: int) -> bool:
        """Whether every read of ``seq`` (whose nodes first run at ``first``) with step ``j`` moved to
        position ``q`` (``np.insert(np.delete(seq, j), q, seq[j])``) still has an earlier instance, given
        that every read of ``seq`` has one: the check :meth:`uses` makes, in the steps between ``j`` and
        ``q`` only. Moved earlier, each of the node's inputs needs an instance before ``q``; moved later,
        each of its readers between its old and new step needs another instance before it.
        ``invalidated_by`` is not checked."""
        v = int(seq[j])
        if q < j:
            return all(first[u] < q for u in self.idx[self.ptr[v] : self.ptr[v] + self.deg[v]].tolist())
        if first[v] < j:
            return True
        readers = self.readers[v]
        for w in seq[j + 1 : q + 1].tolist():
            if w == v:
                return True  # another instance of v comes before any reader
            if w in readers:
                return False
        return True

    def check_invalidated(self, seq: np.ndarray) -> None:
        """PoetError if an instance of a node comes after the first run of a node that invalidates it."""
        if not len(self.invalidated):
            return
        steps = np.arange(len(seq), dtype=np.int64)
        last = np.full(len(self.out), -1, dtype=np.int64)
        first = np.full(len(self.out), len(seq), dtype=np.int64)
        np.maximum.at(last, seq, steps)
        np.minimum.at(first, seq, steps)
        bad = np.flatnonzero(last[self.invalidated[:, 0]] > first[self.invalidated[:, 1]])
        if len(bad):
            a, b = self.invalidated[bad[0]]
            raise PoetError(f"a compute sequence runs {self.names[a]} after its invalidator {self.names[b]}")

    def curve(self, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(RAM at each step, each step's instance's last use); PoetError if a step uses a value with no
        earlier instance, or a node runs after its invalidator (``invalidated_by``)."""
        self.evaluations += 1
        self.check_invalidated(seq)
        end = self.ends(seq)
        out = self.out[seq]
        live = np.cumsum(out - np.bincount(end, weights=out, minlength=len(seq)).astype(np.int64))
        before = np.concatenate(([0], live[:-1]))
        return self.fixed + before + out + self.ws[seq], end


def _gaps(
    seq: np.ndarray, seqs: Sequences, allowed: np.ndarray, spans: Callable[..., np.ndarray]
) -> np.ndarray:
    """Rows (instance step, gap start, next use) of the idle stretches of recomputable instances between
    two of their uses (where a recomputation right before the next use could free them) for which
    ``spans(starts, next_uses)`` holds."""
    inst, at = seqs.uses(seq)
    m = len(seq)
    pairs = np.sort(inst * m + at)  # (instance, reading step), sorted by instance then step; a step
    # reads distinct nodes, so distinct instances: no pair twice
    uses = np.stack([pairs // m, pairs % m], axis=1)
    same = uses[1:, 0] == uses[:-1, 0]
    keep = same & allowed[seq[uses[1:, 0]]] & spans(uses[:-1, 1], uses[1:, 1])
    return np.stack([uses[:-1, 0][keep], uses[:-1, 1][keep], uses[1:, 1][keep]], axis=1)


def _gain(
    seq: np.ndarray,
    end: np.ndarray,
    mem: np.ndarray,
    budget: int,
    seqs: Sequences,
    i: int,
    a: int,
    p: int,
    seen: dict[int, list[int]],
) -> int:
    """Exactly how much the overflow (bytes over the budget, summed over steps) falls when the node of
    step ``i``, idle after its use at step ``a``, is recomputed at step ``p`` (inserted before the step now
    there, at most its next use): it is not live over (a, p), its inputs whose instances end before ``p``
    stay live until the new step, which needs fixed + live + its output + its workspace."""
    v = int(seq[i])
    delta = np.full(p - a - 1, -int(seqs.out[v]), dtype=np.int64)
    carried = 0
    for u in seqs.idx[seqs.ptr[v] : seqs.ptr[v] + seqs.deg[v]].tolist():
        at = seen[u][bisect.bisect_left(seen[u], p) - 1]
        if end[at] < p:
            delta[max(0, int(end[at]) - a) :] += int(seqs.out[u])
            carried += int(seqs.out[u])
    old = mem[a + 1 : p]
    here = int(mem[p] - seqs.out[seq[p]] - seqs.ws[seq[p]]) - int(seqs.out[v]) + carried
    new_step = here + int(seqs.out[v]) + int(seqs.ws[v])
    before = int(np.maximum(old - budget, 0).sum())
    after = int(np.maximum(old + delta - budget, 0).sum()) + max(0, new_step - budget)
    return before - after


EXACT = 64  # insert_recomputations: single recomputations evaluated exactly per round


def _insertions(
    seq: np.ndarray,
    end: np.ndarray,
    mem: np.ndarray,
    budget: int,
    seqs: Sequences,
    allowed: np.ndarray,
    costs: np.ndarray,
) -> list[tuple[float, int, int]]:
    """Recomputations that lower the overflow, as (-gain per unit of cost, step to insert at, step of the
    instance), best first: of the idle stretches (a, b) of values over steps above the budget, the
    ``EXACT`` with the most bytes times such steps per unit of cost, each recomputed right before its
    next use b, or right before the last use of an input's instance that ends inside the stretch (a
    shorter stretch, that input not kept longer); gains exact (:func:`_gain`)."""
    hot = np.concatenate(([0], np.cumsum(mem > budget)))
    rows = _gaps(seq, seqs, allowed, lambda a, b: hot[b] > hot[a + 1])
    if not len(rows):
        return []
    nodes = seq[rows[:, 0]]
    bound = seqs.out[nodes] * (hot[rows[:, 2]] - hot[rows[:, 1] + 1]) / np.maximum(costs[nodes], 1e-12)
    seen: dict[int, list[int]] = {}
    for k, v in enumerate(seq.tolist()):
        seen.setdefault(v, []).append(k)
    out: list[tuple[float, int, int]] = []
    for i, a, b in rows[np.argsort(-bound, kind="stable")[:EXACT]].tolist():
        v = int(seq[i])
        inputs = seqs.idx[seqs.ptr[v] : seqs.ptr[v] + seqs.deg[v]].tolist()
        ends = {int(end[seen[u][bisect.bisect_left(seen[u], b) - 1]]) for u in inputs}
        for p in sorted({b} | {e for e in ends if a + 1 < e < b and hot[e] > hot[a + 1]}):
            gain = _gain(seq, end, mem, budget, seqs, i, a, p, seen)
            if gain > 0:
                out.append((-gain / max(float(costs[v]), 1e-12), p, i))
    return sorted(out)


CLOSURES = 48  # insert_recomputations: node-and-inputs recomputations evaluated when no single one helps


def block_gain(
    seq: np.ndarray,
    end: np.ndarray,
    mem: np.ndarray,
    budget: int,
    seqs: Sequences,
    a: int,
    b: int,
    nodes: list[int],
    seen: dict[int, list[int]],
) -> int:
    """Exactly how much the overflow falls when ``nodes`` (a node last, the inputs of it whose instances
    end before step ``b`` first, in an order their links allow) run right before step ``b``, where the
    last node's instance is idle after its use at step ``a``: that instance ends at ``a``; each input
    of the block that no block step makes, whose instance ends before ``b``, stays live until the last
    block step that reads it; a block step needs what is live before ``b`` (less the last node) and
    what the block made or kept so far, its output and its workspace. Steps from ``b`` on are as they
    were (the block's values other than the last node are read in it only). The RAM curve of the
    sequence with the block inserted gives the same (tests/test_fit.py)."""
    v = nodes[-1]
    out, ws = seqs.out, seqs.ws
    made = set(nodes)
    last: dict[int, int] = {}  # a value the block reads -> its last reading block step
    kept: dict[int, int] = {}  # an input kept live for the block -> the step its instance ended
    for k, x in enumerate(nodes):
        for u in seqs.idx[seqs.ptr[x] : seqs.ptr[x] + seqs.deg[x]].tolist():
            last[u] = k
            if u not in made:
                at = seen[u][bisect.bisect_left(seen[u], b) - 1]
                if end[at] < b:
                    kept[u] = int(end[at])
    lo = min([a, *kept.values()]) + 1
    delta = np.zeros(b - lo, dtype=np.int64)
    delta[a + 1 - lo :] -= int(out[v])
    for u, e in kept.items():
        delta[e + 1 - lo :] += int(out[u])
    old = mem[lo:b]
    gain = int(np.maximum(old - budget, 0).sum()) - int(np.maximum(old + delta - budget, 0).sum())
    live = int(mem[b] - out[seq[b]] - ws[seq[b]]) - int(out[v]) + sum(int(out[u]) for u in kept)
    for k, x in enumerate(nodes):
        gain -= max(0, live + int(out[x]) + int(ws[x]) - budget)
        live += int(out[x])  # read by a later block step (the last node reads every other), or after
        live -= sum(int(out[u]) for u in kept if last[u] == k)
    return gain


def _closure(
    seq: np.ndarray,
    end: np.ndarray,
    mem: np.ndarray,
    budget: int,
    seqs: Sequences,
    allowed: np.ndarray,
    costs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """For idle stretches over the highest step, a node recomputed right before its next use together
    with those of its inputs whose instances end earlier (recomputed first, where allowed): of the
    ``CLOSURES`` that span the most steps over the budget, evaluated exactly, the one that lowers the
    overflow most per unit of cost; None if none does."""
    top = int(mem.argmax())
    seen: dict[int, list[int]] = {}
    for k, v in enumerate(seq.tolist()):
        seen.setdefault(v, []).append(k)
    tried: list[tuple[int, int, list[int], int]] = []
    for i, a, b in _gaps(seq, seqs, allowed, lambda a, b: (a < top) & (top < b)).tolist():
        v = int(seq[i])
        ins = seqs.idx[seqs.ptr[v] : seqs.ptr[v] + seqs.deg[v]].tolist()
        missing = [u for u in ins if end[seen[u][bisect.bisect_left(seen[u], b) - 1]] < b]
        if missing and all(allowed[u] for u in missing):
            tried.append(
                (-int(np.count_nonzero(mem[a + 1 : b] > budget)) * int(seqs.out[v]), b, [*missing, v], a)
            )
    best: tuple[float, int, list[int]] | None = None
    for _, b, nodes, a in sorted(tried)[:CLOSURES]:
        seqs.evaluations += 1  # each counted as the RAM curve it stands for
        gain = block_gain(seq, end, mem, budget, seqs, a, b, nodes, seen) / max(
            float(costs[nodes].sum()), 1e-12
        )
        if gain > 0 and (best is None or gain > best[0]):
            best = (gain, b, nodes)
    if best is None:
        return None
    moved = np.insert(seq, [best[1]] * len(best[2]), best[2])
    seqs.evaluations -= 1  # the winner's curve was counted above
    return (moved, *seqs.curve(moved))


def _overflow(mem: np.ndarray, budget: int) -> int:
    return int(np.maximum(mem - budget, 0).sum())


def _shift(
    seq: np.ndarray, mem: np.ndarray, budget: int, seqs: Sequences, rng: random.Random, tries: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tries`` random moves of a step near a step over the budget to the other side of it, each kept
    when the sequence stays valid and its overflow does not grow (the same steps: the cost is unchanged)."""
    m = len(seq)
    end = seqs.ends(seq)
    first = seqs.firsts(seq)
    for _ in range(tries):
        hot = np.flatnonzero(mem > budget)
        if not len(hot):
            break
        t = int(hot[rng.randrange(len(hot))])
        j = rng.randrange(max(0, t - NEAR), min(m, t + NEAR + 1))
        q = rng.randint(t, min(m - 1, t + NEAR)) if j <= t else rng.randint(max(0, t - NEAR), t)
        if q == j:
            continue
        if not seqs.reads_after_move(seq, first, j, q):  # the curve would find a read with no instance
            seqs.evaluations += 1  # counted as the curve it stands for: the same work, the same moves
            continue
        moved = np.insert(np.delete(seq, j), q, seq[j])
        try:
            new_mem, new_end = seqs.curve(moved)
        except PoetError:
            continue
        if _overflow(new_mem, budget) <= _overflow(mem, budget):
            seq, mem, end, first = moved, new_mem, new_end, seqs.firsts(moved)
    return seq, mem, end


SHIFTS = 200  # insert_recomputations: moves tried whenever no insertion lowers the overflow


def insert_recomputations(
    problem: SchedulingProblem,
    budget: int,
    work: int,
    cost: Sequence[float] | np.ndarray,
    start: np.ndarray | None = None,
    seed: int = SEED,
) -> tuple[np.ndarray | None, int]:
    """Recomputations inserted into the problem's order until its RAM curve fits ``budget``: each round
    ranks where recomputations could go by an estimate of the bytes over the budget they would save per
    unit of ``cost`` (:func:`_ranked`), evaluates the best exactly and applies the one that lowers the
    overflow most per unit of cost (:func:`_best_insertion`); when none does, ``SHIFTS`` moves of steps
    across the steps over the budget (:func:`_shift`), and on. (sequence of node indices, or None when
    neither helps or ``work`` evaluations are spent; evaluations).

    ``start``: from this sequence instead of the problem's order (``seed``: of the moves).

    Only nodes that are recomputable and invalidate nothing are recomputed."""
    seqs = Sequences(problem)
    rng = random.Random(seed)
    costs = np.asarray(cost, dtype=float)
    allowed = np.array([node.recomputable for node in problem.nodes], dtype=bool)
    for a, _ in problem.invalidated_by:
        allowed[a] = False
    seq = np.arange(len(problem.nodes), dtype=np.int64) if start is None else start
    mem, end = seqs.curve(seq)
    while seqs.evaluations < work:
        if not (mem > budget).any():
            return seq, seqs.evaluations
        found = _insertions(seq, end, mem, budget, seqs, allowed, costs)
        if not found:
            closure = _closure(seq, end, mem, budget, seqs, allowed, costs)
            if closure is not None:
                seq, mem, end = closure
                continue
            before = _overflow(mem, budget)
            seq, mem, end = _shift(seq, mem, budget, seqs, rng, min(SHIFTS, work - seqs.evaluations))
            if _overflow(mem, budget) == before and not _insertions(
                seq, end, mem, budget, seqs, allowed, costs
            ):
                return None, seqs.evaluations
            continue
        _, at, i = found[0]
        seq = np.insert(seq, at, seq[i])
        mem, end = seqs.curve(seq)
    return None, seqs.evaluations


def sequence_schedule(problem: SchedulingProblem, seq: np.ndarray, solver: str) -> Schedule:
    """The steps of a compute sequence: each compute, then frees of the instances last used there."""
    end = Sequences(problem).ends(seq)
    frees: list[list[int]] = [[] for _ in range(len(seq))]
    for i, e in enumerate(end.tolist()):
        frees[e].append(i)
    names = [node.name for node in problem.nodes]
    steps: list[Step] = []
    for i, v in enumerate(seq.tolist()):
        steps.append(Compute(names[v]))
        steps.extend(Free(names[int(seq[j])]) for j in sorted(frees[i], key=lambda j: (j != i, j)))
    return Schedule(tuple(steps), solver)


# -- scheduling on the chosen order ---------------------------------------------------------------------

ALL_ORDERS = "all orders"
THIS_ORDER = "this order"


def forced(problem: SchedulingProblem) -> bool:
    """Whether the problem's order is its only topological order (each node must precede the next)."""
    prec = precedence(problem)
    return all(i - 1 in prec[i] for i in range(1, len(problem.nodes)))
