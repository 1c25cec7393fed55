"""GRU (ONNX, gates z, r, h; linear_before_reset 1 as torch exports it, or 0) and its BPTT gradient GRUGrad.

Per step, with h the previous hidden state (initial_h or zeros at the first step):
z = σ(Wz x + Wbz + Rz h + Rbz), r = σ(Wr x + Wbr + Rr h + Rbr), h' = (1 - z) ⊙ n + z ⊙ h, with
n = tanh(Wh x + Wbh + r ⊙ (Rh h + Rbh)) for linear_before_reset=1, tanh(Wh x + Wbh + Rh (r ⊙ h) + Rbh) for 0.

GRUGrad(X, W, R, [B], [initial_h], Y, [dY], [dY_h]) -> (dX, dW, dR, dB, d_initial_h, scratch[4H]) walks
the sequence backwards; it recomputes each step's gates from X and the saved hidden states (Y and
initial_h), so the forward keeps nothing beyond its own outputs. The running dh lives in the
d_initial_h output; scratch holds one row's four gate gradients. Its MACs count the recomputation.
dX is an output only when X needs a gradient (attribute has_dx), e.g. not when X is the model input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from poet_edge.ir import Role
from poet_edge.ops import rnn_common as rc
from poet_edge.ops.base import CArg, IntArg, KernelCall, NullArg, OpDef, TensorArg, only

ACTS = ("Sigmoid", "Tanh")
GRAD_KEYS = ("X", "W", "R", "?b", "?h0", "Y", "?dy", "?dyh")


def check(node):
    rc.check(node, ACTS, 5)


def _lbr(attrs) -> int:
    return int(attrs.get("linear_before_reset", 0))


def infer(shapes, attrs):
    return rc.infer(shapes, attrs, 3, 1)


def _gates(x, h, w, r, wb, rb, lbr=1):
    """z, r, hl, n of one step for all batch rows; hl = Rh h + Rbh (linear_before_reset=1) or
    Rh (r ⊙ h) + Rbh (0)."""
    hs = h.shape[-1]
    gx = x @ w.T + wb
    gh = h @ r[: 2 * hs].T + rb[: 2 * hs]
    z = rc.sigmoid(gx[:, :hs] + gh[:, :hs])
    rr = rc.sigmoid(gx[:, hs : 2 * hs] + gh[:, hs : 2 * hs])
    if lbr:
        hl = h @ r[2 * hs :].T + rb[2 * hs :]
        n = np.tanh(gx[:, 2 * hs :] + rr * hl)
    else:
        hl = (rr * h) @ r[2 * hs :].T + rb[2 * hs :]
        n = np.tanh(gx[:, 2 * hs :] + hl)
    return z, rr, hl, n


def forward(xs, attrs):
    x = xs[0]
    seq, batch, _, hs, nd = rc.seq_dims(x.shape, attrs)
    w, r, wb, rb = rc.split_params([xs[1], xs[2], xs[3] if len(xs) > 3 else None], 3, hs, nd)
    y = np.zeros((seq, nd, batch, hs), x.dtype)
    yh = np.zeros((nd, batch, hs), x.dtype)
    for d in range(nd):
        h = xs[4][d] if len(xs) > 4 else np.zeros((batch, hs), x.dtype)
        for t in rc.steps(seq, attrs, d):
            z, _, _, n = _gates(x[t], h, w[d], r[d], wb[d], rb[d], _lbr(attrs))
            h = ((1 - z) * n + z * h).astype(x.dtype)
            y[t, d] = h
        yh[d] = h
    return [y, yh]


def backward(gb, node, gys, needs):
    present, flags = rc.fwd_inputs(node, ("b", "h0"))
    attrs = _grad_attrs(node.attrs) | flags | {"has_dy": int(gys[0] is not None), "has_dyh": 0}
    if len(gys) > 1 and gys[1] is not None:
        attrs["has_dyh"] = 1
    attrs["has_dx"] = int(needs[0])
    ins = (*node.inputs[:3], *present.values(), node.outputs[0], *[g for g in gys[:2] if g is not None])
    outs = rc.emit_multi(gb, "GRUGrad", ins, attrs, [Role.GRADIENT] * (5 + needs[0]))
    full: list[str | None] = [*outs] if needs[0] else [None, *outs]
    grads = full[:3] + [full[3] if "b" in present else None, full[4] if "h0" in present else None]
    return [g if need else None for g, need in zip(grads, needs, strict=False)]


def _grad_attrs(attrs):
    keep = ("hidden_size", "direction", "linear_before_reset")
    return {k: attrs[k] for k in keep if k in attrs}


def grad_infer(shapes, attrs):
    v = rc.unpack(shapes, attrs, GRAD_KEYS)
    seq, batch, inp, hs, nd = rc.seq_dims(tuple(v["X"]), attrs)
    shapes = [
        (seq, batch, inp),
        (nd, 3 * hs, inp),
        (nd, 3 * hs, hs),
        (nd, 6 * hs),
        (nd, batch, hs),
        (4 * hs,),
    ]
    return shapes[1 - int(attrs.get("has_dx", 1)) :]


def grad_forward(xs, attrs):
    v = rc.unpack(xs, attrs, GRAD_KEYS)
    x, y = v["X"], v["Y"]
    seq, batch, _, hs, nd = rc.seq_dims(x.shape, attrs)
    w, r, wb, rb = rc.split_params([v["W"], v["R"], v["b"]], 3, hs, nd)
    dx, dw, dr = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r)
    db, dh0 = np.zeros((nd, 6 * hs), x.dtype), np.zeros((nd, batch, hs), x.dtype)
    for d in range(nd):
        order = rc.steps(seq, attrs, d)
        h0 = v["h0"][d] if v["h0"] is not None else np.zeros((batch, hs), x.dtype)
        dh = v["dyh"][d].copy() if v["dyh"] is not None else np.zeros((batch, hs), x.dtype)
        for s in range(seq - 1, -1, -1):
            t = order[s]
            hp = h0 if s == 0 else y[order[s - 1], d]
            z, rr, hl, n = _gates(x[t], hp, w[d], r[d], wb[d], rb[d], _lbr(attrs))
            if v["dy"] is not None:
                dh = dh + v["dy"][t, d]
            dan = dh * (1 - z) * (1 - n * n)
            daz = dh * (hp - n) * z * (1 - z)
            if _lbr(attrs):
                dar = dan * hl * rr * (1 - rr)
                gr = np.concatenate([daz, dar, dan * rr], axis=1)
                dr[d] += gr.T @ hp
                dh_r = gr @ r[d]
            else:  # hl = Rh (r ⊙ h) + Rbh: d(r ⊙ h) = Rhᵀ dan
                drh = dan @ r[d, 2 * hs :]
                dar = drh * hp * rr * (1 - rr)
                gr = np.concatenate([daz, dar, dan], axis=1)
                dr[d, : 2 * hs] += gr[:, : 2 * hs].T @ hp
                dr[d, 2 * hs :] += dan.T @ (rr * hp)
                dh_r = gr[:, : 2 * hs] @ r[d, : 2 * hs] + drh * rr
            gw = np.concatenate([daz, dar, dan], axis=1)
            dw[d] += gw.T @ x[t]
            db[d, : 3 * hs] += gw.sum(axis=0)
            db[d, 3 * hs :] += gr.sum(axis=0)
            dx[t] += gw @ w[d]
            dh = dh * z + dh_r
        dh0[d] = dh
    return [dx, dw, dr, db, dh0, np.zeros(4 * hs, x.dtype)][1 - int(attrs.get("has_dx", 1)) :]


def _extra_macs(ins, attrs, last_step_slow: bool) -> int:
    """linear_before_reset=0 evaluates the reset gate once more per step and row (r ⊙ h for all units
    first); a forward without a spare row at its last step (no Y_h output) evaluates it H times more."""
    if _lbr(attrs):
        return 0
    seq, batch, inp, hs, nd = rc.seq_dims(tuple(ins[0]), attrs)
    return nd * batch * hs * (inp + hs) * (seq + (hs if last_step_slow else 0))


def work(ins, outs, attrs):
    w = rc.rnn_work(ins, outs, attrs, 3, 1, "GRU")
    return replace(w, macs=w.macs + _extra_macs(ins, attrs, len(outs) < 2))


def grad_work(ins, outs, attrs):
    w = rc.rnn_work(ins, outs, attrs, 3, 3, "GRUGrad")
    return replace(w, macs=w.macs + _extra_macs(ins, attrs, False))


def _opt(node, i):
    return TensorArg(node.inputs[i]) if len(node.inputs) > i else NullArg()


def _modes(attrs) -> tuple[IntArg, IntArg]:
    return IntArg(rc.direction_code(attrs)), IntArg(_lbr(attrs))


def kernel(node, shape):
    seq, batch, inp, hs, nd = rc.seq_dims(shape(node.inputs[0]), node.attrs)
    ys = [TensorArg(o, False) for o in node.outputs] + [NullArg()] * (2 - len(node.outputs))
    args = (TensorArg(node.inputs[0]), TensorArg(node.inputs[1]), TensorArg(node.inputs[2]), _opt(node, 3))
    dims = (IntArg(seq), IntArg(batch), IntArg(inp), IntArg(hs), *_modes(node.attrs))
    return KernelCall("poet_gru_f32", (*args, _opt(node, 4), *ys, *dims), "gru")


def grad_kernel(node, shape):
    v = rc.unpack(node.inputs, node.attrs, GRAD_KEYS)
    seq, batch, inp, hs, _ = rc.seq_dims(shape(v["X"]), node.attrs)
    names = [k.lstrip("?") for k in GRAD_KEYS]
    ins = [TensorArg(v[k]) if v[k] is not None else NullArg() for k in names]
    outs: list[CArg] = [TensorArg(o, False) for o in node.outputs]
    if not node.attrs.get("has_dx", 1):
        outs.insert(0, NullArg())
    dims = (IntArg(seq), IntArg(batch), IntArg(inp), IntArg(hs), *_modes(node.attrs))
    return KernelCall("poet_gru_grad_f32", (*ins, *outs, *dims), "gru")


ATTRIBUTES = rc.attributes(ACTS, linear_before_reset=only(0, 1))
OP = OpDef(
    "GRU",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={4: "sequence_lens"},
    attributes=ATTRIBUTES,
)
GRAD = OpDef("GRUGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True)
