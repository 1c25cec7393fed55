"""ONNX file -> IR graph: checker, batch resolution, constant folding, shape inference by the registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Role, Tensor

_DTYPES = {onnx.TensorProto.FLOAT: "float32"}


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


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
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


def _input_shape(vi: onnx.ValueInfoProto, batch: int) -> tuple[int, ...]:
    tt = vi.type.tensor_type
    if tt.elem_type not in _DTYPES:
        raise PoetError(f"input '{vi.name}': element type {onnx.TensorProto.DataType.Name(tt.elem_type)} "
                        f"is not supported (float32 only)")
    dims = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif axis == 0:
            dims.append(batch)
        else:
            name = d.dim_param or "?"
            raise PoetError(f"input '{vi.name}': dimension {axis} ('{name}') is dynamic; only the batch "
                            f"dimension (axis 0) may be, and it is set by --batch")
    return tuple(dims)


class _Builder:
    """Walks ONNX nodes, folding constants and inferring shapes with the op registry."""

    def __init__(self, model: onnx.ModelProto, batch: int):
        g = model.graph
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.params: dict[str, np.ndarray] = {}
        self.consts: dict[str, np.ndarray] = {}
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
            raise PoetError(f"the model must have exactly one data input, it has {len(names)}: {names}")
        vi = self.inputs[0]
        self.tensors[vi.name] = Tensor(vi.name, _input_shape(vi, batch), "float32", Role.INPUT)

    def add(self, pn: onnx.NodeProto, index: int) -> None:
        name = pn.name or f"{pn.op_type}_{index}"
        if pn.domain not in ("", "ai.onnx"):
            raise PoetError(f"node '{name}': op {pn.domain}::{pn.op_type} is not in the ONNX domain; "
                            f"supported: {', '.join(ops.supported_onnx_ops())}")
        if pn.op_type == "Constant":
            self.consts[pn.output[0]] = self._constant(pn, name)
            return
        op = ops.REGISTRY.get(pn.op_type)
        if op is None or op.internal:
            raise PoetError(f"node '{name}': unsupported op {pn.op_type}; supported: "
                            f"{', '.join(ops.supported_onnx_ops())}")
        attrs, inputs = _attrs(pn), []
        for i, t in enumerate(pn.input):
            if i in op.const_inputs:
                if t == "":
                    continue  # an omitted optional input
                value = self.consts.get(t, self.params.get(t))  # float initializers may be constants here
                if value is None:
                    raise PoetError(f"node '{name}' ({pn.op_type}): input {i} '{t}' must be a constant")
                attrs[op.const_inputs[i]] = tuple(np.asarray(value).reshape(-1).tolist())
            elif t in self.consts:
                raise PoetError(f"node '{name}' ({pn.op_type}): constant non-float input '{t}' is not supported")
            elif t not in self.tensors:
                raise PoetError(f"node '{name}' ({pn.op_type}): input '{t}' is not produced by any earlier node")
            else:
                inputs.append(t)
        node = Node(name, pn.op_type, tuple(inputs), tuple(pn.output), attrs)
        if op.check:
            op.check(node)
        try:
            shapes = op.infer([self.tensors[t].shape for t in inputs], attrs)
        except (ValueError, KeyError) as e:
            raise PoetError(f"node '{name}' ({pn.op_type}): {e}") from None
        for out, shape in zip(node.outputs, shapes):
            self.tensors[out] = Tensor(out, tuple(int(d) for d in shape), "float32", Role.ACTIVATION)
        self.nodes.append(node)

    def _constant(self, pn: onnx.NodeProto, name: str) -> np.ndarray:
        attrs = _attrs(pn)
        if "value" in attrs:
            return np.asarray(attrs["value"])
        for key in ("value_float", "value_int", "value_floats", "value_ints"):
            if key in attrs:
                return np.asarray(attrs[key])
        raise PoetError(f"node '{name}' (Constant): unsupported attributes {sorted(attrs)}")


def to_ir(model: onnx.ModelProto, batch: int = 1) -> Graph:
    if batch < 1:
        raise PoetError(f"--batch must be at least 1, got {batch}")
    b = _Builder(model, batch)
    for i, pn in enumerate(model.graph.node):
        b.add(pn, i)
    outputs = tuple(o.name for o in model.graph.output)
    missing = [o for o in outputs if o not in b.tensors or b.tensors[o].role != Role.ACTIVATION]
    if missing:
        raise PoetError(f"graph outputs {missing} are not computed by any node")
    used = {t for n in b.nodes for t in n.inputs}
    params = {k: v for k, v in b.params.items() if k in used}
    tensors = {k: v for k, v in b.tensors.items() if v.role != Role.PARAMETER or k in used}
    return Graph(tensors, tuple(b.nodes), (b.inputs[0].name,), outputs, params, trainable_candidates(b.nodes, params))


def trainable_candidates(nodes: list[Node], params: dict[str, np.ndarray]) -> frozenset[str]:
    """Parameters that may be trained: those read by at least one op input that is not frozen.
    Scalar initializers (an attention scale, a clip bound) are constants of the exported graph, not weights."""
    out = set()
    for n in nodes:
        frozen = ops.get(n.op).frozen_inputs
        out.update(t for i, t in enumerate(n.inputs) if t in params and i not in frozen and params[t].size > 1)
    return frozenset(out)


def load(path: str | Path, batch: int = 1) -> Graph:
    return to_ir(load_onnx(path), batch)
