"""The IR: a static-shape dataflow graph of tensors and nodes (used for the model and the training graph)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class Role(str, Enum):
    INPUT = "input"  # the model's data input
    LABEL = "label"  # labels / targets added by poet for the loss
    PARAMETER = "parameter"  # an initializer (trainable or frozen)
    ACTIVATION = "activation"  # any forward intermediate, including the model output
    LOSS = "loss"
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer-state"  # persistent per-parameter state (momentum buffer, Adam m and v)


class Phase(str, Enum):
    FORWARD = "forward"
    LOSS = "loss"
    BACKWARD = "backward"
    UPDATE = "update"


DTYPE_BYTES = {"float32": 4, "int32": 4, "int64": 8, "uint32": 4}  # uint32: packed 1-bit masks


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    role: Role = Role.ACTIVATION

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, object] = field(default_factory=dict)
    phase: Phase = Phase.FORWARD

    def attr(self, key: str, default: object = None) -> object:
        return self.attrs.get(key, default)


@dataclass(frozen=True)
class Graph:
    """Nodes are in topological order. ``params`` holds initial values of every parameter."""

    tensors: Mapping[str, Tensor]
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]  # data inputs (and labels in a training graph)
    outputs: tuple[str, ...]
    params: Mapping[str, np.ndarray]
    trainable: frozenset[str] = frozenset()

    def tensor(self, name: str) -> Tensor:
        return self.tensors[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def producers(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        cons: dict[str, list[Node]] = {t: [] for t in self.tensors}
        for n in self.nodes:
            for i in n.inputs:
                cons[i].append(n)
        return cons


@dataclass
class Names:
    """Fresh names, deterministic: ``base`` when unused, else ``<base>_2``, ``<base>_3``, ... (each name
    handed out is used from then on)."""

    used: set[str]

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name
