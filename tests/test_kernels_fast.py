"""The fast kernels (runtime_c/src/optimized) give the same bits as the reference kernels, kernel by kernel
(host and QEMU Cortex-M4) and for whole training runs (`poet compile --kernels fast|reference`)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import microbench as mb
from poet_edge import runner
from poet_edge.autodiff import Loss
from poet_edge.codegen import emit
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.paths import RUNTIME_C

# M, N, K: 1x1x1, every tail of the 4-row / 6-column blocks, K = 1 and 2 (first step only), zoo shapes
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
    return list({c.name: c for c in cases}.values())


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


def _check_identical(target: str, cases: list[mb.KernelCase], tmp_path) -> None:
    result = mb.compare_variants(target, cases, tmp_path / target)
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


def test_elementwise_bit_identical_host(tmp_path):
    need_tools("gcc")
    _check_identical("host", elementwise_cases(), tmp_path)


def test_bit_identical_qemu_m4(tmp_path):
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    _check_identical("qemu-cortex-m4", gemm_cases() + elementwise_cases(), tmp_path)


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
        assert fast / c.quantity < 3.0 and ref / fast > 3.0, (c.name, fast / c.quantity, ref / c.quantity)


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
    [(EXAMPLES / "mlp.onnx", {}), (EXAMPLES / "zoo" / "autoencoder.onnx", AE_KW)],
    ids=["mlp", "autoencoder"],
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
