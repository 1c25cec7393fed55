"""The fast kernels (runtime_c/src/optimized) give the same bits as the reference kernels, kernel by kernel
(host and QEMU Cortex-M4) and for whole training runs (`poet compile --kernels fast|reference`)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import microbench as mb
from poet_edge import ops, runner
from poet_edge.autodiff import Loss
from poet_edge.codegen import emit
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.paths import RUNTIME_C

# M, N, K: 1x1x1, every tail of the 4-row / 6-column blocks, K = 1 and 2 (first step only), zoo shapes;
# on Cortex-M also every block and tail of the assembly blocks (poet/blocked_arm.h)
GEMM_SHAPES = [
    (1, 1, 1),
    (1, 7, 3),
    (3, 1, 5),
    (2, 2, 2),
    (4, 6, 1),
    (4, 6, 2),
    (5, 7, 3),
    (7, 11, 9),
    (8, 13, 17),
    (9, 5, 4),
    (6, 4, 6),
    (3, 12, 1),
    (13, 23, 7),
    (8, 10, 32),
    (8, 2, 64),
    (10, 32, 8),
    (12, 19, 33),
    (17, 3, 8),
    (2, 30, 8),
    # assembly blocks on Cortex-M: 2-column heads with K % 4 = 1, 2, 3, 0; 2-row weight gradients
    (4, 2, 5),
    (8, 2, 6),
    (5, 4, 7),
    (4, 10, 12),
    (2, 12, 1),
    (3, 25, 6),
    (6, 26, 3),
    (8, 9, 5),
]


def gemm_cases() -> list[mb.KernelCase]:
    cases = []
    for (m, n, k), (ta, tb) in itertools.product(GEMM_SHAPES, itertools.product((0, 1), (0, 1))):
        cases.append(mb.gemm_case(m, n, k, ta, tb))
        cases.append(mb.gemm_case(m, n, k, ta, tb, bias="row"))
    shapes, biases = [(5, 7, 3), (8, 13, 9), (1, 6, 2)], ["row", "col", "full", "scalar"]
    for (m, n, k), bias, alpha, beta in itertools.product(shapes, biases, [1.0, 0.5], [1.0, -2.0]):
        cases.append(mb.gemm_case(m, n, k, 0, 1, alpha, beta, bias))
    cases.append(mb.gemm_case(9, 14, 5, 1, 0, alpha=-1.5))
    # column bias (a 1x1 convolution's forward), every layout, with full 4-row blocks
    for (m, n, k), (ta, tb) in itertools.product(
        [(8, 13, 17), (12, 19, 8), (4, 6, 1)], [(0, 0), (1, 0), (0, 1)]
    ):
        cases.append(mb.gemm_case(m, n, k, ta, tb, bias="col"))
    return list({c.name: c for c in cases}.values())


# batched MatMul (poet_matmul_f32): every layout, broadcast batch dims, block tails
MATMUL_SHAPES = [
    ((2, 5, 7), (2, 7, 4), {}),
    ((3, 2, 9, 13), (3, 2, 13, 6), {}),
    ((2, 3, 5, 7), (7, 11), {}),
    ((4, 7), (3, 7, 5), {}),
    ((2, 1, 6, 5), (1, 3, 5, 9), {}),
    ((2, 5, 7), (2, 4, 7), {"transB": 1}),
    ((2, 7, 5), (2, 7, 4), {"transA": 1}),
    ((2, 7, 5), (2, 4, 7), {"transA": 1, "transB": 1}),
    ((4, 17, 16), (4, 16, 17), {}),
    ((2, 1, 1), (2, 1, 3), {}),
]


def matmul_cases() -> list[mb.KernelCase]:
    return [mb.op_case("MatMul", [a, b], attrs) for a, b, attrs in MATMUL_SHAPES]


# MaxPool (fast path: windows inside the input; the gradient's also non-overlapping) and strided copies
POOLS = [
    ((1, 3, 8, 8), {"kernel_shape": (2, 2), "strides": (2, 2)}),
    ((2, 2, 7, 9), {"kernel_shape": (2, 2), "strides": (2, 2)}),
    ((1, 2, 9, 9), {"kernel_shape": (3, 3), "strides": (2, 2)}),
    ((1, 2, 9, 8), {"kernel_shape": (3, 2), "strides": (3, 2)}),
    ((1, 2, 8, 8), {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
    ((1, 1, 5, 5), {"kernel_shape": (2, 2), "strides": (1, 1)}),
]
TRANSPOSES = [
    ((1, 8, 2, 16), (0, 2, 1, 3)),
    ((3, 5), (1, 0)),
    ((2, 3, 4), (2, 0, 1)),
    ((7,), (0,)),
    ((2, 9, 3), (0, 2, 1)),
]
SLICES = [
    ((4, 10), {"starts": (1, 2), "ends": (4, 9), "axes": (0, 1), "steps": (1, 3)}),
    ((2, 6, 5), {"starts": (1,), "ends": (5,), "axes": (1,)}),
]


def pool_strided_cases() -> list[mb.KernelCase]:
    cases = []
    for x, attrs in POOLS:
        cases.append(mb.op_case("MaxPool", [x], attrs))
        y = ops.get("MaxPool").infer([x], attrs)[0]
        cases.append(mb.op_case("MaxPoolGrad", [x, y], attrs))
    cases += [mb.op_case("Transpose", [x], {"perm": perm}) for x, perm in TRANSPOSES]
    for x, attrs in SLICES:
        cases.append(mb.op_case("Slice", [x], attrs))
        y = ops.get("Slice").infer([x], attrs)[0]
        cases.append(mb.op_case("SliceGrad", [y], {**attrs, "shape": x}))
    return cases


def elementwise_cases() -> list[mb.KernelCase]:
    cases = []
    for n in (1, 3, 4, 5, 8, 67, 256):
        cases += [
            mb.op_case("Relu", [(n,)]),
            mb.op_case("ReluGrad", [(n,), (n,)]),
            mb.op_case("SGDUpdate", [(n,), (n,)]),
        ]
    for a, b in [
        ((8, 32), (32,)),
        ((8, 32), (8, 32)),
        ((3, 5), (3, 1)),
        ((1,), (7,)),
        ((2, 3, 4), (3, 1)),
        ((4, 1, 3), (1, 5, 1)),
        ((5,), (1,)),
    ]:
        cases.append(mb.op_case("Add", [a, b]))
    for x, y in [((8, 32), (32,)), ((8, 32), (8, 1)), ((2, 3, 4), (3, 1)), ((6,), (1,)), ((4, 5), (4, 5))]:
        cases.append(mb.op_case("ReduceSumTo", [x], {"shape": y, "scale": 1.0}))
        cases.append(mb.op_case("ReduceSumTo", [x], {"shape": y, "scale": 0.125}))
    return cases


# Conv geometries (X shape, W shape, stride or (SH, SW), pads (top, left, bottom, right), groups): general,
# grouped, depthwise (3x3 at strides 1 and 2: the specialised paths; other shapes take the general blocks),
# pointwise (strides 1 and 2), odd sizes that leave 4/2/1-channel and 4/2/1-pixel tails, asymmetric pads,
# maps smaller than the kernel's reach, batch 2, and the zoo's own kinds of layer.
CONV_GEOMETRIES = [
    ((1, 3, 8, 8), (5, 3, 3, 3), 1, (1, 1, 1, 1), 1),
    ((2, 4, 7, 9), (6, 4, 3, 3), 2, (1, 1, 1, 1), 1),
    ((1, 5, 9, 9), (7, 5, 3, 3), 2, (1, 1, 1, 1), 1),
    ((1, 2, 13, 13), (11, 2, 3, 3), 1, (1, 1, 1, 1), 1),
    ((1, 2, 5, 17), (3, 2, 3, 3), 1, (0, 0, 0, 0), 1),
    ((1, 3, 7, 7), (4, 3, 3, 3), 3, (1, 1, 1, 1), 1),
    ((1, 3, 8, 8), (4, 3, 3, 3), 1, (1, 0, 0, 2), 1),
    ((1, 3, 5, 5), (2, 3, 5, 5), 1, (0, 0, 0, 0), 1),
    ((1, 2, 9, 11), (5, 2, 5, 5), 1, (2, 2, 2, 2), 1),
    ((1, 6, 10, 10), (7, 6, 5, 5), 1, (0, 0, 0, 0), 1),
    ((1, 3, 12, 7), (4, 3, 5, 5), 1, (1, 2, 0, 1), 1),
    ((2, 1, 10, 9), (5, 1, 3, 5), 1, (1, 2, 0, 1), 1),
    ((1, 4, 7, 8), (6, 2, 2, 4), 1, (0, 1, 1, 0), 2),
    ((1, 1, 13, 6), (7, 1, 6, 4), 2, (3, 1, 3, 1), 1),
    ((1, 1, 11, 6), (9, 1, 5, 4), 2, (2, 2, 2, 2), 1),
    ((1, 4, 4, 4), (8, 4, 2, 2), 2, (0, 0, 0, 0), 1),
    ((1, 4, 6, 5), (6, 2, 3, 3), 1, (1, 1, 1, 1), 2),
    ((1, 4, 3, 3), (8, 2, 3, 3), 1, (1, 1, 1, 1), 2),
    ((1, 6, 6, 6), (12, 1, 3, 3), 1, (1, 1, 1, 1), 6),
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, (1, 1, 1, 1), 6),
    ((1, 6, 3, 3), (6, 1, 3, 3), 1, (1, 1, 1, 1), 6),
    ((1, 4, 2, 2), (4, 1, 3, 3), 1, (1, 1, 1, 1), 4),
    ((2, 3, 6, 7), (3, 1, 3, 3), 1, (0, 0, 0, 0), 3),
    ((1, 4, 8, 9), (4, 1, 3, 3), 1, (2, 0, 1, 2), 4),
    ((1, 8, 9, 7), (8, 1, 3, 3), 2, (1, 1, 1, 1), 8),
    ((1, 4, 8, 8), (4, 1, 3, 3), 2, (1, 1, 1, 1), 4),
    ((2, 4, 7, 6), (4, 1, 3, 3), 2, (0, 0, 0, 0), 4),
    ((1, 3, 10, 11), (3, 1, 3, 3), 2, (2, 2, 2, 2), 3),
    ((1, 4, 1, 5), (4, 1, 3, 3), 2, (1, 1, 1, 1), 4),
    ((1, 4, 8, 9), (4, 1, 3, 3), 2, (0, 1, 1, 0), 4),
    ((2, 3, 6, 6), (3, 1, 3, 3), 2, (1, 1, 1, 1), 3),
    ((1, 2, 12, 12), (2, 1, 3, 3), 2, (1, 1, 1, 1), 2),
    ((1, 2, 11, 11), (2, 1, 3, 3), 2, (1, 1, 1, 1), 2),
    ((1, 3, 4, 4), (3, 1, 3, 3), 1, (1, 1, 1, 1), 3),
    ((2, 2, 7, 5), (2, 1, 3, 3), 1, (1, 1, 1, 1), 2),
    ((1, 5, 6, 6), (7, 5, 1, 1), 1, (0, 0, 0, 0), 1),
    ((2, 5, 3, 3), (13, 5, 1, 1), 1, (0, 0, 0, 0), 1),
    ((1, 9, 3, 3), (6, 9, 1, 1), 1, (0, 0, 0, 0), 1),
    ((2, 4, 7, 7), (3, 4, 1, 1), 2, (0, 0, 0, 0), 1),
    ((1, 2, 8, 8), (3, 2, 1, 1), 2, (0, 0, 0, 0), 1),
    ((1, 16, 8, 8), (16, 16, 3, 3), 1, (1, 1, 1, 1), 1),
    ((1, 8, 5, 5), (16, 8, 1, 1), 1, (0, 0, 0, 0), 1),
    # 1x1 stride 2 with the assembly paths on Cortex-M (4 | channels, 4 | output width), odd input width
    ((1, 8, 8, 8), (8, 8, 1, 1), 2, (0, 0, 0, 0), 1),
    ((2, 8, 8, 8), (8, 4, 1, 1), 2, (0, 0, 0, 0), 2),
    ((1, 4, 6, 15), (12, 4, 1, 1), 2, (0, 0, 0, 0), 1),
    # width-5 kernels of height 1 and 3 with several input channels (the 5-wide input-gradient path took
    # the weights of one channel 25 apart, as for 5x5: wrong bits and reads past W; issue 54): a Conv1d
    # of an accelerometer CNN (k5 p2, 16 -> 32 channels, length 64) and (3, 5) kernels
    ((1, 16, 1, 64), (32, 16, 1, 5), 1, (0, 2, 0, 2), 1),
    ((1, 3, 1, 128), (16, 3, 1, 5), 1, (0, 2, 0, 2), 1),
    ((1, 3, 8, 8), (4, 3, 3, 5), 1, (1, 2, 1, 2), 1),
    ((2, 4, 6, 9), (3, 4, 3, 5), 1, (1, 2, 1, 2), 1),
    # the same bug as the kernel fuzzer (tests/test_kernel_fuzz.py) finds it with aa58890's fix reverted:
    # grouped, strides (2, 1) and (3, 1), 1-D with batch 2-3 and asymmetric pads, pads beyond the kernel
    ((2, 9, 7, 5), (6, 3, 2, 5), (2, 1), (0, 2, 1, 2), 3),
    ((2, 12, 1, 8), (9, 4, 6, 5), (3, 1), (3, 4, 2, 3), 3),
    ((2, 13, 1, 15), (6, 13, 1, 5), 1, (0, 5, 0, 2), 1),
    ((3, 4, 1, 11), (11, 4, 1, 5), 1, (0, 3, 0, 0), 1),
    ((1, 5, 6, 9), (7, 5, 7, 5), 1, (1, 2, 1, 4), 1),
]


def conv_cases(geometries=CONV_GEOMETRIES) -> list[mb.KernelCase]:
    cases = []
    for x, w, s, pads, g in geometries:
        strides = s if isinstance(s, tuple) else (s, s)
        for kind in ("forward", "input grad", "weight grad"):
            cases.append(mb.conv_case(x, w, kind, strides, pads, g))
    cases.append(mb.conv_case((1, 3, 8, 8), (5, 3, 3, 3), "forward", (1, 1), (1, 1, 1, 1), bias=False))
    cases.append(mb.conv_case((1, 8, 5, 5), (8, 1, 3, 3), "forward", (2, 2), (1, 1, 1, 1), 8, bias=False))
    cases += [mb.op_case("ChannelSum", [(2, 5, 7, 3)]), mb.op_case("ChannelSum", [(1, 3, 4, 4)])]
    return cases


def _check_identical(target: str, cases: list[mb.KernelCase], tmp_path, sanitize: bool = False) -> None:
    result = mb.compare_variants(target, cases, tmp_path / target, sanitize=sanitize)
    differ = {name: at for name, at in result.items() if at >= 0}
    assert not differ, f"fast kernels differ from the reference (first differing element): {differ}"


def test_optimized_files_replace_existing_kernels():
    for f in sorted((RUNTIME_C / "src" / "optimized").glob("*.c")):
        assert (RUNTIME_C / "src" / "kernels" / f.name).is_file(), f"{f.name} has no reference kernel"
    assert emit.kernel_file("gemm", "fast").parent.name == "optimized"
    assert emit.kernel_file("gemm", "reference").parent.name == "kernels"
    assert emit.kernel_file("softmax_xent", "fast").parent.name == "kernels"  # no optimized version
    with pytest.raises(PoetError):
        emit.kernel_file("gemm", "turbo")


def test_gemm_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", gemm_cases(), tmp_path)


def test_matmul_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", matmul_cases(), tmp_path)


def test_pool_and_strided_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", pool_strided_cases(), tmp_path)


def test_elementwise_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", elementwise_cases(), tmp_path)


def test_conv_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", conv_cases(), tmp_path)


def test_conv_bit_identical_host_sanitized(tmp_path):
    """The fast conv kernels under -fsanitize=address,undefined (no error aborts the run)."""
    need_tools("gcc")
    _check_identical("host", conv_cases(), tmp_path, sanitize=True)


def test_bit_identical_qemu_m4(tmp_path):
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    _check_identical(
        "qemu-cortex-m4",
        gemm_cases() + matmul_cases() + pool_strided_cases() + elementwise_cases() + conv_cases(),
        tmp_path,
    )


@pytest.mark.parametrize("target", ["qemu-cortex-m7", "qemu-cortex-m33"])
def test_gemm_bit_identical_qemu_m7_m33(tmp_path, target):
    """The assembly GEMM blocks (poet/blocked_arm.h) on the other FPUs: FPv5 double-precision (M7), FPv5-SP
    on Armv8-M (M33)."""
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    _check_identical(target, gemm_cases() + matmul_cases(), tmp_path)


def test_fast_gemm_instruction_counts_deterministic(tmp_path):
    """Instruction counts on QEMU are exact: two runs agree, and the fast kernel beats the reference."""
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    cases = [
        mb.gemm_case(8, 128, 128, 0, 1, bias="row"),
        mb.gemm_case(8, 128, 128, 0, 0),
        mb.gemm_case(128, 128, 8, 1, 0),
    ]
    a = mb.measure("qemu-cortex-m4", cases, tmp_path / "a", ("reference", "fast"))
    b = mb.measure("qemu-cortex-m4", cases, tmp_path / "b", ("reference", "fast"))
    assert a.instructions == b.instructions
    for c in cases:
        fast, ref = a.instructions[(c.name, "fast")], a.instructions[(c.name, "reference")]
        # assembly blocks: 2.3-2.5 instr/MAC on these shapes (the C blocks needed 2.55-2.8)
        assert fast / c.quantity < 2.6 and ref / fast > 3.5, (c.name, fast / c.quantity, ref / c.quantity)


def test_fast_conv_instruction_counts(tmp_path):
    """On the Cortex-M4 the fast conv kernels need a fraction of the reference's instructions per MAC."""
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    cases = [
        mb.conv_case((1, 16, 12, 12), (16, 16, 3, 3), kind, (1, 1), (1, 1, 1, 1))
        for kind in ("forward", "input grad", "weight grad")
    ] + [mb.conv_case((1, 16, 12, 12), (16, 1, 3, 3), "forward", (1, 1), (1, 1, 1, 1), 16)]
    m = mb.measure("qemu-cortex-m4", cases, tmp_path / "m", ("reference", "fast"))
    for c in cases:
        fast, ref = m.instructions[(c.name, "fast")], m.instructions[(c.name, "reference")]
        assert fast / c.quantity < 5.0 and ref / fast > 3.0, (c.name, fast / c.quantity, ref / c.quantity)


def _run(
    tmp_path, name, kernels, target="host", model=EXAMPLES / "mlp.onnx", ram=256 * 1024, **kw
) -> runner.RunOutcome:
    opts = CompileOptions(model, "cortex-m4", ram, tmp_path / name, batch=4, kernels=kernels, **kw)
    compile_model(opts)
    assert json.loads((tmp_path / name / "plan.json").read_text())["kernels"] == kernels
    return runner.run_project(tmp_path / name, target, 3)


def _same(a: runner.RunOutcome, b: runner.RunOutcome) -> None:
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]  # float equality: bit for bit
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert np.array_equal(a.params[k].view(np.uint32), b.params[k].view(np.uint32)), k


AE_KW = {"loss": Loss.MSE, "ram": 2 << 20}  # all of the autoencoder trains: > 256 KB


@pytest.mark.parametrize(
    "model,kw",
    [
        (EXAMPLES / "mlp.onnx", {}),
        (EXAMPLES / "zoo" / "autoencoder.onnx", AE_KW),
        (EXAMPLES / "zoo" / "lenet5.onnx", {"ram": 2 << 20}),
    ],
    ids=["mlp", "autoencoder", "lenet5"],
)
def test_whole_model_fast_equals_reference_host(tmp_path, model, kw):
    need_tools("gcc")
    fast = _run(tmp_path, "fast", "fast", model=model, **kw)
    ref = _run(tmp_path, "ref", "reference", model=model, **kw)
    _same(fast, ref)
    assert (tmp_path / "fast" / "runtime" / "src" / "kernels" / "gemm.c").read_text() == (
        RUNTIME_C / "src" / "optimized" / "gemm.c"
    ).read_text()


def test_whole_model_fast_equals_reference_qemu(tmp_path):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    fast = _run(tmp_path, "fast", "fast", "qemu-cortex-m4")
    ref = _run(tmp_path, "ref", "reference", "qemu-cortex-m4")
    _same(fast, ref)
    assert fast.steps[0].ticks < ref.steps[0].ticks  # fewer instructions per step (QEMU -icount)
