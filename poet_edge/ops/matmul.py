"""MatMul with numpy semantics: N-D operands are stacks of matrices whose batch dims broadcast; a 1-D
operand is promoted to a matrix (and the added dim removed from the result).

Internal attributes ``transA`` / ``transB`` (never in ONNX files; the checker rejects them) transpose the
last two dims of an operand; the backward rule uses them. 2-D products without them run on poet_gemm_f32,
batched ones on poet_matmul_f32; gradients of broadcast batch dims are reduced with ReduceSumTo."""

from __future__ import annotations

import numpy as np

from poet_edge.kernel_model import gemm_weight
from poet_edge.ops import gemm
from poet_edge.ops.base import (
    IntArg,
    IntArrayArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    per_sample_first,
    unsupported,
)
from poet_edge.ops.broadcast import broadcast_shape, check_rank, strides_for
from poet_edge.work import OpClass, Work


def _dims(shapes, attrs):
    """(batch shape, m, n, k, a batch shape, b batch shape, output shape)."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if not a or not b:
        raise ValueError(f"MatMul operands must have at least one dim, got {a} x {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    m, k = (a2[-1], a2[-2]) if attrs.get("transA", 0) else (a2[-2], a2[-1])
    k2, n = (b2[-1], b2[-2]) if attrs.get("transB", 0) else (b2[-2], b2[-1])
    if k != k2:
        raise ValueError(f"MatMul inner dimensions differ: {a} x {b}")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    out = batch + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
    return batch, m, n, k, a2[:-2], b2[:-2], out


def infer(shapes, attrs):
    return [_dims(shapes, attrs)[-1]]


def _t(x, flag):
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


def forward(xs, attrs):
    a, b = _t(xs[0], attrs.get("transA", 0)), _t(xs[1], attrs.get("transB", 0))
    y = gemm.by_rows(a, b) if a.ndim == 2 and b.ndim == 2 else np.matmul(a, b)
    return [np.asarray(y).astype(xs[0].dtype)]


def backward(gb, node, gys, needs):
    """dA = dY Bᵀ, dB = Aᵀ dY on the matrix-promoted operands, summed over broadcast batch dims."""
    if node.attr("transA", 0) or node.attr("transB", 0):
        raise NotImplementedError("MatMul backward of the internal transposed form")
    a, b, dy = node.inputs[0], node.inputs[1], gys[0]
    sa, sb = gb.shape(a), gb.shape(b)
    batch, m, n, k, _, _, _ = _dims([sa, sb], {})

    def reshape(t, shape):
        return t if gb.shape(t) == tuple(shape) else gb.emit("Reshape", (t,), {"shape": tuple(shape)})

    a2 = reshape(a, (1, k)) if len(sa) == 1 else a
    b2 = reshape(b, (k, 1)) if len(sb) == 1 else b
    dy2 = reshape(dy, batch + (m, n))
    grads: list[str | None] = [None, None]
    if needs[0]:
        da = gb.emit("MatMul", (dy2, b2), {"transB": 1})
        grads[0] = reshape(gb.sum_to(da, gb.shape(a2)), sa)
    if needs[1]:
        db = gb.emit("MatMul", (a2, dy2), {"transA": 1})
        grads[1] = reshape(gb.sum_to(db, gb.shape(b2)), sb)
    return grads


def work(ins, outs, attrs):
    batch, m, n, k, *_ = _dims(ins, attrs)
    return Work(
        OpClass.DENSE,
        macs=elements(batch) * m * n * k,
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=gemm_weight(m, n, k, int(attrs.get("transA", 0)), int(attrs.get("transB", 0))),
    )


def kernel(node, shape):
    a, b, y = node.inputs[0], node.inputs[1], node.outputs[0]
    ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    batch, m, n, k, ba, bb, _ = _dims([shape(a), shape(b)], node.attrs)
    if not batch:
        stored = {a: (k, m) if ta else (m, k), b: (n, k) if tb else (k, n)}  # 1-D operands as matrices
        return gemm.kernel(node, lambda t: stored.get(t, shape(t)))
    dims = batch
    check_rank(dims)
    sa = tuple(s * m * k for s in strides_for(ba, dims))
    sb = tuple(s * k * n for s in strides_for(bb, dims))
    args = (
        TensorArg(a),
        TensorArg(b),
        TensorArg(y, False),
        IntArg(m),
        IntArg(n),
        IntArg(k),
        IntArg(ta),
        IntArg(tb),
        IntArg(len(dims)),
        IntArrayArg(dims),
        IntArrayArg(sa),
        IntArrayArg(sb),
    )
    return KernelCall("poet_matmul_f32", args, "matmul")


def check(node):
    if len(node.inputs) != 2:
        raise unsupported(node, "number of inputs")


def per_sample(ins, batched, attrs, axis=0) -> bool:
    """Along the batch: A's leading dim is the batch (rows of a 2-D A, or its broadcast batch dims) when
    only A carries the batch and B (a weight) is 2-D or broadcasts over that dim; or both carry it as their
    first batch dim (attention's Q·Kᵀ and P·V, same rank >= 3: each sample's matrices multiply alone).
    Along positions (axis >= 1), only A split: A's rows (a position's row times the whole B: a dense
    layer's weight, or attention's keys), or a batch dim of A where B is 1 or absent."""
    a, b = ins[0], ins[1]
    if int(attrs.get("transA", 0)) or int(attrs.get("transB", 0)):
        return False
    if axis != 0:
        at = axis - (len(a) - len(b))  # B's dim under the split axis, when it is a batch dim of A
        batch_dim = axis < len(a) - 2 and (at < 0 or b[at] == 1)
        return batched[0] and not any(batched[1:]) and (axis == len(a) - 2 or batch_dim)
    if all(batched):
        return len(a) == len(b) >= 3
    b_ok = len(b) <= 2 or len(b) < len(a) or b[0] == 1
    return per_sample_first(ins, batched, attrs) and len(a) >= 2 and b_ok


OP = OpDef("MatMul", infer, forward, work, backward, kernel, check, per_sample=per_sample)
