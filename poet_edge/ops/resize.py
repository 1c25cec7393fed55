"""Resize (opset 10+) and Upsample (opset 7-9) in mode "nearest" by integer factors on the spatial axes:
torch's ``nn.Upsample(scale_factor=k, mode="nearest")`` / ``F.interpolate(..., mode="nearest")`` export
(Resize with coordinate_transformation_mode "asymmetric", nearest_mode "floor", and a constant ``scales``
input, or ``sizes`` computed from Shape and folded by the frontend). Every element of X[N, C, *spatial]
becomes a block of k_1 x ... x k_d equal outputs: Y[n, c, i_1, ..., i_d] = X[n, c, i_1 // k_1, ...].

Supported: X of rank 3 to 5 (1 to 3 spatial axes); ``scales`` (or ``sizes``, divided by the input's dims)
whose N and C factors are 1 and whose spatial factors are integers >= 1; Resize-18's ``axes``. That is block
repetition for these (coordinate_transformation_mode, nearest_mode) pairs, the only ones accepted
(:data:`EXACT`): with output index x = k i + j (0 <= j < k), "asymmetric" maps x to x / k = i + j / k in
[i, i + 1) and "tf_half_pixel_for_nn" to (x + 1/2) / k in (i, i + 1), both read i with "floor";
"half_pixel", "pytorch_half_pixel" and "half_pixel_symmetric" (no adjustment: the output is exactly k times
the input) map x to (x + 1/2) / k - 1/2 in (i - 1/2, i + 1/2), which "round_prefer_floor" and
"round_prefer_ceil" round to i (never a tie). Resize-10 and Upsample have no such attributes and read the
same way (ONNX's Resize-10 to 11 adapter gives asymmetric / floor). Refused, naming the node and this list:
modes "linear" and "cubic", "align_corners", "tf_crop_and_resize", other pairs, downsampling, non-integer
factors, N or C factors other than 1, ``keep_aspect_ratio_policy`` other than "stretch", non-constant
scales or sizes.

Gradient ResizeGrad(dY): dX[n, c, i] = the sum of dY over i's block, added in the block's row-major order
(the C kernel's order, so the numpy reference gives its bits).

Each output channel reads only its input channel (N and C factors 1), so operator splitting runs Resize,
Upsample and ResizeGrad per channel tile (``per_channel``; a Resize by sizes is loaded by its factors as
scales: :func:`as_scales`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from poet_edge.ops.base import (
    ANY,
    Attr,
    CArg,
    IntArg,
    KernelCall,
    OpDef,
    TensorArg,
    elements,
    f32_bytes,
    no_effect,
    only,
    per_sample_always,
    unsupported,
)
from poet_edge.ops.softmax import norm_axis
from poet_edge.ops.transpose import grow_work
from poet_edge.work import OpClass, Work

# coordinate_transformation_mode -> the nearest_modes with which an integer upsampling is block repetition
_HALF = ("round_prefer_floor", "round_prefer_ceil")
EXACT: dict[str, tuple[str, ...]] = {
    "asymmetric": ("floor",),
    "tf_half_pixel_for_nn": ("floor",),
    "half_pixel": _HALF,
    "pytorch_half_pixel": _HALF,
    "half_pixel_symmetric": _HALF,
}
SUPPORTED = (
    "Resize supports mode 'nearest' upsampling of X[N, C, 1 to 3 spatial dims] by integer factors (N and "
    "C factors 1) from constant scales or sizes, with asymmetric or tf_half_pixel_for_nn and nearest_mode "
    "floor (torch's export), or half_pixel, pytorch_half_pixel or half_pixel_symmetric and nearest_mode "
    "round_prefer_floor or round_prefer_ceil"
)
MAX_SPATIAL = 3


def _floats(v) -> tuple[float, ...]:
    return tuple(float(s) for s in np.asarray(v if v is not None else (), np.float64).reshape(-1))


def factors(x: Sequence[int], attrs) -> tuple[int, ...]:
    """The integer factor of every axis of an input of shape ``x``; ValueError naming what is unsupported.
    Resize-10 has no roi input: its scales fold to ``roi`` (input 1), told apart by a missing scales and
    sizes (Resize-11+ needs one of them)."""
    rank = len(x)
    scales, sizes = _floats(attrs.get("scales")), _floats(attrs.get("sizes"))
    if not scales and not sizes:
        scales = _floats(attrs.get("roi"))  # Resize-10 (X, scales); Upsample's scales fold to "scales"
    if bool(scales) == bool(sizes):
        raise ValueError("needs exactly one of the constant inputs scales and sizes")
    given = scales or sizes
    axes = tuple(norm_axis(int(a), rank) for a in attrs.get("axes", range(rank)))  # type: ignore[attr-defined]
    if len(given) != len(axes) or len(set(axes)) != len(axes):
        raise ValueError(f"{len(given)} {'scales' if scales else 'sizes'} for axes {axes} of rank {rank}")
    full = [1.0] * rank
    for a, v in zip(axes, given, strict=True):
        full[a] = v if scales else v / x[a]
    if not 3 <= rank <= 2 + MAX_SPATIAL:
        raise ValueError(f"X of rank {rank}; {SUPPORTED}")
    out = []
    for a, f in enumerate(full):
        k = int(round(f))
        if f != k or k < 1 or (a < 2 and k != 1):
            shown = tuple(float(f"{v:.8g}") for v in full)
            what = f"scales {shown}" if scales else f"sizes {tuple(int(v) for v in sizes)} (factors {shown})"
            raise ValueError(f"{what} for input {tuple(x)}; {SUPPORTED}")
        out.append(k)
    return tuple(out)


def as_scales(x: Sequence[int], attrs) -> dict[str, object]:
    """``attrs`` with ``sizes`` (which name input ``x``'s whole dims) replaced by the factors as ``scales``.
    The frontend loads every Resize so, where ``x`` is known: a part along N or C (operator splitting's
    channel tiles, batch splitting's parts) then keeps the factors."""
    if not _floats(attrs.get("sizes")):
        return dict(attrs)
    rest = {k: v for k, v in attrs.items() if k not in ("sizes", "axes")}
    return {**rest, "scales": factors(x, attrs)}


def infer(shapes, attrs):
    x = tuple(shapes[0])
    return [tuple(d * k for d, k in zip(x, factors(x, attrs), strict=True))]


def forward(xs, attrs):
    y = xs[0]
    for a, k in enumerate(factors(xs[0].shape, attrs)):
        if k > 1:
            y = np.repeat(y, k, axis=a)
    return [np.ascontiguousarray(y)]


def backward(gb, node, gys, needs):
    if not needs[0]:
        return [None]
    ks = factors(gb.shape(node.inputs[0]), node.attrs)
    if all(k == 1 for k in ks):
        return [gys[0]]
    return [gb.emit("ResizeGrad", (gys[0],), {"scales": ks})]


def _geometry(x: Sequence[int], ks: Sequence[int]) -> tuple[CArg, ...]:
    """(planes, D, H, W, KD, KH, KW) of X[N, C, spatial] and its factors (leading spatial axes 1 when
    fewer)."""
    pad = MAX_SPATIAL - (len(x) - 2)
    dims = (1,) * pad + tuple(x[2:])
    fs = (1,) * pad + tuple(ks[2:])
    return tuple(IntArg(v) for v in (x[0] * x[1], *dims, *fs))


def kernel(node, shape):
    x = shape(node.inputs[0])
    args = (
        TensorArg(node.inputs[0]),
        TensorArg(node.outputs[0], False),
        *_geometry(x, factors(x, node.attrs)),
    )
    return KernelCall("poet_resize_nearest_f32", args, "resize")


def check(node):
    attrs = node.attrs
    ctm = str(attrs.get("coordinate_transformation_mode", "half_pixel"))
    nearest = str(attrs.get("nearest_mode", "round_prefer_floor"))
    if nearest not in EXACT.get(ctm, ()):
        raise unsupported(
            node,
            f"coordinate_transformation_mode='{ctm}' with nearest_mode='{nearest}'; {SUPPORTED}",
        )
    if "scales" not in attrs and "sizes" not in attrs and not (node.op == "Resize" and attrs.get("roi")):
        raise unsupported(node, f"scales / sizes that are not constants; {SUPPORTED}")


def work(ins, outs, attrs):
    """Every output element written once. Measured on qemu-cortex-m4 (poet_edge.microbench): 1.14
    instructions per output byte for 8 8x8 maps by 2, 0.94 for 8 16x16 maps by 2, 1.28 for 4 8x8 maps by 3,
    0.85 for 8 rows of 64 by 2, against the cortex-m4 profile's 0.977 per copied byte: weight 1.1."""
    return grow_work(ins, outs, 1.1)


# ---- the gradient: dX = the sum of dY over each block ------------------------------------------------
def grad_infer(shapes, attrs):
    dy, ks = tuple(shapes[0]), tuple(int(k) for k in attrs["scales"])  # type: ignore[attr-defined]
    if len(dy) != len(ks) or any(d % k for d, k in zip(dy, ks, strict=True)):
        raise ValueError(f"ResizeGrad: dY {dy} is not a multiple of the factors {ks}")
    return [tuple(d // k for d, k in zip(dy, ks, strict=True))]


def grad_forward(xs, attrs):
    dy = xs[0]
    ks = tuple(int(k) for k in attrs["scales"])
    x = grad_infer([dy.shape], attrs)[0]
    blocks = dy.reshape(tuple(v for d, k in zip(x, ks, strict=True) for v in (d, k)))
    acc = np.zeros(x, dy.dtype)
    for offs in itertools.product(*(range(k) for k in ks)):  # row-major over the block: the C order
        acc = acc + blocks[tuple(v for o in offs for v in (slice(None), o))]
    return [acc]


def grad_kernel(node, shape):
    dx = shape(node.outputs[0])
    ks = tuple(int(k) for k in node.attrs["scales"])  # type: ignore[attr-defined]
    args = (TensorArg(node.inputs[0]), TensorArg(node.outputs[0], False), *_geometry(dx, ks))
    return KernelCall("poet_resize_nearest_grad_f32", args, "resize")


def grad_work(ins, outs, attrs):
    """Every dY element read and added once. Measured on qemu-cortex-m4 (poet_edge.microbench), per dY
    element: 6.26 for 8 16x16 maps by 2x2, 5.23 for 32x32 maps, 4.52 for rows of 128 by 2 (the kernel's
    unrolled path for a last factor <= 2); 9.08 and 8.53 for 4 24x24 and 48x48 maps by 3x3 (the general
    loop), against the cortex-m4 profile's 4.184 per reduced element: weight 1.3, or 2.1 for a last factor
    above 2."""
    wide = int(attrs["scales"][-1]) > 2  # type: ignore[index]
    return Work(
        OpClass.REDUCE,
        elements=elements(ins[0]),
        bytes_read=f32_bytes(*ins),
        bytes_written=f32_bytes(*outs),
        weight=2.1 if wide else 1.3,
    )


def _told(attr: Attr) -> Attr:
    """``attr`` whose refusal also says everything Resize supports."""
    return Attr(attr.ok, f"{attr.supported}; {SUPPORTED}")


_MODE = _told(only("nearest"))
_NO_EFFECT = "no effect on mode 'nearest' upsampling"
OP = OpDef(
    "Resize",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={1: "roi", 2: "scales", 3: "sizes"},  # Resize-10: input 1 is scales (see factors)
    attributes={
        "mode": _MODE,
        "coordinate_transformation_mode": only(*EXACT),  # with a matching nearest_mode (check)
        "nearest_mode": only("floor", *_HALF),
        "axes": ANY,
        "keep_aspect_ratio_policy": only("stretch"),
        "antialias": no_effect(_NO_EFFECT + " (it filters linear and cubic downsampling)"),
        "cubic_coeff_a": no_effect(_NO_EFFECT + " (mode 'cubic' only)"),
        "exclude_outside": no_effect(_NO_EFFECT + " (interpolation weights only)"),
        "extrapolation_value": no_effect(_NO_EFFECT + " ('tf_crop_and_resize' only, which is refused)"),
    },
    per_sample=per_sample_always,  # N and C factors 1; sizes are loaded as scales (as_scales)
    per_channel=True,
)
UPSAMPLE = OpDef(
    "Upsample",
    infer,
    forward,
    work,
    backward,
    kernel,
    check,
    const_inputs={1: "scales"},  # opset 9; opset 7: the attribute
    attributes={"mode": _MODE, "scales": ANY},
    per_sample=per_sample_always,  # N and C factors 1; sizes are loaded as scales (as_scales)
    per_channel=True,
)
GRAD = OpDef(
    "ResizeGrad", grad_infer, grad_forward, grad_work, None, grad_kernel, internal=True, per_channel=True
)
