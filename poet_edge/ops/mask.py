"""1-bit masks (``TrainingOptions.relu_masks``, poet_edge/autodiff.py): what ReluGrad and ClipGrad need of
the forward pass is one bit per element, so a packed mask replaces the float tensor they would keep.

``RangeMask(Y) -> M`` packs ``min < Y < max`` (a missing bound is no test) into uint32 words: element i is
bit ``i % 32`` of word ``i // 32``, unused bits of the last word 0. Relu's mask is ``Y > 0`` on its output
(ReluGrad's own test); Clip's is the range test on its output Y, which equals ClipGrad's test on its input
X for every X and bounds: inside the open range Y = X, and outside it Y is a bound, which the strict test
excludes (NaN fails both). ``MaskGrad(M, dY) -> dX`` is ``dY`` where the bit is set, else +0.0f: the
selection of ReluGrad / ClipGrad, so the result has their bits."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import IntArg, KernelCall, OpDef, TensorArg, elements
from poet_edge.ops.clip import bound, bound_args
from poet_edge.work import OpClass, Work

WORD_BITS = 32


def words(n: int) -> int:
    return -(-n // WORD_BITS)


def pack(bits: np.ndarray) -> np.ndarray:
    """Boolean array -> uint32 words (element i: bit i % 32 of word i // 32)."""
    flat = np.asarray(bits, dtype=bool).reshape(-1)
    padded = np.zeros(words(flat.size) * WORD_BITS, dtype=np.uint64)
    padded[: flat.size] = flat
    w = (padded.reshape(-1, WORD_BITS) << np.arange(WORD_BITS, dtype=np.uint64)).sum(axis=1)
    return w.astype(np.uint32)


def unpack(m: np.ndarray, n: int) -> np.ndarray:
    """uint32 words -> the first ``n`` bits as a boolean array."""
    w = np.asarray(m, dtype=np.uint64).reshape(-1, 1)
    return (((w >> np.arange(WORD_BITS, dtype=np.uint64)) & 1).reshape(-1)[:n]).astype(bool)


# ---- RangeMask(Y) -> M -------------------------------------------------------------------------------
def mask_infer(shapes, attrs):
    bound(attrs, "min"), bound(attrs, "max")
    return [(words(elements(tuple(shapes[0]))),)]


def mask_forward(xs, attrs):
    y = xs[0]
    keep = np.ones(y.shape, dtype=bool)
    lo, hi = bound(attrs, "min"), bound(attrs, "max")
    if lo is not None:
        keep &= y > y.dtype.type(lo)
    if hi is not None:
        keep &= y < y.dtype.type(hi)
    return [pack(keep)]


def mask_work(ins, outs, attrs):
    n = elements(tuple(ins[0]))
    return Work(OpClass.ELEMENTWISE, elements=n, bytes_read=4 * n, bytes_written=4 * words(n))


def mask_kernel(node, shape):
    n = elements(shape(node.inputs[0]))
    return KernelCall(
        "poet_range_mask_f32",
        (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), IntArg(n), *bound_args(node.attrs)),
        "mask",
    )


# ---- MaskGrad(M, dY) -> dX -----------------------------------------------------------------------------
def grad_infer(shapes, attrs):
    n = elements(tuple(shapes[1]))
    if tuple(shapes[0]) != (words(n),):
        raise ValueError(f"mask {tuple(shapes[0])} does not hold {n} bits")
    return [tuple(shapes[1])]


def grad_forward(xs, attrs):
    m, dy = xs
    keep = unpack(m, dy.size).reshape(dy.shape)
    return [np.where(keep, dy, 0).astype(dy.dtype)]


def grad_work(ins, outs, attrs):
    n = elements(tuple(ins[1]))
    return Work(OpClass.ELEMENTWISE, elements=n, bytes_read=4 * (n + words(n)), bytes_written=4 * n)


def grad_kernel(node, shape):
    n = elements(shape(node.outputs[0]))
    m, dy = node.inputs
    return KernelCall(
        "poet_mask_grad_f32",
        (TensorArg(m), TensorArg(dy), TensorArg(node.outputs[0], False), IntArg(n)),
        "mask",
    )


MASK = OpDef(
    "RangeMask", mask_infer, mask_forward, mask_work, None, mask_kernel, internal=True, channelwise=True
)
GRAD = OpDef(
    "MaskGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True, channelwise=True
)
