"""Differential kernel fuzzer: every fast kernel (runtime_c/src/optimized) against its reference kernel
(runtime_c/src/kernels) on randomly drawn shapes, bit for bit, with every tensor in its own guarded region
(poet_edge.microbench.layout): on the host under AddressSanitizer + UBSan (any access outside a kernel's
tensors stops the run) and on qemu-cortex-m4 (guard writes checked after each call).

Shapes are drawn by a numpy Generator from a fixed seed, so a run is deterministic. Environment:
POET_FUZZ_CASES (default 150) scales every family (conv geometries: that many, each run as forward, input
gradient and weight gradient; gemm: twice that many; the others a fixed share), POET_FUZZ_SEED a comma-
separated list of seeds (default 54), one test per seed and target. `make fuzz` runs 20x the cases with
several seeds. Nothing is filtered out after drawing: a draw the op rejects is drawn again, and the count of
cases per kernel is asserted."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from conftest import need_tools

from poet_edge import microbench as mb
from poet_edge import ops
from poet_edge.errors import PoetError
from poet_edge.ops.conv import conv_window

CASES = int(os.environ.get("POET_FUZZ_CASES", "150"))
SEEDS = [int(s) for s in os.environ.get("POET_FUZZ_SEED", "54").split(",") if s.strip()]
MAX_MACS = 60_000  # per conv call: keeps the reference kernels' QEMU time in bounds
CONV_KINDS = ("forward", "input grad", "weight grad")

Geometry = tuple[tuple[int, int, int, int], tuple[int, int, int, int], tuple[int, int], tuple[int, ...], int]


def _pick(rng: np.random.Generator, values) -> int:
    return int(values[int(rng.integers(len(values)))])


def _channels(rng: np.random.Generator) -> int:
    """Channel counts per group: 1, odd, and every tail of the 4/2/1 (and 6/4/2/1) channel blocks."""
    return _pick(rng, [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16])


def _conv_geometry(rng: np.random.Generator) -> Geometry | None:
    """One random convolution: 1-D (H = 1) or 2-D; kernels 1-7 wide and high (non-square); strides 1-3 (per
    axis); asymmetric pads (some up to the kernel size + 1); general, grouped, depthwise (multiplier 1 or 2)
    or pointwise; batch 1-3; output widths 1-20 (every tail of the 6/4/2/1-pixel blocks) and some 21-64.
    None: an invalid or too large draw (drawn again)."""
    one_d = rng.random() < 0.3
    kind = _pick(rng, [0, 0, 0, 1, 2, 2, 3])  # general, grouped, depthwise, pointwise
    kw = _pick(rng, [3, 5]) if rng.random() < 0.4 else int(rng.integers(1, 8))  # 3 and 5: specialised paths
    kh = 1 if one_d else (kw if rng.random() < 0.3 else int(rng.integers(1, 8)))
    if kind == 2 and rng.random() < 0.5:
        kh, kw = (1, 3) if one_d else (3, 3)  # the specialised depthwise 3x3 paths
    if kind == 3:
        kh, kw = 1, 1
    sh = 1 if one_d else _pick(rng, [1, 1, 2, 2, 3])
    sw = sh if (not one_d and rng.random() < 0.6) else _pick(rng, [1, 1, 2, 2, 3])
    pads = [0 if one_d else int(rng.integers(0, kh)), int(rng.integers(0, kw))]
    pads += [0 if one_d else int(rng.integers(0, kh)), int(rng.integers(0, kw))]
    if kind == 3 or rng.random() < 0.25:
        pads = [0, 0, 0, 0]
    elif rng.random() < 0.3:
        pads = [(kh - 1) // 2, (kw - 1) // 2, kh // 2, kw // 2]  # "same"
    elif rng.random() < 0.15:  # pads up to the kernel size + 1: rows and columns with no taps at all
        pads = [0 if one_d else int(rng.integers(0, kh + 2)), int(rng.integers(0, kw + 2))]
        pads += [0 if one_d else int(rng.integers(0, kh + 2)), int(rng.integers(0, kw + 2))]
    ow = int(rng.integers(1, 21)) if rng.random() < 0.85 else int(rng.integers(21, 65))  # long rows: 1-D
    oh = 1 if one_d else int(rng.integers(1, 9))
    iw = max(1, (ow - 1) * sw + kw - pads[1] - pads[3] + int(rng.integers(0, sw)))
    ih = 1 if one_d else max(1, (oh - 1) * sh + kh - pads[0] - pads[2] + int(rng.integers(0, sh)))
    groups, cg, mg = 1, _channels(rng), _channels(rng)
    if kind == 1:
        groups = int(rng.integers(2, 5))
        cg, mg = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    elif kind == 2:
        groups, cg, mg = int(rng.integers(1, 10)), 1, _pick(rng, [1, 1, 1, 2])
    n = int(rng.integers(1, 4))
    x, w = (n, groups * cg, ih, iw), (groups * mg, cg, kh, kw)
    geo: Geometry = (x, w, (sh, sw), tuple(pads), groups)
    try:
        win = conv_window(x, w, {"group": groups, "strides": (sh, sw), "pads": tuple(pads)})
    except (ValueError, PoetError):
        return None
    if win.oh < 1 or win.ow < 1 or n * win.m * win.oh * win.ow * cg * kh * kw > MAX_MACS:
        return None
    return geo


def _draw(rng: np.random.Generator, count: int, make: Callable[[np.random.Generator], object | None]) -> list:
    out: list = []
    while len(out) < count:
        v = make(rng)
        if v is not None:
            out.append(v)
    return out


def conv_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """Every geometry as forward, input gradient and weight gradient; every other one also as the weight
    gradient's part kernel (ConvGradWeight with P: operator splitting's row tiles), and every other channel
    sum with P (no extra draws: the other families' cases stay those of the seed)."""
    cases = []
    for k, (x, w, s, pads, g) in enumerate(_draw(rng, count, _conv_geometry)):
        for kind in CONV_KINDS:
            bias = kind != "forward" or k % 4 != 3
            c = mb.conv_case(x, w, kind, s, pads, g, bias=bias)
            cases.append(mb.KernelCase(**{**c.__dict__, "name": f"#{k} {c.name}"}))
        if k % 2 == 0:
            attrs = {"group": g, "strides": s, "pads": pads, "w_shape": w, "partial": True}
            y = conv_window(x, w, attrs).y_shape
            geo = cases[-1].name.split(" ", 2)[2]  # the weight gradient's geometry text
            cases.append(mb.op_case("ConvGradWeight", [x, y, w], attrs, name=f"#{k} conv_dw_part {geo}"))
    for k, (n, c, h, w) in enumerate(
        (int(rng.integers(1, 4)), _channels(rng), int(rng.integers(1, 6)), int(rng.integers(1, 12)))
        for _ in range(max(2, count // 10))
    ):
        cases.append(mb.op_case("ChannelSum", [(n, c, h, w)], name=f"#{k} channel_sum {n}x{c}x{h}x{w}"))
        if k % 2:
            cases.append(
                mb.op_case(
                    "ChannelSum",
                    [(n, c, h, w), (c,)],
                    {"partial": True},
                    name=f"#{k} channel_sum_part {n}x{c}x{h}x{w}",
                )
            )
    return cases


def _gemm_dim(rng: np.random.Generator) -> int:
    """1-13 (every tail of the 4-row / 6-column blocks, twice) or a larger size up to 40."""
    return int(rng.integers(1, 14)) if rng.random() < 0.75 else int(rng.integers(14, 41))


def gemm_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """Every transpose layout and bias (none, row, column, full, scalar) with M, N, K tails; alpha and beta
    1 (the fast epilogues) or not."""
    cases = []
    for k in range(count):
        m, n, kk = _gemm_dim(rng), _gemm_dim(rng), _gemm_dim(rng)
        ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        bias = [None, "row", "col", "full", "scalar"][int(rng.integers(0, 5))]
        alpha = 1.0 if rng.random() < 0.6 else float(_pick(rng, [2, -1, 3]) / 2)
        beta = 1.0 if rng.random() < 0.6 else float(_pick(rng, [-4, 1, 3]) / 2)
        c = mb.gemm_case(m, n, kk, ta, tb, alpha, beta, bias)
        cases.append(mb.KernelCase(**{**c.__dict__, "name": f"#{k} {c.name}"}))
    return cases


def matmul_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """Batched MatMul: 2-D to 4-D operands, broadcast batch dimensions, every transpose layout."""
    cases = []
    for k in range(count):
        m, n, kk = _gemm_dim(rng), _gemm_dim(rng), _gemm_dim(rng)
        ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        batch = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
        a_batch = [d if rng.random() < 0.7 else 1 for d in batch]
        b_batch = [d if rng.random() < 0.7 else 1 for d in batch][int(rng.integers(0, len(batch) + 1)) :]
        a = (*a_batch, *((kk, m) if ta else (m, kk)))
        b = (*b_batch, *((n, kk) if tb else (kk, n)))
        attrs = {key: 1 for key, on in (("transA", ta), ("transB", tb)) if on}
        c = mb.op_case("MatMul", [a, b], attrs)
        cases.append(mb.KernelCase(**{**c.__dict__, "name": f"#{k} {c.name}"}))
    return cases


def gemm_part_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """GemmPart (operator splitting's chained input gradient): A [.., rows, K] (2-D or 3-D), B [K, N] or
    (transB) [N, K], with or without the previous part's sums P, alpha on the last part or not."""
    cases = []
    for k in range(count):
        rows, n, kk = _gemm_dim(rng), _gemm_dim(rng), _gemm_dim(rng)
        tb, partial, final = (int(rng.integers(0, 2)) for _ in range(3))
        a = (2, rows, kk) if rng.random() < 0.3 else (rows, kk)
        shapes = [a, (n, kk) if tb else (kk, n)] + ([(*a[:-1], n)] if partial else [])
        attrs = {
            "transB": tb,
            "partial": bool(partial),
            "final": bool(final),
            "alpha": 1.0 if k % 3 else -0.5,
        }
        c = mb.op_case("GemmPart", shapes, attrs)
        cases.append(mb.KernelCase(**{**c.__dict__, "name": f"#{k} gemm_part {a}x{shapes[1]} {attrs}"}))
    return cases


def _pool(rng: np.random.Generator) -> tuple[tuple[int, ...], dict] | None:
    one_d = rng.random() < 0.25
    kh, kw = (1 if one_d else int(rng.integers(1, 5))), int(rng.integers(1, 5))
    sh, sw = (1 if one_d else int(rng.integers(1, 4))), int(rng.integers(1, 4))
    pads = (0, 0, 0, 0)
    if rng.random() < 0.4:
        pads = (0 if one_d else int(rng.integers(0, kh)), int(rng.integers(0, kw)))
        pads = (*pads, 0 if one_d else int(rng.integers(0, kh)), int(rng.integers(0, kw)))
    x = (
        int(rng.integers(1, 3)),
        _channels(rng),
        1 if one_d else int(rng.integers(1, 10)),
        int(rng.integers(1, 14)),
    )
    if one_d:
        x, attrs = x[:2] + x[3:], {"kernel_shape": (kw,), "strides": (sw,), "pads": (pads[1], pads[3])}
    else:
        attrs = {"kernel_shape": (kh, kw), "strides": (sh, sw), "pads": pads}
    try:
        ops.get("MaxPool").infer([x], attrs)
    except (ValueError, PoetError):
        return None
    return x, attrs


def pool_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    cases = []
    for k, (x, attrs) in enumerate(_draw(rng, count, _pool)):
        y = ops.get("MaxPool").infer([x], attrs)[0]
        for op, shapes in (("MaxPool", [x]), ("MaxPoolGrad", [x, y])):
            c = mb.op_case(op, shapes, attrs)
            cases.append(mb.KernelCase(**{**c.__dict__, "name": f"#{k} {c.name}"}))
    return cases


def _shape(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    return tuple(int(rng.integers(1, 8)) for _ in range(rank))


def _broadcast_of(rng: np.random.Generator, full: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``full``: some leading axes dropped, some axes 1."""
    b = [d if rng.random() < 0.6 else 1 for d in full]
    return tuple(b[int(rng.integers(0, len(b) + 1)) :]) or (1,)


def elementwise_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """Relu, ReluGrad, SGDUpdate (lengths 1-70: every tail of the 4-wide unroll), Add with broadcasting
    either way round, ReduceSumTo onto broadcast shapes (scale 1 and not)."""
    cases = []
    for k in range(count):
        n = int(rng.integers(1, 71))
        cases += [
            mb.op_case("Relu", [(n,)], name=f"#{k} relu {n}"),
            mb.op_case("ReluGrad", [(n,), (n,)], name=f"#{k} relu_grad {n}"),
            mb.op_case("SGDUpdate", [(n,), (n,)], name=f"#{k} sgd {n}"),
        ]
        full = _shape(rng, int(rng.integers(1, 5)))
        part = _broadcast_of(rng, full)
        a, b = (full, part) if rng.random() < 0.5 else (part, full)
        cases.append(mb.op_case("Add", [a, b], name=f"#{k} add {a} {b}"))
        scale = 1.0 if rng.random() < 0.5 else 0.125
        cases.append(
            mb.op_case(
                "ReduceSumTo",
                [full],
                {"shape": part, "scale": scale},
                name=f"#{k} rsum {full}->{part} {scale}",
            )
        )
    return cases


def strided_cases(rng: np.random.Generator, count: int) -> list[mb.KernelCase]:
    """Transpose (rank 1-4, any permutation) and Slice / SliceGrad with steps 1-3 on any axes."""
    cases = []
    for k in range(count):
        x = _shape(rng, int(rng.integers(1, 5)))
        perm = tuple(int(p) for p in rng.permutation(len(x)))
        cases.append(mb.op_case("Transpose", [x], {"perm": perm}, name=f"#{k} transpose {x} {perm}"))
        axes = tuple(
            sorted(int(a) for a in rng.choice(len(x), int(rng.integers(1, len(x) + 1)), replace=False))
        )
        starts = tuple(int(rng.integers(0, x[a])) for a in axes)
        ends = tuple(int(rng.integers(s + 1, x[a] + 1)) for s, a in zip(starts, axes, strict=True))
        steps = tuple(int(rng.integers(1, 4)) for _ in axes)
        attrs = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
        y = ops.get("Slice").infer([x], attrs)[0]
        cases.append(mb.op_case("Slice", [x], attrs, name=f"#{k} slice {x} {attrs}"))
        cases.append(mb.op_case("SliceGrad", [y], {**attrs, "shape": x}, name=f"#{k} slice_grad {x} {attrs}"))
    return cases


def fuzz_cases(seed: int, scale: int = CASES) -> list[mb.KernelCase]:
    """All families, drawn in a fixed order from one Generator: the same cases for a seed and scale."""
    rng = np.random.default_rng(seed)
    return (
        conv_cases(rng, scale)
        + gemm_cases(rng, 2 * scale)
        + matmul_cases(rng, max(4, scale // 3))
        + pool_cases(rng, max(4, scale // 3))
        + elementwise_cases(rng, max(4, scale // 4))
        + strided_cases(rng, max(4, scale // 4))
        + gemm_part_cases(rng, max(4, scale // 4))
    )


def test_cases_deterministic_and_cover_every_fast_kernel():
    a, b = fuzz_cases(7, 30), fuzz_cases(7, 30)
    assert [c.call for c in a] == [c.call for c in b] and [c.name for c in a] == [c.name for c in b]
    assert len({c.name for c in a}) == len(a)
    calls = Counter(c.call.split("(")[0] for c in a)
    every = {
        "poet_conv2d_f32",
        "poet_conv2d_grad_input_f32",
        "poet_conv2d_grad_weight_f32",
        "poet_conv2d_grad_weight_part_f32",
        "poet_channel_sum_f32",
        "poet_channel_sum_part_f32",
        "poet_gemm_f32",
        "poet_matmul_f32",
        "poet_maxpool2d_f32",
        "poet_maxpool2d_grad_f32",
        "poet_add_f32",
        "poet_relu_f32",
        "poet_relu_grad_f32",
        "poet_reduce_sum_to_f32",
        "poet_sgd_f32",
        "poet_strided_copy_f32",
        "poet_strided_scatter_f32",
    }
    assert every <= set(calls), every - set(calls)
    families = Counter(c.name.split()[1] for c in a)
    assert families["conv"] == families["conv_dx"] == families["conv_dw"] == 30 and families["gemm"] == 60
    assert families["conv_dw_part"] == 15 and families["channel_sum_part"] == 1
    # every fast kernel file is exercised
    sources = {c.source for c in a}
    assert {f.stem for f in mb.OPTIMIZED_DIR.glob("*.c")} <= sources | {"strided"}, sources


def _conv_coverage(cases: list[mb.KernelCase]) -> dict[str, set]:
    """Geometry features the CI-sized draw reaches (read back from the case names)."""
    seen: dict[str, set] = {"kw": set(), "kh": set(), "stride": set(), "groups": set(), "batch": set()}
    for c in cases:
        if not c.call.startswith("poet_conv2d_f32"):
            continue
        parts = c.name.split()
        x = [int(v) for v in parts[2].split("x")]
        w = [int(v) for v in parts[3][1:].split("x")]
        seen["kw"].add(w[3])
        seen["kh"].add(w[2])
        seen["stride"].update(int(v) for v in parts[4][1:].split("x"))
        seen["groups"].add("depthwise" if w[1] == 1 and x[1] > 1 and int(parts[6][1:]) == x[1] else parts[6])
        seen["batch"].add(x[0])
    return seen


def test_ci_draw_covers_the_geometries():
    seen = _conv_coverage(fuzz_cases(SEEDS[0]))
    assert seen["kw"] == set(range(1, 8)) and seen["kh"] == set(range(1, 8)), seen
    assert seen["stride"] == {1, 2, 3} and seen["batch"] == {1, 2, 3}
    assert "depthwise" in seen["groups"] and "g1" in seen["groups"] and len(seen["groups"]) >= 3


def _check(target: str, seed: int, tmp_path, sanitize: bool) -> None:
    cases = fuzz_cases(seed)
    found = mb.compare_all(target, cases, tmp_path / target, sanitize=sanitize)
    failures = found.failures()
    assert not failures, f"{len(failures)} of {len(cases)} cases fail (seed {seed}):\n" + "\n".join(
        failures[:20]
    )
    assert len(found.first_diff) == len(cases)


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_host_asan_ubsan(tmp_path, seed):
    need_tools("gcc")
    _check("host", seed, tmp_path, sanitize=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_qemu_m4(tmp_path, seed):
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    _check("qemu-cortex-m4", seed, tmp_path, sanitize=False)


def test_layout_guards_every_tensor():
    case = mb.op_case("Add", [(3, 5), (5,)])  # tensors of 15, 5 and 15 floats
    plain, guarded = mb.layout(case, False), mb.layout(case, True)
    assert plain.offsets == (0, 16, 24) and plain.floats == 40 and not plain.guards
    g = mb.guard_floats(case)
    assert g == 16 and guarded.offsets[0] == g and all(o % 4 == 0 for o in guarded.offsets)
    # a guard right after every tensor's last element, at least g floats, up to the next tensor
    for off, n, (gs, gn) in zip(guarded.offsets, case.tensors, guarded.guards[1:], strict=True):
        assert gs == off + n and gn >= g
    assert guarded.guards[0] == (0, g) and guarded.floats == sum(guarded.guards[-1])


def _overrun_case() -> mb.KernelCase:
    """Relu over 9 elements of 8-element tensors: both kernels read and write one element past them."""
    c = mb.op_case("Relu", [(8,)])
    assert c.call == "poet_relu_f32(@T0@, @T1@, 8);"
    return mb.KernelCase(**{**c.__dict__, "call": "poet_relu_f32(@T0@, @T1@, 9);", "name": "relu overrun"})


def test_harness_reports_writes_past_a_tensor(tmp_path):
    need_tools("gcc")
    ok = mb.op_case("Relu", [(8,)])
    found = mb.compare_all("host", [ok, _overrun_case()], tmp_path, per_build=1)  # one program per case
    assert found.first_diff == {ok.name: -1, "relu overrun": -1} and found.guards[ok.name] == (-1, -1)
    at = found.guards["relu overrun"]
    assert at[0] == at[1] == mb.layout(ok, True).offsets[1] + 8  # the element after Y
    with pytest.raises(PoetError, match="wrote outside its tensors"):
        mb.compare_variants("host", [_overrun_case()], tmp_path / "v")


def test_harness_sanitized_stops_at_reads_past_a_tensor(tmp_path):
    """Under ASan the read of X[8] (in the poisoned guard) stops the run; the cases after it still run."""
    need_tools("gcc")
    ok = mb.op_case("Relu", [(8,)])
    found = mb.compare_all("host", [_overrun_case(), ok], tmp_path, sanitize=True)
    assert found.first_diff == {ok.name: -1} and len(found.stopped) == 1
    assert found.stopped[0].startswith("relu overrun: the run on host stopped")
    assert "AddressSanitizer: use-after-poison" in found.stopped[0]
