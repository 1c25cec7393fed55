"""LSTM (ONNX, gates i, o, f, c; no peepholes, input_forget=0) and its BPTT gradient.

Per step, with (h, c) the previous state (initial_h / initial_c or zeros at the first step):
a = W x + Wb + R h + Rb split into i, o, f, g; i, o, f = σ(.), g = tanh(.);
c' = f ⊙ c + i ⊙ g, h' = o ⊙ tanh(c').

The backward pass needs every step's cell state, which the forward does not output (Y holds only h):
LSTMStates(X, W, R, [B], [initial_h], [initial_c], Y) -> C[seq, dirs, batch, H] recomputes them (one
gate evaluation per step, its own node: the scheduler sees C's bytes and may free or page it), then
LSTMGrad(X, W, R, [B], [h0], [c0], Y, C, [dY], [dY_h], [dY_c]) -> (dX, dW, dR, dB, dh0, dc0, scratch[4H])
walks the sequence backwards, recomputing each step's gates from X and Y; the running dh and dc live in
the dh0 and dc0 outputs. dX is an output only when X needs a gradient (attribute has_dx)."""

from __future__ import annotations

import numpy as np

from poet_edge.ir import Role
from poet_edge.ops import rnn_common as rc
from poet_edge.ops.base import CArg, IntArg, KernelCall, NullArg, OpDef, TensorArg, only

ACTS = ("Sigmoid", "Tanh", "Tanh")
STATE_KEYS = ("X", "W", "R", "?b", "?h0", "?c0", "Y")
GRAD_KEYS = ("X", "W", "R", "?b", "?h0", "?c0", "Y", "C", "?dy", "?dyh", "?dyc")


def check(node):
    rc.check(node, ACTS, 6)


def infer(shapes, attrs):
    return rc.infer(shapes, attrs, 4, 2)


def _gates(x, h, w, r, wb, rb):
    hs = h.shape[-1]
    a = x @ w.T + wb + h @ r.T + rb
    i, o, f = (rc.sigmoid(a[:, k * hs : (k + 1) * hs]) for k in range(3))
    return i, o, f, np.tanh(a[:, 3 * hs :])


def _params(v, x, attrs):
    seq, batch, _, hs, nd = rc.seq_dims(x.shape, attrs)
    w, r, wb, rb = rc.split_params([v["W"], v["R"], v["b"]], 4, hs, nd)
    zeros = np.zeros((nd, batch, hs), x.dtype)
    h0 = v["h0"] if v["h0"] is not None else zeros
    c0 = v["c0"] if v["c0"] is not None else zeros
    return seq, nd, w, r, wb, rb, h0, c0


def forward(xs, attrs):
    x = xs[0]
    v = dict(zip(("W", "R", "b", "h0", "c0"), list(xs[1:]) + [None] * (6 - len(xs)), strict=False))
    seq, nd, w, r, wb, rb, h0, c0 = _params(v, x, attrs)
    y = np.zeros((seq,) + h0.shape, x.dtype)
    yh, yc = np.zeros_like(h0), np.zeros_like(c0)
    for d in range(nd):
        h, c = h0[d], c0[d]
        for t in rc.steps(seq, attrs, d):
            i, o, f, g = _gates(x[t], h, w[d], r[d], wb[d], rb[d])
            c = (f * c + i * g).astype(x.dtype)
            h = (o * np.tanh(c)).astype(x.dtype)
            y[t, d] = h
        yh[d], yc[d] = h, c
    return [y, yh, yc]


def backward(gb, node, gys, needs):
    present, flags = rc.fwd_inputs(node, ("b", "h0", "c0"))
    ins = (*node.inputs[:3], *present.values(), node.outputs[0])
    attrs = {k: node.attrs[k] for k in ("hidden_size", "direction") if k in node.attrs} | flags
    cells = gb.emit("LSTMStates", ins, attrs, Role.ACTIVATION)
    dys = list(gys[:3]) + [None] * (3 - len(gys[:3]))
    gattrs = attrs | {f"has_{k}": int(g is not None) for k, g in zip(("dy", "dyh", "dyc"), dys, strict=True)}
    gattrs["has_dx"] = int(needs[0])
    outs = rc.emit_multi(
        gb,
        "LSTMGrad",
        (*ins, cells, *[g for g in dys if g is not None]),
        gattrs,
        [Role.GRADIENT] * (6 + needs[0]),
    )
    full: list[str | None] = [*outs] if needs[0] else [None, *outs]
    grads = full[:3] + [full[k + 3] if n in present else None for k, n in enumerate(("b", "h0", "c0"))]
    return [g if need else None for g, need in zip(grads, needs, strict=False)]


def states_infer(shapes, attrs):
    v = rc.unpack(shapes, attrs, STATE_KEYS)
    return [tuple(v["Y"])]


def states_forward(xs, attrs):
    v = rc.unpack(xs, attrs, STATE_KEYS)
    x, y = v["X"], v["Y"]
    seq, nd, w, r, wb, rb, h0, c0 = _params(v, x, attrs)
    cs = np.zeros_like(y)
    for d in range(nd):
        order, c = rc.steps(seq, attrs, d), c0[d]
        for s, t in enumerate(order):
            hp = h0[d] if s == 0 else y[order[s - 1], d]
            i, _, f, g = _gates(x[t], hp, w[d], r[d], wb[d], rb[d])
            c = (f * c + i * g).astype(x.dtype)
            cs[t, d] = c
    return [cs]


def grad_infer(shapes, attrs):
    v = rc.unpack(shapes, attrs, GRAD_KEYS)
    seq, batch, inp, hs, nd = rc.seq_dims(tuple(v["X"]), attrs)
    st = (nd, batch, hs)
    shapes = [(seq, batch, inp), (nd, 4 * hs, inp), (nd, 4 * hs, hs), (nd, 8 * hs), st, st, (4 * hs,)]
    return shapes[1 - int(attrs.get("has_dx", 1)) :]


def grad_forward(xs, attrs):
    v = rc.unpack(xs, attrs, GRAD_KEYS)
    x, y, cs = v["X"], v["Y"], v["C"]
    seq, nd, w, r, wb, rb, h0, c0 = _params(v, x, attrs)
    hs = h0.shape[-1]
    dx, dw, dr = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r)
    db, dh0, dc0 = np.zeros((nd, 8 * hs), x.dtype), np.zeros_like(h0), np.zeros_like(c0)
    for d in range(nd):
        order = rc.steps(seq, attrs, d)
        dh = v["dyh"][d].copy() if v["dyh"] is not None else np.zeros_like(h0[d])
        dc = v["dyc"][d].copy() if v["dyc"] is not None else np.zeros_like(c0[d])
        for s in range(seq - 1, -1, -1):
            t = order[s]
            hp, cp = (h0[d], c0[d]) if s == 0 else (y[order[s - 1], d], cs[order[s - 1], d])
            i, o, f, g = _gates(x[t], hp, w[d], r[d], wb[d], rb[d])
            if v["dy"] is not None:
                dh = dh + v["dy"][t, d]
            tc = np.tanh(cs[t, d])
            dc = dc + dh * o * (1 - tc * tc)
            da_i, da_o = dc * g * i * (1 - i), dh * tc * o * (1 - o)
            ga = np.concatenate([da_i, da_o, dc * cp * f * (1 - f), dc * i * (1 - g * g)], axis=1)
            dw[d] += ga.T @ x[t]
            dr[d] += ga.T @ hp
            db[d, : 4 * hs] += ga.sum(axis=0)
            db[d, 4 * hs :] += ga.sum(axis=0)
            dx[t] += ga @ w[d]
            dh, dc = ga @ r[d], dc * f
        dh0[d], dc0[d] = dh, dc
    return [dx, dw, dr, db, dh0, dc0, np.zeros(4 * hs, x.dtype)][1 - int(attrs.get("has_dx", 1)) :]


def work(ins, outs, attrs):
    return rc.rnn_work(ins, outs, attrs, 4, 1, "LSTM")


def states_work(ins, outs, attrs):
    return rc.rnn_work(ins, outs, attrs, 4, 1, "LSTMStates")


def grad_work(ins, outs, attrs):
    return rc.rnn_work(ins, outs, attrs, 4, 3, "LSTMGrad")


def _opt(node, i):
    return TensorArg(node.inputs[i]) if len(node.inputs) > i else NullArg()


def _dims(node, shape):
    seq, batch, inp, hs, _ = rc.seq_dims(shape(node.inputs[0]), node.attrs)
    return (IntArg(seq), IntArg(batch), IntArg(inp), IntArg(hs), IntArg(rc.direction_code(node.attrs)))


def kernel(node, shape):
    ys = [TensorArg(o, False) for o in node.outputs] + [NullArg()] * (3 - len(node.outputs))
    ins = [TensorArg(t) for t in node.inputs[:3]] + [_opt(node, k) for k in (3, 4, 5)]
    return KernelCall("poet_lstm_f32", (*ins, *ys, *_dims(node, shape)), "lstm")


def _named(node, keys):
    v = rc.unpack(node.inputs, node.attrs, keys)
    return [TensorArg(v[k.lstrip("?")]) if v[k.lstrip("?")] is not None else NullArg() for k in keys]


def states_kernel(node, shape):
    args = (*_named(node, STATE_KEYS), TensorArg(node.outputs[0], False), *_dims(node, shape))
    return KernelCall("poet_lstm_states_f32", args, "lstm")


def grad_kernel(node, shape):
    outs: list[CArg] = [TensorArg(o, False) for o in node.outputs]
    if not node.attrs.get("has_dx", 1):
        outs.insert(0, NullArg())
    return KernelCall("poet_lstm_grad_f32", (*_named(node, GRAD_KEYS), *outs, *_dims(node, shape)), "lstm")


ATTRIBUTES = rc.attributes(ACTS, input_forget=only(0))
OP = OpDef(
    "LSTM",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={4: "sequence_lens"},
    attributes=ATTRIBUTES,
)
STATES = OpDef("LSTMStates", states_infer, states_forward, states_work, None, states_kernel, internal=True)
GRAD = OpDef("LSTMGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True)
