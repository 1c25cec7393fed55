"""Training graph = forward + loss + reverse-mode backward (rules live with the ops) + optimizer updates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from enum import Enum

from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Phase, Role, Tensor
from poet_edge.optimizer import PLAIN_SGD, Optimizer


class Loss(str, Enum):
    CROSS_ENTROPY = "cross-entropy"
    MSE = "mse"


LABELS = "labels"
LOSS = "loss"


class GradBuilder:
    """Emits nodes into the training graph; names derive from the node being differentiated."""

    def __init__(self, tensors: dict[str, Tensor], phase: Phase = Phase.BACKWARD):
        self.tensors = tensors
        self.nodes: list[Node] = []
        self.phase = phase
        self.prefix = ""
        self._used: set[str] = set(tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def _fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        return name

    def emit(
        self,
        op: str,
        inputs: tuple[str, ...],
        attrs: Mapping[str, object] | None = None,
        role: Role = Role.GRADIENT,
    ) -> str:
        attrs = dict(attrs or {})
        shapes = ops.get(op).infer([self.shape(t) for t in inputs], attrs)
        out = self._fresh(f"{self.prefix}{op}")
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


def _backward(g: Graph, gb: GradBuilder, seed: tuple[str, str], req: set[str]) -> dict[str, str]:
    """Returns the final gradient tensor of every tensor that needs one.

    A tensor read by several nodes gets one gradient contribution from each read, produced in reverse
    node order (and, within one node, in input order): g0, g1, g2, ... Each contribution is added to
    the running sum as soon as it is produced, an ``Add`` emitted right after the backward nodes that
    made it, so the sum is always ((g0 + g1) + g2) + ... in that order, and at most one partial sum per
    tensor is alive (an unrolled RNN's per-step weight gradients are not all held until the end)."""
    acc: dict[str, str] = {seed[0]: seed[1]}

    def accumulate(t: str, gt: str) -> None:
        if t in acc:
            gb.prefix = f"grad/{t}/"
            gt = gb.emit("Add", (acc[t], gt))
        acc[t] = gt

    for n in reversed(g.nodes):
        needs = [t in req for t in n.inputs]
        gys = [acc.get(o) for o in n.outputs]
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


def _place_updates(
    nodes: list[Node],
    grads: dict[str, str],
    trainable: frozenset[str],
    tensors: dict[str, Tensor],
    optimizer: Optimizer,
) -> list[Node]:
    """Insert each update right after its gradient is final and the last reader of the parameter ran.
    The update reads (param, grad, *state) and rewrites the parameter and its state in place."""
    pos = {o: i for i, n in enumerate(nodes) for o in n.outputs}
    last_read = {p: max(i for i, n in enumerate(nodes) if p in n.inputs) for p in trainable}
    op, attrs = optimizer.update()
    after: dict[int, list[Node]] = {}
    for p in sorted(trainable):
        if p not in grads:
            raise PoetError(f"parameter '{p}' is trainable but does not influence the loss")
        inputs = (p, grads[p], *state_tensors(tensors, p, optimizer))
        upd = Node(f"update/{p}", op, inputs, (), attrs, Phase.UPDATE)
        after.setdefault(max(pos[grads[p]], last_read[p]), []).append(upd)
    out: list[Node] = []
    for i, n in enumerate(nodes):
        out.append(n)
        out.extend(after.get(i, []))
    return out


def training_graph(
    g: Graph,
    loss: Loss = Loss.CROSS_ENTROPY,
    trainable: frozenset[str] | None = None,
    optimizer: Optimizer = PLAIN_SGD,
) -> Graph:
    """Builds the training graph; its output is the scalar ``loss`` and its inputs are (x, labels).
    Optimizer state tensors (role OPTIMIZER_STATE) are read and written only by the update nodes."""
    trainable = g.trainable if trainable is None else trainable
    if not trainable:
        raise PoetError("no trainable parameters selected")
    tensors = dict(g.tensors)
    for p in trainable:
        tensors[p] = replace(tensors[p], role=Role.PARAMETER)
    gb = GradBuilder(tensors)
    labels, dlogits = _add_loss(gb, g.outputs[0], loss)
    req = _requires_grad(g, trainable)
    grads = _backward(g, gb, (g.outputs[0], dlogits), req)
    nodes = _place_updates(list(g.nodes) + gb.nodes, grads, trainable, gb.tensors, optimizer)
    used = {t for n in nodes for t in (*n.inputs, *n.outputs)}
    tensors = {k: v for k, v in gb.tensors.items() if k in used}
    return Graph(tensors, tuple(nodes), (g.inputs[0], labels), (LOSS,), g.params, trainable)
