"""Operator splitting (issue 57): big tensors of the training graph become channel tiles, each its own value
that the scheduler keeps, drops, recomputes or pages on its own, and the nodes that make and read them run
tile by tile, so no node needs a whole big tensor and its whole inputs at once.

The rewrite works on the training graph, after autodiff. Tensors that channelwise ops (``OpDef.channelwise``:
elementwise ops on same-shape inputs, Relu / Clip and their gradients, 1-bit masks) connect must share one
tiling, so they form a class; a class is tiled when its biggest tensor exceeds the tile size, into
``ceil(bytes / tile_bytes)`` channel ranges (at most one channel each). Then:

- a channelwise node runs once per tile, on the tiles of its operands (same kernel, a smaller count);
- a Conv whose input or output is tiled becomes a grid of ``ConvPart`` nodes: output tile t is the chain,
  over the input tiles its groups read in ascending order, of parts that add their channels' products to the
  previous part's sums (ops/conv_part.py), the last adding the bias; ``ConvGradInput`` likewise;
- ``ChannelSum`` (a bias gradient) runs per tile, and a Concat joins the small per-tile sums;
- any other reader of a tiled tensor gets the whole tensor back from a Concat of its tiles (the rewrite is
  valid for every graph; only the split nodes get smaller).

Exact: a channelwise op on a tile computes the same elements; the conv parts accumulate in the unsplit
kernel's order, starting from the previous part's float sums, so every result has the unsplit bits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Tensor
from poet_edge.ops import get as get_op
from poet_edge.ops.concat import MAX_PIECES
from poet_edge.ops.conv import conv_window

CONV_OPS = ("Conv", "ConvGradInput")


@dataclass(frozen=True)
class Split:
    """The rewritten graph; ``tiles``: each tiled tensor of the input graph and its channel bounds
    (0 = b0 < b1 < ... < bk = C); ``split_nodes``: nodes of the input graph that now run in tiles."""

    graph: Graph
    tile_bytes: int
    tiles: Mapping[str, tuple[int, ...]]
    split_nodes: tuple[str, ...]

    def summary(self) -> dict[str, object]:
        """plan.json's ``split``: the tile size, tiled tensors with their tile count, split nodes."""
        return {
            "tile_bytes": self.tile_bytes,
            "tensors": {t: len(b) - 1 for t, b in sorted(self.tiles.items())},
            "nodes": list(self.split_nodes),
        }


def tile_name(t: str, i: int) -> str:
    return f"{t}/t{i}"


def _channelwise(tg: Graph, n: Node) -> bool:
    """A node that runs per channel tile: a channelwise op whose float operands have its output's shape
    (rank >= 3, [N, C, ...]); RangeMask reads one such tensor, MaskGrad's mask is a tile-wise RangeMask's."""
    op = get_op(n.op)
    if not op.channelwise or len(n.outputs) != 1:
        return False
    if n.op == "RangeMask":
        return len(tg.shape(n.inputs[0])) >= 3
    shape = tg.shape(n.outputs[0])
    floats = [i for i in n.inputs if tg.tensor(i).dtype == "float32"]
    if len(shape) < 3 or any(tg.shape(i) != shape for i in floats):
        return False
    return n.op == "MaskGrad" or len(floats) == len(n.inputs)


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


def plan_tiles(tg: Graph, tile_bytes: int) -> dict[str, tuple[int, ...]]:
    """Channel bounds of every tensor to tile: the classes channelwise nodes link whose biggest tensor
    exceeds ``tile_bytes`` and whose every tensor is made by a node that can run in tiles."""
    if tile_bytes < 1:
        raise PoetError(f"tile size must be positive, got {tile_bytes} bytes")
    classes = _Classes()
    producer, consumers = tg.producers(), tg.consumers()
    split_ok = {n.name for n in tg.nodes if _channelwise(tg, n)}
    for n in tg.nodes:
        if n.name in split_ok:
            for t in (*n.inputs, *n.outputs):
                classes.union(t, n.outputs[0])
    conv_made = {t for n in tg.nodes if _tileable(tg, n) for t in (n.outputs[0],)}
    members: dict[str, list[str]] = {}
    for t in tg.tensors:
        members.setdefault(classes.find(t), []).append(t)
    fixed = set(tg.inputs) | set(tg.outputs) | set(tg.params)
    out: dict[str, tuple[int, ...]] = {}
    for names in members.values():
        floats = [t for t in names if tg.tensor(t).dtype == "float32" and len(tg.shape(t)) >= 3]
        if not floats:
            continue
        nc = {tg.shape(t)[:2] for t in floats}
        big = max(tg.tensor(t).nbytes for t in names)
        if len(nc) != 1 or big <= tile_bytes or any(t in fixed for t in names):
            continue
        if any(t not in conv_made and (t not in producer or producer[t].name not in split_ok) for t in names):
            continue
        others = [t for t in names if t not in floats]  # masks: only split nodes may read them
        if any(c.name not in split_ok for t in others for c in consumers[t]):
            continue
        c = next(iter(nc))[1]
        k = min(c, -(-big // tile_bytes))
        if k < 2:
            continue
        bounds = tuple(i * c // k for i in range(k + 1))
        for t in floats:
            out[t] = bounds
        for t in others:
            out[t] = bounds  # a mask's tile i packs the bits of its source's tile i
    return out


def split_graph(tg: Graph, tile_bytes: int) -> Split:
    """The training graph with every tensor :func:`plan_tiles` picks in channel tiles."""
    tiles = plan_tiles(tg, tile_bytes)
    return _Rewrite(tg, tiles).run(tile_bytes)


class _Rewrite:
    def __init__(self, tg: Graph, tiles: dict[str, tuple[int, ...]]) -> None:
        self.tg, self.tiles = tg, tiles
        self.tensors: dict[str, Tensor] = dict(tg.tensors)
        self.producer = tg.producers()
        self.nodes: list[Node] = []
        self.joined: set[str] = set()  # tiled tensors a Concat has made whole again
        self.split: list[str] = []

    def run(self, tile_bytes: int) -> Split:
        for n in self.tg.nodes:
            self.node(n)
        used = {t for n in self.nodes for t in (*n.inputs, *n.outputs)}
        keep = set(self.tg.inputs) | set(self.tg.outputs) | set(self.tg.params) | used
        tensors = {t: v for t, v in self.tensors.items() if t in keep}
        g = Graph(
            tensors, tuple(self.nodes), self.tg.inputs, self.tg.outputs, self.tg.params, self.tg.trainable
        )
        return Split(g, tile_bytes, dict(self.tiles), tuple(self.split))

    # ---- tensors ---------------------------------------------------------------------------------------
    def tile(self, t: str, i: int, shape: Sequence[int] | None = None) -> str:
        """Name of tile ``i`` of ``t`` (registered with its channel range, or ``shape`` for a mask)."""
        name = tile_name(t, i)
        if name not in self.tensors:
            base = self.tg.tensor(t)
            if shape is None:
                b = self.tiles[t]
                shape = (base.shape[0], b[i + 1] - b[i], *base.shape[2:])
            self.tensors[name] = Tensor(name, tuple(shape), base.dtype, base.role)
        return name

    def temp(self, name: str, like: str, channels: int) -> str:
        base = self.tg.tensor(like)
        self.tensors[name] = Tensor(name, (base.shape[0], channels, *base.shape[2:]), base.dtype, base.role)
        return name

    def whole(self, t: str) -> str:
        """``t`` whole: a Concat of its tiles the first time an unsplit node reads it."""
        if t in self.tiles and t not in self.joined:
            parts = [self.tile(t, i) for i in range(len(self.tiles[t]) - 1)]
            made = self.producer[t]  # the join belongs to the phase that made t, never an update
            self.concat(parts, t, 1, made, f"join/{t}")
            self.joined.add(t)
        return t

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
        if not tiled:
            self.nodes.append(n)
        elif n.outputs and n.outputs[0] in self.tiles and _channelwise(self.tg, n):
            self.channelwise(n)
        elif _tileable(self.tg, n):
            self.conv(n)
        elif n.op == "ChannelSum" and n.inputs[0] in self.tiles:
            self.channel_sum(n)
        else:
            ins = tuple(self.whole(t) if t in self.tiles else t for t in n.inputs)
            self.nodes.append(Node(n.name, n.op, ins, n.outputs, n.attrs, n.phase))
            return
        if tiled:
            self.split.append(n.name)

    def channelwise(self, n: Node) -> None:
        op = get_op(n.op)
        k = len(self.tiles[n.outputs[0]]) - 1
        for i in range(k):
            ins = tuple(self.tile(t, i) for t in n.inputs)
            shape = op.infer([self.tensors[t].shape for t in ins], n.attrs)[0]
            out = self.tile(n.outputs[0], i, shape)
            self.nodes.append(Node(f"{n.name}/t{i}", n.op, ins, (out,), n.attrs, n.phase))

    def channel_sum(self, n: Node) -> None:
        x, y = n.inputs[0], n.outputs[0]
        parts = []
        for i in range(len(self.tiles[x]) - 1):
            xi = self.tile(x, i)
            part = f"{y}/t{i}"
            self.tensors[part] = Tensor(part, (self.tensors[xi].shape[1],), "float32", self.tg.tensor(y).role)
            self.nodes.append(Node(f"{n.name}/t{i}", n.op, (xi,), (part,), n.attrs, n.phase))
            parts.append(part)
        self.concat(parts, y, 0, n, f"{n.name}/join")

    def conv(self, n: Node) -> None:
        """The grid of parts: per output tile, a chain over the input tiles its groups read."""
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
        for t in range(len(outs) - 1):
            lo, hi = outs[t], outs[t + 1]
            if forward:
                first, last = (lo // mg) * cg, ((hi - 1) // mg + 1) * cg  # input channels read
            else:
                first, last = (lo // cg) * mg, ((hi - 1) // cg + 1) * mg  # output channels read
            chain = [j for j in range(len(reads) - 1) if reads[j] < last and reads[j + 1] > first]
            prev: str | None = None
            for idx, j in enumerate(chain):
                final = idx == len(chain) - 1
                rlo, rhi = reads[j], reads[j + 1]
                src = self.tile(read_t, j) if read_t in self.tiles else read_t
                box = (rlo, rhi, lo, hi) if forward else (lo, hi, rlo, rhi)
                ins = [src, w]
                bias = forward and final and len(n.inputs) > 2
                if bias:
                    ins.append(n.inputs[2])
                if prev is not None:
                    ins.append(prev)
                if final:
                    out = self.tile(out_t, t) if out_t in self.tiles else out_t
                else:
                    out = self.temp(f"{out_t}/t{t}/p{j}", out_t, hi - lo)
                attrs = {
                    **n.attrs,
                    "x_shape": tuple(x_shape),
                    "tile": box,
                    "bias": bias,
                    "partial": prev is not None,
                }
                op = "ConvPart" if forward else "ConvGradInputPart"
                self.nodes.append(Node(f"{n.name}/t{t}c{j}", op, tuple(ins), (out,), attrs, n.phase))
                prev = out


# ---- the choice of a tile size (compiler, --split) -------------------------------------------------------
SPLIT_HELP = (
    "operator splitting: big activations and gradients become channel tiles that the scheduler keeps, "
    "drops, recomputes or pages one by one, and the convolutions and elementwise ops that make and read "
    "them run tile by tile (bit-identical results). auto (default): only when the model's memory floor is "
    "above --ram, with the largest tile size that brings it under (and half that size, the less energy "
    "kept); off: never; or a tile size, e.g. 16KB"
)
TILE_SIZES = tuple(1 << k for k in range(19, 9, -1))  # 512 KiB down to 1 KiB: the sizes auto tries


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
