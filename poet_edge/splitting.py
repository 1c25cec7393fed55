"""Operator splitting (issue 57): big tensors of the training graph become channel tiles (and row tiles,
:func:`plan_rows`; or bands of rows first, ``TileSizes.rows_first``), each its own value
that the scheduler keeps, drops, recomputes or pages on its own, and the nodes that make and read them run
tile by tile, so no node needs a whole big tensor and its whole inputs at once.

The rewrite works on the training graph, after autodiff. Tensors that channelwise ops (``OpDef.channelwise``:
elementwise ops on same-shape inputs, Relu / Clip and their gradients, 1-bit masks) connect must share one
tiling, so they form a class; a class is tiled when its biggest tensor exceeds the tile size, into
``ceil(bytes / tile_bytes)`` channel ranges (at most one channel each). The tile size is one size for the
whole graph, or a size per tensor (:class:`TileSizes`: a class takes its members' smallest), which
:func:`split_for_floor` picks so that each class is cut only as finely as a target floor needs. Then:

- a channelwise node runs once per tile, on the tiles of its operands (same kernel, a smaller count);
- a Conv whose input or output is tiled becomes a grid of ``ConvPart`` nodes: output tile t is the chain,
  over the input tiles its groups read in ascending order, of parts that add their channels' products to the
  previous part's sums (ops/conv_part.py), the last adding the bias; ``ConvGradInput`` likewise;
- a 2-D MaxPool / AveragePool or its gradient with an operand in row tiles runs per channel tile and per row
  range (:meth:`_Rewrite.pool`): a part reads the input rows its windows read (a gradient part: the dY rows
  whose windows touch its dX rows, and those windows' X rows) and writes only its own rows;
- ``ChannelSum`` (a bias gradient) runs per tile, and a Concat joins the small per-tile sums;
- a channel Concat whose output is tiled, and a channel Slice of such a tensor (a Concat's gradient), run
  nothing: their classes share one channel axis (:func:`_view_frames`), cut at every piece's bounds, so the
  output's tiles are the inputs' tiles (:meth:`_Rewrite.resolve`);
- any other reader of a tiled tensor gets the whole tensor back from a Concat of its tiles (the rewrite is
  valid for every graph; only the split nodes get smaller);
- a trainable weight is cut into blocks: a convolution's along its tiled operands (:class:`Family`), a
  Gemm / MatMul's along its output columns when it exceeds a tile (:class:`Dense`; the input gradient then a
  chain of GemmPart nodes, ops/gemm_part.py).

Exact: a channelwise op on a tile computes the same elements; the conv parts accumulate in the unsplit
kernel's order, starting from the previous part's float sums, so every result has the unsplit bits; a pool
part takes the same taps (and counts) per output, a pool gradient part the same additions per dX element in
the same order (overlapping windows included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Phase, Role, Tensor
from poet_edge.ops import get as get_op
from poet_edge.ops.concat import MAX_PIECES
from poet_edge.ops.conv import conv_window
from poet_edge.ops.fused import UPDATE_KEYS, UPDATES, conv_workspace, gemm_dims, gemm_workspace, update_attrs
from poet_edge.ops.pool_common import Window, forward_rows, grad_rows, output_spans, pool_x_shape
from poet_edge.ops.slice import ranges
from poet_edge.ops.softmax import norm_axis
from poet_edge.units import align

CONV_OPS = ("Conv", "ConvGradInput")
POOL_OPS = ("MaxPool", "AveragePool", "MaxPoolGrad", "AveragePoolGrad")  # run per row tile too
DENSE_OPS = ("Gemm", "MatMul")
Block = tuple[str, int, int, int, int]  # (block parameter, first row, end row, first column, end column)


@dataclass(frozen=True)
class Split:
    """The rewritten graph; ``tiles``: each tiled tensor of the input graph and its channel bounds
    (0 = b0 < b1 < ... < bk = C); ``rows``: those also cut along axis 2, and their row bounds (tile (i, r)
    is channel tile i's rows r); ``split_nodes``: nodes of the input graph that now run in tiles."""

    graph: Graph
    tile_bytes: int
    tiles: Mapping[str, tuple[int, ...]]
    split_nodes: tuple[str, ...]
    blocks: Mapping[str, tuple[Block, ...]] = field(default_factory=dict)  # parameter -> its blocks
    rows: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    _shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # a blocked parameter's shape
    # each tiled tensor's (and blocked Gemm / MatMul weight's) tile size, when not one size for all
    sizes: Mapping[str, int] = field(default_factory=dict)
    origin: Mapping[str, str] = field(default_factory=dict)  # node of the split graph -> the node it runs
    asked: TileSizes | None = None  # the sizes split_graph was given: split_graph(tg, asked) is this split
    patched: frozenset[str] = frozenset()  # tensors of forward-only stages computed in patches (patch_stages)

    @property
    def mixed(self) -> bool:
        """Whether classes were cut to different tile sizes (:class:`TileSizes`)."""
        return bool(self.sizes)

    @property
    def rows_first(self) -> bool:
        """Whether tensors were cut in rows before channels (``TileSizes.rows_first``)."""
        return self.asked is not None and self.asked.rows_first

    def summary(self) -> dict[str, object]:
        """plan.json's ``split``: the tile size (mixed sizes: the largest, and ``tile_sizes``, each tiled
        tensor's and each Gemm / MatMul weight in blocks' size), tiled tensors with their tile count (channel
        tiles times row tiles), those in row tiles with their row bounds, split nodes, and the parameters cut
        into blocks (each block: name, rows [r0, r1) and columns [c0, c1) of axes 0 and 1)."""
        mixed = {"tile_sizes": dict(sorted(self.sizes.items()))} if self.sizes else {}
        return {
            "tile_bytes": self.tile_bytes,
            "rows_first": self.rows_first,
            "patches": bool(self.patched),
            **mixed,
            "tensors": {
                t: (len(b) - 1) * (len(self.rows.get(t, (0, 1))) - 1) for t, b in sorted(self.tiles.items())
            },
            "rows": {t: list(b) for t, b in sorted(self.rows.items())},
            "nodes": list(self.split_nodes),
            "parameters": {p: [list(b) for b in bs] for p, bs in sorted(self.blocks.items())},
        }

    def param_names(self, names: frozenset[str]) -> frozenset[str]:
        """``names`` (parameters of the unsplit graph) in the split graph: a blocked one by its blocks."""
        return frozenset(b[0] for p in names for b in self.blocks.get(p, ((p, 0, 0, 0, 0),)))

    def join_params(self, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Parameter values of the split graph as the unsplit graph's: each blocked parameter whole again,
        in its own shape."""
        joined = join_blocks(params, self.summary()["parameters"])  # type: ignore[arg-type]
        return {k: v.reshape(self._shapes[k]) if k in self.blocks else v for k, v in joined.items()}


@dataclass(frozen=True)
class TileSizes:
    """A tile size per tensor of the training graph: ``sizes`` (tensor -> bytes), ``default`` for every
    other tensor. Tensors that must share one tiling (a channel class, a row class) take the smallest size
    of their members; a convolution's or a Gemm / MatMul's weight cut into blocks, its own size.
    ``rows_first``: tensors that may be cut in rows (:func:`plan_rows`) become bands of rows of all their
    channels, cut in channels too only where a band of :data:`MIN_ROWS` rows still exceeds the tile (spatial
    tiles: a 1x1 convolution's band of output rows reads only the same band of its input, where a channel
    tile reads every input tile); else channels are cut first, rows only where one channel exceeds it.
    ``patches``: forward-only stages run patch by patch, their halos recomputed (:func:`patch_stages`)."""

    default: int
    sizes: Mapping[str, int] = field(default_factory=dict)
    rows_first: bool = False
    patches: bool = False

    def __post_init__(self) -> None:
        least = min((self.default, *self.sizes.values()))
        if least < 1:
            raise PoetError(f"tile size must be positive, got {least} bytes")

    def of(self, t: str) -> int:
        return self.sizes.get(t, self.default)

    def least(self, names: Iterable[str]) -> int:
        """The tile size of a class of ``names``: its members' smallest."""
        return min((self.of(t) for t in names), default=self.default)


def _sizes(tile_bytes: int | TileSizes) -> TileSizes:
    return tile_bytes if isinstance(tile_bytes, TileSizes) else TileSizes(tile_bytes)


def _grid(blocks: Sequence[Sequence[object]]) -> tuple[int, int]:
    return max(int(cast(int, b[2])) for b in blocks), max(int(cast(int, b[4])) for b in blocks)


def join_blocks(
    params: Mapping[str, np.ndarray], blocks: Mapping[str, Sequence[Sequence[object]]]
) -> dict[str, np.ndarray]:
    """``params`` with every blocked parameter's blocks (plan.json ``tiles.parameters``: name, rows
    [r0, r1) of axis 0, columns [c0, c1) of axis 1) put back together, flat."""
    out = dict(params)
    for p, bs in blocks.items():
        rows, cols = _grid(bs)
        parts = [np.asarray(out.pop(str(b[0]))).reshape(-1) for b in bs]
        inner = sum(v.size for v in parts) // (rows * cols)  # elements per (row, column): the kernel
        whole = np.zeros((rows, cols * inner), dtype=parts[0].dtype)
        for b, v in zip(bs, parts, strict=True):
            r0, r1, c0, c1 = (int(cast(int, x)) for x in b[1:])
            whole[r0:r1, c0 * inner : c1 * inner] = v.reshape(r1 - r0, (c1 - c0) * inner)
        out[p] = whole.reshape(-1)
    return out


def cut_blocks(
    params: Mapping[str, np.ndarray], blocks: Mapping[str, Sequence[Sequence[object]]]
) -> dict[str, np.ndarray]:
    """The inverse of :func:`join_blocks`: each blocked parameter given (any shape) replaced by its
    blocks, flat."""
    out = dict(params)
    for p, bs in blocks.items():
        if p not in out:
            continue
        rows, cols = _grid(bs)
        v = np.asarray(out.pop(p)).reshape(-1)
        if v.size % (rows * cols):
            raise ValueError(f"{p!r} holds {v.size} values, not a multiple of its {rows}x{cols} channels")
        m = v.reshape(rows, v.size // rows)
        inner = m.shape[1] // cols
        for b in bs:
            r0, r1, c0, c1 = (int(cast(int, x)) for x in b[1:])
            out[str(b[0])] = np.ascontiguousarray(m[r0:r1, c0 * inner : c1 * inner]).reshape(-1)
    return out


def tile_name(t: str, i: int, r: int | None = None) -> str:
    """Channel tile ``i`` of ``t``; with ``r``, its row tile ``r``."""
    return f"{t}/t{i}" if r is None else f"{t}/t{i}r{r}"


def _per_channel(tg: Graph, n: Node) -> bool:
    """A pool or pool gradient, or a ReduceMean / BroadcastTo over the trailing axes (``OpDef.per_channel``)
    on [N, C, ...] float tensors of one (N, C) (a BroadcastTo viewing its input as its own shape)."""
    if not get_op(n.op).per_channel or len(n.outputs) != 1:
        return False
    if "view" in n.attrs and tuple(cast(Sequence[int], n.attrs["view"])) != tg.shape(n.inputs[0]):
        return False
    ts = [t for t in (*n.inputs, *n.outputs) if tg.tensor(t).dtype == "float32"]
    return (
        len(ts) == len(n.inputs) + 1
        and all(len(tg.shape(t)) >= 3 for t in ts)
        and len({tg.shape(t)[:2] for t in ts}) == 1
    )


def _row_pool(tg: Graph, n: Node) -> bool:
    """A 2-D or 1-D pool or pool gradient that runs per channel tile (:func:`_per_channel`): it can run per
    row tile too, each part on the rows its windows read (pool_common.forward_rows / grad_rows)."""
    return n.op in POOL_OPS and _per_channel(tg, n) and len(tg.shape(n.outputs[0])) in (3, 4)


def _pool_geometry(
    tg: Graph, n: Node, channels: int | None = None
) -> tuple[tuple[int, ...], dict[str, object]]:
    """Pool (or pool gradient) ``n``'s input shape, with ``channels`` channels when given (a channel tile),
    and its attributes with that shape where they carry one (``x_shape``: the gradients)."""
    whole = pool_x_shape(n.op, [tg.shape(t) for t in n.inputs], n.attrs)
    xs = tuple(whole) if channels is None else (whole[0], channels, *whole[2:])
    return xs, ({**n.attrs, "x_shape": xs} if "x_shape" in n.attrs else dict(n.attrs))


def _pool_cuts(tg: Graph, n: Node, bounds: Sequence[int]) -> bool:
    """Whether a pool gradient's dX can be cut at row ``bounds``: every row tile's rows inside the windows
    of the dY rows that touch it (not so where the stride exceeds the kernel and leaves rows unread)."""
    x = pool_x_shape(n.op, [tg.shape(t) for t in n.inputs], n.attrs)
    try:
        for a, b in zip(bounds, bounds[1:], strict=False):
            grad_rows(x, n.attrs, a, b)
    except ValueError:
        return False
    return True


def _runs_in_tiles(tg: Graph, n: Node) -> bool:
    return _channelwise(tg, n) or _per_channel(tg, n) or bool(_channel_maps(tg, n))


def _channel_maps(tg: Graph, n: Node) -> list[str]:
    """The [N, C, ...] operands of a node whose other inputs (``OpDef.channel_inputs``: BatchNormalization's
    scale, bias, mean and var) are parameters of one value per channel: it runs per channel tile and row
    tile of them, each part reading the slices of those parameters (an output of one value per channel,
    BatchNormGradScale's, as a chain over the row tiles per channel tile, joined). Empty for any other
    node."""
    per = get_op(n.op).channel_inputs
    if not per or len(n.outputs) != 1:
        return []
    maps = [t for k, t in enumerate(n.inputs) if k not in per]
    if any(len(tg.shape(t)) < 3 for t in maps) or len({tg.shape(t) for t in maps}) != 1:
        return []
    c = tg.shape(maps[0])[1]
    if any(n.inputs[k] not in tg.params or tg.shape(n.inputs[k]) != (c,) for k in per):
        return []
    return maps


def _class_members(tg: Graph, n: Node) -> tuple[str, ...]:
    """The tensors of a node that runs in tiles (:func:`_runs_in_tiles`) that share its channel tiles."""
    maps = _channel_maps(tg, n)
    if not maps:  # a per-channel parameter is sliced, never tiled with the maps
        return tuple(t for t in (*n.inputs, *n.outputs) if _channel_param(tg, t, n) is None)
    return (*maps, *(n.outputs if len(tg.shape(n.outputs[0])) >= 3 else ()))


def _channelwise(tg: Graph, n: Node) -> bool:
    """A node that runs per channel tile: a channelwise op whose float operands have its output's shape
    (rank >= 3, [N, C, ...]), or are a computed per-channel value broadcast over it (:func:`_broadcast`: a
    squeeze-and-excitation gate); RangeMask reads one such tensor, MaskGrad's mask is a tile-wise
    RangeMask's."""
    op = get_op(n.op)
    if not op.channelwise or len(n.outputs) != 1:
        return False
    if n.op == "RangeMask":
        return len(tg.shape(n.inputs[0])) >= 3
    shape = tg.shape(n.outputs[0])
    floats = [i for i in n.inputs if tg.tensor(i).dtype == "float32"]
    if len(shape) < 3 or any(
        tg.shape(i) != shape and not _broadcast(tg, i, n) and _channel_param(tg, i, n) is None for i in floats
    ):
        return False
    return n.op == "MaskGrad" or len(floats) == len(n.inputs)


def _channel_axis(small: Sequence[int], big: Sequence[int]) -> int | None:
    """The axis of ``small`` that broadcasts over the channels of ``big`` [N, C, ...] (rank 3 or more, C
    above 1) when every other axis of ``small`` is 1 ([1, C, 1, 1], [C, 1, 1]: right-aligned, as ONNX
    broadcasts); None otherwise."""
    axis = len(small) - (len(big) - 1)  # right-aligned: big's axis 1
    if len(big) < 3 or axis < 0 or len(small) > len(big) or big[1] == 1 or small[axis] != big[1]:
        return None
    return axis if all(d == 1 for k, d in enumerate(small) if k != axis) else None


def _channel_param(tg: Graph, t: str, n: Node) -> int | None:
    """The axis of ``t`` that holds the channels when ``t`` is a parameter of one value per channel of
    ``n``'s [N, C, ...] output, broadcast over it ([1, C, 1, 1] or [C, 1, 1]: a scale or shift of a
    normalization the exporter wrote as Mul and Add, a layer scale): each channel tile of ``n`` reads a
    Slice of it. None otherwise."""
    if t not in tg.params or not n.outputs:
        return None
    return _channel_axis(tg.shape(t), tg.shape(n.outputs[0]))


def _param_grad_axis(tg: Graph, n: Node) -> int | None:
    """The channel axis of a ReduceSumTo's output when it sums an [N, C, ...] tensor down to one value per
    channel in a parameter's shape of lower rank ([C, 1, 1]: the gradient of a :func:`_channel_param`);
    None otherwise. (To [N, C, 1, 1] it is a per-channel node, :func:`_per_channel`.)"""
    if n.op != "ReduceSumTo" or len(n.outputs) != 1:
        return None
    x, y = tg.shape(n.inputs[0]), tg.shape(n.outputs[0])
    return _channel_axis(y, x) if len(y) < len(x) else None


def _broadcast(tg: Graph, t: str, n: Node) -> bool:
    """Whether ``t`` is an operand of ``n`` computed by the graph (not a parameter or input) that holds one
    value per (sample, channel), [N, C, 1, ...], broadcast over ``n``'s [N, C, H, ...] output: its channel
    tiles go with the output's, and every row tile reads its whole channel tile."""
    shape, out = tg.shape(t), tg.shape(n.outputs[0])
    if t in tg.params or t in tg.inputs or len(shape) != len(out) or shape == out:
        return False
    return shape[:2] == out[:2] and all(d == 1 for d in shape[2:])


class _Classes:
    """Union-find over tensor names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, t: str) -> str:
        self.parent.setdefault(t, t)
        while self.parent[t] != t:
            self.parent[t] = self.parent[self.parent[t]]
            t = self.parent[t]
        return t

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _conv_sides(n: Node) -> tuple[str, str]:
    """(the tensor tiled along input channels C, the one along output channels M) of a conv node."""
    if n.op == "Conv":
        return n.inputs[0], n.outputs[0]
    return n.outputs[0], n.inputs[0]  # ConvGradInput(dY, W) -> dX


def _tileable(tg: Graph, n: Node) -> bool:
    return n.op in CONV_OPS and len(tg.shape(n.inputs[1])) in (3, 4)


@dataclass(frozen=True)
class Family:
    """A convolution whose trainable weight W can be cut into blocks along the tiles of its operands, so
    that no node reads W whole: its forward ``conv`` (X, W, [B]) -> Y, its input gradient ``grad_input``
    (dY, W) -> dX (or None), W's update ``update`` (fused: (W, X, dY, *state); plain: (W, dW, *state) with
    dW from ``grad_weight`` (X, dY)), and the bias B's update when B is trainable. Any groups: a block is
    the pair of an output tile and an input tile that share a group (:func:`block_geometry`); depthwise (one
    input and one output channel per group) ties X's tiles to Y's, so block i is the channels of tile i. A
    grouped convolution (1 < groups, not depthwise) has its classes' tiles cut at its group bounds
    (:func:`_group_cells`); where its tiles still cross groups in a way a block cannot express (one side
    whole, or tiled by another rule), its W stays whole (:meth:`_Rewrite.cut`)."""

    conv: Node
    grad_input: Node | None
    update: Node
    grad_weight: Node | None
    bias_update: Node | None
    depthwise: bool
    groups: int = 1

    @property
    def w(self) -> str:
        return self.conv.inputs[1]

    @property
    def b(self) -> str | None:
        return self.conv.inputs[2] if len(self.conv.inputs) > 2 else None

    @property
    def dy(self) -> str:
        return self.update.inputs[2] if self.grad_weight is None else self.grad_weight.inputs[1]

    def ties(self) -> list[tuple[str, str]]:
        """Tensors that must share their channel tiles for the blocks to line up."""
        x, y = self.conv.inputs[0], self.conv.outputs[0]
        out = [(y, self.dy)]
        if self.grad_input is not None:
            out.append((x, self.grad_input.outputs[0]))
        if self.depthwise:
            out.append((x, y))
        return out


def families(tg: Graph) -> dict[str, Family]:
    """Every convolution whose trainable weight :class:`Family` can cut, by weight."""
    producer, consumers = tg.producers(), tg.consumers()
    out: dict[str, Family] = {}
    for n in tg.nodes:
        if n.op != "Conv" or not _tileable(tg, n) or n.inputs[1] not in tg.trainable:
            continue
        x, w = n.inputs[0], n.inputs[1]
        win = conv_window(tg.shape(x), tg.shape(w), n.attrs)
        depthwise = win.groups == win.c == win.m
        readers = consumers[w]
        gi = [r for r in readers if r.op == "ConvGradInput" and r.inputs[1] == w]
        ups = [r for r in readers if r.phase == Phase.UPDATE and r.inputs[0] == w]
        if len(gi) > 1 or len(ups) != 1 or len(readers) != 1 + len(gi) + 1:
            continue
        u, gw = ups[0], None
        if u.op == "ConvGradWeightUpdate":
            dy = u.inputs[2]
            if u.inputs[1] != x:
                continue
        elif u.op in UPDATES and u.inputs[1] in producer:
            gw = producer[u.inputs[1]]
            if gw.op != "ConvGradWeight" or gw.inputs[0] != x or len(consumers[u.inputs[1]]) != 1:
                continue
            dy = gw.inputs[1]
        else:
            continue
        if gi and gi[0].inputs[0] != dy:
            continue
        bias_update = None
        if len(n.inputs) > 2:
            b = n.inputs[2]
            breaders = [r for r in consumers[b] if r is not n]
            if b in tg.trainable:
                if (
                    len(breaders) != 1
                    or breaders[0].op not in UPDATES
                    or breaders[0].inputs[1] not in producer
                ):
                    continue
                sums = producer[breaders[0].inputs[1]]
                if sums.op != "ChannelSum" or sums.inputs[0] != dy or len(consumers[sums.outputs[0]]) != 1:
                    continue
                bias_update = breaders[0]
            elif breaders:
                continue
        out[w] = Family(n, gi[0] if gi else None, u, gw, bias_update, depthwise, win.groups)
    return out


def _group_range(lo: int, hi: int, per: int) -> tuple[int, int]:
    """The first and last group of channels [lo, hi), ``per`` channels a group."""
    return lo // per, (hi - 1) // per


def shares_group(win: Window, m: tuple[int, int], c: tuple[int, int]) -> bool:
    """Whether output channels [m0, m1) and input channels [c0, c1) of a convolution share a group."""
    ma, mz = _group_range(*m, win.m // win.groups)
    ca, cz = _group_range(*c, win.c // win.groups)
    return ma <= cz and ca <= mz


def block_geometry(win: Window, m: tuple[int, int], c: tuple[int, int]) -> tuple[int, int, int] | None:
    """The block of output channels [m0, m1) and input channels [c0, c1) (which share a group) as a
    sub-convolution of its own: (its groups, first and end column of W's axis 1, within a group). Both
    ranges within one group: groups 1, the input channels' columns in that group (always so for groups 1);
    both the same whole groups: that many groups, all columns (depthwise tiles). None otherwise: the block's
    rows would read different columns, or some of its rows none (a tile that straddles groups)."""
    mg, cg = win.m // win.groups, win.c // win.groups
    (ma, mz), (ca, cz) = _group_range(*m, mg), _group_range(*c, cg)
    if ma == mz == ca == cz:
        return 1, c[0] - ca * cg, c[1] - ca * cg
    whole = m[0] % mg == m[1] % mg == c[0] % cg == c[1] % cg == 0
    if whole and (ma, mz) == (ca, cz):
        return mz - ma + 1, 0, cg
    return None


@dataclass(frozen=True)
class Dense:
    """A Gemm / MatMul ``fwd`` (X [..., K], W, [B]) -> Y [..., M] whose trainable 2-D weight W can be cut
    into blocks of its M output columns, so that no node reads W whole: the forward per block (Y's columns,
    joined), the input gradient ``grad_input`` (dY, W) -> dX as a chain of GemmPart nodes over the blocks,
    W's update ``update`` (fused: (W, dY, X) or (W, X, dY); plain: (W, dW) with dW from ``grad_weight``)
    per block on dY's columns, and the bias B (1-D [M], a parameter) in blocks too, its gradient
    ``bias_sum`` (a ReduceSumTo of dY) and ``bias_update`` per block. ``rows``: M is W's axis 0 (Gemm with
    transB), else its axis 1."""

    fwd: Node
    grad_input: Node | None
    update: Node
    grad_weight: Node | None
    bias_sum: Node | None
    bias_update: Node | None
    dy: str
    rows: bool

    @property
    def w(self) -> str:
        return self.fwd.inputs[1]

    @property
    def b(self) -> str | None:
        return self.fwd.inputs[2] if len(self.fwd.inputs) > 2 else None


def _dense_update(
    tg: Graph, u: Node, x: str, rows: bool, producer: Mapping[str, Node], consumers: Mapping[str, list[Node]]
) -> tuple[str, Node | None] | None:
    """(dY, the plain update's gradient node or None) of W's update ``u``, or None when it is not a weight
    gradient of (X, dY) this rewrite can cut: fused (W, dY, X) / (W, X, dY) with transA, or a plain update
    of a 2-D Gemm / MatMul of the same operands."""
    if u.op == "GemmGradUpdate":
        node, ops = u, u.inputs[1:3]  # batched (a 3-D MatMul's): per batch, the same columns
    elif u.op in UPDATES and u.inputs[1] in producer:
        node = producer[u.inputs[1]]
        if node.op not in DENSE_OPS or len(node.inputs) != 2:
            return None
        if len(consumers[u.inputs[1]]) != 1 or len(tg.shape(node.outputs[0])) != 2:
            return None
        ops = node.inputs
    else:
        return None
    if int(cast(int, node.attr("transA", 0))) != 1 or int(cast(int, node.attr("transB", 0))) != 0:
        return None
    dy, other = (ops[0], ops[1]) if rows else (ops[1], ops[0])
    if other != x:
        return None
    return dy, (None if node is u else node)


def dense_families(tg: Graph) -> dict[str, Dense]:
    """Every Gemm / MatMul whose trainable weight :class:`Dense` can cut, by weight."""
    producer, consumers = tg.producers(), tg.consumers()
    out: dict[str, Dense] = {}
    for n in tg.nodes:
        if n.op not in DENSE_OPS or len(n.inputs) < 2 or n.inputs[1] not in tg.trainable:
            continue
        x, w = n.inputs[0], n.inputs[1]
        if len(tg.shape(w)) != 2 or len(tg.shape(x)) < 2 or int(cast(int, n.attr("transA", 0))):
            continue
        rows = n.op == "Gemm" and bool(n.attr("transB", 0))
        if n.op == "MatMul" and n.attr("transB", 0):
            continue
        m = tg.shape(w)[0 if rows else 1]
        readers = consumers[w]
        ups = [r for r in readers if r.phase == Phase.UPDATE and r.inputs[0] == w]
        gi = [r for r in readers if r.op in DENSE_OPS and r.phase != Phase.UPDATE and r is not n]
        if len(ups) != 1 or len(gi) > 1 or len(readers) != 2 + len(gi):
            continue
        found = _dense_update(tg, ups[0], x, rows, producer, consumers)
        if found is None:
            continue
        dy, gw = found
        if dy not in producer or tg.shape(dy)[-1] != m:
            continue
        if gi:
            g = gi[0]
            if (
                g.inputs != (dy, w)
                or int(cast(int, g.attr("transA", 0)))
                or int(cast(int, g.attr("transB", 0))) != (0 if rows else 1)
            ):
                continue
        bias_sum = bias_update = None
        if len(n.inputs) > 2:
            b = n.inputs[2]
            if b not in tg.params or tg.shape(b) != (m,):
                continue
            others = [r for r in consumers[b] if r is not n]
            if b in tg.trainable:
                if len(others) != 1 or others[0].op not in UPDATES or others[0].inputs[1] not in producer:
                    continue
                bias_update, bias_sum = others[0], producer[others[0].inputs[1]]
                if bias_sum.op != "ReduceSumTo" or bias_sum.inputs != (dy,):
                    continue
                if len(consumers[bias_sum.outputs[0]]) != 1:
                    continue
            elif others:
                continue
        out[w] = Dense(n, gi[0] if gi else None, ups[0], gw, bias_sum, bias_update, dy, rows)
    return out


def _eligible(tg: Graph, classes: _Classes) -> dict[str, list[str]]:
    """Members of every class whose tensors all may be tiled (whatever their size): one (N, C), none an
    input, output or parameter, masks made and read by nodes that run in tiles only. A float tensor that a
    node which cannot run in tiles makes is sliced into the tiles after it. A tensor no node makes (a whole
    weight's optimizer state) is never tiled: there is no node to slice it after."""
    producer, consumers = tg.producers(), tg.consumers()
    split_ok = {n.name for n in tg.nodes if _runs_in_tiles(tg, n)}
    fixed = set(tg.inputs) | set(tg.outputs) | set(tg.params) | (set(tg.tensors) - set(producer))
    members: dict[str, list[str]] = {}
    for t in tg.tensors:
        members.setdefault(classes.find(t), []).append(t)
    out = {}
    for root, names in members.items():
        floats = [t for t in names if tg.tensor(t).dtype == "float32" and len(tg.shape(t)) >= 3]
        if not floats or len({tg.shape(t)[:2] for t in floats}) != 1 or any(t in fixed for t in names):
            continue
        others = [t for t in names if t not in floats]  # masks: only split nodes may make and read them
        ok = {c.name in split_ok for t in others for c in (producer[t], *consumers[t])}
        if False in ok:
            continue
        out[root] = names
    return out


def _classes(tg: Graph, sizes: TileSizes, fams: Mapping[str, Family]) -> tuple[dict[str, list[str]], Need]:
    """The members of every channel class that may be tiled (:func:`_eligible`; classes: channelwise and
    per-channel nodes, and the ties of families whose classes may all be tiled), and the weights bigger than
    their tile size, with the classes their blocks' rows and columns follow."""
    classes = _Classes()
    for n in tg.nodes:
        if _runs_in_tiles(tg, n):
            members = _class_members(tg, n)
            for t in members:
                classes.union(t, members[0])
    ok = _eligible(tg, classes)
    big_w = {w: f for w, f in fams.items() if tg.tensor(w).nbytes > sizes.of(w) and not f.depthwise}
    for w, fam in sorted(fams.items()):
        ties = fam.ties()
        if w in big_w:
            y = fam.conv.outputs[0]
            classes.union(y, fam.dy)
            ties = [(a, b) for a, b in ties if (a, b) != (y, fam.dy)]
        if all(classes.find(t) in ok for pair in ties for t in pair):
            for a, b in ties:
                classes.union(a, b)
    order = {n.name: i for i, n in enumerate(tg.nodes)}
    need = [  # in graph order: (output's class, input's class, weight bytes, its tile size)
        (classes.find(f.conv.outputs[0]), classes.find(f.conv.inputs[0]), tg.tensor(w).nbytes, sizes.of(w))
        for w, f in sorted(big_w.items(), key=lambda wf: order[wf[1].conv.name])
    ]
    return _eligible(tg, classes), need


Need = list[tuple[str, str, int, int]]  # big weights: (output's class, input's class, bytes, tile size)


def plan_tiles(
    tg: Graph, tile_bytes: int | TileSizes, fams: Mapping[str, Family] | None = None
) -> dict[str, tuple[int, ...]]:
    """Channel bounds of every tensor to tile: the classes that channelwise and per-channel nodes link
    whose biggest tensor exceeds ``tile_bytes`` (and that :func:`_eligible` allows). A family's
    (:func:`families`) tensors that must share tiles are linked too, when all their classes may be tiled;
    a family whose weight exceeds ``tile_bytes`` has its output's class cut into at least as many tiles as
    its weight has tile sizes, so the weight's blocks fit a tile. A grouped family's classes are cut at its
    group bounds, and both when either is (:func:`_group_cells`). ``tile_bytes``: one size, or a size per
    tensor (:class:`TileSizes`: a class takes its members' smallest)."""
    sizes = _sizes(tile_bytes)
    fams = fams or {}
    return _channel_bounds(tg, sizes, *_classes(tg, sizes, fams), fams)


def _channel_bounds(
    tg: Graph,
    sizes: TileSizes,
    eligible: Mapping[str, list[str]],
    need: Need,
    fams: Mapping[str, Family],
    row_tiles: Mapping[str, int] | None = None,
) -> dict[str, tuple[int, ...]]:
    """:func:`plan_tiles` from the classes :func:`_classes` found. A weight bigger than a tile has
    (output tiles) x (input tiles) blocks: its output's class gets enough tiles that a block fits a tile
    given its input's tiles so far (weights in graph order), not a grid of two such cuts. ``row_tiles``
    (rows first): the row tiles a tensor will be cut into; it then needs that many times fewer channel
    tiles (a class takes what its most demanding member needs)."""
    chans, k = {}, {}
    for root, names in eligible.items():
        floats = [t for t in names if tg.tensor(t).dtype == "float32" and len(tg.shape(t)) >= 3]
        chans[root] = c = tg.shape(floats[0])[1]
        size, bands = sizes.least(names), row_tiles or {}
        # each member's bands within a tile: one not cut in rows (a pooled map) needs more channel tiles
        k[root] = min(c, max(-(-tg.tensor(t).nbytes // (size * bands.get(t, 1))) for t in names))
    for y, x, nbytes, size in need:
        if y in k:
            k[y] = min(chans[y], max(k[y], -(-nbytes // (size * k.get(x, 1)))))
    _, linked = _group_cells(tg, fams, eligible)
    _settle(k, chans, linked)
    frames = _view_frames(tg, eligible, _channel_views(tg), k)
    _settle(k, chans, [*linked, *_members(frames).values()])
    cells, _ = _group_cells(tg, fams, eligible, k)
    bounds_of: dict[str, tuple[int, ...]] = {}
    for f, rs in _members(frames).items():
        if k[f] >= 2:  # each class: the frame's tiles over its channels
            on = _view_bounds([(frames[r][1], chans[r], k[r], cells.get(r, set())) for r in rs])
            bounds_of |= {r: _within(on, frames[r][1], chans[r]) for r in rs}
    for root in eligible:
        if k[root] >= 2 and root not in frames:  # even tiles, cut at the group bounds where it has some
            bounds_of[root] = _view_bounds([(0, chans[root], k[root], cells.get(root, set()))])
    out: dict[str, tuple[int, ...]] = {}
    for root, bounds in bounds_of.items():
        for t in eligible[root]:
            out[t] = bounds  # a mask's tile i packs the bits of its source's tile i
    return out


def _settle(k: dict[str, int], chans: Mapping[str, int], together: Sequence[Sequence[str]]) -> None:
    """Tiles asked by each class (``k``, updated) such that in each set of ``together`` (a grouped family's X
    and Y classes, the classes of one frame) either none is tiled or all are (in two tiles at least)."""
    changed = True
    while changed:
        changed = False
        for pair in together:
            if max(k[r] for r in pair) >= 2:
                for r in pair:
                    if k[r] < min(2, chans[r]):
                        k[r], changed = min(2, chans[r]), True


def _group_cells(
    tg: Graph,
    fams: Mapping[str, Family],
    eligible: Mapping[str, list[str]],
    k: Mapping[str, int] | None = None,
) -> tuple[dict[str, set[int]], list[tuple[str, str]]]:
    """The group bounds that the tiles of each class a grouped family (1 < groups, not depthwise) reads or
    makes must not cross, by class, so that every block of its weight is a sub-convolution
    (:func:`block_geometry`: both tiles of a block within one group, or both the same whole groups); and
    the pairs of classes (X's and dX's, Y's and dY's) that such a family needs tiled together (with one
    side whole, a block's rows would span groups). Only families whose X and dX, and Y and dY, share a
    class that may be tiled. With ``k`` (the tiles each class asks), a family whose classes ask for fewer
    tiles than it has groups is cut every ``groups // tiles`` groups on both sides instead of at every
    group (a ResNeXt stage of 32 groups in 4 tiles: 4 tiles of 8 groups, not 32)."""
    root = {t: r for r, names in eligible.items() for t in names}
    cells: dict[str, set[int]] = {}
    linked = []
    for _, fam in sorted(fams.items()):
        x, y = fam.conv.inputs[0], fam.conv.outputs[0]
        dx = fam.grad_input.outputs[0] if fam.grad_input is not None else x
        if fam.groups == 1 or fam.depthwise or any(t not in root for t in (x, y, dx, fam.dy)):
            continue
        if root[x] != root[dx] or root[y] != root[fam.dy]:
            continue
        step = 1 if k is None else max(1, fam.groups // max(k[root[x]], k[root[y]], 1))
        for t in (x, y):
            per = tg.shape(t)[1] // fam.groups
            cells.setdefault(root[t], set()).update(range(0, tg.shape(t)[1] + 1, per * step))
            cells[root[t]].add(tg.shape(t)[1])
        linked.append((root[x], root[y]))
    return cells, linked


@dataclass(frozen=True)
class _View:
    """Tensor ``piece`` is channels [offset, offset + its channels) of ``whole``: an input of a channel
    Concat (``whole`` its output) or the output of a channel Slice (``whole`` its input)."""

    piece: str
    whole: str
    offset: int


def _channel_views(tg: Graph) -> dict[str, tuple[_View, ...]]:
    """Every channel Concat (axis 1 of [N, C, ...] float tensors, distinct inputs) and channel Slice (axis
    1 only, step 1, every other axis whole) by name: its pieces of the whole tensor. Such a node is a
    relabeling when the whole's channel tiles are cut at its pieces' bounds (:func:`_active_views`)."""
    out: dict[str, tuple[_View, ...]] = {}
    for n in tg.nodes:
        if n.op not in ("Concat", "Slice") or len(n.outputs) != 1:
            continue
        ts = (*n.inputs, *n.outputs)
        shape = tg.shape(n.outputs[0])
        if len(shape) < 3 or any(tg.tensor(t).dtype != "float32" for t in ts):
            continue
        if n.op == "Concat":
            axis = norm_axis(int(cast(int, n.attrs["axis"])), len(shape))
            if axis != 1 or len(set(n.inputs)) != len(n.inputs):
                continue
            offsets = np.cumsum([0] + [tg.shape(t)[1] for t in n.inputs])
            out[n.name] = tuple(
                _View(t, n.outputs[0], int(o)) for t, o in zip(n.inputs, offsets, strict=False)
            )
            continue
        x = tg.shape(n.inputs[0])
        rs = ranges(x, n.attrs)
        if rs[1].step != 1 or any(len(r) != d for a, (r, d) in enumerate(zip(rs, x, strict=True)) if a != 1):
            continue
        out[n.name] = (_View(n.outputs[0], n.inputs[0], rs[1].start),)
    return out


def _frame_find(frame: dict[str, tuple[str, int]], r: str) -> tuple[str, int]:
    """The frame root of class ``r`` and the position of ``r``'s channel 0 in it."""
    off = 0
    while frame.get(r, (r, 0))[0] != r:
        r, o = frame[r]
        off += o
    return r, off


def _view_frames(
    tg: Graph,
    eligible: Mapping[str, list[str]],
    views: Mapping[str, tuple[_View, ...]],
    k: Mapping[str, int],
) -> dict[str, tuple[str, int]]:
    """Classes whose tiles channel Concats and Slices can relabel, placed on shared channel axes (frames):
    class -> (its frame, the frame position of its channel 0). A node's views put each piece's class at
    its offset within its whole's class; a node is left out when its whole's class is not tiled (``k``:
    the tiles each class asks for, fewer than 2: whole), a tensor of it may not be tiled, a piece has one
    channel or is in its whole's class, or its offsets contradict the nodes placed before it."""
    root = {t: r for r, names in eligible.items() for t in names}
    frame: dict[str, tuple[str, int]] = {}
    for vs in views.values():
        if not all(
            v.whole in root
            and k[root[v.whole]] >= 2
            and v.piece in root
            and root[v.piece] != root[v.whole]
            and tg.shape(v.piece)[1] > 1
            for v in vs
        ):
            continue
        trial = dict(frame)
        for v in vs:
            (pf, po), (wf, wo) = _frame_find(trial, root[v.piece]), _frame_find(trial, root[v.whole])
            if pf == wf and po != wo + v.offset:
                break
            if pf != wf:
                trial[pf] = (wf, wo + v.offset - po)  # the piece's frame within the whole's
        else:
            frame = trial
    placed = set(frame) | {f for f, _ in frame.values()}
    return {r: _frame_find(frame, r) for r in sorted(placed)}


def _view_bounds(members: Sequence[tuple[int, int, int, set[int]]]) -> tuple[int, ...]:
    """Bounds along one frame of classes (each: position, channels, tiles asked, cuts within): cut at every
    class's ends and cuts, and each range between two cuts in as many tiles as any class over it asks for
    its share, so every class's tiles are the frame's tiles over its channels."""
    edges: set[int] = set()
    for off, c, _, cuts in members:
        edges |= {off, off + c} | {off + x for x in cuts}
    ordered = sorted(edges)
    out = [ordered[0]]
    for lo, hi in zip(ordered, ordered[1:], strict=False):
        q = min(
            hi - lo, max(-(-k * (hi - lo) // c) for off, c, k, _ in members if off <= lo and hi <= off + c)
        )
        out += [lo + p * (hi - lo) // q for p in range(1, q + 1)]
    return tuple(out)


def _members(frames: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, ...]]:
    """The classes of every frame, by frame."""
    out: dict[str, list[str]] = {}
    for r, (f, _) in sorted(frames.items()):
        out.setdefault(f, []).append(r)
    return {f: tuple(rs) for f, rs in out.items()}


def _within(bounds: Sequence[int], off: int, c: int) -> tuple[int, ...]:
    """The bounds of channels [off, off + c) of a tensor cut at ``bounds``, from 0."""
    return tuple(b - off for b in bounds if off <= b <= off + c)


def _active_views(
    tg: Graph, tiles: Mapping[str, tuple[int, ...]], rows: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[_View, ...]]:
    """The channel Concats and Slices whose every piece is tiled as its whole's tiles over its range (and
    in the same rows): each piece tile is a whole tile, so the node makes nothing."""
    out = {}
    for name, vs in _channel_views(tg).items():
        if all(
            v.piece in tiles
            and v.whole in tiles
            and rows.get(v.piece) == rows.get(v.whole)
            and tiles[v.piece] == _within(tiles[v.whole], v.offset, tg.shape(v.piece)[1])
            for v in vs
        ):
            out[name] = vs
    return out


MIN_ROWS = 4  # rows of a row tile at least: a 3x3 window's halo stays within the neighbouring tiles


def plan_rows(
    tg: Graph,
    tile_bytes: int | TileSizes,
    tiles: Mapping[str, tuple[int, ...]],
    fams: Mapping[str, Family] | None = None,
    eligible: Mapping[str, list[str]] | None = None,
) -> dict[str, tuple[int, ...]]:
    """Row bounds (axis 2) of every tensor whose channel tiles (``tiles``, or the whole tensor) still exceed
    ``tile_bytes``: 4-D and 3-D tensors (a 1-D map's rows: ranges of its length) that channelwise nodes link
    (and a family's Y and dY, X and dX) form a row class of one shape (a MaxPoolGrad's X and dX too); a class
    is cut into ``ceil(tile bytes / tile_bytes)`` row ranges of at least :data:`MIN_ROWS` rows when its
    tensors may be tiled, no per-channel node other than a pool (:func:`_row_pool`) reads or makes them,
    every pool gradient making one can be cut there (:func:`_pool_cuts`), and their largest channel tile
    exceeds ``tile_bytes``. A convolution or a pool reads the rows its output rows need (a halo of its
    neighbouring tiles) through a window: a Slice, or a Concat of tiles and slices, along the rows. Rows
    first (``TileSizes.rows_first``), the output of a convolution or pool has at least as many row tiles as
    its input (at most one per :data:`MIN_ROWS` rows): a strided one's window of input rows then spans
    about one input tile, not several.
    ``eligible``: the channel classes that may be tiled, when :func:`_classes` already found them.
    ``tile_bytes``: one size, or a size per tensor (a row class takes its members' smallest)."""
    sizes = _sizes(tile_bytes)
    fams = fams or {}
    if eligible is None:
        eligible = _classes(tg, sizes, fams)[0]
    may = {t for names in eligible.values() for t in names}
    rows = _Classes()
    pooled: set[str] = set()
    grads: dict[str, list[Node]] = {}  # dX -> the pool gradients that make it
    for n in tg.nodes:
        if _channelwise(tg, n):
            for t in (*n.inputs, *n.outputs):
                if not _broadcast(tg, t, n) and _channel_param(tg, t, n) is None:  # per-channel operands
                    rows.union(t, n.outputs[0])  # have no rows: each row tile reads its channels' values
        elif _row_pool(tg, n):
            if n.op == "MaxPoolGrad":  # X and dX: the same rows
                rows.union(n.inputs[0], n.outputs[0])
            if n.op in ("MaxPoolGrad", "AveragePoolGrad"):
                grads.setdefault(n.outputs[0], []).append(n)
        elif _per_channel(tg, n):
            pooled.update((*n.inputs, *n.outputs))
        elif maps := _channel_maps(tg, n):  # row by row (BatchNormGradScale: a chain over them)
            ranged = (*maps, n.outputs[0]) if len(tg.shape(n.outputs[0])) >= 3 else maps
            for t in ranged:
                rows.union(t, maps[0])
    for fam in fams.values():
        for a, b in fam.ties():
            if tg.shape(a) == tg.shape(b):
                rows.union(a, b)
    for vs in _active_views(tg, tiles, {}).values():  # a piece's tiles are its whole's: the same rows
        for v in vs:
            rows.union(v.piece, v.whole)
    members: dict[str, list[str]] = {}
    for t in tg.tensors:
        members.setdefault(rows.find(t), []).append(t)
    ks: dict[str, tuple[int, int]] = {}  # row class -> (row tiles, rows)
    for root, names in members.items():
        floats = [t for t in names if tg.tensor(t).dtype == "float32"]
        if not floats or any(t not in may or t in pooled for t in names):
            continue
        shape = tg.shape(floats[0])
        same = all(_but_channels(tg.shape(t)) == _but_channels(shape) for t in floats)
        if len(shape) not in (3, 4) or not same:
            continue
        widest = max(_widest(tiles.get(t, (0, tg.shape(t)[1]))) for t in floats)
        per = shape[0] * widest * math.prod(shape[2:]) * 4
        ks[root] = (min(-(-per // sizes.least(names)), shape[2] // MIN_ROWS), shape[2])
    if sizes.rows_first:
        _at_least_inputs(tg, rows, ks)
    out: dict[str, tuple[int, ...]] = {}
    for root, (k, h) in ks.items():
        names = members[root]
        if k < 2:
            continue
        bounds = tuple(i * h // k for i in range(k + 1))
        if not all(_pool_cuts(tg, n, bounds) for t in names for n in grads.get(t, ())):
            continue
        for t in names:
            out[t] = bounds
    return out


def _at_least_inputs(tg: Graph, rows: _Classes, ks: dict[str, tuple[int, int]]) -> None:
    """Rows first: every convolution's and pool's output class gets at least its input's row tiles (``ks``,
    updated, in graph order), at most one per :data:`MIN_ROWS` rows."""
    for n in tg.nodes:
        if n.op in ("Conv", "MaxPool", "AveragePool") and len(tg.shape(n.inputs[0])) in (3, 4):
            x, y = rows.find(n.inputs[0]), rows.find(n.outputs[0])
            if x in ks and y in ks and ks[x][0] > ks[y][0]:
                ks[y] = (min(ks[x][0], ks[y][1] // MIN_ROWS), ks[y][1])


def _but_channels(shape: Sequence[int]) -> tuple[int, ...]:
    return (shape[0], *shape[2:])


def _widest(bounds: Sequence[int]) -> int:
    """The channels of the widest tile of ``bounds``."""
    return max(hi - lo for lo, hi in zip(bounds, bounds[1:], strict=False))


def split_graph(tg: Graph, tile_bytes: int | TileSizes, rows: bool = True, input_rows: bool = False) -> Split:
    """The training graph with every tensor :func:`plan_tiles` picks in channel tiles, and those whose
    channel tiles still exceed ``tile_bytes`` (:func:`plan_rows`) in row tiles too; the trainable weight of
    every convolution :func:`families` can cut, whose operands are tiled, in blocks, and every Gemm /
    MatMul weight :func:`dense_families` finds that exceeds ``tile_bytes`` in blocks of its output columns
    of at most ``tile_bytes`` each (one column each when a column alone exceeds it). ``tile_bytes``: one
    size for the whole graph, or a size per tensor (:class:`TileSizes`; :func:`split_for_floor` picks
    them). ``rows``: False for channel tiles only. ``input_rows``: the batch x is in storage (``--input
    storage``), so convolutions read it through windows of its rows (Slices of x, which planning loads from
    storage one by one) like a row-tiled tensor, instead of whole. With ``tile_bytes.patches``, forward-only
    stages run patch by patch, their halos recomputed (:func:`patch_stages`)."""
    sizes = _sizes(tile_bytes)
    fams = families(tg)
    eligible, need = _classes(tg, sizes, fams)  # once, for the channel and the row tiles
    bands = None
    if sizes.rows_first and rows:  # the row tiles of whole tensors first; channels only where they fall short
        bands = {t: len(b) - 1 for t, b in plan_rows(tg, sizes, {}, fams, eligible).items()}
    tiles = _channel_bounds(tg, sizes, eligible, need, fams, bands)
    row_bounds = plan_rows(tg, sizes, tiles, fams, eligible) if rows else {}
    for t in row_bounds:  # a tensor in rows only: one channel tile (a mask: its source's channels)
        if t not in tiles:
            same = row_bounds[t]
            c = next(
                tg.shape(u)[1]
                for u, b in [(t, same), *row_bounds.items()]
                if b is same and tg.tensor(u).dtype == "float32"
            )
            tiles[t] = (0, c)
    cuts = {}
    for w, d in sorted(dense_families(tg).items()):
        m = tg.shape(w)[0 if d.rows else 1]
        per = max(1, sizes.of(w) // (tg.tensor(w).nbytes // m))  # output columns in a tile (at least one)
        k = -(-m // per)
        if k >= 2:
            cuts[w] = (d, tuple(i * m // k for i in range(k + 1)))
    used = _used_sizes(tg, sizes, eligible, tiles, row_bounds, cuts) if sizes.sizes else {}
    size_of = {t: used.get(t, sizes.of(t)) for t in tg.tensors}
    top = max(used.values(), default=sizes.default)
    split = _Rewrite(tg, tiles, fams, cuts, row_bounds, size_of, input_rows, sizes.patches).run()
    return replace(split, tile_bytes=top if sizes.sizes else sizes.default, sizes=used, asked=sizes)


def _used_sizes(
    tg: Graph,
    sizes: TileSizes,
    eligible: Mapping[str, list[str]],
    tiles: Mapping[str, tuple[int, ...]],
    rows: Mapping[str, tuple[int, ...]],
    cuts: Mapping[str, object],
) -> dict[str, int]:
    """The tile size each tiled tensor was cut to (its channel class's; a tensor in rows: the smaller of
    that and its row class's) and each Gemm / MatMul weight in blocks (its own)."""
    out: dict[str, int] = {}
    for names in eligible.values():
        least = sizes.least(names)
        out |= {t: least for t in names if t in tiles}
    groups: dict[int, list[str]] = {}
    for t, b in rows.items():
        groups.setdefault(id(b), []).append(t)
    for names in groups.values():  # a row class's tensors share their bounds (one tuple object)
        least = sizes.least(names)
        out |= {t: min(out.get(t, least), least) for t in names}
    out |= {w: sizes.of(w) for w in cuts}
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class _Cut:
    """A family cut into blocks: output-channel bounds ``mb``, input-channel bounds ``cb``, the (output
    tile, input tile) pairs that have a block (those that share a group), and each pair's sub-convolution
    (:func:`block_geometry`: its groups, its columns of W's axis 1)."""

    fam: Family
    mb: tuple[int, ...]
    cb: tuple[int, ...]
    pairs: tuple[tuple[int, int], ...]
    bias: bool  # B in blocks too (more than one output tile)
    geometry: Mapping[tuple[int, int], tuple[int, int, int]]

    def block(self, p: str, i: int, j: int) -> str:
        return f"{p}/b{i}.{j}"


class _Rewrite:
    def __init__(
        self,
        tg: Graph,
        tiles: dict[str, tuple[int, ...]],
        fams: Mapping[str, Family],
        dense: Mapping[str, tuple[Dense, tuple[int, ...]]] | None = None,
        rows: Mapping[str, tuple[int, ...]] | None = None,
        size_of: Mapping[str, int] | None = None,
        input_rows: bool = False,
        patches: bool = False,
    ) -> None:
        self.tg, self.tiles, self.rows, self.size_of = tg, tiles, dict(rows or {}), dict(size_of or {})
        self.origin: dict[str, str] = {}  # node made -> the node of tg it runs (a part of)
        self.windowed = {  # whole tensors read through row windows: the batch in storage (input_rows)
            t
            for t in tg.inputs
            if input_rows and tg.tensor(t).role == Role.INPUT and len(tg.shape(t)) in (3, 4)
        }
        self.tensors: dict[str, Tensor] = dict(tg.tensors)
        self.producer = tg.producers()
        self.alias: dict[tuple[str, int], tuple[str, int]] = {}  # a piece's tile or a whole's: the tile it is
        self.relabeled: set[str] = set()  # channel Concats and Slices that run nothing: tiles are aliases
        ops = {n.name: n.op for n in tg.nodes}
        for name, vs in _active_views(tg, tiles, self.rows).items():
            self.relabel(ops[name] == "Concat", vs)
            self.relabeled.add(name)
        self.nodes: list[Node] = []
        self.joined: set[str] = set()  # tiled tensors a Concat has made whole again
        self.split: list[str] = []
        self.params: dict[str, np.ndarray] = dict(tg.params)
        self.trainable = set(tg.trainable)
        self.blocks: dict[str, tuple[Block, ...]] = {}
        self.cuts: dict[str, _Cut] = {}  # node of a cut family -> its cut
        for _, fam in sorted(fams.items()):
            self.cut(fam)
        self.dense: dict[str, tuple[Dense, tuple[int, ...]]] = {}  # node of a cut Gemm / MatMul -> its cut
        self.sliced: set[str] = set()  # output gradients of cut Gemms already cut into their columns
        for _, (d, bounds) in sorted((dense or {}).items()):
            self.cut_dense(d, bounds)
        aliased = {t for key in (*self.alias, *self.alias.values()) for t in key[:1]}
        self.patched = patch_stages(tg, self.tiles, self.rows, aliased) if patches else frozenset()

    def run(self) -> Split:
        for n in self.tg.nodes:
            first = len(self.nodes)
            self.node(n)
            self.claim(first, n)
        if self.patched:  # the patched tensors' own row tiles: read by nothing now
            self.nodes = _live(self.nodes, set(self.tg.outputs))
            self.origin = {m.name: self.origin[m.name] for m in self.nodes}
            self.split = [n for n in self.split if n in set(self.origin.values())]
        used = {t for n in self.nodes for t in (*n.inputs, *n.outputs)}
        keep = set(self.tg.inputs) | set(self.tg.outputs) | set(self.params) | used
        tensors = {t: v for t, v in self.tensors.items() if t in keep}
        g = Graph(
            tensors,
            tuple(self.nodes),
            self.tg.inputs,
            self.tg.outputs,
            self.params,
            frozenset(self.trainable),
        )
        shapes = {p: self.tg.shape(p) for p in self.blocks}
        return Split(
            g,
            0,
            dict(self.tiles),
            tuple(self.split),
            dict(self.blocks),
            self.rows,
            shapes,
            origin=self.origin,
            patched=self.patched,
        )

    def relabel(self, concat: bool, views: Sequence[_View]) -> None:
        """A Concat's output tiles are its inputs' tiles; a Slice's output tiles are its input's."""
        for v in views:
            first = self.tiles[v.whole].index(v.offset)
            for j in range(len(self.tiles[v.piece]) - 1):
                if concat:
                    self.alias[v.whole, first + j] = (v.piece, j)
                else:
                    self.alias[v.piece, j] = (v.whole, first + j)

    def resolve(self, t: str, i: int) -> tuple[str, int]:
        """The tensor and channel tile that tile ``i`` of ``t`` is (itself unless a relabeling made it)."""
        while (t, i) in self.alias:
            t, i = self.alias[t, i]
        return t, i

    # ---- parameter blocks ------------------------------------------------------------------------------
    def cut(self, fam: Family) -> None:
        """Blocks of W (and B) when the family's operands are tiled and their tiles line up: every pair of an
        output tile and an input tile that share a group is a sub-convolution (:func:`block_geometry`).
        Else (a grouped conv's tile that straddles groups, say Y whole and X in tiles) W stays whole."""
        x, y, w = fam.conv.inputs[0], fam.conv.outputs[0], fam.w
        dx = fam.grad_input.outputs[0] if fam.grad_input else None

        def t(v: str) -> tuple[object, object]:
            return self.tiles.get(v), self.rows.get(v)

        if t(y) != t(fam.dy) or (dx is not None and t(x) != t(dx)):
            return
        if x not in self.tiles and y not in self.tiles:
            return
        win = conv_window(self.tg.shape(x), self.tg.shape(w), fam.conv.attrs)
        mb, cb = self.tiles.get(y, (0, win.m)), self.tiles.get(x, (0, win.c))
        spans = {
            (i, j): ((mb[i], mb[i + 1]), (cb[j], cb[j + 1]))
            for i in range(len(mb) - 1)
            for j in range(len(cb) - 1)
        }
        pairs = tuple(p for p, (m, ch) in spans.items() if shares_group(win, m, ch))
        geometry = {}
        for p in pairs:
            sub = block_geometry(win, *spans[p])
            if sub is None:
                return
            geometry[p] = sub
        c = _Cut(fam, mb, cb, pairs, fam.b is not None and len(mb) > 2, geometry)
        wb = []
        for i, j in pairs:
            _, c0, c1 = c.geometry[i, j]
            wb.append((c.block(w, i, j), mb[i], mb[i + 1], c0, c1))
        self.add_blocks(w, tuple(wb), fam.update.inputs[3 if fam.grad_weight is None else 2 :])
        if c.bias:
            assert fam.b is not None
            bb = tuple((f"{fam.b}/b{i}", mb[i], mb[i + 1], 0, 1) for i in range(len(mb) - 1))
            state = fam.bias_update.inputs[2:] if fam.bias_update is not None else ()
            self.add_blocks(fam.b, bb, state)
        for n in (fam.conv, fam.grad_input, fam.update, fam.grad_weight):
            if n is not None:
                self.cuts[n.name] = c
        if fam.bias_update is not None and c.bias:
            self.cuts[fam.bias_update.name] = c
            self.cuts[self.producer[fam.bias_update.inputs[1]].name] = c  # the bias gradient's ChannelSum

    def add_blocks(self, p: str, blocks: tuple[Block, ...], state: Sequence[str]) -> None:
        """Parameter ``p`` (and its optimizer ``state``) replaced by ``blocks``: rows [r0, r1) of axis 0,
        columns [c0, c1) of axis 1 (a 1-D bias: column range (0, 1))."""
        base = self.tg.tensor(p)
        value = np.asarray(self.tg.params[p]) if p in self.tg.params else None
        del self.params[p]
        for name, r0, r1, c0, c1 in blocks:
            shape = (r1 - r0,) if len(base.shape) == 1 else (r1 - r0, c1 - c0, *base.shape[2:])
            self.tensors[name] = Tensor(name, shape, base.dtype, base.role)
            if value is not None:
                part = value[r0:r1] if value.ndim == 1 else value[r0:r1, c0:c1]
                self.params[name] = np.ascontiguousarray(part)
            if p in self.trainable:
                self.trainable.add(name)
            for s in state:
                sname = s + name[len(p) :]
                self.tensors[sname] = Tensor(sname, shape, "float32", Role.OPTIMIZER_STATE)
        self.trainable.discard(p)
        self.blocks[p] = blocks

    def operand(self, t: str, i: int, like: Node) -> str:
        """Channel tile ``i`` of ``t`` with all its rows (``t`` itself when it is not tiled)."""
        if t in self.rows:
            return self.window(t, i, 0, self.tg.shape(t)[2], like)
        return self.tile(t, i) if t in self.tiles else t

    def sub_attrs(self, c: _Cut, n: Node, i: int, j: int) -> dict[str, object]:
        """The sub-convolution of block (i, j): input channels cb[j]..cb[j+1] to outputs mb[i]..mb[i+1], in
        the block's groups."""
        x = self.tg.shape(c.fam.conv.inputs[0])
        mi, cj = c.mb[i + 1] - c.mb[i], c.cb[j + 1] - c.cb[j]
        return {
            **n.attrs,
            "group": c.geometry[i, j][0],
            "x_shape": (x[0], cj, *x[2:]),
            "tile": (0, cj, 0, mi),
        }

    def cut_node(self, n: Node, c: _Cut) -> None:
        f = c.fam
        if n is f.conv:
            self.cut_conv(n, c)
        elif n is f.grad_input:
            self.cut_grad_input(n, c)
        elif n is f.update or n is f.grad_weight:
            for i, j in c.pairs:
                self.block_node(n, c, i, j)
        elif n is f.bias_update:
            assert f.b is not None
            for i in range(len(c.mb) - 1):
                state = tuple(f"{s}/b{i}" for s in n.inputs[2:])
                ins = (f"{f.b}/b{i}", f"{n.inputs[1]}/t{i}", *state)
                self.nodes.append(Node(f"{n.name}/b{i}", n.op, ins, (), n.attrs, n.phase))
        else:  # the bias gradient's ChannelSum: per tile, no join (the blocks' updates read the tiles)
            self.channel_sum(n, join=False)

    def block_node(self, n: Node, c: _Cut, i: int, j: int) -> None:
        """W's fused update (W, X, dY, *state), its gradient (X, dY) -> dW, or its plain update (W, dW,
        *state), on block (i, j): the sub-convolution of input tile j and output tile i. When dY is in row
        tiles, the block's gradient is a chain of ConvGradWeight nodes over them (each on the rows of X its
        tile reads, its sums starting at the previous one's), and a fused update becomes that chain and the
        plain update."""
        w = c.fam.w
        block = c.block(w, i, j)
        shape = self.tensors[block].shape
        name = f"{n.name}/b{i}.{j}"
        if n is c.fam.update and c.fam.grad_weight is not None:  # plain
            state = tuple(s + block[len(w) :] for s in n.inputs[2:])
            ins = (block, c.block(n.inputs[1], i, j), *state)
            self.nodes.append(Node(name, n.op, ins, (), n.attrs, n.phase))
            return
        a = self.sub_attrs(c, n, i, j)
        attrs = {k: v for k, v in a.items() if k not in ("x_shape", "tile")}
        fused = n is c.fam.update
        x, dy = c.fam.conv.inputs[0], c.fam.dy
        spans = None
        if dy in self.rows:
            spans = self.spans(dy)
            windows = [_row_window(a, shape, True, *sp)[:2] for sp in spans]
            if self.window_bytes(x, j, windows) >= self.tile_bytes(dy, i):
                spans = None  # windows of a whole X would copy more than joining dY's rows
        elif x in self.rows:  # dY's rows as X's row tiles cut them
            spans = _derived_spans(self.rows[x], a, shape, True)
            if self.window_bytes(dy, i, spans) >= self.tile_bytes(x, j):
                spans = None
        if spans is not None and len(spans) > 1:
            dw = c.block(n.outputs[0], i, j) if not fused else f"{name}/dW"
            self.tensors[dw] = Tensor(dw, shape, "float32", Role.GRADIENT)
            made = self.producer[dy]
            grad = {k: v for k, v in attrs.items() if k not in ("workspace", "update", *UPDATE_KEYS)}
            prev: str | None = None
            for r, (ya, yb) in enumerate(spans):
                lo, hi, ra = _row_window(a, shape, True, ya, yb)
                ins = (
                    self.window(x, j, lo, hi, n),
                    self.window(dy, i, ya, yb, n),
                    *((prev,) if prev else ()),
                )
                part = dw if r == len(spans) - 1 else f"{dw}/r{r}"
                self.tensors[part] = Tensor(part, shape, "float32", Role.GRADIENT)
                gattrs = {
                    **grad,
                    "pads": ra["pads"],
                    "auto_pad": "NOTSET",
                    "w_shape": shape,
                    "partial": bool(prev),
                }
                self.nodes.append(Node(f"{name}r{r}", "ConvGradWeight", ins, (part,), gattrs, made.phase))
                prev = part
            if fused:
                state = tuple(s + block[len(w) :] for s in n.inputs[3:])
                op = str(n.attrs["update"])
                self.nodes.append(Node(name, op, (block, dw, *state), (), update_attrs(n.attrs), n.phase))
            return
        if n is c.fam.grad_weight:
            dw = c.block(n.outputs[0], i, j)
            self.tensors[dw] = Tensor(dw, shape, "float32", Role.GRADIENT)
            xy = (self.operand(n.inputs[0], j, n), self.operand(n.inputs[1], i, n))
            self.nodes.append(Node(name, n.op, xy, (dw,), {**attrs, "w_shape": shape}, n.phase))
            return
        attrs["workspace"] = conv_workspace(conv_window(a["x_shape"], shape, a))
        state = tuple(s + block[len(w) :] for s in n.inputs[3:])
        ins = (block, self.operand(n.inputs[1], j, n), self.operand(n.inputs[2], i, n), *state)
        self.nodes.append(Node(name, n.op, ins, (), attrs, n.phase))

    def cut_conv(self, n: Node, c: _Cut) -> None:
        """Output tile i: the chain over its input tiles of parts reading block (i, j); B's block last."""
        for i in range(len(c.mb) - 1):
            self.chain(n, n.outputs[0], i, *self.cut_parts(n, c, i))

    def cut_parts(
        self, n: Node, c: _Cut, i: int
    ) -> tuple[list[tuple[str, int, str, dict[str, object]]], str | None]:
        """The parts of output tile ``i`` of a cut family's forward ``n`` (block (i, j) each) and its bias."""
        f = c.fam
        parts = [
            (n.inputs[0], j, c.block(f.w, i, j), self.sub_attrs(c, n, i, j)) for ii, j in c.pairs if ii == i
        ]
        return parts, None if f.b is None else (f"{f.b}/b{i}" if c.bias else f.b)

    def cut_grad_input(self, n: Node, c: _Cut) -> None:
        """Input-gradient tile j: the chain over the output tiles i of parts reading block (i, j)."""
        for j in range(len(c.cb) - 1):
            parts = [
                (n.inputs[0], i, c.block(c.fam.w, i, j), self.sub_attrs(c, n, i, j))
                for i, jj in c.pairs
                if jj == j
            ]
            self.chain(n, n.outputs[0], j, parts, None)

    def window_bytes(self, t: str, j: int, ranges: Sequence[tuple[int, int]]) -> int:
        """The largest copy that windows of rows ``ranges`` of channel tile ``j`` of ``t`` make next to it
        when ``t`` is whole in RAM (neither in row tiles nor read from storage) and that tile exceeds a
        tile; 0 otherwise (a window of row tiles joins only the halo rows)."""
        if t in self.rows or t in self.windowed:
            return 0
        src = self.tensors[self.tile(t, j) if t in self.tiles else t]
        if src.nbytes <= self.size_of[t]:
            return 0
        return max(src.nbytes // src.shape[2] * (hi - lo) for lo, hi in ranges)

    def tile_bytes(self, t: str, i: int) -> int:
        """Channel tile ``i`` of ``t`` with all its rows (what joining its row tiles makes)."""
        b = self.tiles.get(t, (0, self.tg.shape(t)[1]))
        return self.tg.tensor(t).nbytes // self.tg.shape(t)[1] * (b[i + 1] - b[i])

    def chain(
        self,
        n: Node,
        out_t: str,
        t: int,
        parts: Sequence[tuple[str, int, str, dict[str, object]]],
        bias: str | None,
    ) -> None:
        """Channel tile ``t`` of ``out_t`` (each of its row tiles) as a chain of ConvPart (``n`` a Conv) or
        ConvGradInputPart nodes over ``parts``: (operand, its channel tile, weight, part attributes with the
        whole-row ``x_shape``), each adding to the previous one's sums; ``bias`` goes with the last. When
        ``out_t`` or an operand is in row tiles, each part reads the operand's rows its output rows need
        (:meth:`window`), with the geometry of that window (:func:`_row_window`). An operand that is whole
        and bigger than a tile (the input image) is read through windows too (Slices: copies of its rows)
        unless the largest would be at least the output's channel tile: the chain then makes that tile with
        all its rows, and Slices cut it into its row tiles."""
        shape = self.tg.shape(out_t)
        b = self.tiles.get(out_t, (0, shape[1]))
        if out_t in self.rows:
            forward = n.op == "Conv"
            spans = self.spans(out_t)
            windows = [
                (src, j, [_row_window(a, self.tensors[w].shape, forward, *sp)[:2] for sp in spans])
                for src, j, w, a in parts
            ]
            if max(self.window_bytes(*sw) for sw in windows) >= self.tile_bytes(out_t, t):
                # windows of a whole operand would copy more than the tile: make it with all its rows, cut it
                whole = self.temp(f"{out_t}/t{t}/rows", out_t, b[t + 1] - b[t])
                self.links(n, parts, bias, whole, f"{out_t}/t{t}", f"t{t}", None)
                for r, (lo, hi) in enumerate(self.spans(out_t)):
                    attrs = {"starts": (lo,), "ends": (hi,), "axes": (2,)}
                    out = self.tile(out_t, t, r)
                    self.nodes.append(Node(f"slice/{out}", "Slice", (whole,), (out,), attrs, n.phase))
                return
        rowed = [src for src, _, _, _ in parts if src in self.rows]
        if out_t not in self.rows and rowed and out_t in self.tiles:
            # the output's rows as the operand's row tiles cut them: pieces joined along the rows
            forward = n.op == "Conv"
            w0, a0 = parts[0][2], parts[0][3]
            spans = _derived_spans(self.rows[rowed[0]], a0, self.tensors[w0].shape, forward)
            if len(spans) > 1:
                pieces = []
                for q, (ya, yb) in enumerate(spans):
                    piece = self.temp(f"{out_t}/t{t}q{q}", out_t, b[t + 1] - b[t], yb - ya)
                    self.links(n, parts, bias, piece, piece, f"t{t}q{q}", (ya, yb))
                    pieces.append(piece)
                self.concat(pieces, self.tile(out_t, t), 2, n, f"{n.name}/t{t}/rows")
                return
        for r, span in enumerate(self.spans(out_t)):
            rr = r if out_t in self.rows else None
            tag = f"t{t}" + ("" if rr is None else f"r{rr}")
            out = self.tile(out_t, t, rr) if out_t in self.tiles else out_t
            self.links(n, parts, bias, out, f"{out_t}/{tag}", tag, span if rowed or rr is not None else None)

    def links(
        self,
        n: Node,
        parts: Sequence[tuple[str, int, str, dict[str, object]]],
        bias: str | None,
        out: str,
        temp: str,
        tag: str,
        span: tuple[int, int] | None,
    ) -> None:
        """One chain of parts into ``out`` (partial sums in ``<temp>/p<j>``); with ``span``, the output rows
        [a, b) it makes, read through windows."""
        forward = n.op == "Conv"
        op = "ConvPart" if forward else "ConvGradInputPart"
        base = self.tensors[out].shape
        prev: str | None = None
        for idx, (src_t, j, w, attrs) in enumerate(parts):
            final = idx == len(parts) - 1
            if span is not None:
                lo, hi, attrs = _row_window(attrs, self.tensors[w].shape, forward, *span)
                src = self.window(src_t, j, lo, hi, n)
            else:
                src = self.operand(src_t, j, n)
            ins = [src, w]
            with_bias = final and bias is not None
            if with_bias:
                ins.append(str(bias))
            if prev is not None:
                ins.append(prev)
            dst = out
            if not final:
                dst = f"{temp}/p{j}"
                self.tensors[dst] = Tensor(dst, base, "float32", self.tensors[out].role)
            extra = {"bias": with_bias} if forward else {}
            attrs = {**attrs, **extra, "partial": prev is not None}
            self.nodes.append(Node(f"{n.name}/{tag}c{j}", op, tuple(ins), (dst,), attrs, n.phase))
            prev = dst

    # ---- Gemm / MatMul weight blocks --------------------------------------------------------------------
    def cut_dense(self, d: Dense, bounds: tuple[int, ...]) -> None:
        """W in blocks of output columns ``bounds`` (rows of W when ``d.rows``), B likewise."""
        k = self.tg.shape(d.w)[1 if d.rows else 0]
        state = d.update.inputs[3 if d.grad_weight is None else 2 :]
        wb = tuple(
            (self.dense_block(d, i), lo, hi, 0, k) if d.rows else (self.dense_block(d, i), 0, k, lo, hi)
            for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False))
        )
        self.add_blocks(d.w, wb, state)
        if d.b is not None:
            bb = tuple(
                (f"{d.b}/b{i}", lo, hi, 0, 1)
                for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False))
            )
            self.add_blocks(d.b, bb, d.bias_update.inputs[2:] if d.bias_update is not None else ())
        for n in (d.fwd, d.grad_input, d.update, d.grad_weight, d.bias_sum, d.bias_update):
            if n is not None:
                self.dense[n.name] = (d, bounds)

    def dense_block(self, d: Dense, i: int, p: str | None = None) -> str:
        """Block i of W (or of ``p``, a tensor shaped like W: its gradient or optimizer state)."""
        return f"{p or d.w}/b{i}.0" if d.rows else f"{p or d.w}/b0.{i}"

    def columns(self, t: str, i: int, bounds: tuple[int, ...], like: Node | None = None) -> str:
        """Columns [bounds[i], bounds[i+1]) of the last axis of ``t`` (Y or dY of a cut Gemm): a tensor; with
        ``like``, dY's columns are made by Slices (once, in ``like``'s phase) before their first reader."""
        name = f"{t}/c{i}"
        if name not in self.tensors:
            base = self.tg.tensor(t)
            shape = (*base.shape[:-1], bounds[i + 1] - bounds[i])
            self.tensors[name] = Tensor(name, shape, base.dtype, base.role)
        if like is not None and t not in self.sliced:
            self.sliced.add(t)
            src, axis = self.whole(t), len(self.tg.shape(t)) - 1
            for j in range(len(bounds) - 1):
                attrs = {"starts": (bounds[j],), "ends": (bounds[j + 1],), "axes": (axis,)}
                out = self.columns(t, j, bounds)
                self.nodes.append(Node(f"slice/{t}/c{j}", "Slice", (src,), (out,), attrs, like.phase))
        return name

    def dense_node(self, n: Node, d: Dense, bounds: tuple[int, ...]) -> None:
        blocks = range(len(bounds) - 1)
        made = self.producer[d.dy]
        if n is d.fwd:
            x, y = self.whole(n.inputs[0]), n.outputs[0]
            parts = []
            for i in blocks:
                ins = (x, self.dense_block(d, i), *((f"{d.b}/b{i}",) if d.b else ()))
                parts.append(self.columns(y, i, bounds))
                self.nodes.append(Node(f"{n.name}/c{i}", n.op, ins, (parts[-1],), n.attrs, n.phase))
            self.concat(parts, y, len(self.tg.shape(y)) - 1, n, f"join/{y}")
        elif n is d.grad_input:
            dx = n.outputs[0]
            prev: str | None = None
            for i in blocks:
                final = i == len(bounds) - 2
                ins = (
                    self.columns(d.dy, i, bounds, made),
                    self.dense_block(d, i),
                    *((prev,) if prev else ()),
                )
                out = dx if final else self.temp(f"{dx}/p{i}", dx)
                attrs: dict[str, object] = {
                    "transB": int(cast(int, n.attr("transB", 0))),
                    "alpha": float(cast(float, n.attr("alpha", 1.0))),
                    "partial": prev is not None,
                    "final": final,
                }
                self.nodes.append(Node(f"{n.name}/c{i}", "GemmPart", ins, (out,), attrs, n.phase))
                prev = out
        elif n is d.update and d.grad_weight is not None:  # plain: (W, dW, *state) per block
            for i in blocks:
                state = tuple(self.dense_block(d, i, s) for s in n.inputs[2:])
                ins = (self.dense_block(d, i), self.dense_block(d, i, n.inputs[1]), *state)
                self.nodes.append(Node(f"{n.name}/c{i}", n.op, ins, (), n.attrs, n.phase))
        elif n is d.update or n is d.grad_weight:  # fused update (W, A, B, *state), or dW = op(A, B)
            fused = n is d.update
            for i in blocks:
                a, b = n.inputs[1:3] if fused else n.inputs[:2]
                dyc = self.columns(d.dy, i, bounds, made)
                a, b = (dyc, self.whole(b)) if d.rows else (self.whole(a), dyc)
                if fused:
                    w = self.dense_block(d, i)
                    dims = gemm_dims(
                        [self.tensors[w].shape, self.tensors[a].shape, self.tensors[b].shape], n.attrs
                    )
                    _, m, nn, k = dims
                    ws = gemm_workspace(m, nn, k, int(cast(int, n.attr("transA", 0))), "scale" in n.attrs)
                    state = tuple(self.dense_block(d, i, s) for s in n.inputs[3:])
                    attrs = {**n.attrs, "workspace": ws}
                    self.nodes.append(Node(f"{n.name}/c{i}", n.op, (w, a, b, *state), (), attrs, n.phase))
                else:
                    dw = self.dense_block(d, i, n.outputs[0])
                    shape = self.tensors[self.dense_block(d, i)].shape
                    self.tensors[dw] = Tensor(dw, shape, "float32", Role.GRADIENT)
                    self.nodes.append(Node(f"{n.name}/c{i}", n.op, (a, b), (dw,), n.attrs, n.phase))
        elif n is d.bias_sum:
            for i in blocks:
                db = f"{n.outputs[0]}/c{i}"
                self.tensors[db] = Tensor(db, (bounds[i + 1] - bounds[i],), "float32", Role.GRADIENT)
                attrs = {**n.attrs, "shape": (bounds[i + 1] - bounds[i],)}
                ins = (self.columns(d.dy, i, bounds, made),)
                self.nodes.append(Node(f"{n.name}/c{i}", n.op, ins, (db,), attrs, n.phase))
        else:  # the bias update, per block
            assert d.b is not None
            for i in blocks:
                state = tuple(f"{s}/b{i}" for s in n.inputs[2:])
                ins = (f"{d.b}/b{i}", f"{n.inputs[1]}/c{i}", *state)
                self.nodes.append(Node(f"{n.name}/b{i}", n.op, ins, (), n.attrs, n.phase))
        for o in n.outputs:
            if o in self.tiles:
                self.slice(o, n)

    # ---- tensors ---------------------------------------------------------------------------------------
    def tile(self, t: str, i: int, r: int | None = None, shape: Sequence[int] | None = None) -> str:
        """Name of channel tile ``i`` of ``t`` (row tile ``r`` when ``t`` is in rows), registered with its
        channel and row ranges, or ``shape`` for a mask."""
        assert (r is None) == (t not in self.rows), (t, r)
        t, i = self.resolve(t, i)
        name = tile_name(t, i, r)
        if name not in self.tensors:
            base = self.tg.tensor(t)
            if shape is None:
                b = self.tiles[t]
                shape = [base.shape[0], b[i + 1] - b[i], *base.shape[2:]]
                if r is not None:
                    shape[2] = self.rows[t][r + 1] - self.rows[t][r]
            self.tensors[name] = Tensor(name, tuple(shape), base.dtype, base.role)
        return name

    def spans(self, t: str) -> list[tuple[int, int]]:
        """Row ranges of ``t``'s row tiles (all its rows, one range, when it is not in rows)."""
        shape = self.tg.shape(t)
        b = self.rows.get(t, (0, shape[2] if len(shape) > 2 else 1))
        return list(zip(b, b[1:], strict=False))

    def temp(self, name: str, like: str, channels: int | None = None, rows: int | None = None) -> str:
        """A tensor shaped like ``like`` (with ``channels`` channels and ``rows`` rows when given): partial
        sums."""
        base = self.tg.tensor(like)
        shape = list(base.shape)
        if channels is not None:
            shape[1] = channels
        if rows is not None and len(shape) > 2:
            shape[2] = rows
        self.tensors[name] = Tensor(name, tuple(shape), base.dtype, base.role)
        return name

    def window(self, t: str, i: int, lo: int, hi: int, like: Node) -> str:
        """Rows [lo, hi) of channel tile ``i`` of ``t`` (of ``t`` when it is not tiled): the row tile itself
        when it is exactly that, else a Slice of one tile or a Concat of row tiles and slices of the tiles at
        either end (the halo), made once, in the phase that made ``t`` (``like``'s for a step input); of a
        patched tensor (:func:`patch_stages`), the rows computed anew (:meth:`patch`)."""
        if t in self.patched:
            return self.patch(t, i, lo, hi)
        if t in self.tiles:
            t, i = self.resolve(t, i)
        spans = self.spans(t)
        if t in self.rows:
            base = [self.tile(t, i, r) for r in range(len(spans))]
        else:
            base = [self.tile(t, i) if t in self.tiles else t]
        pieces = [(r, max(lo, a), min(hi, b)) for r, (a, b) in enumerate(spans) if a < hi and b > lo]
        if len(pieces) == 1 and pieces[0][1:] == spans[pieces[0][0]]:
            return base[pieces[0][0]]
        name = f"win/{t}/t{i}/{lo}-{hi}" if t in self.tiles else f"win/{t}/{lo}-{hi}"
        if name in self.tensors:
            return name
        made = self.producer.get(t, like)
        src = self.tensors[base[0]]
        self.tensors[name] = Tensor(name, (*src.shape[:2], hi - lo, *src.shape[3:]), src.dtype, src.role)
        parts = []
        for r, plo, phi in pieces:
            a, b = spans[r]
            if (plo, phi) == (a, b):
                parts.append(base[r])
                continue
            out = name if len(pieces) == 1 else f"{name}/r{r}"
            if out != name:
                piece = self.tensors[base[r]]
                shape = (*piece.shape[:2], phi - plo, *piece.shape[3:])
                self.tensors[out] = Tensor(out, shape, piece.dtype, piece.role)
            attrs = {"starts": (plo - a,), "ends": (phi - a,), "axes": (2,)}
            self.nodes.append(Node(out, "Slice", (base[r],), (out,), attrs, made.phase))
            parts.append(out)
        if len(pieces) > 1:
            self.concat(parts, name, 2, made, name)
        return name

    def patch(self, t: str, i: int, lo: int, hi: int) -> str:
        """Rows [lo, hi) of channel tile ``i`` of patched tensor ``t``, computed by its producer's op from
        the rows of its inputs that those rows need (windows, or patches again: a stage's halo grows layer
        by layer down to its first input), made once. The same kernels on the same inputs as the row tiles:
        each element the same sum."""
        name = f"patch/{t}/t{i}/{lo}-{hi}"
        if name in self.tensors:
            return name
        n, b = self.producer[t], self.tiles[t]
        first = len(self.nodes)
        self.temp(name, t, b[i + 1] - b[i], hi - lo)
        tag = f"t{i}w{lo}-{hi}"
        if n.op in ("MaxPool", "AveragePool"):
            xs, attrs = _pool_geometry(self.tg, n, b[i + 1] - b[i])
            self.pool_part(n, i, xs, attrs, (lo, hi), name, tag)
        elif n.name in self.cuts:
            parts, bias = self.cut_parts(n, self.cuts[n.name], i)
            self.links(n, parts, bias, name, name, tag, (lo, hi))
        elif n.op == "Conv":
            parts, bias, _ = self.conv_parts(n, i)
            self.links(n, parts, bias, name, name, tag, (lo, hi))
        else:  # elementwise on the same rows of its operands
            axes = {u: _channel_param(self.tg, u, n) for u in n.inputs}
            ins = tuple(
                self.window(u, i, lo, hi, n) if axes[u] is None else self.operand_part(u, i, None, axes[u], n)
                for u in n.inputs
            )
            self.nodes.append(Node(f"{n.name}/{tag}", n.op, ins, (name,), dict(n.attrs), n.phase))
        self.claim(first, n)  # a deeper patch's nodes were claimed by its own call
        return name

    def claim(self, first: int, n: Node) -> None:
        """The nodes made since ``first`` that no deeper call claimed run (a part of) ``n``."""
        self.origin |= {m.name: n.name for m in self.nodes[first:] if m.name not in self.origin}

    def whole(self, t: str) -> str:
        """``t`` whole: a Concat of its tiles the first time an unsplit node reads it (of each channel
        tile's rows first, when it is in rows)."""
        if t in self.tiles and t not in self.joined:
            made = self.producer[t]  # the join belongs to the phase that made t, never an update
            k = len(self.tiles[t]) - 1
            if t in self.rows and k == 1:
                parts = [self.tile(t, 0, r) for r in range(len(self.rows[t]) - 1)]
                self.concat(parts, t, 2, made, f"join/{t}")
            else:
                parts = [self.operand(t, i, made) for i in range(k)]
                self.concat(parts, t, 1, made, f"join/{t}")
            self.joined.add(t)
        return t

    def slice(self, t: str, made: Node) -> None:
        """Tiles of ``t``, made whole by an unsplit node: one Slice per tile, in ``made``'s phase."""
        b = self.tiles[t]
        for i in range(len(b) - 1):
            for r, (lo, hi) in enumerate(self.spans(t)):
                rr = r if t in self.rows else None
                attrs: dict[str, object] = {"starts": (b[i],), "ends": (b[i + 1],), "axes": (1,)}
                if rr is not None:
                    attrs = {"starts": (b[i], lo), "ends": (b[i + 1], hi), "axes": (1, 2)}
                out = self.tile(t, i, rr)
                self.nodes.append(Node(f"slice/{out}", "Slice", (t,), (out,), attrs, made.phase))
        self.joined.add(t)  # readers that need it whole read the producer's output

    def concat(self, parts: list[str], out: str, axis: int, like: Node, name: str) -> None:
        """Concat along ``axis`` as a tree of nodes of at most MAX_PIECES inputs, in ``like``'s phase."""
        level = 0
        while len(parts) > MAX_PIECES:
            grouped = []
            for g in range(0, len(parts), MAX_PIECES):
                chunk = parts[g : g + MAX_PIECES]
                mid = f"{name}/l{level}g{g // MAX_PIECES}"
                shape = list(self.tensors[chunk[0]].shape)
                shape[axis] = sum(self.tensors[c].shape[axis] for c in chunk)
                base = self.tensors[chunk[0]]
                self.tensors[mid] = Tensor(mid, tuple(shape), base.dtype, base.role)
                self.nodes.append(Node(mid, "Concat", tuple(chunk), (mid,), {"axis": axis}, like.phase))
                grouped.append(mid)
            parts, level = grouped, level + 1
        self.nodes.append(Node(name, "Concat", tuple(parts), (out,), {"axis": axis}, like.phase))

    # ---- nodes -----------------------------------------------------------------------------------------
    def node(self, n: Node) -> None:
        tiled = [t for t in (*n.inputs, *n.outputs) if t in self.tiles]
        if n.name in self.cuts:
            self.cut_node(n, self.cuts[n.name])
            self.split.append(n.name)
            return
        if n.name in self.dense:
            self.dense_node(n, *self.dense[n.name])
            self.split.append(n.name)
            return
        if n.name in self.relabeled:  # its output's tiles are its inputs' (its input's): nothing to run
            self.split.append(n.name)
            return
        if not tiled:
            self.nodes.append(n)
        elif _row_pool(self.tg, n) and any(t in self.rows for t in (*n.inputs, *n.outputs)):
            self.pool(n)
        elif _channel_maps(self.tg, n) and n.inputs[0] in self.tiles:
            self.channel_params(n)
        elif n.outputs and n.outputs[0] in self.tiles and _runs_in_tiles(self.tg, n):
            self.channelwise(n)
        elif _tileable(self.tg, n):
            self.conv(n)
        elif n.op == "ChannelSum" and n.inputs[0] in self.tiles:
            self.channel_sum(n)
        elif (axis := _param_grad_axis(self.tg, n)) is not None and n.inputs[0] in self.tiles:
            self.param_grad_sum(n, axis)
        else:
            ins = tuple(self.whole(t) if t in self.tiles else t for t in n.inputs)
            self.nodes.append(Node(n.name, n.op, ins, n.outputs, n.attrs, n.phase))
            for o in n.outputs:
                if o in self.tiles:
                    self.slice(o, n)
            return
        if tiled:
            self.split.append(n.name)

    def operand_part(self, t: str, i: int, r: int | None, axis: int | None, n: Node) -> str:
        """What part (i, r) of channelwise node ``n`` reads of operand ``t``: its tile, or the Slice of a
        per-channel parameter along ``axis`` for the part's channels."""
        if axis is None:
            return self.tile(t, i, r if t in self.rows else None)
        b = self.tiles[n.outputs[0]]
        return self.param_slice(t, b[i], b[i + 1], n, axis)

    def channelwise(self, n: Node) -> None:
        op = get_op(n.op)
        y = n.outputs[0]
        axes = {t: _channel_param(self.tg, t, n) for t in n.inputs}
        for i in range(len(self.tiles[y]) - 1):
            for r in range(len(self.spans(y))):
                rr = r if y in self.rows else None
                ins = tuple(self.operand_part(t, i, rr, axes[t], n) for t in n.inputs)
                attrs = dict(n.attrs)
                same = self.tg.shape(n.inputs[0]) == self.tg.shape(y)  # a ReduceSumTo that only scales
                for key in ("x_shape", "shape", "view"):  # a pool gradient's input shape, a BroadcastTo's:
                    if key in attrs:  # cut to the tile's channels (and rows, where the shape is kept)
                        xs = tuple(cast(Sequence[int], attrs[key]))
                        tile = self.tensors[ins[0]].shape
                        attrs[key] = tile if same else (xs[0], tile[1], *xs[2:])
                shape = op.infer([self.tensors[t].shape for t in ins], attrs)[0]
                out = self.tile(y, i, rr, shape)
                self.nodes.append(Node(f"{n.name}/{out[len(y) + 1 :]}", n.op, ins, (out,), attrs, n.phase))

    def channel_params(self, n: Node) -> None:
        """A node with per-channel parameters (:func:`_channel_maps`) per channel tile of its maps and per
        row tile where they are in rows, each part reading Slices of the parameters for its channels (made
        once per range); an output of one value per channel is made per channel tile and joined."""
        per = get_op(n.op).channel_inputs
        x, y = _channel_maps(self.tg, n)[0], n.outputs[0]
        b, parts = self.tiles[x], []
        for i in range(len(b) - 1):
            chans = {k: self.param_slice(t, b[i], b[i + 1], n) for k, t in enumerate(n.inputs) if k in per}
            if y not in self.tiles:  # one value per channel: this tile's, joined below
                parts.append(self.channel_chain(n, x, i, chans))
                continue
            for r in range(len(self.spans(y))):
                rr = r if y in self.rows else None
                ins = tuple(chans.get(k) or self.tile(t, i, rr) for k, t in enumerate(n.inputs))
                out = self.tile(y, i, rr)
                self.nodes.append(Node(f"{n.name}/{out[len(y) + 1 :]}", n.op, ins, (out,), n.attrs, n.phase))
        if parts:
            self.concat(parts, y, 0, n, f"{n.name}/join")

    def channel_chain(self, n: Node, x: str, i: int, chans: Mapping[int, str]) -> str:
        """Channel tile ``i`` of a per-channel output (BatchNormGradScale's) from the parameters' slices
        ``chans``: one node, or a chain over the row tiles of its maps (``x`` the first), each starting at
        the previous one's sums (``partial``), the last one dividing (``divide``)."""
        y = n.outputs[0]
        base, c = self.tg.tensor(y), self.tensors[self.tile(x, i, 0 if x in self.rows else None)].shape[1]
        part = f"{y}/t{i}"
        spans = range(len(self.spans(x))) if x in self.rows else [None]
        prev: str | None = None
        for r in spans:
            last = r is None or r == len(spans) - 1
            out = part if last else f"{part}r{r}"
            self.tensors[out] = Tensor(out, (c,), base.dtype, base.role)
            ins = tuple(chans.get(k) or self.tile(t, i, r) for k, t in enumerate(n.inputs))
            attrs = n.attrs if r is None else {**n.attrs, "partial": prev is not None, "divide": last}
            name = f"{n.name}/t{i}" + ("" if r is None else f"r{r}")
            self.nodes.append(Node(name, n.op, (*ins, *((prev,) if prev else ())), (out,), attrs, n.phase))
            prev = out
        return part

    def param_slice(self, p: str, lo: int, hi: int, like: Node, axis: int = 0) -> str:
        """Channels [lo, hi) (along ``axis``) of the per-channel parameter ``p``: a Slice, made once (in
        ``like``'s phase)."""
        name = f"slice/{p}/{lo}-{hi}" + (f"@{axis}" if axis else "")
        if name not in self.tensors:
            shape = list(self.tg.shape(p))
            shape[axis] = hi - lo
            self.tensors[name] = Tensor(name, tuple(shape), self.tg.tensor(p).dtype, Role.ACTIVATION)
            attrs = {"starts": (lo,), "ends": (hi,), "axes": (axis,)}
            self.nodes.append(Node(name, "Slice", (p,), (name,), attrs, like.phase))
        return name

    def pool(self, n: Node) -> None:
        """A 2-D pool or pool gradient with an operand in row tiles, per channel tile of its output and per
        row range: the output's row tiles; else, for a forward pool whose input is in rows, ranges cut where
        the input's row tiles start, joined along the rows (each range reads about one row tile and its
        halo); else all rows at once. Each part reads the rows its windows need (:meth:`pool_part`)."""
        o = n.outputs[0]
        shape = self.tg.shape(o)
        cb = self.tiles.get(o, (0, shape[1]))
        for i in range(len(cb) - 1):
            xs, attrs = _pool_geometry(self.tg, n, cb[i + 1] - cb[i])
            if o in self.rows:
                for r, (a, b) in enumerate(self.spans(o)):
                    self.pool_part(n, i, xs, attrs, (a, b), self.tile(o, i, r), f"t{i}r{r}")
                continue
            out = self.tile(o, i) if o in self.tiles else o
            x = n.inputs[0]
            spans = [(0, shape[2])]
            if n.op in ("MaxPool", "AveragePool") and x in self.rows:
                spans = output_spans(xs, attrs, self.rows[x])
            if len(spans) == 1:
                self.pool_part(n, i, xs, attrs, None, out, f"t{i}")
                continue
            pieces = []
            for q, (a, b) in enumerate(spans):
                pieces.append(self.temp(f"{o}/t{i}q{q}", o, cb[i + 1] - cb[i], b - a))
                self.pool_part(n, i, xs, attrs, (a, b), pieces[-1], f"t{i}q{q}")
            self.concat(pieces, out, 2, n, f"{n.name}/t{i}/rows")

    def pool_part(
        self,
        n: Node,
        i: int,
        xs: tuple[int, ...],
        attrs: dict[str, object],
        span: tuple[int, int] | None,
        out: str,
        tag: str,
    ) -> None:
        """Output rows ``span`` (None: all) of channel tile ``i`` (input shape ``xs``) of pool node ``n``
        into ``out``: a forward pool reads the input rows its windows read; a gradient, the dY rows whose
        windows touch its dX rows and the X rows those windows read, and writes only its rows."""
        if span is None:
            ins = tuple(self.operand(t, i, n) for t in n.inputs)
        elif n.op in ("MaxPool", "AveragePool"):
            lo, hi, attrs = forward_rows(xs, attrs, *span)
            ins = (self.window(n.inputs[0], i, lo, hi, n),)
        else:
            oa, ob, lo, hi, attrs = grad_rows(xs, attrs, *span)
            dy = self.window(n.inputs[-1], i, oa, ob, n)
            ins = (dy,) if n.op == "AveragePoolGrad" else (self.window(n.inputs[0], i, lo, hi, n), dy)
        self.nodes.append(Node(f"{n.name}/{tag}", n.op, ins, (out,), attrs, n.phase))

    def param_grad_sum(self, n: Node, axis: int) -> None:
        """A ReduceSumTo down to a per-channel parameter's shape (:func:`_param_grad_axis`) per channel
        tile of its input (with all its rows), the parts joined along the parameter's channel axis."""
        x, y = n.inputs[0], n.outputs[0]
        b, parts = self.tiles[x], []
        for i in range(len(b) - 1):
            shape = list(self.tg.shape(y))
            shape[axis] = b[i + 1] - b[i]
            parts.append(f"{y}/t{i}")
            self.tensors[parts[-1]] = Tensor(parts[-1], tuple(shape), "float32", self.tg.tensor(y).role)
            attrs = {**n.attrs, "shape": tuple(shape)}
            self.nodes.append(
                Node(f"{n.name}/t{i}", n.op, (self.operand(x, i, n),), (parts[-1],), attrs, n.phase)
            )
        self.concat(parts, y, axis, n, f"{n.name}/join")

    def channel_sum(self, n: Node, join: bool = True) -> None:
        """Per channel tile (and per row tile: a chain whose sums start at the previous row tile's), joined
        unless not ``join``."""
        x, y = n.inputs[0], n.outputs[0]
        role = self.tg.tensor(y).role
        parts = []
        for i in range(len(self.tiles[x]) - 1):
            part = f"{y}/t{i}"
            c = self.tensors[self.tile(x, i, 0 if x in self.rows else None)].shape[1]
            self.tensors[part] = Tensor(part, (c,), "float32", role)
            nr = len(self.spans(x))
            prev: str | None = None
            for r in range(nr):
                rr = r if x in self.rows else None
                out = part if r == nr - 1 else f"{part}r{r}"
                self.tensors[out] = Tensor(out, (c,), "float32", role)
                ins = (self.tile(x, i, rr), *((prev,) if prev else ()))
                attrs = n.attrs if rr is None else {**n.attrs, "partial": bool(prev)}
                name = f"{n.name}/t{i}" + ("" if rr is None else f"r{rr}")
                self.nodes.append(Node(name, n.op, ins, (out,), attrs, n.phase))
                prev = out
            parts.append(part)
        if join:
            self.concat(parts, y, 0, n, f"{n.name}/join")

    def conv(self, n: Node) -> None:
        """The grid of parts: per output tile, a chain over the input tiles its groups read."""
        out_t = _conv_sides(n)[1 if n.op == "Conv" else 0]
        for t in range(len(self.tiles[out_t]) - 1 if out_t in self.tiles else 1):
            parts, bias, _ = self.conv_parts(n, t)
            self.chain(n, out_t, t, parts, bias)

    def conv_parts(
        self, n: Node, t: int
    ) -> tuple[list[tuple[str, int, str, dict[str, object]]], str | None, str]:
        """Output tile ``t`` of conv node ``n``: its parts (a chain over the input tiles its groups read),
        its bias and the tensor it is a tile of."""
        tg = self.tg
        w = n.inputs[1]
        forward = n.op == "Conv"
        x_shape = tg.shape(n.inputs[0]) if forward else tuple(cast(Sequence[int], n.attrs["x_shape"]))
        win = conv_window(x_shape, tg.shape(w), n.attrs)
        c_side, m_side = _conv_sides(n)
        cb = self.tiles.get(c_side, (0, win.c))
        mb = self.tiles.get(m_side, (0, win.m))
        cg, mg = win.c // win.groups, win.m // win.groups
        # forward: output tiles are M tiles, read C tiles; input gradient: output tiles are C tiles, read M
        outs, reads = (mb, cb) if forward else (cb, mb)
        out_t, read_t = (m_side, c_side) if forward else (c_side, m_side)
        lo, hi = outs[t], outs[t + 1]
        if forward:
            first, last = (lo // mg) * cg, ((hi - 1) // mg + 1) * cg  # input channels read
        else:
            first, last = (lo // cg) * mg, ((hi - 1) // cg + 1) * mg  # output channels read
        parts = []
        for j in range(len(reads) - 1):
            rlo, rhi = reads[j], reads[j + 1]
            if rlo < last and rhi > first:
                box = (rlo, rhi, lo, hi) if forward else (lo, hi, rlo, rhi)
                parts.append((read_t, j, w, {**n.attrs, "x_shape": tuple(x_shape), "tile": box}))
        bias = n.inputs[2] if forward and len(n.inputs) > 2 else None
        return parts, bias, out_t


# a patch spans at most this many of its tensor's row tiles (bands): where deeper halos would, a stage ends
PATCH_ROWS = 2


def patch_stages(
    tg: Graph, tiles: Mapping[str, tuple[int, ...]], rows: Mapping[str, tuple[int, ...]], aliased: set[str]
) -> frozenset[str]:
    """The tensors in row tiles that only forward convolutions and pools read through row windows, or
    elementwise forward nodes whose outputs are such tensors too, made by a forward Conv, MaxPool,
    AveragePool or elementwise node: a forward-only stage (a frozen early part of the network, --train
    last:N). A reader then computes the rows it needs of them anew (:meth:`_Rewrite.patch`, MCUNetV2's
    patches), so their own row tiles are never made; a patch recomputes the halo rows its neighbour also
    computes, and the scheduler sees those nodes and their cost. The halo grows with every layer a patch
    reaches back through (and doubles its rows at each stride 2): a tensor whose patches would span more
    than :data:`PATCH_ROWS` of its bands keeps its row tiles, and a new stage begins below it."""
    readers: dict[str, list[Node]] = {}
    for n in tg.nodes:
        for u in dict.fromkeys(n.inputs):
            readers.setdefault(u, []).append(n)
    asked: dict[str, set[tuple[int, int]]] = {}  # patched tensor -> the row ranges its readers compute
    for n in reversed(tg.nodes):
        if len(n.outputs) != 1 or n.phase != Phase.FORWARD:
            continue
        t = n.outputs[0]
        if t not in rows or t not in tiles or t in aliased or t in tg.outputs or not readers.get(t):
            continue
        pool = n.op in ("MaxPool", "AveragePool") and _row_pool(tg, n) and n.inputs[0] in rows
        conv = n.op == "Conv" and _tileable(tg, n)
        flat = _channelwise(tg, n) and not _channel_maps(tg, n) and n.op not in ("RangeMask", "MaskGrad")
        if flat:
            flat = all(u in rows or _channel_param(tg, u, n) is not None for u in n.inputs)
        if not (pool or conv or flat):
            continue
        spans: set[tuple[int, int]] = set()
        for m in readers[t]:
            got = _rows_read(tg, m, t, rows, asked)
            if got is None:
                break
            spans |= got
        else:
            band = max(b - a for a, b in zip(rows[t], rows[t][1:], strict=False))
            if max(hi - lo for lo, hi in spans) <= PATCH_ROWS * band:
                asked[t] = spans
    return frozenset(asked)


def _rows_read(
    tg: Graph, m: Node, t: str, rows: Mapping[str, tuple[int, ...]], asked: Mapping[str, set[tuple[int, int]]]
) -> set[tuple[int, int]] | None:
    """The row ranges of ``t`` forward node ``m`` reads through windows (the input of a convolution or pool
    whose output is in row tiles: per output row tile, or per range a patched output is asked for; an
    elementwise node whose output is patched: those ranges); None when it reads ``t`` otherwise."""
    if m.phase != Phase.FORWARD or len(m.outputs) != 1:
        return None
    y = m.outputs[0]
    if m.op not in ("Conv", "MaxPool", "AveragePool"):
        return set(asked[y]) if y in asked else None
    if y not in rows or m.inputs[0] != t or t in m.inputs[1:]:
        return None
    if m.op == "Conv" and not _tileable(tg, m):
        return None
    if m.op != "Conv" and not _row_pool(tg, m):
        return None
    out = asked.get(y) or set(zip(rows[y], rows[y][1:], strict=False))
    if m.op == "Conv":
        attrs = {**m.attrs, "x_shape": tg.shape(t)}
        return {_row_window(attrs, tg.shape(m.inputs[1]), True, a, b)[:2] for a, b in out}
    xs, attrs = _pool_geometry(tg, m)
    return {forward_rows(xs, attrs, a, b)[:2] for a, b in out}


def _live(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """``nodes`` without the forward ones whose outputs nothing reads (the graph's outputs are read)."""
    read = set(outputs)
    keep = []
    for n in reversed(nodes):
        if n.phase != Phase.FORWARD or any(o in read for o in n.outputs):
            keep.append(n)
            read.update(n.inputs)
    return keep[::-1]


def _derived_spans(
    rows: Sequence[int], attrs: Mapping[str, object], w_shape: Sequence[int], forward: bool
) -> list[tuple[int, int]]:
    """Output row ranges of a conv part (Y's for the forward, dX's for the input gradient) cut where the
    operand's row tiles ``rows`` (X's, or dY's) start, so each range reads about one row tile (and its
    halo): the forward's output row o starts reading at o*sh - pt, the input gradient's row r reads dY
    from (r + pt - kh + 1) / sh."""
    xs = tuple(int(d) for d in cast(Sequence[int], attrs["x_shape"]))
    win = conv_window(xs, tuple(w_shape), attrs).along_rows()
    if forward:
        full, cuts = win.oh, [-(-(r + win.pt) // win.sh) for r in rows[1:-1]]
    else:
        full, cuts = win.h, [r * win.sh - win.pt for r in rows[1:-1]]
    bounds = sorted({0, full, *(min(full, max(0, c)) for c in cuts)})
    return list(zip(bounds, bounds[1:], strict=False))


def _row_window(
    attrs: Mapping[str, object], w_shape: Sequence[int], forward: bool, a: int, b: int
) -> tuple[int, int, dict[str, object]]:
    """For output rows [a, b) of a conv part (Y's rows for the forward, dX's for the input gradient; the
    attributes' ``x_shape`` has all rows): the operand's rows [lo, hi) they need (X's, or dY's) and the
    part's attributes on that window, explicit pads (top / bottom: the whole conv's padding where the window
    reaches the edge, else 0) and ``x_shape`` with the window's (forward) or the output's rows. Every output
    element sums the same taps in the same order as unsplit."""
    xs = tuple(int(d) for d in cast(Sequence[int], attrs["x_shape"]))
    whole = conv_window(xs, tuple(w_shape), attrs)
    win = whole.along_rows()  # a 1-D conv's rows: its length
    if forward:
        top, end = a * win.sh - win.pt, (b - 1) * win.sh - win.pt + win.kh
        lo, hi = max(0, top), min(win.h, end)
        pt, pb, h = lo - top, end - hi, hi - lo
    else:  # dX row r takes dY row o's tap kh where o*sh - pt + kh = r
        lo = max(0, -(-(a + win.pt - win.kh + 1) // win.sh))
        hi = min(win.oh, (b - 1 + win.pt) // win.sh + 1)
        pt = win.pt + a - lo * win.sh
        if pt < 0:  # a stride above the kernel leaves rows from a on that no dY row reads (zero): dY row
            lo, pt = lo - 1, pt + win.sh  # lo - 1 comes in, its taps all land above a, in the cut pads
        pb, h = max(0, (hi - lo - 1) * win.sh + win.kh - (b - a) - pt), b - a
    if hi <= lo:
        raise PoetError(f"rows [{a}, {b}) of a {win.kh}x{win.kw} stride-{win.sh} conv read no rows")
    pads = whole.row_pads(pt, pb)
    return lo, hi, {**attrs, "auto_pad": "NOTSET", "pads": pads, "x_shape": (xs[0], xs[1], h, *xs[3:])}


# ---- the choice of a tile size (compiler, --split) -------------------------------------------------------
SPLIT_HELP = (
    "operator splitting: big activations and gradients become tiles (bands of rows, or channel ranges; "
    "see --tile-order) that the scheduler keeps, drops, recomputes or pages one by one, and the "
    "convolutions, pools and elementwise ops that make and read them run tile by tile (bit-identical "
    "results at batch 1); convolutions read row tiles with their halo rows; with --train all, convolution "
    "weights are cut into blocks along the tiles, and Gemm / MatMul weights bigger than a tile into blocks "
    "of their output columns. auto (default): only when the model's memory floor is above --ram, with the "
    "largest tile size that brings it under (rows first also the next size whose floor fits; the least "
    "energy is kept; sizes whose graph exceeds 30,000 nodes are not tried); off: never; or a tile size, "
    "e.g. 16KB"
)
TILE_ORDER_HELP = (
    "how --split cuts a big 2-D or 1-D map: rows (bands of rows, or of a 1-D map's length, of all channels "
    "first, channels too only where a band of 4 rows is still too big: a 1x1 convolution's band reads one "
    "band of its input, so less is paged or recomputed), channels (channel ranges first, rows only where "
    "one channel is too big), or auto (default: both are scheduled and the least energy is kept)"
)
TILE_SIZES = tuple(1 << k for k in range(19, 9, -1))  # 512 KiB down to 1 KiB: the sizes auto tries
MAX_NODES = 30_000  # a split graph above this many nodes is not tried: scheduling it would take too long


TILE_ORDERS = {"auto": (True, False), "rows": (True,), "channels": (False,)}  # --tile-order: rows_first


def splits(
    tg: Graph, input_rows: bool = False, rows_first: bool = False, patches: bool = False
) -> Iterator[Split]:
    """``tg`` split at each size of :data:`TILE_SIZES`, largest first, while the split graph has at most
    :data:`MAX_NODES` nodes (smaller tiles only give more); ``input_rows``: see :func:`split_graph`;
    ``rows_first``, ``patches``: see :class:`TileSizes`."""
    for t in TILE_SIZES:
        s = split_graph(tg, TileSizes(t, rows_first=rows_first, patches=patches), input_rows=input_rows)
        if len(s.graph.nodes) > MAX_NODES:
            return
        yield s


def all_splits(tg: Graph, input_rows: bool = False, order: str = "auto") -> Iterator[Split]:
    """:func:`splits` in each order --tile-order ``order`` allows (:data:`TILE_ORDERS`), rows first first."""
    for rows_first in TILE_ORDERS[order]:
        yield from splits(tg, input_rows, rows_first)


def parse_split(text: str) -> str:
    """--split as given: "auto", "off" or a tile size (checked here, parsed by :func:`tile_bytes_of`)."""
    t = text.strip().lower()
    if t in ("auto", "off"):
        return t
    tile_bytes_of(t)
    return t


def tile_bytes_of(text: str) -> int | None:
    """The tile size of an explicit --split value (None for auto / off); PoetError when malformed."""
    from poet_edge.units import parse_size

    if text in ("auto", "off"):
        return None
    try:
        n = parse_size(text)
    except (ValueError, PoetError):
        raise PoetError(f"--split {text!r}: expected auto, off or a tile size such as 16KB") from None
    if n < 256:
        raise PoetError(f"--split {text}: tiles below 256 bytes would only multiply nodes; give 256B or more")
    return n


# ---- tiles only as small as a floor needs (mixed tile sizes) ---------------------------------------------
def node_bytes(g: Graph, stored: frozenset[str] | None = None, input_storage: bool = False) -> dict[str, int]:
    """What each node of ``g`` needs in RAM while it runs, on top of the fixed RAM: its outputs, its
    inputs and its workspace, each aligned, as the memory floor (memory_floor.node_need) counts them. An
    input counts when a node makes it, when it is a trainable parameter kept in storage (``stored``; None:
    every trainable parameter, as ``--split auto`` keeps them), or when it is the batch and the batch is in
    storage (``input_storage``; a window of it is then a load, its output only, or nothing when only
    windows read it: :func:`batch_windows`). Parameters in RAM, frozen parameters and step inputs held in
    RAM are fixed bytes, not counted. The floor is the fixed
    bytes plus the largest of these (planning fuses in-place epilogues into their producers, which never
    raises it)."""
    kept = frozenset(g.trainable) if stored is None else stored
    producer = g.producers()
    windows = batch_windows(g) if input_storage else BatchWindows(None, {}, frozenset())
    x = windows.x
    counted = set(producer) | kept | ({x} if x is not None else set())
    out: dict[str, int] = {}
    for n in g.nodes:
        outs = sum(align(g.tensor(o).nbytes) for o in n.outputs)
        if n.name in windows.boxes:  # a load from storage: its output only (none when never loaded)
            out[n.name] = 0 if n.name in windows.virtual else outs
            continue
        ins = sum(align(g.tensor(t).nbytes) for t in set(n.inputs) if t in counted)
        work = get_op(n.op).work([g.shape(t) for t in n.inputs], [g.shape(t) for t in n.outputs], n.attrs)
        out[n.name] = outs + ins + (align(work.workspace_bytes) if work.workspace_bytes else 0)
    return out


Box = tuple[tuple[int, int], ...]  # a range [start, end) of every axis of the batch x


@dataclass(frozen=True)
class BatchWindows:
    """The Slices that read a box of the batch x (``batch_windows``): with the batch in storage (``--input
    storage``) each is a load of that box from storage instead of a copy of the loaded batch."""

    x: str | None
    boxes: Mapping[str, Box]  # Slice node -> the box of x it reads
    virtual: frozenset[str]  # windows that only other windows read: never loaded themselves

    def runs(self, name: str, shape: Sequence[int]) -> Runs:
        """How window ``name`` lies in x of ``shape`` (row-major): contiguous runs of elements, repeated
        over the axes before the last one the box cuts."""
        box = self.boxes[name]
        strides = [int(np.prod(shape[a + 1 :], dtype=np.int64)) for a in range(len(shape))]
        k = max((a for a, (lo, hi) in enumerate(box) if (lo, hi) != (0, shape[a])), default=0)
        loops = tuple((a, *box[a], strides[a]) for a in range(k) if box[a][1] - box[a][0] > 1)
        start = sum(box[a][0] * strides[a] for a in range(len(shape)) if a not in {lp[0] for lp in loops})
        count = int(np.prod([hi - lo for _, lo, hi, _ in loops], dtype=np.int64))
        return Runs(count, (box[k][1] - box[k][0]) * strides[k], start, loops)


@dataclass(frozen=True)
class Runs:
    """A window's contiguous runs in x: ``count`` runs of ``per`` elements; run (i_a for each loop axis
    a) starts at element ``start`` + sum of i_a * stride_a, the loops being (axis, first, end, stride)."""

    count: int
    per: int
    start: int
    loops: tuple[tuple[int, int, int, int], ...]


def batch_windows(g: Graph) -> BatchWindows:
    """Every Slice, step 1 (a batch part: samples; channels; rows, or a range of a 1-D batch's length), of
    the batch x or of such a Slice's output (a row window of a batch part is a box of x too), with the box
    of x it reads."""
    x = next((t for t in g.inputs if g.tensor(t).role == Role.INPUT), None)
    if x is None or len(g.shape(x)) < 2:
        return BatchWindows(x, {}, frozenset())
    box_of: dict[str, Box] = {x: tuple((0, d) for d in g.shape(x))}
    boxes: dict[str, Box] = {}
    for n in g.nodes:
        if n.op != "Slice" or len(n.inputs) != 1 or n.inputs[0] not in box_of:
            continue
        rs = ranges(g.shape(n.inputs[0]), n.attrs)
        if any(r.step != 1 and len(r) > 1 for r in rs):
            continue
        outer = box_of[n.inputs[0]]
        box_of[n.outputs[0]] = boxes[n.name] = tuple(
            (lo + r.start, lo + r.start + len(r)) for (lo, _), r in zip(outer, rs, strict=True)
        )
    readers = g.consumers()
    virtual = frozenset(
        n.name
        for n in g.nodes
        if n.name in boxes
        and n.outputs[0] not in g.outputs
        and readers[n.outputs[0]]
        and all(r.name in boxes for r in readers[n.outputs[0]])
    )
    return BatchWindows(x, boxes, virtual)


def floor_bytes(split: Split, stored: frozenset[str] | None = None, input_storage: bool = False) -> int:
    """The largest :func:`node_bytes` of a split graph: its memory floor without the fixed bytes.
    ``stored``: trainable parameters of the unsplit graph kept in storage (None: all)."""
    kept = None if stored is None else split.param_names(stored)
    return max(node_bytes(split.graph, kept, input_storage).values(), default=0)


def split_for_floor(
    tg: Graph,
    target: int,
    input_rows: bool = False,
    stored: frozenset[str] | None = None,
    input_storage: bool | None = None,
    rows: bool = True,
    ladder: Sequence[int] = TILE_SIZES,
    need: Callable[[Split], Mapping[str, int]] | None = None,
    rows_first: bool = False,
) -> Split:
    """The split of ``tg`` whose tiles are only as small as a floor of ``target`` bytes needs: no node of
    the split graph needs more than ``target`` (:func:`node_bytes`: outputs, inputs and workspace, the
    memory floor without the fixed bytes), and no class is cut much finer than that asks. Every tensor
    starts at the largest size of ``ladder`` (a class takes its members' smallest, :class:`TileSizes`);
    while some node needs more than ``target``, the tensors whose pieces weigh most in it (tiles, windows,
    partial sums, weight blocks: :func:`_culprits`) go down to their next size, until no node does or none
    of them can shrink. When one size for the whole graph also stays within ``target`` with fewer nodes
    (sizes tried largest first while they take fewer nodes), that uniform split is returned instead. The
    result may still exceed ``target`` when no size reaches it (check :func:`floor_bytes`). Deterministic.

    ``stored``: trainable parameters in storage (None: all, as ``--split auto``); ``input_storage``: the
    batch is in storage (default: ``input_rows``, which is what ``--input storage`` passes unless
    ``--verify-paging``). ``need``: what each node of a split graph needs, by name, compared with
    ``target`` (default: :func:`node_bytes` with ``stored`` and ``input_storage``); the compile passes the
    planning's own count (memory_floor.node_need of the priced split graph, fixed bytes included, an
    in-place epilogue's group counted for each of its members) and the whole floor as ``target``.
    ``rows_first``: see :class:`TileSizes` (every split tried cuts rows first then)."""
    if target < 1:
        raise PoetError(f"target floor must be positive, got {target} bytes")
    steps = sorted(set(ladder), reverse=True)
    smaller = dict(zip(steps, steps[1:], strict=False))
    batch = input_rows if input_storage is None else input_storage

    def needs_of(split: Split) -> Mapping[str, int]:
        if need is not None:
            return need(split)
        return node_bytes(split.graph, None if stored is None else split.param_names(stored), batch)

    sizes: dict[str, int] = {}
    while True:
        split = split_graph(
            tg, TileSizes(steps[0], dict(sorted(sizes.items())), rows_first), rows, input_rows
        )
        needs = needs_of(split)
        over = {n: b - target for n, b in needs.items() if b > target and n in split.origin}
        shrink = _culprits(tg, split, over, lambda t: sizes.get(t, steps[0]) in smaller)
        if not shrink:
            break
        for t in shrink:
            sizes[t] = smaller[sizes.get(t, steps[0])]
    if max(needs.values(), default=0) > target:
        return split
    for size in steps:  # one size for all, when its largest size within the target takes fewer nodes
        uniform = split_graph(tg, TileSizes(size, rows_first=rows_first), rows, input_rows)
        if len(uniform.graph.nodes) >= len(split.graph.nodes):
            break
        if max(needs_of(uniform).values(), default=0) <= target:
            return uniform
    return split


def _culprits(tg: Graph, split: Split, over: Mapping[str, int], can: Callable[[str], bool]) -> list[str]:
    """The tensors of ``tg`` to cut finer, for the nodes of the split graph that need more than the target
    (``over``: node -> bytes in excess): for each, the tensors whose pieces it reads or makes weigh most,
    largest first, until halving them would free the excess (at least one), among those that ``can``
    shrink; a piece (a tile, a row window, a partial sum, a weight block) counts for the tensor it is
    part of (:func:`_source`)."""
    g = split.graph
    nodes = {n.name: n for n in g.nodes}
    made = g.producers()
    out: set[str] = set()
    for name, excess in sorted(over.items()):
        n = nodes[name]
        weight: dict[str, int] = {}
        for t in {*n.inputs, *n.outputs}:
            src = _source(tg, t)
            if src is not None and can(src) and (t in made or t in g.trainable or t in g.inputs):
                weight[src] = weight.get(src, 0) + align(g.tensor(t).nbytes)
        freed = 0
        for src in sorted(weight, key=lambda u: (-weight[u], u)):
            if freed >= excess:
                break
            out.add(src)
            freed += weight[src] // 2
    return sorted(out)


def _source(tg: Graph, t: str) -> str | None:
    """The tensor of ``tg`` that split tensor ``t`` is a piece of: ``t`` itself, or the longest name of
    ``tg`` that ``t`` starts with followed by ``/`` (tiles ``T/t<i>``, partial sums, blocks ``W/b<i>.<j>``),
    after a row window's ``win/`` prefix."""
    name = t[len("win/") :] if t.startswith("win/") and t not in tg.tensors else t
    if name in tg.tensors:
        return name
    cut = name.rfind("/")
    while cut > 0:
        if name[:cut] in tg.tensors:
            return name[:cut]
        cut = name.rfind("/", 0, cut)
    return None
