"""Training graph = forward + loss + reverse-mode backward (rules live with the ops) + optimizer updates."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Names, Node, Phase, Role, Tensor
from poet_edge.ops import fused
from poet_edge.ops.concat import MAX_PIECES
from poet_edge.ops.slice import ranges as slice_ranges
from poet_edge.optimizer import PLAIN_SGD, Optimizer


class Loss(str, Enum):
    CROSS_ENTROPY = "cross-entropy"
    MSE = "mse"


LABELS = "labels"
LOSS = "loss"


@dataclass(frozen=True)
class TrainingOptions:
    """Exact rewrites of the training graph (parameters bit-identical to the graph without them).

    ``fused_updates``: a weight whose gradient is one Conv / Gemm / MatMul weight-gradient node is updated
    by a fused node that computes its gradient tile by tile (a few output channels or rows in a workspace)
    and applies the optimizer's update to each tile, so the whole gradient never exists (ops/fused.py).
    It runs after every other reader of the weight. Applied only where its workspace is smaller than the
    gradient it replaces.

    ``relu_masks``: ReluGrad and ClipGrad read a packed 1-bit mask of their test (ops/mask.py), computed
    right after the Relu / Clip, instead of the float tensor; applied only where no other backward or
    update node reads that tensor (else the float value is kept anyway and the mask would only add)."""

    fused_updates: bool = False
    relu_masks: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"fused_updates": self.fused_updates, "relu_masks": self.relu_masks}


PLAIN = TrainingOptions()  # the graph as the backward rules build it
DEFAULT_OPTIONS = TrainingOptions(fused_updates=True, relu_masks=True)  # the CLI's default


def add_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--fused-updates / --relu-masks and their --no- forms (compile, inspect, sweep)."""
    p.add_argument(
        "--fused-updates",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_OPTIONS.fused_updates,
        help="update each Conv / Gemm / MatMul weight tile by tile as its gradient is computed, so the "
        "whole weight gradient never exists; exact: the same parameters bit for bit (default: on)",
    )
    p.add_argument(
        "--relu-masks",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_OPTIONS.relu_masks,
        help="keep a 1-bit mask for the backward of Relu and Clip (ReLU6) where nothing else needs the "
        "float tensor; exact (default: on)",
    )


def options_from_args(args: argparse.Namespace) -> TrainingOptions:
    return TrainingOptions(bool(args.fused_updates), bool(args.relu_masks))


class GradBuilder:
    """Emits nodes into the training graph; names derive from the node being differentiated."""

    def __init__(self, tensors: dict[str, Tensor], phase: Phase = Phase.BACKWARD):
        self.tensors = tensors
        self.nodes: list[Node] = []
        self.phase = phase
        self.prefix = ""
        self.names = Names(set(tensors))  # every tensor name handed out (ops emitting multi-output nodes too)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def emit(
        self,
        op: str,
        inputs: tuple[str, ...],
        attrs: Mapping[str, object] | None = None,
        role: Role = Role.GRADIENT,
    ) -> str:
        attrs = dict(attrs or {})
        shapes = ops.get(op).infer([self.shape(t) for t in inputs], attrs)
        out = self.names.fresh(f"{self.prefix}{op}")
        self.tensors[out] = Tensor(out, tuple(shapes[0]), "float32", role)
        self.nodes.append(Node(out, op, inputs, (out,), attrs, self.phase))
        return out

    def sum_to(self, grad: str, shape: tuple[int, ...], scale: float = 1.0) -> str:
        if self.shape(grad) == tuple(shape) and scale == 1.0:
            return grad
        return self.emit("ReduceSumTo", (grad,), {"shape": tuple(shape), "scale": scale})


def _requires_grad(g: Graph, trainable: frozenset[str]) -> set[str]:
    req = set(trainable)
    for n in g.nodes:
        if any(t in req for t in n.inputs):
            req.update(n.outputs)
    return req


def _add_loss(gb: GradBuilder, output: str, loss: Loss) -> tuple[str, str]:
    out_shape = gb.shape(output)
    if loss == Loss.CROSS_ENTROPY:
        if len(out_shape) != 2:
            raise PoetError(
                f"cross-entropy needs 2-D logits [batch, classes]; output '{output}' is {out_shape}"
            )
        gb.tensors[LABELS] = Tensor(LABELS, (out_shape[0],), "int32", Role.LABEL)
        op = "SoftmaxCrossEntropy"
    else:
        gb.tensors[LABELS] = Tensor(LABELS, out_shape, "float32", Role.LABEL)
        op = "MeanSquaredError"
    gb.phase = Phase.LOSS
    gb.prefix = ""
    gb.tensors[LOSS] = Tensor(LOSS, (), "float32", Role.LOSS)
    gb.nodes.append(Node(LOSS, op, (output, LABELS), (LOSS,), {}, Phase.LOSS))
    gb.phase = Phase.BACKWARD
    gb.prefix = "grad/"
    return LABELS, gb.emit(op + "Grad", (output, LABELS))


def _partitions(g: Graph) -> dict[str, tuple[int, tuple[Node, ...]]]:
    """Tensors that only Slices read, cutting one axis (step 1) into ranges that cover it without overlap
    (an attention block's q, k and v cut from one projection; an unrolled RNN's gates), in 2 to MAX_PIECES
    pieces: tensor -> (axis, the Slices in range order). Their gradient is a Concat of the pieces'
    gradients (as ONNX Split's), not a sum of zero-padded SliceGrads."""
    readers: dict[str, list[Node]] = {}
    for n in g.nodes:
        for t in set(n.inputs):
            readers.setdefault(t, []).append(n)
    out: dict[str, tuple[int, tuple[Node, ...]]] = {}
    for t, ns in readers.items():
        if not 2 <= len(ns) <= MAX_PIECES or t in g.outputs or any(n.op != "Slice" for n in ns):
            continue
        shape = g.shape(t)
        cuts = [
            [(a, r) for a, r in enumerate(slice_ranges(shape, n.attrs)) if r != range(shape[a])] for n in ns
        ]
        if any(len(c) != 1 or c[0][1].step != 1 for c in cuts) or len({c[0][0] for c in cuts}) != 1:
            continue
        axis = cuts[0][0][0]
        order = sorted(range(len(ns)), key=lambda i: cuts[i][0][1].start)
        bounds = [(cuts[i][0][1].start, cuts[i][0][1].stop) for i in order]
        if (
            bounds[0][0] == 0
            and bounds[-1][1] == shape[axis]
            and all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
        ):
            out[t] = (axis, tuple(ns[i] for i in order))
    return out


def _backward(
    g: Graph, gb: GradBuilder, seed: tuple[str, str], req: set[str], params: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Returns the final gradient tensor of every tensor that needs one.

    A tensor read by several nodes gets one gradient contribution from each read, produced in reverse
    node order (and, within one node, in input order): g0, g1, g2, ... Each contribution is added to
    the running sum as soon as it is produced, an ``Add`` emitted right after the backward nodes that
    made it, so the sum is always ((g0 + g1) + g2) + ... in that order, and at most one partial sum per
    tensor is alive (an unrolled RNN's per-step weight gradients are not all held until the end). For a
    parameter of ``params`` whose contribution a ConvGradWeight or a 2-D Gemm makes, that node adds its
    products to the running sum itself (:func:`_fold`): no Add, and no third weight-sized buffer."""
    acc: dict[str, str] = {seed[0]: seed[1]}

    def accumulate(t: str, gt: str) -> None:
        if t in acc and not (t in params and _fold(gb, gt, acc[t])):
            gb.prefix = f"grad/{t}/"
            gt = gb.emit("Add", (acc[t], gt))
        acc[t] = gt

    parts = _partitions(g)
    pieces: dict[str, dict[str, str | None]] = {}  # a partitioned tensor -> its Slices' gradients so far
    for n in reversed(g.nodes):
        needs = [t in req for t in n.inputs]
        gys = [acc.get(o) for o in n.outputs]
        if n.op == "Slice" and n.inputs[0] in parts and needs[0]:
            _piece(gb, n, gys[0], parts[n.inputs[0]], pieces, accumulate)
            continue
        if not any(needs) or all(gy is None for gy in gys):
            continue
        op = ops.get(n.op)
        if op.backward is None:
            raise PoetError(f"node '{n.name}' ({n.op}): no backward rule")
        gb.prefix = f"grad/{n.name}/"
        grads = op.backward(gb, n, gys, needs)
        for t, gt, need in zip(n.inputs, grads, needs, strict=False):
            if need and gt is not None:
                accumulate(t, gt)
    return acc


def _fold(gb: GradBuilder, gt: str, running: str) -> bool:
    """Makes the node that emitted contribution ``gt`` add its products to ``running`` (the sum of the
    contributions before it), if it can: a ConvGradWeight (``partial``, P = ``running``: its accumulators
    start at P, ops/conv.py) or a Gemm of 2-D operands without C (C = ``running``, beta 1), whose operands
    weigh no more than the gradient: then the folded node needs operands + 2 gradients, no more than the
    Add's 3 gradients (with bigger operands, as a convolution's maps are, the fold would raise the node's
    floor, and the running sum could no longer be paged out while the products run). The sum's order
    changes from (running + (products)) to (products added to running): within rounding. False (nothing
    changed) otherwise."""
    k = next(i for i in range(len(gb.nodes) - 1, -1, -1) if gt in gb.nodes[i].outputs)
    n = gb.nodes[k]
    if sum(gb.tensors[t].nbytes for t in n.inputs) > gb.tensors[gt].nbytes:
        return False
    if n.op == "ConvGradWeight" and not n.attr("partial", False):
        attrs = {**n.attrs, "partial": True}
    elif n.op == "Gemm" and len(n.inputs) == 2 and len(gb.shape(gt)) == 2:
        attrs = {**n.attrs, "beta": 1.0}
    else:
        return False
    later = gb.nodes[k + 1 :]
    if any(gt in m.inputs or running in m.outputs for m in later):  # read already, or the sum made after it
        return False
    ops.get(n.op).infer([gb.shape(t) for t in (*n.inputs, running)], attrs)  # the shapes agree
    gb.nodes[k] = replace(n, inputs=(*n.inputs, running), attrs=attrs)
    return True


def _piece(
    gb: GradBuilder,
    n: Node,
    gy: str | None,
    part: tuple[int, tuple[Node, ...]],
    pieces: dict[str, dict[str, str | None]],
    accumulate: Callable[[str, str], None],
) -> None:
    """Records the gradient of Slice ``n`` of a partitioned tensor; after its last Slice (in reverse order)
    the tensor's gradient is the Concat of the pieces' (Zeros for a piece that got none)."""
    t, (axis, slices) = n.inputs[0], part
    got = pieces.setdefault(t, {})
    got[n.name] = gy
    if len(got) < len(slices) or all(v is None for v in got.values()):
        return
    gb.prefix = f"grad/{t}/"
    ins = tuple(got[s.name] or gb.emit("Zeros", (), {"shape": gb.shape(s.outputs[0])}) for s in slices)
    accumulate(t, gb.emit("Concat", ins, {"axis": axis}))


def state_tensors(tensors: dict[str, Tensor], p: str, optimizer: Optimizer) -> tuple[str, ...]:
    """Adds the optimizer state of parameter ``p`` (``<p>.momentum_buffer``, ``<p>.exp_avg``, ...: torch's
    names) to ``tensors`` and returns their names."""
    names = []
    for kind in optimizer.state_names:
        name, k = f"{p}.{kind}", 1
        while name in tensors:
            k += 1
            name = f"{p}.{kind}_{k}"
        tensors[name] = Tensor(name, tensors[p].shape, "float32", Role.OPTIMIZER_STATE)
        names.append(name)
    return tuple(names)


def _fusable(
    nodes: list[Node], grads: dict[str, str], p: str, tensors: dict[str, Tensor]
) -> tuple[list[Node], str, tuple[str, ...], dict[str, object], int] | None:
    """How parameter ``p``'s update fuses with its gradient: (the gradient nodes it replaces, the fused op,
    its operands, its attributes, workspace floats), or None. The gradient must be the output of one
    ConvGradWeight, of one 2-D Gemm / MatMul without C, or of a batched MatMul whose batch a ReduceSumTo
    sums away, read by nothing but the update; the workspace must be smaller than the gradient."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[str, int] = {}
    for n in nodes:
        for t in set(n.inputs):
            readers[t] = readers.get(t, 0) + 1
    g = grads.get(p)
    if g is None or g not in producer or readers.get(g, 0) or tensors[g].shape != tensors[p].shape:
        return None
    n = producer[g]
    gbytes = tensors[g].nbytes
    if n.op == "ConvGradWeight":
        if n.attr("partial", False):  # the last of a chain of contributions (_fold)
            return None
        win = fused.conv.conv_window(tensors[n.inputs[0]].shape, tensors[p].shape, n.attrs)
        ws = fused.conv_workspace(win)
        cattrs = {k: v for k, v in n.attrs.items() if k != "w_shape"}
        if ws is None or 4 * ws >= gbytes:
            return None
        return [n], "ConvGradWeightUpdate", n.inputs, cattrs, ws
    chain, scale = [n], 1.0
    if n.op == "ReduceSumTo":  # a batched MatMul's per-batch products summed over the batch
        mm = producer.get(n.inputs[0])
        if mm is None or mm.op != "MatMul" or readers.get(mm.outputs[0], 0) != 1:
            return None
        lead = len(tensors[mm.outputs[0]].shape) - len(tensors[g].shape)
        if lead < 1 or tensors[mm.outputs[0]].shape[lead:] != tensors[g].shape:
            return None
        chain, scale, n = [mm, n], float(n.attr("scale", 1.0)), mm  # type: ignore[arg-type]
    if n.op not in ("Gemm", "MatMul") or len(n.inputs) != 2 or len(tensors[g].shape) != 2:
        return None
    sa, sb = tensors[n.inputs[0]].shape, tensors[n.inputs[1]].shape
    batch = sa[:-2]
    if len(sa) < 2 or len(sb) < 2 or sb[:-2] != batch or (len(chain) == 1 and batch):
        return None
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))  # type: ignore[call-overload]
    batches = 1
    for d in batch:
        batches *= d
    if len(chain) == 2 and n.op != "MatMul":
        return None
    attrs: dict[str, object] = {"source": n.op, "transA": ta, "transB": tb, "batches": batches}
    if n.op == "Gemm":
        attrs["alpha"] = float(n.attr("alpha", 1.0))  # type: ignore[arg-type]
    if len(chain) == 2:
        attrs["scale"] = scale
    m, nn, k = fused.gemm.mnk([sa[-2:], sb[-2:]], attrs)
    ws = fused.gemm_workspace(m, nn, k, ta, len(chain) == 2)
    if 4 * ws >= gbytes:
        return None
    return chain, "GemmGradUpdate", n.inputs, attrs, ws


def _place_updates(
    nodes: list[Node],
    grads: dict[str, str],
    trainable: frozenset[str],
    tensors: dict[str, Tensor],
    optimizer: Optimizer,
    fuse: bool = False,
) -> list[Node]:
    """Insert each update right after its gradient is final and the last reader of the parameter ran.
    The update reads (param, grad, *state) and rewrites the parameter and its state in place.

    With ``fuse``, a parameter whose gradient is one weight-gradient node (:func:`_fusable`) gets a fused
    update (param, *operands, *state) instead, placed where that node was or after the last other reader of
    the parameter if later, and the gradient node is dropped."""
    op, attrs = optimizer.update()
    fusions: dict[str, tuple[list[Node], str, tuple[str, ...], dict[str, object], int]] = {}
    if fuse:
        for p in sorted(trainable):
            f = _fusable(nodes, grads, p, tensors)
            if f is not None:
                fusions[p] = f
        dropped = {id(n) for f in fusions.values() for n in f[0]}
        nodes = [n for n in nodes if id(n) not in dropped]
        for f in fusions.values():
            for n in f[0]:
                for o in n.outputs:
                    del tensors[o]
    pos = {o: i for i, n in enumerate(nodes) for o in n.outputs}
    last_read = {p: max(i for i, n in enumerate(nodes) if p in n.inputs) for p in trainable}
    after: dict[int, list[Node]] = {}
    for p in sorted(trainable):
        if p not in grads:
            raise PoetError(f"parameter '{p}' is trainable but does not influence the loss")
        state = state_tensors(tensors, p, optimizer)
        if p in fusions:
            _, fop, operands, fattrs, ws = fusions[p]
            upd = Node(
                f"update/{p}",
                fop,
                (p, *operands, *state),
                (),
                {**fattrs, "update": op, **attrs, "workspace": ws},
                Phase.UPDATE,
            )
            at = max([last_read[p], *(pos[t] for t in operands if t in pos)])
        else:
            upd = Node(f"update/{p}", op, (p, grads[p], *state), (), attrs, Phase.UPDATE)
            at = max(pos[grads[p]], last_read[p])
        after.setdefault(at, []).append(upd)
    out: list[Node] = []
    for i, n in enumerate(nodes):
        out.append(n)
        out.extend(after.get(i, []))
    return out


def _mask_rewrite(nodes: list[Node], tensors: dict[str, Tensor]) -> list[Node]:
    """ReluGrad(Y, dY) -> MaskGrad(M, dY) with M = RangeMask(Y) right after the Relu, and ClipGrad(X, dY) ->
    MaskGrad(M, dY) with M = RangeMask(Y) of the Clip's output, wherever no other node of the loss,
    backward or update phases reads the float tensor the gradient read (Y, resp. X): then only the
    forward needs it and the planner can free it there."""
    late = [n for n in nodes if n.phase != Phase.FORWARD]
    fwd_nodes = [n for n in nodes if n.phase == Phase.FORWARD and n.op in ("Relu", "Clip")]
    by_name = {n.name: n for n in nodes}
    insert: dict[str, Node] = {}
    replace_: dict[str, Node] = {}
    used = set(tensors)
    for r in nodes:
        if r.op not in ("ReluGrad", "ClipGrad"):
            continue
        kept = r.inputs[0]  # ReluGrad reads Y (the Relu's output), ClipGrad X (the Clip's input)
        src = next(
            (
                c
                for c in fwd_nodes
                if c.op == r.op[: -len("Grad")]
                and kept == (c.outputs[0] if c.op == "Relu" else c.inputs[0])
                and r.name.startswith(f"grad/{c.name}/")
            ),
            None,
        )
        if src is None:
            continue
        if any(kept in n.inputs for n in late if n is not r):
            continue
        y = src.outputs[0]
        bounds: dict[str, object] = {"min": 0.0}  # Relu: Y > 0
        if r.op == "ClipGrad":
            bounds = {k: src.attrs[k] for k in ("min", "max") if k in src.attrs}
        name, k = f"mask/{src.name}", 1
        while name in used or name in by_name:
            k += 1
            name = f"mask/{src.name}_{k}"
        used.add(name)
        shape = ops.get("RangeMask").infer([tensors[y].shape], bounds)[0]
        tensors[name] = Tensor(name, tuple(shape), "uint32", Role.ACTIVATION)
        insert[src.name] = Node(name, "RangeMask", (y,), (name,), bounds, Phase.FORWARD)
        replace_[r.name] = Node(r.name, "MaskGrad", (name, r.inputs[1]), r.outputs, {}, r.phase)
    out: list[Node] = []
    for n in nodes:
        out.append(replace_.get(n.name, n))
        if n.name in insert:
            out.append(insert[n.name])
    return out


def training_graph(
    g: Graph,
    loss: Loss = Loss.CROSS_ENTROPY,
    trainable: frozenset[str] | None = None,
    optimizer: Optimizer = PLAIN_SGD,
    options: TrainingOptions = PLAIN,
) -> Graph:
    """Builds the training graph; its output is the scalar ``loss`` and its inputs are (x, labels).
    Optimizer state tensors (role OPTIMIZER_STATE) are read and written only by the update nodes (and
    by the fused updates of ``options.fused_updates``); ``options`` (:class:`TrainingOptions`) chooses
    the exact rewrites."""
    trainable = g.trainable if trainable is None else trainable
    if not trainable:
        raise PoetError("no trainable parameters selected")
    tensors = dict(g.tensors)
    for p in trainable:
        tensors[p] = replace(tensors[p], role=Role.PARAMETER)
    gb = GradBuilder(tensors)
    labels, dlogits = _add_loss(gb, g.outputs[0], loss)
    req = _requires_grad(g, trainable)
    grads = _backward(g, gb, (g.outputs[0], dlogits), req, trainable)
    nodes = _place_updates(
        list(g.nodes) + gb.nodes, grads, trainable, gb.tensors, optimizer, options.fused_updates
    )
    if options.relu_masks:
        nodes = _mask_rewrite(nodes, gb.tensors)
    used = {t for n in nodes for t in (*n.inputs, *n.outputs)}
    tensors = {k: v for k, v in gb.tensors.items() if k in used}
    return Graph(tensors, tuple(nodes), (g.inputs[0], labels), (LOSS,), g.params, trainable)
