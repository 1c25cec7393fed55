"""How efficiently the register-blocked kernels (runtime_c/src/optimized) run a given shape.

The fast GEMM and convolution kernels compute blocks of up to R = 4 x P = 6 outputs in registers. A block
with a reduction of length K executes, per k step, R + P loads and 2 R P arithmetic instructions (one
multiply, one add: multiply-adds are never contracted) plus loop overhead, then stores its R P outputs.
Small or narrow shapes therefore cost more per MAC than large ones: a batch-1 dense layer runs 1 x 6
blocks (7 loads for 6 MACs), a 14-pixel convolution row ends in a 2-pixel block, a border pixel of a
valid 5x5 convolution gets fewer taps. :func:`gemm_weight` and :func:`conv_weight` walk the kernels' block
structure (the same loops as the C, without the MACs) and count::

    instructions = 2 MACs + loads + step * k steps + edge_step * border k steps + output * outputs
                   + block * blocks + row * rows + line * position rows (weight gradients)

with one set of coefficients per kernel family (GEMM, which also runs the 1x1 convolutions' gradients;
convolution forward, input gradient, weight gradient by blocks of input channels or by kernel taps;
depthwise 3x3 by kind and stride). The weight is that count
divided by the count of the same MACs in full 4 x 6 GEMM blocks with a long reduction (``IDEAL``
instructions per MAC), so a large GEMM weighs 1.0, a convolution about its extra cost, and the cost model
(:mod:`poet_edge.cost`) prices ``weight * MACs`` at the device's per-MAC rate. A call's fixed set-up is
not in the weight: the cost model's per-call cycles hold it.

The coefficients are a least-squares fit (relative error, :func:`fit`) of this count to the instruction
counts of the zoo's dense and convolution calls measured on qemu-cortex-m4 by bench/kernels.py (the fit
and its residuals: ``.venv/bin/python bench/kernels.py --model``). The count is the same for every Cortex-M
target (one C source, one instruction set); a device's cycles per instruction live in its profile.
Depthwise convolutions run a different kernel (one channel, taps in registers): weight 1.0, their own
per-MAC rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the ops import this module: no import of them at run time
    from poet_edge.ops.pool_common import Window


@dataclass(frozen=True)
class Coefficients:
    """Instructions per unit of a kernel family's block structure (besides 2 per MAC and 1 per load)."""

    step: float = 0.0  # loop and pointer overhead of one k step of a block
    edge_step: float = 0.0  # extra for a step of a border block (run-time tap counts) or a run-time stride
    output: float = 0.0  # storing one output (and its bias add)
    block: float = 0.0  # setting up one block
    row: float = 0.0  # one strip of rows or run of pixels the kernel sets up
    line: float = 0.0  # one row of positions of a weight-gradient block (its R + P pointers re-pointed)
    asm_step: float = 0.0  # loop overhead of one k step of an assembly GEMM block (poet/blocked_arm.h)
    asm_block: float = 0.0  # setting up, zeroing and storing one assembly GEMM block
    narrow_step: float = 0.0  # extra for a k step of a block of fewer than 4 rows (the part kernels' C path)


# Fitted with `.venv/bin/python bench/kernel_model.py qemu-cortex-m4` (2026-11-23) to 261 distinct dense and
# convolution calls (the zoo's and `poet calibrate`'s); terms a family does not have, or whose fitted value
# came out negative, are 0. Fitted count vs measured, rms / max relative error: gemm (with the 1x1
# convolutions, which call it or its assembly blocks) 1.7 / 9.3%, conv forward 3.5 / 6.1%, input gradient
# 2.4 / 5.1%, weight gradient 5.3 / 9.0%; depthwise 1.8 to 19% rms by kind and stride (worst: the stride-2
# input gradient, and maps 5 columns wide).
COEFFICIENTS: dict[str, Coefficients] = {
    "gemm": Coefficients(step=1.42, block=54.09, row=141.56, asm_step=1.3, asm_block=31.76),
    "conv_forward": Coefficients(step=4.7, row=317.93),
    "conv_grad_input": Coefficients(edge_step=14.39, block=512.42),
    # the block kernels of part-kernel tiles that are not a convolution of their own (part_tally), fitted with
    # `.venv/bin/python bench/part_model.py qemu-cortex-m4` (2026-11-29) to 189 distinct calls of the zoo's
    # splits, to the measured count minus the cortex-m4 profile's per-call cost of a conv call (the cost
    # model adds it): rms / max relative error of the priced call 13.8 / 38% forward, 16.1 / 65% input
    # gradient (worst: tiles of depthwise convolutions that cut groups); whole-conv pricing: 46 / 53% rms
    "conv_forward_part": Coefficients(step=0.67, edge_step=9.6, output=3.35, row=197.86, narrow_step=3.36),
    "conv_grad_input_part": Coefficients(edge_step=24.24, output=1.75, row=320.03, narrow_step=17.3),
    "conv_grad_weight": Coefficients(edge_step=4.81, output=22.77, line=57.73),
    "conv_grad_weight_taps": Coefficients(step=7.13, output=61.75, block=3.82, line=87.37),
    "depthwise_forward_s1": Coefficients(step=0.85, output=0.09, row=21.16),
    "depthwise_forward_s2": Coefficients(step=1.09, output=0.12, row=33.18),
    "depthwise_grad_input_s1": Coefficients(step=0.72, output=0.08, row=21.36),
    "depthwise_grad_input_s2": Coefficients(step=0.58, output=0.26),
    "depthwise_grad_weight_s1": Coefficients(step=0.69, row=4.29),
    "depthwise_grad_weight_s2": Coefficients(step=0.89, row=33.3),
}
# instructions per element of a plain elementwise kernel (the fast Relu on qemu-cortex-m4): the unit of the
# weights of elementwise ops that call the math helpers (GELU, tanh, softmax...: ops/elementwise.costly)
ELEMENT = 7.0


def element_weight(instructions: float) -> float:
    """Weight of an elementwise op measured at ``instructions`` per element."""
    return round(instructions / ELEMENT, 3)


# instructions per MAC of full 4 x 6 assembly A·B blocks with a long reduction (7 load and pointer
# instructions per 24 MACs): every weight is relative to it
IDEAL = 2.0 + 7.0 / 24.0 + COEFFICIENTS["gemm"].asm_step / 24.0


@dataclass
class Tally:
    """Counts of the block structure of one kernel call of a kernel ``family`` (a key of COEFFICIENTS)."""

    family: str = "gemm"
    macs: int = 0
    loads: int = 0
    steps: int = 0
    edge_steps: int = 0
    outputs: int = 0
    blocks: int = 0
    rows: int = 0
    lines: int = 0
    asm_steps: int = 0
    asm_blocks: int = 0
    narrow_steps: int = 0

    def asm(self, r: int, p: int, k: int, load_instructions: int) -> None:
        """One assembly block of r x p outputs (poet/blocked_arm.h) issuing ``load_instructions`` load and
        pointer instructions over its reduction of k."""
        self.macs += r * p * k
        self.loads += load_instructions
        self.outputs += r * p
        self.asm_steps += k
        self.asm_blocks += 1

    def block(self, r: int, p: int, k: int, times: int = 1, edge: bool = False) -> None:
        """``times`` blocks of r x p outputs with a reduction of k (``edge``: a border block, whose tap
        loops have run-time counts)."""
        self.macs += times * r * p * k
        self.loads += times * k * (r + p)
        self.steps += times * k
        if edge:
            self.edge_steps += times * k
        self.outputs += times * r * p
        self.blocks += times
        if r < 4:
            self.narrow_steps += times * k

    def run(self, r: int, n: int, k: int, times: int = 1, edge: bool = False) -> None:
        """A run of n pixels tiled by 6/4/2/1-pixel blocks (poet_run), r rows, reduction k."""
        for p in tiles(n, (6, 4, 2, 1)):
            self.block(r, p, k, times, edge)
        self.rows += times

    def terms(self) -> tuple[int, ...]:
        """The counts multiplied by the family's coefficients (in the order of :class:`Coefficients`)."""
        return (
            self.steps,
            self.edge_steps,
            self.outputs,
            self.blocks,
            self.rows,
            self.lines,
            self.asm_steps,
            self.asm_blocks,
            self.narrow_steps,
        )

    def instructions(self, table: dict[str, Coefficients] | None = None) -> float:
        c = (table or COEFFICIENTS)[self.family]
        coef = (c.step, c.edge_step, c.output, c.block, c.row, c.line, c.asm_step, c.asm_block, c.narrow_step)
        return 2 * self.macs + self.loads + sum(k * n for k, n in zip(coef, self.terms(), strict=True))

    def weight(self, macs: int) -> float:
        """Modelled instructions over ``macs`` MACs in ideal blocks (1.0 when macs is 0)."""
        return round(self.instructions() / (IDEAL * macs), 4) if macs > 0 else 1.0


def tiles(n: int, sizes: tuple[int, ...]) -> list[int]:
    """n split as the kernels split it: the largest size as often as it fits, then each smaller size once."""
    out = [sizes[0]] * (n // sizes[0])
    n -= sizes[0] * len(out)
    for s in sizes[1:]:
        if n >= s:
            out.append(s)
            n -= s
    return out


def _asm_loads(kind: str, k: int) -> int:
    """Load and pointer instructions of one assembly block over a reduction of k (poet/blocked_arm.h)."""
    if kind == "tn":  # 4x6 Aᵀ·B: VLDM of 4 x, 2 VLDM of 3 y, 2 ADD per step
        return 5 * k
    if kind == "nn":  # 4x6 A·B: 4 single-value VLDM, 2 VLDM of 3 y, 1 ADD per step
        return 7 * k
    if kind == "nt":  # 4x5 A·Bᵀ: 9 VLDM per pair of steps (of one value for an odd first step)
        return 9 * (k // 2 + k % 2)
    if kind == "nt2":  # 4x2 A·Bᵀ: 6 VLDM per 4 steps, 6 per single step for K % 4
        return 6 * (k // 4 + k % 4)
    if kind == "nn3":  # 4x3 A·B: 4 single-value VLDM, VLDM of 3 y, 1 ADD per step
        return 6 * k
    if kind == "tn3":  # 4x3 Aᵀ·B: VLDM of 4 x, VLDM of 3 y, 2 ADD per step
        return 4 * k
    return 7 * k  # "tn2": 2x12 Aᵀ·B: VLDM of 2 x, 4 VLDM of 3 y, 2 ADD


def gemm_tally(m: int, n: int, k: int, trans_a: int = 0, trans_b: int = 0) -> Tally:
    """poet_gemm_f32 as built for Cortex-M (with the assembly blocks, src/optimized/gemm.c): 4-row strips of
    4x6 assembly blocks and a 4x3 one (4x5, then 4x2, for A·Bᵀ) with C tails of 2/1 columns; for Aᵀ·B two
    remaining rows in 2x12 assembly blocks; every other row in C blocks of 2/1 rows x 6/4/2/1 columns.
    Aᵀ·Bᵀ runs C only (no training graph calls it)."""
    t = Tally()
    if trans_a and trans_b:
        for r in tiles(m, (4, 2, 1)):
            for p in tiles(n, (6, 4, 2, 1)):
                t.block(r, p, k)
            t.rows += 1
        return t
    kind = "tn" if trans_a else "nt" if trans_b else "nn"
    width = 5 if kind == "nt" else 6
    rest_rows = m
    for _ in range(m // 4):
        for _ in range(n // width):
            t.asm(4, width, k, _asm_loads(kind, k))
        rest = n % width
        if kind != "nt" and rest >= 3:
            t.asm(4, 3, k, _asm_loads(kind + "3", k))
            rest -= 3
        if kind == "nt":
            for _ in range(rest // 2):
                t.asm(4, 2, k, _asm_loads("nt2", k))
            rest %= 2
        for p in tiles(rest, (4, 2, 1)):
            t.block(4, p, k)
        t.rows += 1
        rest_rows -= 4
    if rest_rows >= 2 and kind == "tn":
        for _ in range(n // 12):
            t.asm(2, 12, k, _asm_loads("tn2", k))
        for p in tiles(n % 12, (6, 4, 2, 1)):
            t.block(2, p, k)
        t.rows += 1
        rest_rows -= 2
    for r in tiles(rest_rows, (2, 1)):
        for p in tiles(n, (6, 4, 2, 1)):
            t.block(r, p, k)
        t.rows += 1
    return t


def gemm_weight(m: int, n: int, k: int, trans_a: int = 0, trans_b: int = 0) -> float:
    """Weight of an m x n x k product of layout (trans_a, trans_b) (Gemm; each matrix of a batched MatMul)."""
    return gemm_tally(m, n, k, trans_a, trans_b).weight(m * n * k)


def gemm_part_weight(
    m: int, n: int, k: int, trans_b: int = 0, partial: bool = True, plain: bool = True
) -> float:
    """Weight of an m x n x k GemmPart call (poet_gemm_part_f32, src/optimized/gemm_part.c, as built for
    Cortex-M), from its block structure: with alpha == 1 (``plain``) A·B runs 4-row strips of 4x6 and 4x3
    assembly blocks (7 and 6 load and pointer instructions a k step) and every other row 1x8 assembly blocks
    (3 a k step: one VLDM of A, one of 8 B values, one ADD); A·Bᵀ runs 4-row strips of 4x5 and 4x4 assembly
    blocks (9 and 8 VLDM a pair of k steps), its other rows C blocks of 2 / 1 rows. Column tails, and every
    block when alpha != 1, are C blocks of up to 4 rows x 6/4/2/1 columns. With the previous part's sums
    (``partial``) a block first loads its accumulators: one VLDM and one ADD a row in assembly, one load an
    output in C. The blocks of gemm_part.c's own assembly are counted instruction by instruction instead
    of by the ``asm_step`` / ``asm_block`` coefficients of the whole kernel's blocks: a 1x8 block's 16
    set-up instructions (its pointers, one VLDM of P or zeros, the k loop's entry tests, one VSTM, the
    column loop); a 4x5 A·Bᵀ block of a strip statement: P's 4 rows (10, or 1 VLDM of zeros), 5 column
    pointers, the 4 stores (10), the A pointers' reset and the block loop (8), and its k loop (2 a pair
    of pairs, with 7 entry tests unless K % 4 == 0)."""
    t = Tally()

    def row8() -> None:
        t.macs += 8 * k
        t.loads += 3 * k + 16
        t.outputs += 8
        t.asm_steps += k

    def c_blocks(r: int, cols: int) -> None:
        for p in tiles(cols, (6, 4, 2, 1)):
            t.block(r, p, k)
            t.loads += r * p if partial else 0

    def asm(r: int, p: int, loads: int) -> None:
        t.asm(r, p, k, loads + (2 * r if partial else 0))

    def nt5() -> None:
        t.macs += 20 * k
        loop = 1 + k // 2 if k % 4 == 0 else 7 + 2 * (k // 4)
        t.loads += 9 * pairs + loop + (10 if partial else 1) + 5 + 10 + 8
        t.outputs += 20

    pairs = k // 2 + k % 2
    rest_rows = m
    if plain:
        for _ in range(m // 4):
            rest = n
            if trans_b:
                for _ in range(n // 5):
                    nt5()
                rest = n % 5
                if rest == 4:
                    asm(4, 4, 8 * pairs)
                    rest = 0
            else:
                for _ in range(n // 6):
                    asm(4, 6, 7 * k)
                rest = n % 6
                if rest >= 3:
                    asm(4, 3, 6 * k)
                    rest -= 3
            c_blocks(4, rest)
            t.rows += 1
            rest_rows -= 4
        if not trans_b:
            for _ in range(rest_rows):
                for _ in range(n // 8):
                    row8()
                c_blocks(1, n % 8)
                t.rows += 1
            rest_rows = 0
    for r in tiles(rest_rows, (4, 2, 1)):
        c_blocks(r, n)
        t.rows += 1
    return t.weight(m * n * k)


def _span(i: int, pad: int, stride: int, k: int, size: int) -> tuple[int, int]:
    """Forward taps of output index i (poet_fwd_cols): (first tap, count) with i * stride - pad + tap in
    [0, size) for tap < k."""
    base = i * stride - pad
    k0 = max(0, -base)
    return k0, max(0, min(k, size - base) - k0)


def _runs(keys: list[tuple[int, int]]) -> list[tuple[tuple[int, int], int]]:
    """Maximal runs of equal keys: (key, length)."""
    out: list[tuple[tuple[int, int], int]] = []
    for key in keys:
        if out and out[-1][0] == key:
            out[-1] = (key, out[-1][1] + 1)
        else:
            out.append((key, 1))
    return out


def _gi_taps(i: int, pad: int, stride: int, k: int, out: int) -> tuple[int, int]:
    """Input-gradient taps of input index i (poet_gi_taps): (first tap, count)."""
    t = i + pad
    lo, hi = max(0, t - (out - 1) * stride), min(k - 1, t)
    if lo > hi:
        return 0, 0
    first = lo + (t - lo) % stride
    return (0, 0) if first > hi else (first, (hi - first) // stride + 1)


def _pointwise(w: Window) -> bool:
    """1x1, stride 1, no padding: the kernels run all pixels of a channel as one row."""
    return w.kh == w.kw == 1 and w.sh == w.sw == 1 and not (w.pt or w.pl or w.pb or w.pr)


def _as_gemm(t: Tally, m: int, n: int, k: int, times: int, trans_a: int, trans_b: int) -> None:
    """``times`` m x n x k products by poet_gemm_f32 (the 1x1 convolutions): counted as GEMM."""
    g = gemm_tally(m, n, k, trans_a, trans_b)
    t.family = g.family
    counts = (
        "macs",
        "loads",
        "steps",
        "outputs",
        "blocks",
        "rows",
        "asm_steps",
        "asm_blocks",
        "narrow_steps",
    )
    for name in counts:
        setattr(t, name, getattr(g, name) * times)


def _pointwise_s2(w: Window, channels: int) -> bool:
    """The assembly paths of a 1x1 stride-2 convolution (conv.c's poet_pw2_asm)."""
    return (
        w.kh == w.kw == 1
        and w.sh == w.sw == 2
        and not (w.pt or w.pl)
        and channels % 4 == 0
        and w.ow % 4 == 0
        and 2 * (w.oh - 1) < w.h
        and 2 * (w.ow - 1) < w.w
    )


def _s2_blocks(t: Tally, channels: int, k: int, times: int, w: Window, loads_per_step: int) -> None:
    """4x4 assembly blocks (4 channels x 4 pixels of an output row) of a 1x1 stride-2 convolution."""
    t.family = "gemm"
    for _ in range(times * (channels // 4) * w.oh * (w.ow // 4)):
        t.asm(4, 4, k, loads_per_step * k)


def _fwd(w: Window, t: Tally, blocks: bool = False) -> None:
    """``blocks``: the block kernels only (a part kernel's tile, poet_fwd_tile): no GEMM, no 1x1 stride-2
    assembly; a 1x1 stride-1 conv runs all pixels of a channel as one run (poet_fwd_pw_blk)."""
    mg, cg, times = w.m // w.groups, w.c // w.groups, w.n * w.groups
    if _pointwise(w) and blocks:
        for r in tiles(mg, (4, 2, 1)):
            t.run(r, w.oh * w.ow, cg, times)
        return None
    if _pointwise(w):  # poet_fwd_pw on Cortex-M: W·X + bias per sample and group by the fast GEMM
        return _as_gemm(t, mg, w.oh * w.ow, cg, times, 0, 0)
    if _pointwise_s2(w, mg) and not blocks:  # poet_fwd_pw_s2_nn: 4 VLDM of a weight, 4 VLDR of an input
        return _s2_blocks(t, mg, cg, times, w, 9)  # and 1 ADD per step
    strips = tiles(mg, (4, 2, 1))
    rows = [_span(oh, w.pt, w.sh, w.kh, w.h)[1] for oh in range(w.oh)]
    cols = _runs([_span(ow, w.pl, w.sw, w.kw, w.w) for ow in range(w.ow)])
    for r in strips:
        for nkh in rows:
            for (_, nkw), n in cols:
                t.run(r, n, cg * nkh * nkw, times, nkh < w.kh or nkw < w.kw)


def _gi(w: Window, t: Tally, blocks: bool = False) -> None:
    """``blocks``: as for :func:`_fwd` (poet_gi_tile; 1x1 stride 1: poet_gi_pw_blk)."""
    mg, cg, times = w.m // w.groups, w.c // w.groups, w.n * w.groups
    if _pointwise(w) and blocks:
        for r in tiles(cg, (4, 2, 1)):
            t.run(r, w.h * w.w, mg, times)
        return None
    if _pointwise(w):  # poet_gi_pw: Wᵀ·dY per sample and group by the fast GEMM
        return _as_gemm(t, cg, w.h * w.w, mg, times, 1, 0)
    if _pointwise_s2(w, cg) and not blocks:  # poet_gi_pw_s2_tn: 2 VLDM, 2 ADD per step
        return _s2_blocks(t, cg, mg, times, w, 4)
    strips = tiles(cg, (4, 2, 1))
    ra = rb = qa = 0
    qb = w.w
    if w.sh == w.sw == 1:  # interior rows: border columns as vertical runs (poet_gi_rows)
        ra, rb = max(0, w.kh - 1 - w.pt), min(w.h, w.oh - w.pt)
        qa = min(w.w, max(0, w.kw - 1 - w.pl))
        qb = max(qa, min(w.w, w.ow - w.pl))
        if ra >= rb or (qa == 0 and qb == w.w):
            ra = rb = qa = 0
            qb = w.w
    for r in strips:
        if ra < rb:
            for iw in [*range(0, qa), *range(qb, w.w)]:
                t.run(r, rb - ra, mg * w.kh * _gi_taps(iw, w.pl, 1, w.kw, w.ow)[1], times, True)
        for ih in range(w.h):
            nkh = _gi_taps(ih, w.pt, w.sh, w.kh, w.oh)[1]
            split = ra <= ih < rb
            for rho in range(min(w.sw, w.w)):
                nq = qb if split else (w.w - rho + w.sw - 1) // w.sw
                q0 = qa if split else 0
                keys = [_gi_taps(rho + q * w.sw, w.pl, w.sw, w.kw, w.ow) for q in range(q0, nq)]
                for (_, nkw), n in _runs(keys):
                    full = nkh * w.sh >= w.kh and nkw * w.sw >= w.kw
                    t.run(r, n, mg * nkh * nkw, times, not full)


def _gw(w: Window, t: Tally) -> None:
    mg, cg = w.m // w.groups, w.c // w.groups
    strips = tiles(mg, (4, 2, 1))
    pointwise = _pointwise(w)
    if pointwise and w.n == 1:  # poet_gw_pw: dY·Xᵀ per group by the fast GEMM
        return _as_gemm(t, mg, cg, w.h * w.w, w.groups, 0, 1)
    spans_h = [_gw_span(kh, w.pt, w.sh, w.h, w.oh) for kh in range(w.kh)]
    spans_w = [_gw_span(kw, w.pl, w.sw, w.w, w.ow) for kw in range(w.kw)]
    if pointwise:
        spans_h, spans_w = [1], [w.h * w.w]
    if cg <= 2 and w.kw in (4, 5) and not pointwise:  # poet_gw_taps: the KW taps of a row as the block
        t.family = "conv_grad_weight_taps"
        ranges = [_gw_range(kw, w.pl, w.sw, w.w, w.ow) for kw in range(w.kw)]
        used = [(a, a + n) for a, n in ranges if n > 0]
        width = max(b for _, b in used) - min(a for a, _ in used) if used else 0
        missing = w.kw * width - sum(n for _, n in ranges)  # positions of the row a tap skips (tested)
        for r in strips:
            for nh in spans_h:
                times = w.groups * cg
                t.block(r, w.kw, w.n * nh * width, times)
                t.macs -= times * r * w.n * nh * missing
                t.lines += times * w.n * nh
        return
    for r in strips:
        for p in tiles(cg, (6, 4, 2, 1)):
            for nh in spans_h:
                for nw in spans_w:
                    t.block(r, p, w.n * nh * nw, w.groups, w.sw != 1)
                    t.lines += w.groups * w.n * nh


def _gw_range(k: int, pad: int, stride: int, size: int, out: int) -> tuple[int, int]:
    """(first, count) of the output positions of tap k along one axis (poet_gw_span)."""
    a = pad - k
    lo = 0 if a <= 0 else (a + stride - 1) // stride
    b = size - 1 + pad - k
    hi = -1 if b < 0 else min(out - 1, b // stride)
    return lo, max(0, hi - lo + 1)


def _gw_span(k: int, pad: int, stride: int, size: int, out: int) -> int:
    """Number of output positions of tap k along one axis."""
    return _gw_range(k, pad, stride, size, out)[1]


def _depthwise(w: Window, kind: str, t: Tally) -> None:
    """The 3x3 depthwise kernels: one channel plane at a time, the taps of a kernel row in registers,
    sliding along output rows (each input value of a row loaded once per kernel row)."""
    planes = w.n * w.m
    t.macs = planes * w.oh * w.ow * w.kh * w.kw
    t.steps = t.macs  # per-MAC addressing beyond the multiply and the add
    width = min(w.w, (w.ow - 1) * w.sw + w.kw)  # input columns an output row reads
    t.loads = planes * w.oh * w.kh * width
    t.outputs = planes * {"forward": w.oh * w.ow, "grad_input": w.h * w.w, "grad_weight": w.kh * w.kw}[kind]
    t.rows = planes * (w.h if kind == "grad_input" else w.oh)
    t.blocks = planes


KINDS = {"forward": _fwd, "grad_input": _gi, "grad_weight": _gw}


def depthwise3(w: Window) -> bool:
    """Whether the specialised 3x3 depthwise kernels run this window (one input channel per group)."""
    return w.groups == w.c == w.m > 1 and w.kh == w.kw == 3 and w.sh == w.sw and w.sh in (1, 2)


def conv_tally(w: Window, kind: str) -> Tally:
    """Block structure of one convolution call (``kind``: forward, grad_input, grad_weight)."""
    if depthwise3(w):
        t = Tally(f"depthwise_{kind}_s{w.sh}")
        _depthwise(w, kind, t)
        return t
    t = Tally("conv_" + kind)
    KINDS[kind](w, t)
    return t


def conv_weight(w: Window, kind: str, macs: int) -> float:
    """Weight of a convolution call of ``macs`` MACs (the cost model's count, padded taps included)."""
    return _whole_tally(w, kind).weight(macs)


@lru_cache(maxsize=4096)
def _whole_tally(w: Window, kind: str) -> Tally:
    return conv_tally(w, kind)


def part_groups(w: Window, tile: tuple[int, int, int, int], kind: str, partial: bool) -> int:
    """The groups of the convolution of its own that a channel tile (c_lo, c_hi, m_lo, m_hi) of a part kernel
    is, which the whole kernel runs (conv.c's poet_part_groups); 0: the tile runs the block kernels."""
    c_lo, c_hi, m_lo, m_hi = tile
    grad = kind == "grad_input"
    mg, cg = w.m // w.groups, w.c // w.groups
    a_lo, a_hi, ag = (m_lo, m_hi, mg) if grad else (c_lo, c_hi, cg)  # the channels summed
    b_lo, b_hi, bg = (c_lo, c_hi, cg) if grad else (m_lo, m_hi, mg)  # the output channels
    if partial:
        return 0
    if b_lo % bg == 0 and b_hi % bg == 0 and a_lo == b_lo // bg * ag and a_hi == b_hi // bg * ag:
        return (b_hi - b_lo) // bg
    if not grad and b_lo // bg == (b_hi - 1) // bg and a_lo == b_lo // bg * ag and a_hi == a_lo + ag:
        return 1
    if grad and b_lo % bg == 0 and b_hi == b_lo + bg and a_lo // ag == b_lo // bg == (a_hi - 1) // ag:
        return 1
    return 0


def part_tally(w: Window, tile: tuple[int, int, int, int], kind: str, partial: bool) -> Tally:
    """Block structure of one call of a part kernel (ops/conv_part.py: poet_conv2d_part_f32, ``kind``
    forward, or poet_conv2d_grad_input_part_f32, grad_input) on channel tile (c_lo, c_hi, m_lo, m_hi) of
    the convolution ``w``, with starting values P (``partial``). A tile that is a convolution of its own
    runs the whole kernel on it; any other runs the block kernels over the tile's channels (family
    ``conv_<kind>_part``) group by group, each output loaded once more with P."""
    c_lo, c_hi, m_lo, m_hi = tile
    g = part_groups(w, tile, kind, partial)
    if g:
        own = replace(w, c=c_hi - c_lo, m=m_hi - m_lo, groups=g)
        if own.c == own.m == g and own.kh == own.kw == 3 and own.sh == own.sw and own.sh in (1, 2):
            t = Tally(f"depthwise_{kind}_s{own.sh}")  # conv.c's poet_dw3: one channel per group, even one
            _depthwise(own, kind, t)
            return t
        return conv_tally(own, kind)
    t = Tally(f"conv_{kind}_part")
    mg, cg = w.m // w.groups, w.c // w.groups
    lo, hi, per = (m_lo, m_hi, mg) if kind == "forward" else (c_lo, c_hi, cg)  # the outputs, by group
    for grp in range(lo // per, (hi - 1) // per + 1):
        nc = max(0, min(c_hi, (grp + 1) * cg) - max(c_lo, grp * cg))
        nm = max(0, min(m_hi, (grp + 1) * mg) - max(m_lo, grp * mg))
        sub = replace(w, c=nc, m=nm, groups=1)
        if kind == "forward":
            _fwd(sub, t, blocks=True)
        else:
            _gi(sub, t, blocks=True)
        if partial:
            t.loads += sub.n * (nm * sub.oh * sub.ow if kind == "forward" else nc * sub.h * sub.w)
    return t


@lru_cache(maxsize=16384)
def part_weight(w: Window, tile: tuple[int, int, int, int], kind: str, partial: bool, macs: int) -> float:
    """Weight of one part-kernel call of ``macs`` MACs (:func:`part_tally`)."""
    return part_tally(w, tile, kind, partial).weight(macs)


def fit(tallies: list[Tally], measured: list[float]) -> tuple[dict[str, Coefficients], list[float]]:
    """Least-squares coefficients per family (rows weighted by 1 / measured; terms that come out negative
    are dropped and the family refitted) and each call's relative error of the fitted count."""
    import numpy as np

    out: dict[str, Coefficients] = {}
    for fam in sorted({t.family for t in tallies}):
        rows = [i for i, t in enumerate(tallies) if t.family == fam]
        x = np.array([tallies[i].terms() for i in rows], dtype=np.float64)
        y = np.array([measured[i] - 2 * tallies[i].macs - tallies[i].loads for i in rows])
        w = 1.0 / np.array([measured[i] for i in rows])
        cols = [j for j in range(x.shape[1]) if x[:, j].any()]
        while True:
            coef = np.linalg.lstsq(x[:, cols] * w[:, None], y * w, rcond=None)[0]
            if (coef >= 0).all() or len(cols) == 1:
                break
            cols = [c for c, k in zip(cols, coef, strict=True) if k >= 0] or cols[:1]
        full = [0.0] * x.shape[1]
        for c, k in zip(cols, coef, strict=True):
            full[c] = round(float(max(k, 0.0)), 2)
        out[fam] = Coefficients(*full)
    errors = [t.instructions(out) / m - 1.0 for t, m in zip(tallies, measured, strict=True)]
    return out, errors
