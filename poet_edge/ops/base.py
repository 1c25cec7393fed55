"""What defines an op: shapes, numpy forward, backward rule, work, and the C kernel call.

Every op file builds one :class:`OpDef`; ``poet_edge/ops/__init__.py`` registers them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from poet_edge.errors import PoetError
from poet_edge.work import OpClass, Work

if TYPE_CHECKING:
    from poet_edge.autodiff import GradBuilder
    from poet_edge.ir import Node

Shape = tuple[int, ...]
Attrs = Mapping[str, object]


# ---- structured C kernel calls -------------------------------------------------------------
@dataclass(frozen=True)
class TensorArg:
    """Pointer to a tensor's current RAM copy; ``const`` for read-only arguments."""

    name: str
    const: bool = True


@dataclass(frozen=True)
class IntArg:
    value: int


@dataclass(frozen=True)
class FloatArg:
    value: float


@dataclass(frozen=True)
class DoubleArg:
    """A double constant: a hyperparameter that a kernel uses in double precision (Adam's betas in its
    bias correction, as torch computes it in Python floats)."""

    value: float


@dataclass(frozen=True)
class IntArrayArg:
    """A small constant int32 array passed by pointer (emitted as a C99 compound literal)."""

    values: tuple[int, ...]


@dataclass(frozen=True)
class RuntimeArg:
    """A parameter of poet_train_step itself, e.g. the learning rate ``lr``."""

    name: str


@dataclass(frozen=True)
class NullArg:
    """A NULL pointer (an optional tensor that is absent)."""


CArg = TensorArg | IntArg | FloatArg | DoubleArg | IntArrayArg | RuntimeArg | NullArg


@dataclass(frozen=True)
class KernelCall:
    func: str  # C function name, declared in runtime_c/include/poet/kernels.h
    args: tuple[CArg, ...]
    source: str  # runtime_c/src/kernels/<source>.c that defines it


# ---- the op definition ---------------------------------------------------------------------
InferFn = Callable[[Sequence[Shape], Attrs], list[Shape]]
ForwardFn = Callable[[Sequence[np.ndarray], Attrs], list[np.ndarray]]
BackwardFn = Callable[["GradBuilder", "Node", Sequence[str | None], Sequence[bool]], list[str | None]]
WorkFn = Callable[[Sequence[Shape], Sequence[Shape], Attrs], Work]
KernelFn = Callable[["Node", Callable[[str], Shape]], KernelCall]
CheckFn = Callable[["Node"], None]


@dataclass(frozen=True)
class OpDef:
    """One op. ``backward(gb, node, grad_outputs, needs)`` emits gradient nodes through ``gb`` and
    returns one gradient tensor name (or None) per input; ``needs[i]`` says whether input i wants one.

    ``const_inputs`` maps an input index to the attribute name it becomes when the frontend folds a
    constant input (e.g. Reshape's ``shape``). A parameter fed only into ``frozen_inputs`` is never
    trainable. ``internal`` ops appear only in training graphs."""

    name: str
    infer: InferFn
    forward: ForwardFn
    work: WorkFn
    backward: BackwardFn | None = None
    kernel: KernelFn | None = None
    check: CheckFn | None = None
    const_inputs: Mapping[int, str] = field(default_factory=dict)
    frozen_inputs: frozenset[int] = (
        frozenset()
    )  # parameter inputs that are never trained (e.g. BN statistics)
    internal: bool = False


def unsupported(node: Node, what: str) -> PoetError:
    return PoetError(f"node '{node.name}' ({node.op}): unsupported {what}")


def elements(shape: Shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def f32_bytes(*shapes: Shape) -> int:
    return 4 * sum(elements(s) for s in shapes)


def elementwise_work(ins: Sequence[Shape], outs: Sequence[Shape], attrs: Attrs) -> Work:
    """One pass over the output, reading every input once: the work of every elementwise op."""
    return Work(
        OpClass.ELEMENTWISE,
        elements=elements(outs[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
    )
