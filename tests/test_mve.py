"""Helium (MVE) kernels on the Cortex-M55 (target qemu-cortex-m55-mve, POET_GEMM_MVE in poet/arm_asm.h): the
fast GEMM and conv kernels give the reference's bits on normal data (each output's own accumulator lane,
products rounded before the addition, the reference's order), differ where MVE floating point flushes
subnormals to zero (the scalar build of the same chip, qemu-cortex-m55, does not), and whole training runs
match the host bit for bit."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess

import numpy as np
import pytest
import test_kernels_fast as tkf
from conftest import EXAMPLES, need_tools

from poet_edge import microbench as mb
from poet_edge import runner
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.targets import RUNTIME_INCLUDE_DIR, load_target

MVE = "qemu-cortex-m55-mve"
QEMU_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")


def _random_gemm_cases(seed: int, count: int) -> list[mb.KernelCase]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        m, n, k = rng.randint(1, 13), rng.randint(1, 21), rng.randint(1, 40)
        ta, tb = rng.choice([(0, 0), (0, 1), (1, 0)])
        bias = rng.choice([None, "row", "col", "full"])
        alpha = rng.choice([1.0, 1.0, 0.5])
        cases.append(mb.gemm_case(m, n, k, ta, tb, alpha=alpha, bias=bias))
    return list({c.name: c for c in cases}.values())


def _random_conv_geometries(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        kh, kw = rng.choice([(1, 1), (3, 3), (3, 3), (5, 5), (1, 5), (3, 1)])
        s = rng.choice([1, 1, 2])
        g = rng.choice([1, 1, 2])
        c, m = g * rng.randint(1, 4), g * rng.randint(1, 5)
        h, w = rng.randint(kh, kh + 9), rng.randint(kw, kw + 13)
        pads = tuple(rng.randint(0, k // 2) for k in (kh, kw, kh, kw))
        out.append(
            ((rng.randint(1, 2), c, h, w), (m, c // g, kh, kw), s, (pads[0], pads[1], pads[2], pads[3]), g)
        )
    return out


def _differ(target: str, cases: list[mb.KernelCase], tmp_path) -> dict[str, int]:
    return {k: v for k, v in mb.compare_variants(target, cases, tmp_path / target).items() if v >= 0}


def test_mve_only_where_asked() -> None:
    """POET_GEMM_MVE is defined for qemu-cortex-m55-mve only (-DPOET_MVE); the scalar M55 build has none."""
    need_tools("arm-none-eabi-gcc")
    for name, mve in [(MVE, True), ("qemu-cortex-m55", False), ("qemu-cortex-m4", False)]:
        t = load_target(name)
        macros = subprocess.run(
            [t.cc, *t.cflags, f"-I{RUNTIME_INCLUDE_DIR}", "-dM", "-E", "-include", "poet/arm_asm.h", "-"],
            input="",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert ("#define POET_GEMM_MVE 1" in macros) == mve, name
        assert ("#define POET_CONV_ASM 1" in macros) == (not mve), name
    t = load_target("qemu-cortex-m4")  # asking for MVE on a core without it stops the build
    bad = subprocess.run(
        [t.cc, *t.cflags, "-DPOET_MVE", f"-I{RUNTIME_INCLUDE_DIR}", "-E", "-include", "poet/arm_asm.h", "-"],
        input="",
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "MVE floating point" in bad.stderr


def test_gemm_bit_identical_mve(tmp_path):
    need_tools(*QEMU_TOOLS)
    cases = tkf.gemm_cases() + tkf.matmul_cases() + _random_gemm_cases(58, 60)
    assert not _differ(MVE, cases, tmp_path)


def test_conv_bit_identical_mve(tmp_path):
    need_tools(*QEMU_TOOLS)
    cases = tkf.conv_cases() + tkf.conv_cases(_random_conv_geometries(58, 16))
    cases = list({c.name: c for c in cases}.values())
    assert not _differ(MVE, cases, tmp_path)


def _subnormal(case: mb.KernelCase) -> mb.KernelCase:
    """The case with op(A) scaled by 2^-126 first: most of its values become subnormal."""
    scale = f"for (int32_t q_ = 0; q_ < {case.tensors[0]}; ++q_) (@T0@)[q_] *= 0x1p-126f; "
    return dataclasses.replace(case, name=case.name + " subnormal A", call="{ " + scale + case.call + " }")


def test_subnormals_flushed_by_mve_only(tmp_path):
    """Where MVE differs: subnormal operands are flushed to zero by the MVE blocks, so the fast kernel's
    outputs differ from the reference's; on the scalar build of the same chip (FPv5 with FPSCR.FZ = 0) and
    on the host the fast kernels keep them and agree with the reference bit for bit."""
    need_tools("gcc", *QEMU_TOOLS)
    cases = [_subnormal(mb.gemm_case(5, 9, 7, ta, tb)) for ta, tb in [(0, 0), (0, 1), (1, 0)]]
    cases.append(
        _subnormal(mb.conv_case((1, 3, 8, 8), (4, 3, 3, 3), "forward", (1, 1), (1, 1, 1, 1), bias=False))
    )
    assert set(_differ(MVE, cases, tmp_path)) == {c.name for c in cases}
    assert not _differ("qemu-cortex-m55", cases, tmp_path)
    assert not _differ("host", cases, tmp_path)


def _same(a: runner.RunOutcome, b: runner.RunOutcome) -> None:
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]  # float equality: bit for bit
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert np.array_equal(a.params[k].view(np.uint32), b.params[k].view(np.uint32)), k


@pytest.mark.parametrize(
    "model,kw",
    [
        (EXAMPLES / "mlp.onnx", {"batch": 4, "ram": 256 * 1024}),
        (EXAMPLES / "zoo" / "dscnn.onnx", {"batch": 1, "train": "bias", "ram": 512 * 1024}),
    ],
    ids=["mlp", "dscnn-bias"],
)
def test_zoo_model_on_mve_bit_identical_to_host(tmp_path, model, kw):
    need_tools("gcc", *QEMU_TOOLS)
    ram = kw.pop("ram")
    compile_model(CompileOptions(model, "cortex-m4", ram, tmp_path / "m", **kw))
    assert json.loads((tmp_path / "m" / "plan.json").read_text())["kernels"] == "fast"
    host = runner.run_project(tmp_path / "m", "host", 3)
    mve = runner.run_project(tmp_path / "m", MVE, 3)
    _same(host, mve)
    assert mve.measured_ram_bytes <= ram
    disasm = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "-marmv8.1-m.main", str(mve.build.elf)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"vmul\.f32\tq\d, q\d, r\d", disasm)  # the MVE blocks are in the image
    assert not re.search(r"vfma\.f32\tq", disasm)  # and no fused multiply-add
