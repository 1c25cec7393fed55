"""Split along ``axis`` into up to POET_MAX_PIECES outputs: sizes from the ``split`` input/attribute, else
``num_outputs`` (opset 18: equal chunks of ceil(dim / n), the last one smaller), else one equal chunk per
output (opset < 18). The gradient concatenates the output gradients, zeros (internal op Zeros) for outputs
that received none."""

from __future__ import annotations

import numpy as np

from poet_edge.ops.base import (
    ANY,
    IntArg,
    IntArrayArg,
    KernelCall,
    NullArg,
    OpDef,
    TensorArg,
    per_sample_axis,
    unsupported,
)
from poet_edge.ops.concat import MAX_PIECES, pieces, work
from poet_edge.ops.softmax import norm_axis


def sizes(shape, attrs) -> tuple[int, ...]:
    a = norm_axis(int(attrs.get("axis", 0)), len(shape))
    dim = int(shape[a])
    if attrs.get("split") is not None:
        out = tuple(int(s) for s in attrs["split"])
        if sum(out) != dim or any(s < 0 for s in out):
            raise ValueError(f"split sizes {out} do not add up to dim {dim}")
        return out
    n = int(attrs["num_outputs"])
    chunk = -(-dim // n)
    out = tuple(max(0, min(chunk, dim - i * chunk)) for i in range(n))
    return out


def infer(shapes, attrs):
    s = tuple(shapes[0])
    a = norm_axis(int(attrs.get("axis", 0)), len(s))
    return [s[:a] + (k,) + s[a + 1 :] for k in sizes(s, attrs)]


def forward(xs, attrs):
    a = norm_axis(int(attrs.get("axis", 0)), xs[0].ndim)
    cuts = np.cumsum(sizes(xs[0].shape, attrs))[:-1]
    return [np.ascontiguousarray(p) for p in np.split(xs[0], cuts, axis=a)]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    parts = [
        gy if gy is not None else gb.emit("Zeros", (), {"shape": gb.shape(out)})
        for out, gy in zip(node.outputs, gys, strict=True)
    ]
    if len(parts) == 1:
        return [parts[0]]
    return [gb.emit("Concat", tuple(parts), {"axis": int(node.attr("axis", 0))})]


def kernel(node, shape):
    outer, lens = pieces([shape(t) for t in node.outputs], int(node.attr("axis", 0)))
    ys = [TensorArg(t, False) for t in node.outputs] + [NullArg()] * (MAX_PIECES - len(node.outputs))
    args = (TensorArg(node.inputs[0]), *ys, IntArg(outer), IntArg(len(node.outputs)), IntArrayArg(lens))
    return KernelCall("poet_split_f32", args, "concat")


def check(node):
    if not 1 <= len(node.outputs) <= MAX_PIECES:
        raise unsupported(node, f"{len(node.outputs)} outputs (at most {MAX_PIECES})")
    if "" in node.outputs:
        raise unsupported(node, "omitted (empty) output in the middle of the outputs")
    if node.attrs.get("split") is None and "num_outputs" not in node.attrs:
        # opset < 18 without sizes: one equal chunk per output (recorded for shape inference)
        node.attrs["num_outputs"] = len(node.outputs)  # type: ignore[index]
    elif node.attrs.get("split") is not None and len(tuple(node.attrs["split"])) != len(node.outputs):
        raise unsupported(node, f"{len(node.outputs)} outputs for split sizes {tuple(node.attrs['split'])}")


ATTRIBUTES = {"axis": ANY, "split": ANY, "num_outputs": ANY}  # split: an attribute before opset 13
OP = OpDef(
    "Split",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={1: "split"},
    attributes=ATTRIBUTES,
    per_sample=per_sample_axis("axis", 0),
)
