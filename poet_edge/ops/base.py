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


@dataclass(frozen=True)
class WorkspaceArg:
    """Pointer to the node's kernel workspace: ``Work.workspace_bytes`` of scratch in the arena."""


CArg = TensorArg | IntArg | FloatArg | DoubleArg | IntArrayArg | RuntimeArg | NullArg | WorkspaceArg


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
# (input shapes, which inputs are split (False: read whole by every part: a parameter, a constant, or a
# joined value), attributes, the split axis: 0 samples, 1 positions) -> whether the node is per-sample:
# index i of the axis of every output depends on index i of the split inputs alone (batch splitting,
# poet_edge/batch_split.py, which also checks the shapes: every split input has the axis's full extent)
PerSampleFn = Callable[[Sequence[Shape], Sequence[bool], Attrs, int], bool]


# ---- declared ONNX attributes --------------------------------------------------------------
@dataclass(frozen=True)
class Attr:
    """How an op treats one ONNX attribute. ``ok(value)`` tells whether a value is implemented (None: every
    value the ONNX spec allows); ``supported`` names those that are, for the error. ``ignored`` says why an
    attribute that is accepted has no effect on training (e.g. BatchNormalization's ``momentum``, which only
    updates running statistics that poet keeps frozen)."""

    ok: Callable[[object], bool] | None = None
    supported: str = "any value"
    ignored: str = ""

    def accepts(self, value: object) -> bool:
        return self.ok is None or self.ok(value)


ANY = Attr()


def only(*values: object) -> Attr:
    """An attribute implemented for these values only (ints, floats, strings, or tuples of them)."""
    shown = " or ".join(_show(v) for v in values)
    return Attr(lambda v: _plain(v) in values, shown)


def no_effect(why: str) -> Attr:
    """An attribute accepted because it does not change what poet computes; ``why`` says so."""
    return Attr(None, "any value (no effect: " + why + ")", why)


def refused(why: str) -> Attr:
    """An ONNX attribute poet does not implement at all (any value, even the default, is refused)."""
    return Attr(lambda v: False, why)


def _plain(v: object) -> object:
    """An attribute value as ints / floats / strings / tuples, for comparison with declared values."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_plain(x) for x in np.asarray(v).reshape(-1).tolist())
    return v


def _show(v: object) -> str:
    p = _plain(v)
    if isinstance(p, tuple):
        return "[" + ", ".join(_show(x) for x in p) + "]"
    return repr(p) if isinstance(p, str) else str(p)


def attribute_problems(op: OpDef, attrs: Attrs) -> list[str]:
    """One phrase per ONNX attribute of a node of ``op`` that poet does not implement (its name, its value
    and what is supported); empty when every attribute is handled. Called on the node's own attributes,
    before constant inputs are merged in."""
    out = []
    for key in sorted(attrs):
        spec, value = op.attributes.get(key), attrs[key]
        if spec is None:
            handled = ", ".join(sorted(op.attributes)) or "none"
            out.append(f"attribute {key}={_show(value)} (not implemented; {op.name} handles: {handled})")
        elif not spec.accepts(value):
            out.append(f"attribute {key}={_show(value)} (implemented: {spec.supported})")
    return out


@dataclass(frozen=True)
class OpDef:
    """One op. ``backward(gb, node, grad_outputs, needs)`` emits gradient nodes through ``gb`` and
    returns one gradient tensor name (or None) per input; ``needs[i]`` says whether input i wants one.

    ``const_inputs`` maps an input index to the attribute name it becomes when the frontend folds a
    constant input (e.g. Reshape's ``shape``). A parameter fed only into ``frozen_inputs`` is never
    trainable. ``internal`` ops appear only in training graphs.

    ``fused`` marks an update node that computes its parameter's gradient itself, tile by tile (its inputs
    are the parameter, the gradient's operands, then the optimizer state; no gradient tensor exists).

    ``attributes`` declares every ONNX attribute the op handles (ONNX opsets ``frontend.MIN_OPSET`` to
    ``MAX_OPSET``) and the values it implements; the frontend refuses any other attribute or value
    (:func:`attribute_problems`). Internal ops leave it empty: their attributes come from poet itself."""

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
    attributes: Mapping[str, Attr] = field(default_factory=dict)
    # an update that computes its parameter's gradient itself (inputs: param, operands, *state; ops/fused.py)
    fused: bool = False
    # run on channel tiles of same-shape inputs, gives the channel tiles of its output (elementwise ops;
    # operator splitting, poet_edge/splitting.py)
    channelwise: bool = False
    # each output channel from the same channel of each float input alone, whatever their spatial shapes
    # (pools and their gradients): runs on channel tiles like ``channelwise``; attribute ``x_shape``, when
    # present, is an input shape and follows the tile's channel count
    per_channel: bool = False
    # inputs that hold one value per channel ([C]) of the op's [N, C, ...] operands (BatchNormalization's
    # scale, bias, mean and var): on a channel tile the op reads their slices (operator splitting)
    channel_inputs: frozenset[int] = frozenset()
    # whether a node is per-sample along an axis (PerSampleFn(shapes, split, attrs, axis); None: never, the
    # conservative default): each index of that axis of its split inputs' and outputs' (0: the batch's
    # samples, 1: a sequence's positions) depends on the same index alone. Batch splitting runs such a node
    # once per part along that axis (poet_edge/batch_split.py)
    per_sample: PerSampleFn | None = None


# ---- per-sample facts (OpDef.per_sample) -----------------------------------------------------
# ``axis``: 0, parts of the batch; 1, parts of a sequence's positions ([N, T, ...] tensors of transformer
# blocks: tokens). Only the facts that hold for positions say so; the others are False for axis 1.
def per_sample_always(ins: Sequence[Shape], batched: Sequence[bool], attrs: Attrs, axis: int = 0) -> bool:
    """Elementwise ops, pools (per channel), and reshapes that keep the dims up to the split axis (each
    index a contiguous block of the same size in and out, which the rewrite's leading-dims check ensures)."""
    return True


def per_sample_first(ins: Sequence[Shape], batched: Sequence[bool], attrs: Attrs, axis: int = 0) -> bool:
    """Only the first input carries the batch; the others (weights, biases, statistics) are shared. Not
    along positions (a convolution mixes its channels)."""
    return axis == 0 and bool(batched) and batched[0] and not any(batched[1:])


def per_sample_broadcast(ins: Sequence[Shape], batched: Sequence[bool], attrs: Attrs, axis: int = 0) -> bool:
    """A broadcasting op: every split input has the output's rank and every shared one (right-aligned, as
    ONNX broadcasts) does not reach the split axis or is 1 there, so it broadcasts over the parts."""
    rank = max(len(s) for s in ins)

    def shared(s: Shape) -> bool:
        at = axis - (rank - len(s))
        return at < 0 or s[at] == 1

    return all(len(s) == rank if b else shared(s) for s, b in zip(ins, batched, strict=True))


def _axis(value: object, rank: int) -> int:
    a = int(value)  # type: ignore[call-overload]
    return a + rank if a < 0 else a


def per_sample_axis(key: str, default: int, every_input: bool = False, onward: bool = False) -> PerSampleFn:
    """An op along attribute ``key`` (``default`` when absent) that is per-sample when that axis is not
    the split axis (``onward``: it works on the axes from that one on, LayerNormalization: when they all
    come after it): only the first input split, or (``every_input``, Concat) all of them."""

    def fn(ins: Sequence[Shape], batched: Sequence[bool], attrs: Attrs, axis: int = 0) -> bool:
        fits = all(batched) if every_input else bool(batched) and batched[0] and not any(batched[1:])
        at = _axis(attrs.get(key, default), len(ins[0]))
        return fits and (at > axis if onward else at != axis)

    return fn


def per_sample_axes(key: str) -> PerSampleFn:
    """An op over the axes of attribute ``key`` of its first (only split) input: per-sample when they are
    given and none is the split axis (ReduceMean without axes reduces every axis)."""

    def fn(ins: Sequence[Shape], batched: Sequence[bool], attrs: Attrs, axis: int = 0) -> bool:
        axes: tuple[object, ...] = tuple(attrs.get(key, ()) or ())  # type: ignore[arg-type]
        rank = len(ins[0])
        first = bool(batched) and batched[0] and not any(batched[1:])
        return first and bool(axes) and all(_axis(a, rank) != axis for a in axes)

    return fn


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
