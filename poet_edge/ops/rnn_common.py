"""Shared parts of the recurrent ops GRU and LSTM (ONNX opset 14+, layout 0).

Inputs after the frontend: X[seq, batch, in], W[dirs, G*H, in], R[dirs, G*H, H], optional B[dirs, 2*G*H],
optional initial_h[dirs, batch, H] (and initial_c for LSTM); sequence_lens (input 4) must be a compile-time
constant equal to seq for every batch entry and becomes the attribute ``sequence_lens``. Outputs:
Y[seq, dirs, batch, H], Y_h[dirs, batch, H] (and Y_c). G is 3 for GRU, 4 for LSTM.

Training graphs use internal ops whose optional inputs are listed by flags (``has_b``, ``has_h0``, ...),
so a node carries only tensors that exist. Their backward pass (BPTT) recomputes the gates of each step
from X, the saved hidden states Y (and for LSTM the cell states) inside the kernel: no gate tensor is
kept, and the recomputation is counted in the backward node's MACs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from poet_edge import ops
from poet_edge.ir import Node, Role, Tensor
from poet_edge.ops.base import ANY, Attr, Attrs, Shape, f32_bytes, only, refused, unsupported
from poet_edge.work import OpClass, Work

DIRECTIONS = {"forward": 0, "reverse": 1, "bidirectional": 2}

# gru.c / lstm.c run scalar dot products and per-unit activations, not register-blocked GEMM blocks: the
# weight of their MACs is their instructions per MAC measured on qemu-cortex-m4 (`poet run --profile`, one
# step at batch 1 of examples/zoo/gru_kws.onnx, in 10, H 64, and tests/data/rnn/lstm_kws.onnx, in 10, H 48)
# over the 2.337 instructions per MAC of the profiles' fitted dense rate (a large GEMM's MAC weighs 1).
DENSE_INSTRUCTIONS_PER_MAC = 2.337
INSTRUCTIONS_PER_MAC = {"GRU": 7.50, "GRUGrad": 9.15, "LSTM": 7.99, "LSTMStates": 7.80, "LSTMGrad": 7.88}


def weight(op: str) -> float:
    return round(INSTRUCTIONS_PER_MAC[op] / DENSE_INSTRUCTIONS_PER_MAC, 4)


def dirs(attrs: Attrs) -> int:
    return 2 if attrs.get("direction", "forward") == "bidirectional" else 1


def is_reverse(attrs: Attrs, d: int) -> bool:
    return attrs.get("direction", "forward") == "reverse" or d == 1


def steps(seq: int, attrs: Attrs, d: int) -> list[int]:
    """Time indices in processing order for direction ``d``."""
    return list(range(seq - 1, -1, -1)) if is_reverse(attrs, d) else list(range(seq))


def attributes(default_acts: tuple[str, ...], **more: Attr) -> dict[str, Attr]:
    """The ONNX attributes GRU and LSTM handle (``more``: the op's own) and the values implemented."""
    acts = tuple(a.lower() for a in default_acts)
    unset = "not set: only the default activations, without clipping"
    return {
        "activations": Attr(
            lambda v: tuple(str(a).lower() for a in cast(Sequence[str], v)) in (acts, acts * 2),
            f"the defaults {list(default_acts)} for each direction",
        ),
        "activation_alpha": refused(unset),
        "activation_beta": refused(unset),
        "clip": refused(unset),
        "direction": only(*DIRECTIONS),
        "hidden_size": ANY,
        "layout": Attr(lambda v: v == 0, "0 ([seq, batch, ...]; layout=1 is batch-first)"),
        **more,
    }


def check(node: Node, default_acts: tuple[str, ...], max_inputs: int) -> None:
    """Refuses what the kernels do not implement beyond the attribute values (``attributes``)."""
    a = node.attrs
    if "hidden_size" not in a:
        raise unsupported(node, "missing hidden_size attribute")
    acts = a.get("activations")
    if acts is not None and len(acts) != len(default_acts) * dirs(a):  # type: ignore[arg-type]
        raise unsupported(node, f"activations {tuple(acts)} (only the defaults {default_acts})")  # type: ignore[arg-type]
    if len(node.inputs) > max_inputs:
        raise unsupported(node, f"{len(node.inputs)} inputs (peephole weights P are not supported)")
    if not node.outputs or node.outputs[0] == "":
        raise unsupported(node, "omitted output Y (name it: backpropagation through time reads it)")
    if "" in node.outputs:
        raise unsupported(node, "an omitted output before a used one")


def infer(shapes: Sequence[Shape], attrs: Attrs, gates: int, n_states: int) -> list[Shape]:
    x, w, r = (tuple(s) for s in shapes[:3])
    h = int(attrs["hidden_size"])  # type: ignore[call-overload]
    nd = dirs(attrs)
    if len(x) != 3:
        raise ValueError(f"X must be [seq, batch, input], got {x}")
    seq, batch, inp = x
    want = {"W": (nd, gates * h, inp), "R": (nd, gates * h, h), "B": (nd, 2 * gates * h)}
    got = {"W": w, "R": r} | ({"B": tuple(shapes[3])} if len(shapes) > 3 else {})
    for k in range(n_states):
        if len(shapes) > 4 + k:
            want[f"initial state {k}"] = (nd, batch, h)
            got[f"initial state {k}"] = tuple(shapes[4 + k])
    for key, s in got.items():
        if s != want[key]:
            raise ValueError(f"{key} has shape {s}, expected {want[key]}")
    lens = attrs.get("sequence_lens")
    if lens is not None and tuple(int(v) for v in lens) != (seq,) * batch:  # type: ignore[attr-defined]
        raise ValueError(f"sequence_lens {tuple(lens)} (only full lengths, {seq} for every batch entry)")  # type: ignore[arg-type]
    return [(seq, nd, batch, h)] + [(nd, batch, h)] * n_states


def split_params(xs: Sequence[np.ndarray | None], gates: int, h: int, nd: int):
    """(W, R, Wb, Rb) with zero biases when B is absent."""
    w, r, b = xs[0], xs[1], xs[2]
    assert w is not None and r is not None
    if b is None:
        b = np.zeros((nd, 2 * gates * h), w.dtype)
    return w, r, b[:, : gates * h], b[:, gates * h :]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x))).astype(x.dtype)


def unpack(values: Sequence, attrs: Attrs, keys: Sequence[str]) -> dict:
    """Maps the present inputs to ``keys``; a key written ``?name`` is present iff attrs['has_name']."""
    out, it = {}, iter(values)
    for k in keys:
        if k.startswith("?"):
            out[k[1:]] = next(it) if attrs.get(f"has_{k[1:]}") else None
        else:
            out[k] = next(it)
    return out


def fwd_inputs(node: Node, names: Sequence[str]) -> tuple[dict[str, str], dict[str, int]]:
    """The forward node's optional inputs by name (``names`` after X, W, R) and their has_ flags."""
    present = {n: node.inputs[3 + i] for i, n in enumerate(names) if len(node.inputs) > 3 + i}
    return present, {f"has_{n}": int(n in present) for n in names}


def emit_multi(gb, op: str, inputs: tuple[str, ...], attrs: dict, roles: Sequence[Role]) -> list[str]:
    """Emits one node of a multi-output internal op (GradBuilder.emit makes single-output nodes)."""
    shapes = ops.get(op).infer([gb.shape(t) for t in inputs], attrs)
    outs = []
    for k, (shape, role) in enumerate(zip(shapes, roles, strict=True)):
        name = gb.names.fresh(f"{gb.prefix}{op}_{k}")
        gb.tensors[name] = Tensor(name, tuple(shape), "float32", role)
        outs.append(name)
    gb.nodes.append(Node(outs[0], op, inputs, tuple(outs), attrs, gb.phase))
    return outs


def seq_dims(x: Shape, attrs: Attrs) -> tuple[int, int, int, int, int]:
    seq, batch, inp = x
    return seq, batch, inp, int(attrs["hidden_size"]), dirs(attrs)  # type: ignore[call-overload]


def rnn_work(
    ins: Sequence[Shape], outs: Sequence[Shape], attrs: Attrs, gates: int, passes: int, op: str
) -> Work:
    """``passes`` gate evaluations per step and row: 1 forward, 3 backward (the recomputed gates, then
    dX/dh and dW/dR, each G*H*(in+H) MACs; without dX, G*H*in fewer)."""
    seq, batch, inp, h, nd = seq_dims(tuple(ins[0]), attrs)
    per_row = passes * gates * h * (inp + h) - (passes > 1 and not attrs.get("has_dx", 1)) * gates * h * inp
    macs = seq * nd * batch * per_row
    return Work(
        OpClass.DENSE,
        macs=macs,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=weight(op),
    )


def direction_code(attrs: Attrs) -> int:
    return DIRECTIONS[str(attrs.get("direction", "forward"))]
