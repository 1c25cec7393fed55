"""poet_edge.kernel_model: the block structure it counts matches the kernels' arithmetic (every MAC it
places is a real product, counted by brute force over the window), and the weights order shapes as the
measured kernels do (bench/kernel_model.py fits the coefficients on qemu-cortex-m4)."""

from __future__ import annotations

import itertools

import pytest

from poet_edge import kernel_model as km
from poet_edge import ops
from poet_edge.ops.conv import conv_window


def valid_macs(x, w, strides, pads, group) -> int:
    """Products a direct convolution computes (padded taps skipped), by brute force."""
    win = conv_window(x, w, {"strides": strides, "pads": pads, "group": group})
    rows = sum(
        1
        for oh, kh in itertools.product(range(win.oh), range(win.kh))
        if 0 <= oh * win.sh - win.pt + kh < win.h
    )
    cols = sum(
        1
        for ow, kw in itertools.product(range(win.ow), range(win.kw))
        if 0 <= ow * win.sw - win.pl + kw < win.w
    )
    return win.n * win.m * (win.c // group) * rows * cols


CONVS = [
    ((1, 16, 32, 32), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), 1),
    ((1, 16, 32, 32), (32, 16, 3, 3), (2, 2), (1, 1, 1, 1), 1),
    ((1, 6, 14, 14), (16, 6, 5, 5), (1, 1), (0, 0, 0, 0), 1),
    ((1, 1, 28, 28), (6, 1, 5, 5), (1, 1), (2, 2, 2, 2), 1),
    ((1, 16, 32, 32), (32, 16, 1, 1), (2, 2), (0, 0, 0, 0), 1),
    ((1, 64, 25, 5), (64, 64, 1, 1), (1, 1), (0, 0, 0, 0), 1),
    ((2, 8, 12, 12), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), 8),
    ((1, 3, 32, 32), (8, 3, 3, 3), (2, 2), (1, 1, 1, 1), 1),
]


@pytest.mark.parametrize("x, w, strides, pads, group", CONVS)
@pytest.mark.parametrize("kind", ["forward", "grad_input", "grad_weight"])
def test_conv_blocks_place_exactly_the_real_products(x, w, strides, pads, group, kind) -> None:
    win = conv_window(x, w, {"strides": strides, "pads": pads, "group": group})
    t = km.conv_tally(win, kind)
    if t.family.startswith("depthwise"):  # the depthwise count is the window's, padded taps included
        assert t.macs == win.n * win.m * win.oh * win.ow * win.kh * win.kw and t.loads > 0
    else:
        assert t.macs == valid_macs(x, w, strides, pads, group)
        assert t.loads >= t.steps + t.asm_steps > 0
    assert t.outputs > 0


def test_gemm_blocks_cover_the_product_once() -> None:
    for m, n, k in [(8, 128, 640), (1, 120, 400), (7, 13, 5), (128, 640, 8)]:
        t = km.gemm_tally(m, n, k)
        assert t.macs == m * n * k and t.outputs == m * n
    for m, n, k in [(8, 128, 640), (7, 13, 5), (2, 30, 8), (9, 11, 7)]:
        for layout in [(0, 0), (0, 1), (1, 0), (1, 1)]:
            t = km.gemm_tally(m, n, k, *layout)
            assert t.macs == m * n * k and t.outputs == m * n, (m, n, k, layout)
    # 8 x 6 Aᵀ·Bᵀ (C blocks only): two 4-row strips of one 6-wide block, 3 k steps: (4 + 6) loads per step
    t = km.gemm_tally(8, 6, 3, 1, 1)
    assert (t.blocks, t.rows, t.steps, t.loads) == (2, 2, 6, 60)
    # A·B: two 4x6 assembly blocks, 7 load and pointer instructions per step
    t = km.gemm_tally(8, 6, 3)
    assert (t.blocks, t.asm_blocks, t.rows, t.asm_steps, t.loads) == (0, 2, 2, 6, 42)
    # A·Bᵀ, 8 x 12: per strip two 4x5 blocks (9 loads per pair of steps) and one 4x2 block (6 per 4 steps)
    t = km.gemm_tally(8, 12, 8, 0, 1)
    assert (t.asm_blocks, t.loads) == (6, 4 * 9 * 4 + 2 * 6 * 2)
    # Aᵀ·B with two rows: a 2x12 block and a 2x2 C block
    t = km.gemm_tally(2, 14, 4, 1, 0)
    assert (t.asm_blocks, t.blocks, t.loads) == (1, 1, 7 * 4 + 4 * 4)


def test_weights_order_shapes_like_the_measured_kernels() -> None:
    big = km.gemm_weight(8, 128, 640)
    assert big == pytest.approx(1.0, abs=0.02)  # the rate's unit: a MAC of a large GEMM
    # measured on qemu-cortex-m4: batch-1 dense 3.8, K = 8 weight gradients 2.45-2.5, large GEMMs 2.3-2.35
    assert km.gemm_weight(1, 120, 400, 0, 1) > km.gemm_weight(128, 640, 8, 1, 0) > big
    # a 2-wide reduction stores an output per 2 MACs (3.3 measured), a 2-column head runs 4x2 blocks (2.4)
    assert km.gemm_weight(8, 256, 2) > km.gemm_weight(8, 2, 256, 0, 1) > km.gemm_weight(8, 128, 640, 0, 1)


def test_ops_carry_the_weights() -> None:
    gemm = ops.get("Gemm").work([(1, 400), (120, 400)], [(1, 120)], {"transB": 1})
    assert gemm.weight == km.gemm_weight(1, 120, 400, 0, 1) and gemm.quantity == pytest.approx(
        48000 * gemm.weight
    )
    gelu = ops.get("Gelu").work([(8, 256)], [(8, 256)], {})
    relu = ops.get("Relu").work([(8, 256)], [(8, 256)], {})
    assert relu.weight == 1.0 and gelu.weight > 5 and gelu.quantity == pytest.approx(8 * 256 * gelu.weight)


def test_fit_recovers_the_coefficients_it_was_given() -> None:
    shapes = [
        (8, 128, 64),
        (1, 30, 40),
        (13, 7, 8),
        (64, 64, 8),
        (3, 2, 90),
        (2, 40, 16),
        (9, 9, 9),
        (5, 3, 7),
    ]
    tallies = [
        km.gemm_tally(m, n, k, ta, tb) for m, n, k in shapes for ta, tb in [(0, 0), (0, 1), (1, 0), (1, 1)]
    ]
    true = km.Coefficients(step=3.0, output=1.5, block=25.0, row=80.0, asm_step=1.0, asm_block=40.0)
    measured = [t.instructions({"gemm": true}) for t in tallies]
    coef, errors = km.fit(tallies, measured)
    assert coef["gemm"].step == pytest.approx(3.0, abs=0.01) and coef["gemm"].row == pytest.approx(
        80.0, abs=0.5
    )
    assert max(abs(e) for e in errors) < 1e-3
