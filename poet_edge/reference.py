"""The numpy reference interpreter: the oracle every other layer is checked against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from poet_edge import ops
from poet_edge.ir import Graph


def run(
    g: Graph,
    feeds: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray] | None = None,
    dtype: type = np.float32,
    lr: float = 0.0,
) -> dict[str, np.ndarray]:
    """Executes every node; returns all tensor values plus updated parameters under their own names."""
    env: dict[str, np.ndarray] = {}
    for k, v in (params if params is not None else g.params).items():
        env[k] = np.asarray(v, dtype=dtype)
    for k, v in feeds.items():
        v = np.asarray(v)
        env[k] = v if v.dtype.kind in "iu" else v.astype(dtype)
    for n in g.nodes:
        op = ops.get(n.op)
        attrs = {**n.attrs, "lr": lr} if n.op == "SGDUpdate" else n.attrs
        outs = op.forward([env[t] for t in n.inputs], attrs)
        if n.op == "SGDUpdate":
            env[n.inputs[0]] = outs[0]
            continue
        for name, val in zip(n.outputs, outs, strict=False):
            env[name] = np.asarray(val, dtype=dtype)
    return env


@dataclass(frozen=True)
class StepResult:
    loss: float
    grads: dict[str, np.ndarray]  # by parameter name
    params: dict[str, np.ndarray]  # after the update


def gradient_names(g: Graph) -> dict[str, str]:
    """parameter -> the tensor holding its final gradient (the second input of its SGD update)."""
    return {n.inputs[0]: n.inputs[1] for n in g.nodes if n.op == "SGDUpdate"}


def train_step(
    tg: Graph,
    x: np.ndarray,
    labels: np.ndarray,
    params: Mapping[str, np.ndarray],
    lr: float,
    dtype: type = np.float32,
) -> StepResult:
    env = run(tg, {tg.inputs[0]: x, tg.inputs[1]: labels}, params, dtype, lr)
    grads = {p: env[t] for p, t in gradient_names(tg).items()}
    new = {p: env[p] for p in params}
    return StepResult(float(env["loss"]), grads, new)


def train(
    tg: Graph, batches: list[tuple[np.ndarray, np.ndarray]], lr: float, dtype: type = np.float32
) -> tuple[list[float], dict[str, np.ndarray]]:
    params: dict[str, np.ndarray] = {k: np.asarray(v, dtype=dtype) for k, v in tg.params.items()}
    losses = []
    for x, y in batches:
        r = train_step(tg, x, y, params, lr, dtype)
        losses.append(r.loss)
        params = r.params
    return losses, params
