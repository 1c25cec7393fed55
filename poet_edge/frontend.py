"""ONNX file -> IR graph: checker, batch resolution, constant folding, shape inference by the registry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
import onnx
from onnx import numpy_helper

from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Role, Tensor
from poet_edge.ops import reduce_mean, resize
from poet_edge.ops.base import attribute_problems, elements
from poet_edge.ops.softmax import norm_axis
from poet_edge.trainable import zero_states

_DTYPES = {onnx.TensorProto.FLOAT: "float32"}

# The ONNX opsets (default domain) whose op versions poet implements. 7 is the first with numpy-style
# broadcasting (no ``broadcast`` / ``axis`` attributes on Add, Mul, ...); the ops' declared attributes
# (OpDef.attributes) cover every version from MIN_OPSET to MAX_OPSET. The versions of supported ops after 22
# (Flatten, Identity, Reshape, Squeeze, Transpose, Unsqueeze at 23-25) only add element types, which the
# frontend refuses anyway (float32 data only); tests/test_attributes.py pins that list.
MIN_OPSET = 7
MAX_OPSET = 25
SHOWN_PROBLEMS = 20  # the collected error lists this many problems, then how many more there are

# Shape computations that exporters emit around Reshape (``x.view(x.size(0), -1)``: Shape, Gather, Unsqueeze,
# Concat, ...) are evaluated with numpy when every input is a known constant: an int initializer, a Constant,
# an earlier folded result, or the Shape of any tensor (all shapes are static). Float initializers are never
# folded (they are parameters). The fold-only ops exist in a poet graph only this way; Gather, Squeeze,
# Unsqueeze, Expand, Equal, Where and Transpose also run on run-time data (registered ops).
FOLD_ONLY = ("Shape", "ConstantOfShape", "Cast")
FOLDABLE = FOLD_ONLY + (
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Concat",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Identity",
    "Slice",
    "Reshape",
    "Expand",
    "Equal",
    "Where",
    "Transpose",  # torch.onnx's torchscript exporter reverses F.pad's pads with a Slice and a Transpose
)


class UnsupportedOp(PoetError):
    """A node whose op poet does not implement; the collected error lists the supported ops once."""


def load_onnx(path: str | Path) -> onnx.ModelProto:
    path = Path(path)
    if not path.is_file():
        raise PoetError(f"{path}: no such file")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:  # onnx raises DecodeError, ValidationError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PoetError(f"{path}: not a valid ONNX model ({first})") from None
    if not model.graph.node:
        raise PoetError(f"{path}: the ONNX graph has no nodes")
    return model


def node_attrs(node: onnx.NodeProto) -> dict[str, object]:
    out: dict[str, object] = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list):
            v = tuple(x.decode() if isinstance(x, bytes) else x for x in v)
        out[a.name] = v
    return out


def fixed_batch(vi: onnx.ValueInfoProto) -> int | None:
    """The batch dimension (axis 0) of a data input when the export fixed it, None when it is dynamic."""
    dims = vi.type.tensor_type.shape.dim
    if dims and dims[0].HasField("dim_value") and dims[0].dim_value > 0:
        return int(dims[0].dim_value)
    return None


def resolve_batch(vi: onnx.ValueInfoProto, batch: int | None) -> int:
    """The batch a compile uses: --batch on a dynamic batch dimension (default 1), the export's own on a
    fixed one. A --batch that differs from a fixed batch is refused: silently using another batch than
    asked would mislead, and a static export's reshapes often bake its batch in."""
    fixed = fixed_batch(vi)
    if batch is not None and batch < 1:
        raise PoetError(f"--batch must be at least 1, got {batch}")
    if fixed is None:
        return 1 if batch is None else batch
    if batch is not None and batch != fixed:
        raise PoetError(
            f"input '{vi.name}': the model's batch dimension is fixed at {fixed}, --batch {batch} cannot "
            f"apply; re-export with a dynamic batch dimension (torch.onnx.export(..., dynamic_axes="
            f"{{'{vi.name}': {{0: 'batch'}}}}) or dynamic_shapes) or drop --batch"
        )
    return fixed


def _input_shape(vi: onnx.ValueInfoProto, batch: int) -> tuple[int, ...]:
    tt = vi.type.tensor_type
    if tt.elem_type not in _DTYPES:
        raise PoetError(
            f"input '{vi.name}': element type {onnx.TensorProto.DataType.Name(tt.elem_type)} "
            f"is not supported (float32 only)"
        )
    dims = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif axis == 0:
            dims.append(batch)
        else:
            name = d.dim_param or "?"
            raise PoetError(
                f"input '{vi.name}': dimension {axis} ('{name}') is dynamic; only the batch "
                f"dimension (axis 0) may be, and it is set by --batch"
            )
    return tuple(dims)


class _Builder:
    """Walks ONNX nodes, folding constants and inferring shapes with the op registry."""

    def __init__(self, model: onnx.ModelProto, batch: int, opset: int):
        g = model.graph
        self.opset = opset
        self.problems: list[PoetError] = []  # input-level problems, listed before the nodes'
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.params: dict[str, np.ndarray] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.frozen: set[str] = set()  # float constants used as data: parameters that are never trained
        self.unknown: set[str] = set()  # outputs of refused nodes: later readers get only op/attribute checks
        for init in g.initializer:
            arr = numpy_helper.to_array(init)
            if arr.dtype == np.float32:
                self.params[init.name] = arr.copy()
                self.tensors[init.name] = Tensor(init.name, tuple(arr.shape), "float32", Role.PARAMETER)
            else:
                self.consts[init.name] = arr
        self.inputs = [vi for vi in g.input if vi.name not in self.params and vi.name not in self.consts]
        if len(self.inputs) != 1:
            names = [vi.name for vi in self.inputs]
            self.problems.append(
                PoetError(f"the model must have exactly one data input, it has {len(names)}: {names}")
            )
            self.unknown.update(names)
            return
        vi = self.inputs[0]
        try:
            if batch != 1:  # 1 is every caller's default: on a fixed batch it means "the export's"
                resolve_batch(vi, batch)  # refuses a batch the export fixed otherwise
            self.tensors[vi.name] = Tensor(vi.name, _input_shape(vi, batch), "float32", Role.INPUT)
        except PoetError as e:
            self.problems.append(e)
            self.unknown.add(vi.name)

    def attribute_errors(self, pn: onnx.NodeProto, index: int) -> list[PoetError]:
        """One error per attribute (or value) of a node of a supported op that the op does not implement
        (its declared ``attributes``), told before any work on the node."""
        op = ops.REGISTRY.get(pn.op_type)
        if pn.domain not in ("", "ai.onnx") or op is None or op.internal:
            return []
        name = _node_name(pn, index)
        return [
            PoetError(f"node '{name}' ({pn.op_type}): unsupported {p}")
            for p in attribute_problems(op, node_attrs(pn))
        ]

    def add(self, pn: onnx.NodeProto, index: int) -> None:
        name = _node_name(pn, index)
        if pn.domain not in ("", "ai.onnx"):
            raise UnsupportedOp(f"node '{name}': op {pn.domain}::{pn.op_type} is not in the ONNX domain")
        if pn.op_type == "Constant":
            self.consts[pn.output[0]] = self._constant(pn, name)
            return
        pin, pout = _trim(pn.input), _trim(pn.output)  # trailing omitted optional inputs / outputs
        if pn.op_type in FOLDABLE and self._known(pn.op_type, pin):
            self._fold(pn, name, pin)
            return
        if pn.op_type in FOLD_ONLY:
            self._refuse_fold_only(pn, name, pin)
        op = ops.REGISTRY.get(pn.op_type)
        if op is None or op.internal:
            why = ""
            if pin and all(t == "" or t in self.consts for t in pin):
                why = (
                    f" (its inputs are compile-time constants, but {pn.op_type} is not evaluated at "
                    f"compile time; foldable: {', '.join(FOLDABLE)})"
                )
            raise UnsupportedOp(f"node '{name}': unsupported op {pn.op_type}{why}")
        attrs, inputs = node_attrs(pn), []
        for i, t in enumerate(pin):
            if i in op.const_inputs:
                if t == "":
                    continue  # an omitted optional input
                value = self.consts.get(t, self.params.get(t))  # float initializers may be constants here
                if value is None:
                    raise PoetError(f"node '{name}' ({pn.op_type}): input {i} '{t}' must be a constant")
                attrs[op.const_inputs[i]] = tuple(np.asarray(value).reshape(-1).tolist())
                if pn.op_type == "Gather":  # a scalar index drops the axis: keep the indices' shape
                    attrs["indices_shape"] = tuple(int(d) for d in np.shape(value))
            elif t in self.consts:
                inputs.append(self._frozen_param(t, name, pn.op_type))
            elif t not in self.tensors:
                raise PoetError(
                    f"node '{name}' ({pn.op_type}): input '{t}' is not produced by any earlier node"
                )
            else:
                inputs.append(t)
        node = Node(name, pn.op_type, tuple(inputs), tuple(pout), attrs)
        if op.check:
            op.check(node)
        try:
            rewritten = self._rewritten(node)
            for n in rewritten:
                shapes = ops.get(n.op).infer([self.tensors[t].shape for t in n.inputs], n.attrs)
                for out, shape in zip(n.outputs, shapes, strict=False):
                    self.tensors[out] = Tensor(out, tuple(int(d) for d in shape), "float32", Role.ACTIVATION)
        except (ValueError, KeyError) as e:
            raise PoetError(f"node '{name}' ({pn.op_type}): {e}") from None
        self.nodes.extend(rewritten)

    def _rewritten(self, node: Node) -> list[Node]:
        """The nodes that stand for ``node`` (itself, unless a rewrite below applies)."""
        if node.op == "Softmax" and self.opset < 13:
            return self._softmax_before_13(node)
        if node.op == "ReduceMean" and not int(cast(int, node.attr("keepdims", 1))):
            return self._spatial_mean(node)
        if node.op == "Resize":  # sizes name the whole input's dims: its factors as scales hold for parts
            return [replace(node, attrs=resize.as_scales(self.tensors[node.inputs[0]].shape, node.attrs))]
        return [node]

    def _spatial_mean(self, node: Node) -> list[Node]:
        """ReduceMean over all spatial axes of an [N, C, spatial...] map without keepdims (torch's
        ``x.mean((2, 3))``) becomes the mean with keepdims, [N, C, 1, ...], and a Reshape to [N, C]: the
        mean then runs per channel tile under operator splitting, as GlobalAveragePool does, and only the
        small [N, C, 1, 1] is joined, not the map. Other ReduceMeans stay as they are."""
        shape = self.tensors[node.inputs[0]].shape
        if len(shape) < 4 or reduce_mean.axes_of(shape, node.attrs) != tuple(range(2, len(shape))):
            return [node]
        kept = self._fresh(f"{node.outputs[0]}/kept")
        return [
            replace(node, outputs=(kept,), attrs={**node.attrs, "keepdims": 1}),
            Node(f"{node.name}/flatten", "Reshape", (kept,), node.outputs, {"shape": shape[:2]}),
        ]

    def _softmax_before_13(self, node: Node) -> list[Node]:
        """Softmax before opset 13 normalizes the input flattened to 2-D at ``axis`` (default 1): over all of
        ``shape[axis:]`` at once. On the last axis that is opset 13's Softmax; elsewhere it becomes
        Reshape to [prod(shape[:axis]), prod(shape[axis:])], Softmax on axis 1, Reshape back."""
        shape = self.tensors[node.inputs[0]].shape
        axis = norm_axis(int(cast(int, node.attr("axis", 1))), len(shape))
        if axis == len(shape) - 1:
            return [replace(node, attrs={**node.attrs, "axis": axis})]
        flat, y = self._fresh(f"{node.outputs[0]}/flat_in"), self._fresh(f"{node.outputs[0]}/flat_out")
        rows = (elements(shape[:axis]), elements(shape[axis:]))
        return [
            Node(f"{node.name}/flatten", "Reshape", (node.inputs[0],), (flat,), {"shape": rows}),
            replace(node, inputs=(flat,), outputs=(y,), attrs={"axis": 1}),
            Node(f"{node.name}/unflatten", "Reshape", (y,), node.outputs, {"shape": shape}),
        ]

    def _fresh(self, name: str) -> str:
        while name in self.tensors or name in self.consts or name in self.params:
            name += "_"
        return name

    def refused(self, pn: onnx.NodeProto) -> None:
        """Marks the outputs of a node that could not be added, so that readers are checked, not shaped."""
        self.unknown.update(t for t in pn.output if t)

    def reads_refused(self, pn: onnx.NodeProto) -> bool:
        return any(t in self.unknown for t in pn.input)

    def check_only(self, pn: onnx.NodeProto, index: int) -> None:
        """A node that reads a refused node's output: its shapes are unknown, but whether its op and its
        attributes are supported can still be told (so that one error lists every problem)."""
        name = _node_name(pn, index)
        self.refused(pn)
        if pn.domain not in ("", "ai.onnx"):
            raise UnsupportedOp(f"node '{name}': op {pn.domain}::{pn.op_type} is not in the ONNX domain")
        op = ops.REGISTRY.get(pn.op_type)
        if op is None and pn.op_type in FOLDABLE:
            return  # a shape computation on an unknown value: nothing to tell
        if op is None or op.internal:
            raise UnsupportedOp(f"node '{name}': unsupported op {pn.op_type}")
        pin = _trim(pn.input)
        if any(i < len(pin) and pin[i] in self.unknown for i in op.const_inputs):
            return  # its constant inputs are unknown: the attribute checks would guess
        attrs = node_attrs(pn)
        for i, key in op.const_inputs.items():
            value = self.consts.get(pin[i], self.params.get(pin[i])) if i < len(pin) and pin[i] else None
            if value is not None:
                attrs[key] = tuple(np.asarray(value).reshape(-1).tolist())
        inputs = tuple(t for i, t in enumerate(pin) if i not in op.const_inputs)
        if op.check:
            op.check(Node(name, pn.op_type, inputs, tuple(_trim(pn.output)), attrs))

    def _known(self, op: str, pin: list[str]) -> bool:
        if op == "Shape":
            return bool(pin) and (pin[0] in self.tensors or pin[0] in self.consts)
        return bool(pin) and all(t == "" or t in self.consts for t in pin)

    def _fold(self, pn: onnx.NodeProto, name: str, pin: list[str]) -> None:
        attrs = node_attrs(pn)
        xs = [self.consts.get(t) if t else None for t in pin]  # Shape's input may be any tensor
        try:
            if pn.op_type == "Shape":
                shape = self.tensors[pin[0]].shape if pin[0] in self.tensors else self.consts[pin[0]].shape
                start, end = cast(int, attrs.get("start", 0)), cast(int | None, attrs.get("end"))
                value = np.array(shape[start:end], np.int64)
            else:
                value = _fold_value(pn.op_type, xs, attrs)
        except (ValueError, IndexError, KeyError, TypeError) as e:
            raise PoetError(f"node '{name}' ({pn.op_type}): cannot evaluate at compile time: {e}") from None
        self.consts[pn.output[0]] = np.asarray(value)

    def _refuse_fold_only(self, pn: onnx.NodeProto, name: str, pin: list[str]) -> None:
        runtime = [t for t in pin if t and t not in self.consts]
        where = runtime[0] if runtime else "?"
        raise PoetError(
            f"node '{name}' ({pn.op_type}): supported only inside a shape computation evaluated "
            f"at compile time, but input '{where}' is computed at run time"
        )

    def _frozen_param(self, t: str, name: str, op: str) -> str:
        """A float constant (Constant node or folded value) read as data becomes a frozen parameter."""
        value = self.consts[t]  # a bool becomes a float32 0/1 tensor (Where's condition)
        if value.dtype.kind not in "fb":
            raise PoetError(
                f"node '{name}' ({op}): input '{t}' is a compile-time {value.dtype} constant "
                f"(e.g. a shape value) used as run-time data; only float32 data is supported"
            )
        if t not in self.params:
            self.params[t] = value.astype(np.float32)
            self.tensors[t] = Tensor(t, tuple(int(d) for d in value.shape), "float32", Role.PARAMETER)
            self.frozen.add(t)
        return t

    def _constant(self, pn: onnx.NodeProto, name: str) -> np.ndarray:
        attrs = node_attrs(pn)
        if "value" in attrs:
            return np.asarray(attrs["value"])
        for key in ("value_float", "value_int", "value_floats", "value_ints"):
            if key in attrs:
                return np.asarray(attrs[key])
        raise PoetError(f"node '{name}' (Constant): unsupported attributes {sorted(attrs)}")


def onnx_opset(model: onnx.ModelProto) -> int | None:
    """The model's opset of the default ONNX domain (None if it imports none)."""
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _opset_problem(opset: int | None) -> PoetError | None:
    if opset is None or MIN_OPSET <= opset <= MAX_OPSET:
        return None
    return PoetError(
        f"the model uses ONNX opset {opset}; poet supports opsets {MIN_OPSET} to {MAX_OPSET} (re-export it "
        f"with one of them, e.g. torch.onnx.export(..., opset_version=17), or convert it with "
        f"onnx.version_converter.convert_version)"
    )


def to_ir(model: onnx.ModelProto, batch: int = 1) -> Graph:
    """The IR graph. ``batch`` sets a dynamic batch dimension. On a fixed one, the default 1 keeps the
    export's value and any other batch that differs is refused (the commands also refuse an explicit
    --batch 1 there, see resolve_batch); graph_batch tells the batch used. Every problem found (opset, data
    input, unsupported ops, attributes and values) is collected into one PoetError."""
    if batch < 1:
        raise PoetError(f"--batch must be at least 1, got {batch}")
    opset = onnx_opset(model)
    b = _Builder(model, batch, MAX_OPSET if opset is None else opset)
    bad_opset = _opset_problem(opset)
    problems: list[PoetError] = ([bad_opset] if bad_opset else []) + b.problems
    for i, pn in enumerate(model.graph.node):
        found = b.attribute_errors(pn, i)
        if found:
            problems += found
            b.refused(pn)
            continue
        try:
            if b.reads_refused(pn):
                b.check_only(pn, i)
            else:
                b.add(pn, i)
        except PoetError as e:
            problems.append(e)
            b.refused(pn)
    if problems:
        raise _collected(problems)
    outputs = tuple(o.name for o in model.graph.output)
    missing = [o for o in outputs if o not in b.tensors or b.tensors[o].role != Role.ACTIVATION]
    if missing:
        raise PoetError(f"graph outputs {missing} are not computed by any node")
    used = {t for n in b.nodes for t in n.inputs}
    params = {k: v for k, v in b.params.items() if k in used}
    tensors = {k: v for k, v in b.tensors.items() if v.role != Role.PARAMETER or k in used}
    trainable = trainable_candidates(b.nodes, params) - b.frozen - zero_states(b.nodes, params)
    return Graph(tensors, tuple(b.nodes), (b.inputs[0].name,), outputs, params, trainable)


def _collected(problems: list[PoetError]) -> PoetError:
    """One error for every refused node: each on its own line, then the supported ops once."""
    supported = f"supported: {', '.join(ops.supported_onnx_ops())}"
    if len(problems) == 1:
        e = problems[0]
        return PoetError(f"{e}; {supported}") if isinstance(e, UnsupportedOp) else e
    lines = [f"the model has {len(problems)} problems (every one poet found is listed):"]
    lines += [f"  - {e}" for e in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"  ... and {len(problems) - SHOWN_PROBLEMS} more")
    if any(isinstance(e, UnsupportedOp) for e in problems):
        lines.append(f"  {supported}")
    lines.append("  what to do: docs/models.md, 'When poet refuses a model'")
    return PoetError("\n".join(lines))


def _node_name(pn: onnx.NodeProto, index: int) -> str:
    return pn.name or f"{pn.op_type}_{index}"


def _trim(names) -> list[str]:
    out = list(names)
    while out and out[-1] == "":
        out.pop()
    return out


def _axes_input(xs: list, attrs: dict[str, object]) -> tuple[int, ...]:
    """axes of Squeeze / Unsqueeze: an attribute before opset 13, the second input from 13."""
    if len(xs) > 1 and xs[1] is not None:
        return tuple(int(a) for a in np.asarray(xs[1]).reshape(-1))
    return tuple(int(a) for a in cast(Iterable[int], attrs.get("axes", ())))


def _fold_value(op: str, xs: list, attrs: dict[str, object]) -> np.ndarray:
    """numpy evaluation of a foldable node whose inputs are all constants (``None`` for an omitted input)."""
    x = np.asarray(xs[0])
    if op == "Gather":
        axis = int(cast(int, attrs.get("axis", 0)))
        return np.take(x, np.asarray(xs[1]).astype(np.int64), axis=axis)
    if op == "Unsqueeze":
        axes = _axes_input(xs, attrs)
        rank = x.ndim + len(axes)
        return np.expand_dims(x, tuple(a % rank for a in axes)) if axes else x.copy()
    if op == "Squeeze":
        axes = _axes_input(xs, attrs)
        return np.squeeze(x, axis=tuple(a % x.ndim for a in axes) if axes else None)
    if op == "Concat":
        axis = int(cast(int, attrs["axis"]))
        return np.concatenate([np.asarray(v) for v in xs if v is not None], axis=axis)
    if op == "ConstantOfShape":
        fill = np.asarray(attrs.get("value", np.zeros(1, np.float32)))
        return np.full(tuple(int(d) for d in x.reshape(-1)), fill.reshape(-1)[0], dtype=fill.dtype)
    if op == "Cast":
        return x.astype(onnx.helper.tensor_dtype_to_np_dtype(int(cast(int, attrs["to"]))))
    if op in ("Add", "Sub", "Mul", "Div"):
        y = np.asarray(xs[1])
        if op == "Div" and x.dtype.kind in "iu":
            return (np.trunc(x / y)).astype(x.dtype)  # ONNX integer division truncates
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
        return fn(x, y).astype(x.dtype)
    if op == "Identity":
        return x.copy()
    if op == "Equal":
        return np.equal(x, np.asarray(xs[1]))
    if op == "Where":
        return np.where(x, np.asarray(xs[1]), np.asarray(xs[2]))
    # Slice, Reshape, Transpose: the registered op's numpy forward, constant inputs as attributes
    opdef = ops.get(op)
    attrs = dict(attrs)
    for i, key in opdef.const_inputs.items():
        if i < len(xs) and xs[i] is not None:
            attrs[key] = tuple(int(v) for v in np.asarray(xs[i]).reshape(-1))
    return opdef.forward([x], attrs)[0]


def trainable_candidates(nodes: list[Node], params: dict[str, np.ndarray]) -> frozenset[str]:
    """Parameters that may be trained: those read by at least one op input that is not frozen.
    Scalar initializers (an attention scale, a clip bound) are constants of the exported graph, not
    weights. to_ir also leaves out zero states (see poet_edge/trainable.py for the whole rule)."""
    out: set[str] = set()
    for n in nodes:
        frozen = ops.get(n.op).frozen_inputs
        out.update(
            t for i, t in enumerate(n.inputs) if t in params and i not in frozen and params[t].size > 1
        )
    return frozenset(out)


def graph_batch(g: Graph) -> int:
    """The batch a graph was built with: axis 0 of its data input (1 for a scalar input)."""
    shape = g.shape(g.inputs[0])
    return shape[0] if shape else 1


def batch_of(path: str | Path, batch: int | None = None) -> int:
    """The batch a compile of the model at ``path`` with ``--batch batch`` uses (see resolve_batch)."""
    model = load_onnx(path)
    names = {i.name for i in model.graph.initializer}
    data = [vi for vi in model.graph.input if vi.name not in names]
    return resolve_batch(data[0], batch) if len(data) == 1 else 1 if batch is None else batch


def load(path: str | Path, batch: int = 1) -> Graph:
    return to_ir(load_onnx(path), batch)
