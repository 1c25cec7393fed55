"""The numpy reference interpreter: the oracle every other layer is checked against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from poet_edge import ops
from poet_edge.ir import Graph, Phase, Role


def run(
    g: Graph,
    feeds: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray] | None = None,
    dtype: type = np.float32,
    lr: float = 0.0,
    state: Mapping[str, np.ndarray] | None = None,
    t: int = 1,
) -> dict[str, np.ndarray]:
    """Executes every node; returns all tensor values plus updated parameters and optimizer state under
    their own names. ``state``: optimizer state values (zeros where absent); ``t``: the step count Adam's
    bias correction uses (1 at the first step). An update node's op returns the new values of the inputs
    it rewrites in place (the parameter, then its state), which replace them."""
    env: dict[str, np.ndarray] = {}
    for k, v in (params if params is not None else g.params).items():
        env[k] = np.asarray(v, dtype=dtype)
    for k in state_names(g):
        env[k] = np.asarray(state[k], dtype=dtype) if state and k in state else np.zeros(g.shape(k), dtype)
    for k, v in feeds.items():
        v = np.asarray(v)
        env[k] = v if v.dtype.kind in "iu" else v.astype(dtype)
    for n in g.nodes:
        op = ops.get(n.op)
        update = n.phase == Phase.UPDATE
        attrs = {**n.attrs, "lr": lr, "t": t} if update else n.attrs
        outs = op.forward([env[i] for i in n.inputs], attrs)
        if update:
            env.update(zip(in_place(n.inputs, g), outs, strict=True))
            continue
        for name, val in zip(n.outputs, outs, strict=False):
            val = np.asarray(val)
            env[name] = val if val.dtype.kind in "iu" else val.astype(dtype)  # 1-bit masks stay uint32
    return env


def in_place(update_inputs: tuple[str, ...], g: Graph) -> tuple[str, ...]:
    """The inputs an update node rewrites: the parameter and its optimizer state (not the gradient, nor a
    fused update's operands)."""
    state = (t for t in update_inputs[1:] if g.tensor(t).role == Role.OPTIMIZER_STATE)
    return (update_inputs[0], *state)


def state_names(g: Graph) -> list[str]:
    return sorted(k for k, t in g.tensors.items() if t.role == Role.OPTIMIZER_STATE)


@dataclass(frozen=True)
class StepResult:
    loss: float
    grads: dict[str, np.ndarray]  # by parameter name
    params: dict[str, np.ndarray]  # after the update
    state: dict[str, np.ndarray] = field(default_factory=dict)  # optimizer state after the update


def gradient_names(g: Graph) -> dict[str, str]:
    """parameter -> the tensor holding its final gradient (the second input of its update); a fused update's
    parameter has none (its gradient never exists whole)."""
    return {n.inputs[0]: n.inputs[1] for n in g.nodes if n.phase == Phase.UPDATE and not ops.get(n.op).fused}


def train_step(
    tg: Graph,
    x: np.ndarray,
    labels: np.ndarray,
    params: Mapping[str, np.ndarray],
    lr: float,
    dtype: type = np.float32,
    state: Mapping[str, np.ndarray] | None = None,
    t: int = 1,
) -> StepResult:
    env = run(tg, {tg.inputs[0]: x, tg.inputs[1]: labels}, params, dtype, lr, state, t)
    grads = {p: env[gt] for p, gt in gradient_names(tg).items()}
    new = {p: env[p] for p in params}
    return StepResult(float(env["loss"]), grads, new, {k: env[k] for k in state_names(tg)})


def train(
    tg: Graph,
    batches: list[tuple[np.ndarray, np.ndarray]],
    lr: float | list[float],
    dtype: type = np.float32,
) -> tuple[list[float], dict[str, np.ndarray]]:
    """Trains from the graph's initial parameters and zero optimizer state, step t = 1, 2, ...; ``lr``
    is one learning rate or one per step (the caller's schedule)."""
    params: dict[str, np.ndarray] = {k: np.asarray(v, dtype=dtype) for k, v in tg.params.items()}
    rates = lr if isinstance(lr, list) else [lr] * len(batches)
    state: dict[str, np.ndarray] = {}
    losses = []
    for t, ((x, y), rate) in enumerate(zip(batches, rates, strict=True), start=1):
        r = train_step(tg, x, y, params, rate, dtype, state, t)
        losses.append(r.loss)
        params, state = r.params, r.state
    return losses, params
