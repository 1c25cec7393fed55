"""Fused weight-gradient updates: the optimizer step of a weight applied tile by tile as its gradient is
computed, so the whole gradient never exists (``TrainingOptions.fused_updates``, poet_edge/autodiff.py).

``ConvGradWeightUpdate(W, X, dY, *state)`` and ``GemmGradUpdate(W, A, B, *state)`` are update nodes (phase
UPDATE, no outputs): they rewrite W and its optimizer state in place. The C kernels
(runtime_c/src/kernels/fused.c) compute a tile of output channels (convolution) or rows (GEMM) of dW into
their workspace with the unfused gradient kernel itself (``poet_conv2d_grad_weight_f32`` on a sub-problem,
``poet_gemm_f32`` on a row block) and apply the optimizer's own update kernel to that tile: every dW element
is summed in the unfused order and updated by the unfused expression, so the parameters are bit-identical
to the unfused step. The numpy forward computes the whole gradient with the unfused op's forward and then
applies the update op's forward.

``GemmGradUpdate`` covers a 2-D Gemm / MatMul weight gradient (``batches`` 1) and a batched MatMul's
(``batches`` B > 1 or a batch of one), whose per-batch products the unfused graph sums with ReduceSumTo:
the kernel keeps the B partial tiles and sums them in ReduceSumTo's order (from +0.0f, batch ascending,
then times ``scale`` unless it is 1)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from poet_edge.ops import adam, conv, gemm, matmul, reduce_sum_to, sgd, sgd_momentum
from poet_edge.ops.base import (
    CArg,
    DoubleArg,
    FloatArg,
    IntArg,
    KernelCall,
    NullArg,
    OpDef,
    RuntimeArg,
    TensorArg,
    WorkspaceArg,
    f32_bytes,
)
from poet_edge.ops.pool_common import Window
from poet_edge.work import Work

# rows (GEMM) or output channels (convolution) per tile: the fast kernels' 4-row register blocks
TILE = 4

UPDATES = {"SGDUpdate": sgd.OP, "SGDMomentumUpdate": sgd_momentum.OP, "AdamUpdate": adam.OP}
UPDATE_KIND = {"SGDUpdate": 0, "SGDMomentumUpdate": 1, "AdamUpdate": 2}  # enum POET_UPDATE_* in kernels.h
UPDATE_KEYS = ("momentum", "weight_decay", "nesterov", "beta1", "beta2", "eps", "decoupled")


def update_attrs(attrs: Mapping[str, object]) -> dict[str, object]:
    """The update op's own attributes (without the gradient op's)."""
    return {k: attrs[k] for k in UPDATE_KEYS if k in attrs}


def _apply(p: np.ndarray, g: np.ndarray, state: list[np.ndarray], attrs: Mapping[str, object]) -> list:
    op = UPDATES[str(attrs["update"])]
    extra = {k: attrs[k] for k in ("lr", "t") if k in attrs}
    return list(op.forward([p, g, *state], {**update_attrs(attrs), **extra}))


def _update_args(node, shape) -> tuple[CArg, ...]:
    """State pointers, then the update's kind and hyperparameters (poet_update_tile_f32 in fused.c)."""
    a = node.attrs
    state = list(node.inputs[3:])
    ptrs: list[CArg] = [TensorArg(s, const=False) for s in state]
    ptrs += [NullArg()] * (2 - len(state))
    return (
        *ptrs,
        IntArg(UPDATE_KIND[str(a["update"])]),
        RuntimeArg("lr"),
        RuntimeArg("t"),
        FloatArg(float(a.get("momentum", 0.0))),  # type: ignore[arg-type]
        DoubleArg(float(a.get("weight_decay", 0.0))),  # type: ignore[arg-type]
        IntArg(int(bool(a.get("nesterov", False)))),
        DoubleArg(float(a.get("beta1", 0.0))),  # type: ignore[arg-type]
        DoubleArg(float(a.get("beta2", 0.0))),  # type: ignore[arg-type]
        DoubleArg(float(a.get("eps", 0.0))),  # type: ignore[arg-type]
        IntArg(int(bool(a.get("decoupled", False)))),
    )


def _with_update(grad: Work, w_shape, attrs, ins) -> Work:
    """The gradient kernel's work plus the update of every element of W (priced like the update op)."""
    upd = UPDATES[str(attrs["update"])].work([w_shape, w_shape, *ins[3:]], [], attrs)
    return Work(
        grad.op_class,
        macs=grad.macs,
        elements=grad.elements,
        bytes_read=grad.bytes_read + upd.bytes_read - f32_bytes(w_shape),
        bytes_written=upd.bytes_written,
        workspace_bytes=4 * int(attrs["workspace"]),  # type: ignore[call-overload]
        weight=grad.weight,
        update_elements=upd.elements,
        update_weight=upd.weight,
    )


# ---- ConvGradWeightUpdate(W, X, dY, *state) ------------------------------------------------------------
def conv_tile(win: Window) -> tuple[int, int]:
    """(output channels per call, groups per call): TILE channels of one group, or whole groups when a group
    has fewer than TILE output channels (depthwise: TILE groups)."""
    mg = win.m // win.groups
    if mg >= TILE or win.groups == 1:
        return min(TILE, win.m), 1
    k = max(1, TILE // mg)
    return k * mg, k


def conv_workspace(win: Window) -> int | None:
    """Floats of workspace: the dW tile, and at batch > 1 the dY channels (and, for several groups per
    call or groups > 1, the X channels) of a tile copied contiguous; None when not supported."""
    per = (win.c // win.groups) * win.kh * win.kw
    tile, groups = conv_tile(win)
    ws = tile * per
    if win.n > 1:
        if win.groups > 1:
            return None  # the X channels of a group are strided across the batch: not fused
        ws += win.n * tile * win.oh * win.ow
    return ws


def _conv_win(shapes, attrs) -> Window:
    return conv.conv_window(shapes[1], tuple(shapes[0]), attrs)


def conv_infer(shapes, attrs):
    _conv_win(shapes, attrs)
    return []


def conv_forward(xs, attrs):
    w, x, dy = xs[0], xs[1], xs[2]
    (dw,) = conv.grad_weight_forward([x, dy], {**attrs, "w_shape": w.shape})
    return _apply(w, dw, list(xs[3:]), attrs)


def conv_work(ins, outs, attrs):
    grad = conv.grad_weight_work([ins[1], ins[2]], [ins[0]], {**attrs, "w_shape": tuple(ins[0])})
    return _with_update(grad, tuple(ins[0]), attrs, list(ins))


def conv_kernel(node, shape):
    win = _conv_win([shape(t) for t in node.inputs], node.attrs)
    w, x, dy = node.inputs[:3]
    return KernelCall(
        "poet_conv2d_grad_weight_update_f32",
        (
            TensorArg(x),
            TensorArg(dy),
            TensorArg(w, const=False),
            *_update_args(node, shape),
            WorkspaceArg(),
            win.ints(),
            IntArg(conv_tile(win)[0]),
        ),
        "fused",
    )


# ---- GemmGradUpdate(W, A, B, *state) -------------------------------------------------------------------
def gemm_dims(shapes, attrs) -> tuple[int, int, int, int]:
    """(batches, M, N, K) of W's gradient alpha op(A) op(B) (per batch: A [.., M or K, ..], B likewise)."""
    a, b = tuple(shapes[1]), tuple(shapes[2])
    batches = int(attrs.get("batches", 1))  # type: ignore[call-overload]
    m, n, k = gemm.mnk([a[-2:], b[-2:]], attrs)
    return batches, m, n, k


def gemm_workspace(m: int, n: int, k: int, trans_a: int, reduced: bool) -> int:
    """Floats: the dW tile (and, summed over a batch, the running sum of the per-batch tiles), and for
    op(A) = Aᵀ the tile's columns of A copied contiguous."""
    t = min(TILE, m)
    return (2 if reduced else 1) * t * n + (k * t if trans_a else 0)


def gemm_infer(shapes, attrs):
    b, m, n, _ = gemm_dims(shapes, attrs)
    if tuple(shapes[0]) != (m, n):
        raise ValueError(f"weight {tuple(shapes[0])} is not the gradient's shape {(m, n)}")
    return []


def gemm_forward(xs, attrs):
    """The unfused nodes' forwards: the Gemm / MatMul, then (batched MatMul) the ReduceSumTo."""
    w, a, b = xs[0], xs[1], xs[2]
    src = {k: attrs[k] for k in ("transA", "transB", "alpha") if k in attrs}
    (dw,) = (gemm.forward if attrs["source"] == "Gemm" else matmul.forward)([a, b], src)
    if "scale" in attrs:
        (dw,) = reduce_sum_to.forward([dw], {"shape": w.shape, "scale": attrs["scale"]})
    return _apply(w, dw.astype(w.dtype), list(xs[3:]), attrs)


def gemm_work(ins, outs, attrs):
    b, m, n, k = gemm_dims(ins, attrs)
    sa = (k, m) if attrs.get("transA", 0) else (m, k)
    sb = (n, k) if attrs.get("transB", 0) else (k, n)
    grad = gemm.work([sa, sb], [(m, n)], attrs)
    grad = Work(grad.op_class, macs=b * grad.macs, bytes_read=f32_bytes(ins[1], ins[2]), weight=grad.weight)
    return _with_update(grad, (m, n), attrs, list(ins))


def gemm_kernel(node, shape):
    b, m, n, k = gemm_dims([shape(t) for t in node.inputs], node.attrs)
    w, a, bb = node.inputs[:3]
    return KernelCall(
        "poet_gemm_grad_update_f32",
        (
            TensorArg(a),
            TensorArg(bb),
            TensorArg(w, const=False),
            *_update_args(node, shape),
            WorkspaceArg(),
            IntArg(m),
            IntArg(n),
            IntArg(k),
            IntArg(int(node.attr("transA", 0))),
            IntArg(int(node.attr("transB", 0))),
            FloatArg(float(node.attr("alpha", 1.0))),
            IntArg(b),
            IntArg(int("scale" in node.attrs)),
            FloatArg(float(node.attr("scale", 1.0))),
            IntArg(min(TILE, m)),
        ),
        "fused",
    )


CONV = OpDef(
    "ConvGradWeightUpdate", conv_infer, conv_forward, conv_work, None, conv_kernel, internal=True, fused=True
)
GEMM = OpDef(
    "GemmGradUpdate", gemm_infer, gemm_forward, gemm_work, None, gemm_kernel, internal=True, fused=True
)
