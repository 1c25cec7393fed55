"""Batch splitting (issue 57): the forward graph's batch of N samples run as k parts.

The batch input x is cut along axis 0 by Slice nodes into k parts of sizes as equal as possible (the first
N mod k parts one sample larger). Every node that is per-sample (``OpDef.per_sample``: sample i of its
outputs depends on sample i of its batched inputs alone, e.g. a convolution, an elementwise op, a Gemm
whose rows are the samples) and whose batched inputs are all split is run once per part, reading the
parts' tensors and the shared parameters and constants. At the first node that is not per-sample (or that
reads a value that is not split), and at the graph output, the parts are joined by a Concat along axis 0
under the original tensor's name, and the rest of the graph runs unsplit.

Autodiff of the rewritten graph gives per-part backward nodes; a shared weight's gradient is the sum of the
parts' contributions, added by autodiff in its fixed order. The loss and every per-sample value are
bit-identical to the unsplit graph; only the weight and bias gradients (sums over samples) are summed in
another order (docs/batch_split.md). Names: ``<node>/n<i>`` and ``<tensor>/n<i>`` for part i.

At batch 1, a sequence model (a MatMul of an [N, T, D] activation by a weight: transformer blocks) can run
its positions (tokens) in k parts the same way, along axis 1 (:func:`split_tokens`): the position-wise
layers (``OpDef.per_sample`` along axis 1: dense layers, LayerNormalization, elementwise ops, reshapes of
each token) run per part; an [N, T, ...] tensor that a node needing whole positions made (attention mixes
tokens) is cut by Slices where a position-wise node reads it, and joined by a Concat along axis 1 before
the next node that needs it whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from poet_edge import frontend, ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Names, Node, Role, Tensor
from poet_edge.ops.concat import MAX_PIECES

MAX_PARTS = 64  # the most parts: the forward graph grows k-fold (--batch-parts auto tries up to this)


@dataclass(frozen=True)
class BatchSplit:
    """A forward graph whose batch runs in ``len(sizes)`` parts."""

    graph: Graph
    sizes: tuple[int, ...]  # samples (positions, along axis 1) in each part
    replicated: tuple[str, ...]  # the original nodes run once per part
    joined: tuple[str, ...]  # the tensors whose parts a Concat along the axis joins (the boundary)
    axis: int = 0  # 0: the batch's samples; 1: a sequence's positions (split_tokens)

    @property
    def what(self) -> str:
        """What a part holds, for messages: "samples" or "positions"."""
        return "samples" if self.axis == 0 else "positions"

    @property
    def parts(self) -> int:
        return len(self.sizes)

    def sizes_text(self) -> str:
        """The parts' sizes for the log: "4/4/3", or "1" when all are equal."""
        return str(self.sizes[0]) if len(set(self.sizes)) == 1 else "/".join(map(str, self.sizes))

    def summary(self) -> dict[str, object]:
        """plan.json's ``batch_split``."""
        return {
            "parts": self.parts,
            "axis": self.axis,
            "sizes": list(self.sizes),
            "replicated_nodes": len(self.replicated),
            "joined": list(self.joined),
            "nodes": len(self.graph.nodes),
        }


def part_sizes(n: int, k: int, noun: str = "batch") -> tuple[int, ...]:
    """k sizes as equal as possible summing to n, the larger ones first (``noun``: what n counts, for the
    error: "batch", or "sequence" for positions)."""
    if not 1 <= k <= n:
        of = f"{n}" if noun == "batch" else f"{n} positions"
        none = (
            " (at batch 1 only a sequence's positions split: an [N, T, D] input of a dense layer, which this "
            "model has none of)"
            if n == 1 and noun == "batch"
            else ""
        )
        raise PoetError(f"--batch-parts {k}: a {noun} of {of} splits into 1 to {n} parts{none}")
    return tuple(n // k + (1 if i < n % k else 0) for i in range(k))


@dataclass
class _State:
    """The rewrite in progress (mutable, local to :func:`split_batch`)."""

    g: Graph
    sizes: tuple[int, ...]
    names: Names
    tensors: dict[str, Tensor]
    axis: int = 0
    nodes: list[Node] = field(default_factory=list)
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tensor -> its part tensors
    pending: dict[str, list[Node]] = field(default_factory=dict)  # x's Slices, emitted at first use
    dependent: set[str] = field(default_factory=set)  # tensors computed from the batch
    joined: dict[str, str] = field(default_factory=dict)  # split tensor -> its whole value's name
    replicated: list[str] = field(default_factory=list)
    sliced: set[str] = field(default_factory=set)  # tensors cut into parts by Slices (they exist whole)
    axes: dict[str, int] = field(default_factory=dict)  # split tensor -> the axis of its parts
    frozen: frozenset[str] = frozenset()  # parameters that are not trained: sliced where parts read them

    @property
    def extent(self) -> int:
        """The split axis's full size: the batch, or the sequence's positions."""
        return sum(self.sizes)


def split_batch(g: Graph, k: int) -> BatchSplit:
    """The forward graph ``g`` with its batch in ``k`` parts (k = 1: ``g`` itself)."""
    x = g.inputs[0]
    n = g.shape(x)[0] if g.shape(x) else 1
    sizes = part_sizes(n, k)
    if k == 1:
        return BatchSplit(g, sizes, (), ())
    st = _State(g, sizes, Names(set(g.tensors) | {nd.name for nd in g.nodes}), dict(g.tensors))
    st.dependent.update(g.inputs)
    _slices(st, x)
    return _rewrite(st)


def sequence_length(g: Graph) -> int:
    """The positions T of a sequence model at batch 1: the largest T of a MatMul of an [N, T, D]
    activation by a weight of rank 2 (a transformer's dense layers); 1 when there is none."""
    if frontend.graph_batch(g) != 1:
        return 1
    ts = [
        g.shape(nd.inputs[0])[1]
        for nd in g.nodes
        if nd.op == "MatMul"
        and len(g.shape(nd.inputs[0])) == 3
        and nd.inputs[1] in g.params
        and len(g.shape(nd.inputs[1])) == 2
    ]
    return max(ts, default=1)


def split_tokens(g: Graph, k: int, frozen: frozenset[str] = frozenset()) -> BatchSplit:
    """The forward graph ``g`` (batch 1) with its positions in ``k`` parts along axis 1 (the module
    docstring; k = 1: ``g`` itself): every [N, T, ...] tensor of T = :func:`sequence_length` positions
    that position-wise nodes read, and the ``frozen`` parameters of that shape they read (a position
    embedding that is not trained: a trained one's gradient would be a whole-size sum of the parts')."""
    t = sequence_length(g)
    sizes = part_sizes(t, k)
    if k == 1:
        return BatchSplit(g, sizes, (), (), axis=1)
    names = Names(set(g.tensors) | {nd.name for nd in g.nodes})
    st = _State(g, sizes, names, dict(g.tensors), axis=1, frozen=frozen)
    st.dependent.update(g.inputs)
    return _rewrite(st)


def parts_extent(g: Graph) -> int:
    """What parts cut: the batch above 1, else a sequence model's positions (1: nothing to cut)."""
    batch = frontend.graph_batch(g)
    return batch if batch > 1 else sequence_length(g)


def split_parts(g: Graph, k: int, trained: frozenset[str]) -> BatchSplit:
    """``g`` in ``k`` parts: its batch (:func:`split_batch`), or at batch 1 its positions
    (:func:`split_tokens`, the parameters not in ``trained`` sliceable)."""
    if frontend.graph_batch(g) > 1:
        return split_batch(g, k)
    return split_tokens(g, k, frozenset(g.params) - trained)


def _rewrite(st: _State) -> BatchSplit:
    g = st.g
    for node in g.nodes:
        _visit(st, node)
    outputs = tuple(_whole(st, o) for o in g.outputs)
    used_names = {t for nd in st.nodes for t in (*nd.inputs, *nd.outputs)} | set(g.inputs)
    graph = Graph(
        {t: v for t, v in st.tensors.items() if t in used_names or t in g.params},
        tuple(st.nodes),
        g.inputs,
        outputs,
        g.params,
        g.trainable,
    )
    joined = tuple(t for t in st.joined if t not in st.sliced)
    return BatchSplit(graph, st.sizes, tuple(st.replicated), joined, st.axis)


def _offsets(sizes: Sequence[int]) -> list[tuple[int, int]]:
    out, at = [], 0
    for s in sizes:
        out.append((at, at + s))
        at += s
    return out


def _slices(st: _State, x: str) -> None:
    """The Slice nodes that cut ``x`` into its parts along the base axis (emitted before the first node that
    reads a part); ``x`` exists whole."""
    names, nodes = [], []
    shape = st.g.shape(x)
    for i, (a, b) in enumerate(_offsets(st.sizes)):
        t = st.names.fresh(f"{x}/n{i}")
        st.tensors[t] = Tensor(t, _part_shape(shape, st.axis, b - a), st.g.tensor(x).dtype, Role.ACTIVATION)
        nodes.append(Node(t, "Slice", (x,), (t,), {"starts": (a,), "ends": (b,), "axes": (st.axis,)}))
        names.append(t)
    st.parts[x] = tuple(names)
    st.axes[x] = st.axis
    st.pending[x] = nodes
    st.joined[x] = x
    st.sliced.add(x)


@dataclass(frozen=True)
class _Plan:
    """How a node runs per part: the inputs read as parts (the others whole), the axis they are split
    along, each output's split axis, and each part's attributes."""

    split: frozenset[str]
    cut: tuple[str, ...]  # whole inputs sliced first
    axis: int
    out_axes: tuple[int, ...]
    attrs: list[Mapping[str, object]]


def _visit(st: _State, node: Node) -> None:
    """Replicates ``node`` per part when it is per-sample over split inputs (:func:`_plan`), else runs it
    whole."""
    dep = [t in st.dependent for t in node.inputs]
    if not any(dep):  # computed from parameters and constants alone: shared by every part
        st.nodes.append(node)
        return
    st.dependent.update(node.outputs)
    plan = _plan(st, node, dep)
    if plan is None:
        inputs = tuple(_whole(st, t) if t in st.parts else t for t in node.inputs)
        st.nodes.append(Node(node.name, node.op, inputs, node.outputs, node.attrs, node.phase))
        return
    for t in plan.cut:
        _slices(st, t)
    reads = [t if t in plan.split else _whole(st, t) if t in st.parts else t for t in node.inputs]
    for t in node.inputs:  # in the node's order: the same graph every time
        if t in plan.split:
            st.nodes.extend(st.pending.pop(t, []))
    outs: list[list[str]] = [[] for _ in node.outputs]
    for i, a in enumerate(plan.attrs):
        _replica(st, node, i, a, reads, plan, outs)
    for o, names, axis in zip(node.outputs, outs, plan.out_axes, strict=True):
        st.parts[o] = tuple(names)
        st.axes[o] = axis
    st.replicated.append(node.name)


def _plan(st: _State, node: Node, dep: Sequence[bool]) -> _Plan | None:
    """How ``node`` runs per part, or None (whole). The axis is that of its first split input (along
    positions with none split: whole [N, T, ...] inputs are sliced, :func:`_sliceable`). Tried: every input
    split along it (and those sliced) as parts; then, along positions, only the first as parts and the
    others read whole (attention: each part of the queries against all the keys and values). Along the
    batch every dependent input must be a part."""
    first = next((t for t in node.inputs if t in st.parts), None)
    axis = st.axes[first] if first is not None else st.axis
    cut = () if first else tuple(t for t, d in zip(node.inputs, dep, strict=True) if d and _sliceable(st, t))
    if (first or cut) and axis == st.axis:  # a frozen parameter of positions (position embedding): sliced
        cut += tuple(t for t in node.inputs if t in st.frozen and _sliceable(st, t))
    cut = tuple(dict.fromkeys(cut))  # an input read twice is sliced once
    on = frozenset(t for t in node.inputs if st.axes.get(t) == axis) | frozenset(cut)
    lead = first if first is not None else next(iter(cut), None)
    tries = [on] if st.axis == 0 or lead is None else [on, frozenset({lead})]
    for split in dict.fromkeys(tries):
        if not split or (
            st.axis == 0 and any(d and t not in split for t, d in zip(node.inputs, dep, strict=True))
        ):
            continue
        if not _per_sample(st, node, split, axis):
            continue
        found = _part_attrs(st, node, split, axis)
        if found is not None:
            return _Plan(split, tuple(t for t in cut if t in split), axis, *found)
    return None


def _sliceable(st: _State, t: str) -> bool:
    """Along positions: a whole float [N, T, ...] tensor of the sequence's length (a part's Slice of it is
    a contiguous range of positions per sample)."""
    shape = st.g.shape(t)
    return (
        st.axis == 1
        and t not in st.parts
        and len(shape) >= 3
        and shape[1] == st.extent
        and st.g.tensor(t).dtype == "float32"
    )


def _part_shape(shape: Sequence[int], axis: int, size: int) -> tuple[int, ...]:
    return (*shape[:axis], size, *shape[axis + 1 :])


def _replica(
    st: _State,
    node: Node,
    i: int,
    attrs: Mapping[str, object],
    inputs: Sequence[str],
    plan: _Plan,
    outs: list[list[str]],
) -> None:
    ins = tuple(st.parts[t][i] if t in plan.split else t for t in inputs)
    names = []
    for j, o in enumerate(node.outputs):
        t = st.names.fresh(f"{o}/n{i}")
        src = st.g.tensor(o)
        st.tensors[t] = Tensor(t, _part_shape(src.shape, plan.out_axes[j], st.sizes[i]), src.dtype, src.role)
        outs[j].append(t)
        names.append(t)
    name = st.names.fresh(f"{node.name}/n{i}")
    st.nodes.append(Node(name, node.op, ins, tuple(names), attrs, node.phase))


RESHAPES = frozenset({"Reshape", "Flatten", "Expand"})  # ops that reread their input in another shape


def _per_sample(st: _State, node: Node, split: frozenset[str], axis: int) -> bool:
    """Every split input has the parts' full extent on the axis; a reshape (``RESHAPES``; along the batch,
    every node) keeps the axis and the dims before it on every output, so each part is a contiguous
    block in and out; and the op says the node is per-sample along the axis (``OpDef.per_sample``)."""
    fn = ops.get(node.op).per_sample
    if fn is None:
        return False
    shapes = [st.g.shape(t) for t in node.inputs]
    batched = [t in split for t in node.inputs]
    lead = [s[: axis + 1] for s, b in zip(shapes, batched, strict=True) if b]
    if node.op in RESHAPES or st.axis == 0:
        lead += [st.g.shape(o)[: axis + 1] for o in node.outputs]
    if len(set(lead)) != 1 or len(lead[0]) != axis + 1 or lead[0][axis] != st.extent:
        return False
    return fn(shapes, batched, node.attrs, axis)


def _part_attrs(
    st: _State, node: Node, split: frozenset[str], axis: int
) -> tuple[tuple[int, ...], list[Mapping[str, object]]] | None:
    """Each output's split axis and each part's node's attributes: a constant target ``shape`` (Reshape,
    Expand) whose entry on the axis is the parts' full extent gets the part's size. An output's axis is
    where a part's output differs from the whole one (a Transpose or Squeeze moves it); every other dim
    must be the same. None when that does not hold (the node then runs whole)."""
    op = ops.get(node.op)
    by_size: dict[int, Mapping[str, object]] = {}  # parts of one size have the same node (sizes differ by 1)
    axes: tuple[int, ...] | None = None
    for size in dict.fromkeys(st.sizes):
        attrs = dict(node.attrs)
        target = attrs.get("shape")
        if "shape" in op.const_inputs.values() and isinstance(target, (tuple, list)) and len(target) > axis:
            if int(target[axis]) == st.extent:
                attrs["shape"] = _part_shape(tuple(target), axis, size)
        shapes = [
            _part_shape(st.g.shape(t), axis, size) if t in split else st.g.shape(t) for t in node.inputs
        ]
        try:
            got = [tuple(s) for s in op.infer(shapes, attrs)]
        except (ValueError, PoetError):
            return None
        found = tuple(
            _moved_axis(st.g.shape(o), g, size, st.extent) for o, g in zip(node.outputs, got, strict=True)
        )
        if -1 in found or (axes is not None and found != axes) or (st.axis == 0 and set(found) != {0}):
            return None
        axes = found
        by_size[size] = attrs if attrs != dict(node.attrs) else node.attrs
    assert axes is not None
    return axes, [by_size[size] for size in st.sizes]


def _moved_axis(whole: Sequence[int], part: Sequence[int], size: int, extent: int) -> int:
    """The one axis where ``part`` (of ``size``) differs from ``whole`` (of ``extent`` there), else -1."""
    if len(whole) != len(part):
        return -1
    diff = [k for k, (a, b) in enumerate(zip(whole, part, strict=True)) if a != b]
    ok = len(diff) == 1 and whole[diff[0]] == extent and part[diff[0]] == size
    return diff[0] if ok else -1


def _whole(st: _State, t: str) -> str:
    """The whole value of ``t``: ``t`` itself unless split; a split one joined once by Concat (along the
    axis) under its own name, in groups of at most MAX_PIECES."""
    if t not in st.parts or t in st.joined:
        return st.joined.get(t, t)
    pieces = list(st.parts[t])
    level = 0
    while len(pieces) > MAX_PIECES:
        groups = [pieces[j : j + MAX_PIECES] for j in range(0, len(pieces), MAX_PIECES)]
        pieces = [
            _concat(st, grp, st.names.fresh(f"{t}/join{level}_{m}"), st.axes[t])
            for m, grp in enumerate(groups)
        ]
        level += 1
    _concat(st, pieces, t, st.axes[t])
    st.joined[t] = t
    return t


def _concat(st: _State, pieces: list[str], out: str, axis: int) -> str:
    src = st.tensors[pieces[0]]
    size = sum(st.tensors[p].shape[axis] for p in pieces)
    role = st.g.tensor(out).role if out in st.g.tensors else Role.ACTIVATION
    st.tensors[out] = Tensor(out, _part_shape(src.shape, axis, size), src.dtype, role)
    node = Node(st.names.fresh(f"join/{out}"), "Concat", tuple(pieces), (out,), {"axis": axis})
    st.nodes.append(node)
    return out


def parts_wanted(text: str) -> int | None:
    """--batch-parts: ``auto`` (None) or a count of at least 1."""
    if text.strip().lower() == "auto":
        return None
    try:
        k = int(text)
    except ValueError:
        raise PoetError(f"--batch-parts {text!r}: use auto or a number of parts (1 = off)") from None
    if k < 1:
        raise PoetError(f"--batch-parts {k}: the batch splits into at least 1 part (1 = off)")
    if k > MAX_PARTS:
        raise PoetError(f"--batch-parts {k}: at most {MAX_PARTS} parts (each part repeats the layers)")
    return k


BATCH_PARTS_HELP = (
    "batch splitting (batch > 1): the batch runs in K parts of equal size (up to one sample apart), each "
    "through the layers where a sample needs only itself (convolutions, pools, elementwise ops, Gemm rows), "
    "joined before the first layer that mixes samples; the loss is the same bits, the weight gradients sum "
    "the parts in another order (docs/batch_split.md). auto (default, with --split auto): only when the "
    "memory floor is above --ram, the fewest parts whose floor fits, tried before channel / row tiles, "
    "and combined with them when one sample per part is not enough; 1: off; K: always K parts "
    f"(1 <= K <= batch, K <= {MAX_PARTS}); --split off turns it off. At batch 1, a sequence model's "
    "positions (tokens: [N, T, D] inputs of dense layers) are split the same way through the position-wise "
    "layers (dense layers, LayerNorm, elementwise ops); attention runs per part of its queries, with the "
    "keys and values joined; with tiles, the fewest of 2, 4, 8, ... parts whose tiles fit"
)
