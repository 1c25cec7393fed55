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

from poet_edge import ops
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
        raise PoetError(f"--batch-parts {k}: a {noun} of {of} splits into 1 to {n} parts")
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
    if frontend_batch(g) != 1:
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


def split_tokens(g: Graph, k: int) -> BatchSplit:
    """The forward graph ``g`` (batch 1) with its positions in ``k`` parts along axis 1 (the module
    docstring; k = 1: ``g`` itself): every [N, T, ...] tensor of T = :func:`sequence_length` positions
    that position-wise nodes read."""
    t = sequence_length(g)
    sizes = part_sizes(t, k)
    if k == 1:
        return BatchSplit(g, sizes, (), (), axis=1)
    st = _State(g, sizes, Names(set(g.tensors) | {nd.name for nd in g.nodes}), dict(g.tensors), axis=1)
    st.dependent.update(g.inputs)
    return _rewrite(st)


def frontend_batch(g: Graph) -> int:
    x = g.shape(g.inputs[0])
    return x[0] if x else 1


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
    """The Slice nodes that cut ``x`` into its parts along the axis (emitted before the first node that
    reads a part); ``x`` exists whole."""
    names, nodes = [], []
    shape = st.g.shape(x)
    for i, (a, b) in enumerate(_offsets(st.sizes)):
        t = st.names.fresh(f"{x}/n{i}")
        part = (*shape[: st.axis], b - a, *shape[st.axis + 1 :])
        st.tensors[t] = Tensor(t, part, st.g.tensor(x).dtype, Role.ACTIVATION)
        nodes.append(Node(t, "Slice", (x,), (t,), {"starts": (a,), "ends": (b,), "axes": (st.axis,)}))
        names.append(t)
    st.parts[x] = tuple(names)
    st.pending[x] = nodes
    st.joined[x] = x
    st.sliced.add(x)


def _visit(st: _State, node: Node) -> None:
    """Replicates ``node`` per part when it is per-sample over split inputs, else runs it whole. Along
    positions, whole inputs of the sequence's length are sliced first where that makes it so."""
    dep = [t in st.dependent for t in node.inputs]
    if not any(dep):  # computed from parameters and constants alone: shared by every part
        st.nodes.append(node)
        return
    st.dependent.update(node.outputs)
    cut = [t for t, d in zip(node.inputs, dep, strict=True) if d and t not in st.parts and _sliceable(st, t)]
    attrs = _part_attrs(st, node, set(cut)) if _per_sample(st, node, dep, set(cut)) else None
    if attrs is None:
        inputs = tuple(_whole(st, t) if t in st.parts else t for t in node.inputs)
        st.nodes.append(Node(node.name, node.op, inputs, node.outputs, node.attrs, node.phase))
        return
    for t in cut:
        _slices(st, t)
    for t in node.inputs:
        st.nodes.extend(st.pending.pop(t, []))
    outs: list[list[str]] = [[] for _ in node.outputs]
    for i, a in enumerate(attrs):
        _replica(st, node, i, a, outs)
    for o, names in zip(node.outputs, outs, strict=True):
        st.parts[o] = tuple(names)
    st.replicated.append(node.name)


def _sliceable(st: _State, t: str) -> bool:
    """Along positions: a whole float [N, T, ...] tensor of the sequence's length (a part's Slice of it is
    a contiguous range of positions per sample)."""
    shape = st.g.shape(t)
    return st.axis == 1 and len(shape) >= 3 and shape[1] == st.extent and st.g.tensor(t).dtype == "float32"


def _part_shape(st: _State, shape: Sequence[int], size: int) -> tuple[int, ...]:
    return (*shape[: st.axis], size, *shape[st.axis + 1 :])


def _replica(st: _State, node: Node, i: int, attrs: Mapping[str, object], outs: list[list[str]]) -> None:
    inputs = tuple(st.parts[t][i] if t in st.parts else t for t in node.inputs)
    names = []
    for j, o in enumerate(node.outputs):
        t = st.names.fresh(f"{o}/n{i}")
        src = st.g.tensor(o)
        st.tensors[t] = Tensor(t, _part_shape(st, src.shape, st.sizes[i]), src.dtype, src.role)
        outs[j].append(t)
        names.append(t)
    name = st.names.fresh(f"{node.name}/n{i}")
    st.nodes.append(Node(name, node.op, inputs, tuple(names), attrs, node.phase))


def _per_sample(st: _State, node: Node, dep: Sequence[bool], cut: set[str]) -> bool:
    """Every dependent input is split (or in ``cut``: sliced first), every split input and every output has
    the parts' full extent on the axis and the same dims before it, and the op says the node is per-sample
    along the axis (``OpDef.per_sample``)."""
    if any(d and t not in st.parts and t not in cut for t, d in zip(node.inputs, dep, strict=True)):
        return False
    fn = ops.get(node.op).per_sample
    if fn is None:
        return False
    shapes = [st.g.shape(t) for t in node.inputs]
    a = st.axis
    lead = [s[: a + 1] for s, d in zip(shapes, dep, strict=True) if d]
    lead += [st.g.shape(o)[: a + 1] for o in node.outputs]
    if len(set(lead)) != 1 or len(lead[0]) != a + 1 or lead[0][a] != st.extent:
        return False
    return fn(shapes, dep, node.attrs, a)


def _part_attrs(st: _State, node: Node, cut: set[str]) -> list[Mapping[str, object]] | None:
    """The attributes of each part's node: a constant target ``shape`` (Reshape, Expand) whose entry on the
    axis is the parts' full extent gets the part's size. None when a part's output shapes would not be the
    part of the node's (the node then runs whole)."""
    op = ops.get(node.op)
    a = st.axis
    out: list[Mapping[str, object]] = []
    for size in st.sizes:
        attrs = dict(node.attrs)
        target = attrs.get("shape")
        if "shape" in op.const_inputs.values() and isinstance(target, (tuple, list)) and len(target) > a:
            if int(target[a]) == st.extent:
                attrs["shape"] = (*tuple(target)[:a], size, *tuple(target)[a + 1 :])
        shapes = [
            _part_shape(st, st.g.shape(t), size) if t in st.parts or t in cut else st.g.shape(t)
            for t in node.inputs
        ]
        try:
            got = op.infer(shapes, attrs)
        except (ValueError, PoetError):
            return None
        want = [_part_shape(st, st.g.shape(o), size) for o in node.outputs]
        if [tuple(s) for s in got] != want:
            return None
        out.append(attrs if attrs != dict(node.attrs) else node.attrs)
    return out


def _whole(st: _State, t: str) -> str:
    """The whole value of ``t``: ``t`` itself unless split; a split one joined once by Concat (along the
    axis) under its own name, in groups of at most MAX_PIECES."""
    if t not in st.parts or t in st.joined:
        return st.joined.get(t, t)
    pieces = list(st.parts[t])
    level = 0
    while len(pieces) > MAX_PIECES:
        groups = [pieces[j : j + MAX_PIECES] for j in range(0, len(pieces), MAX_PIECES)]
        pieces = [_concat(st, grp, st.names.fresh(f"{t}/join{level}_{m}")) for m, grp in enumerate(groups)]
        level += 1
    _concat(st, pieces, t)
    st.joined[t] = t
    return t


def _concat(st: _State, pieces: list[str], out: str) -> str:
    src = st.tensors[pieces[0]]
    size = sum(st.tensors[p].shape[st.axis] for p in pieces)
    role = st.g.tensor(out).role if out in st.g.tensors else Role.ACTIVATION
    st.tensors[out] = Tensor(out, _part_shape(st, src.shape, size), src.dtype, role)
    node = Node(st.names.fresh(f"join/{out}"), "Concat", tuple(pieces), (out,), {"axis": st.axis})
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
    "layers (dense layers, LayerNorm, elementwise ops), joined before attention mixes them"
)
