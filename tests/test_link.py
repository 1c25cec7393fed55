"""Only the kernels a project uses are linked: the kernel sources of a project are those its ops' kernel
calls name and those their files call (read from the kernel files, poet_edge/codegen/link.py), listed by
name in the Makefile and CMakeLists.txt; every target compiles with -ffunction-sections -fdata-sections
and links with --gc-sections, so what the program never reaches leaves the image."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools
from onnx import TensorProto, helper, numpy_helper

from poet_edge import runner, targets
from poet_edge.autodiff import DEFAULT_OPTIONS, PLAIN, TrainingOptions
from poet_edge.codegen import emit, link
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.runner import sources

# what every one of these projects calls: the loss, its gradient's reduction, SGD, and math.c's poet_expf
# and poet_logf, which softmax_xent.c calls
BASE = {"math", "reduce_sum_to", "sgd", "softmax_xent"}
# the fused updates (fused.c) call the optimizers' kernels, the convolution's weight gradient and the GEMM
FUSED = {"adam", "conv", "fused", "gemm", "sgd_momentum"}


def project_kernels(out: Path) -> set[str]:
    """The kernel sources of a project: the files, checked against the Makefile's and the CMakeLists'."""
    files = {p.stem for p in (out / "runtime" / "src" / "kernels").glob("*.c")}
    make = re.search(r"^KERNELS = ((?:[^\n]*\\\n)*[^\n]*)", (out / "Makefile").read_text(), re.M)
    cmake = re.search(r"set\(POET_KERNELS\s([^)]*)\)", (out / "CMakeLists.txt").read_text())
    assert make and cmake
    for listed in (make[1], cmake[1]):
        assert sorted(re.findall(r"runtime/src/kernels/(\w+)\.c", listed)) == sorted(files)
    return files


def compiled(model: Path, out: Path, kernels: str = "fast", training: TrainingOptions = PLAIN) -> set[str]:
    compile_model(CompileOptions(model, "cortex-m4", 4 << 20, out, kernels=kernels, training=training))
    return project_kernels(out)


def conv_only_model(path: Path, side: int = 8) -> Path:
    """Conv -> Relu -> Conv (1x1) -> GlobalAveragePool -> Flatten: logits without any Gemm or MatMul, on a
    side x side image."""
    w1 = numpy_helper.from_array(((np.arange(72) % 7 - 3) / 10).astype(np.float32).reshape(4, 2, 3, 3), "w1")
    w2 = numpy_helper.from_array(((np.arange(12) % 5 - 2) / 10).astype(np.float32).reshape(3, 4, 1, 1), "w2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


def test_the_scan_reads_calls_and_definitions_not_comments_or_strings(tmp_path):
    c = tmp_path / "k.c"
    c.write_text(
        '#include "poet/kernels.h"\n'
        "/* poet_sgd_f32(p, g, lr, n) in a comment */\n"
        "void poet_copy_f32(const float *X, float *Y, int32_t n);  /* a prototype */\n"
        "static void poet_helper(float *y) { (void)y; }\n"
        "void poet_relu_f32(const float *X, float *Y,\n"
        "                   int32_t n)\n"
        "{\n"
        '    const char *s = "poet_adam_f32(";  // poet_mse_f32(\n'
        "    poet_gemm_f32(X, X, 0, Y, n, n, n, 0, 0, 1.0f, 0.0f, 0, 0);\n"
        "    poet_copy_f32(X, Y, n);\n"
        "    poet_helper(Y);\n"
        "    (void)s;\n"
        "}\n"
    )
    assert link.definitions(c) == {"poet_relu_f32"}
    assert link.calls(c) == {"poet_gemm_f32", "poet_copy_f32"}


def test_every_kernels_h_function_has_one_source_and_the_fast_files_define_the_same():
    owners = link.owners()
    assert set(owners) == link.api() and len(owners) > 60
    assert owners["poet_gemm_part_f32"] == "gemm_part" and owners["poet_conv2d_grad_weight_f32"] == "conv"
    assert owners["poet_conv2d_grad_weight_part_f32"] == "conv_part"
    assert owners["poet_conv2d_grad_weight_from_f32"] == "conv"
    assert owners["poet_expf"] == "math"
    for fast in sorted(link.OPTIMIZED_DIR.glob("*.c")):
        assert link.definitions(fast) == link.definitions(link.KERNELS_DIR / fast.name), fast.name


def test_what_the_kernel_files_call():
    """Read from the files: the fast convolution calls the GEMM (its 1x1 cases), never the part GEMM; the
    weight gradient's row-tile part kernel (conv_part.c) calls conv.c's paths and, fast, the part GEMM (a
    one-sample 1x1 tile). The reference convolution calls no other kernel."""
    assert link.callees("conv", "fast") == {"gemm"}
    assert link.callees("conv", "reference") == set()
    assert link.callees("conv_part", "fast") == {"conv", "gemm_part"}
    assert link.callees("conv_part", "reference") == {"conv"}
    assert link.callees("matmul", "fast") == {"gemm"} and link.callees("matmul", "reference") == set()
    assert link.callees("fused", "reference") == {"adam", "conv", "gemm", "sgd", "sgd_momentum"}
    assert link.callees("softmax_xent", "fast") == {"math"}
    assert link.closure({"fused"}) == ["adam", "conv", "fused", "gemm", "sgd", "sgd_momentum"]
    assert link.closure({"fused"}, ["reference"]) == ["adam", "conv", "fused", "gemm", "sgd", "sgd_momentum"]
    assert emit.with_dependencies({"conv", "softmax_xent"}) == ["conv", "gemm", "softmax_xent"]
    assert emit.with_dependencies({"conv_part"}) == ["conv", "conv_part", "gemm", "gemm_part"]
    assert link.closure({"conv_part"}, ["reference"]) == ["conv", "conv_part"]
    with pytest.raises(PoetError, match="no kernel source"):
        link.closure({"nonexistent"})
    with pytest.raises(PoetError, match="poet_gemm_f32 is not defined by src/optimized/conv.c"):
        link.check_defines("poet_gemm_f32", "conv")


@pytest.mark.parametrize("target", ["host", "qemu-cortex-m4"])
def test_the_scan_finds_every_symbol_the_compiled_kernels_need(tmp_path, target):
    """Each kernel file compiled for ``target``: every kernel function its object needs from another
    source is one the scan found (the scan also sees calls in code the preprocessor leaves out there)."""
    t = targets.load_target(target)
    need_tools(t.cc, t.nm_tool)
    for variant in link.KERNEL_VARIANTS:
        for src in sorted(link.KERNELS_DIR.glob("*.c")):
            path = link.kernel_file(src.stem, variant)
            obj = tmp_path / f"{variant}-{src.stem}.o"
            flags = [*t.cpu_flags, "-std=c99", "-O2", f"-I{targets.RUNTIME_INCLUDE_DIR}"]
            subprocess.run([t.cc, *flags, "-c", str(path), "-o", str(obj)], check=True)
            nm = subprocess.run([t.nm_tool, "-u", str(obj)], capture_output=True, text=True, check=True)
            needed = {link.owners()[s] for s in nm.stdout.split() if s in link.owners()}
            assert needed <= link.callees(src.stem, variant), (variant, src.stem)
            if target == "host":  # no asm or MVE branches left out: the same set
                assert needed == link.callees(src.stem, variant), (variant, src.stem)


def test_a_conv_and_a_dense_project_list_exactly_the_kernels_they_use(tmp_path):
    lenet5, mlp = EXAMPLES / "zoo" / "lenet5.onnx", EXAMPLES / "mlp.onnx"
    # lenet5: conv, maxpool, relu, gemm (its Gemm layers), copy (Reshape); no part GEMM with either kernel
    # set (before: the fast conv.c called it and added gemm_part)
    conv = BASE | {"conv", "copy", "gemm", "maxpool", "relu"}
    assert compiled(lenet5, tmp_path / "lenet5") == conv
    assert compiled(lenet5, tmp_path / "lenet5-ref", "reference") == conv
    assert compiled(lenet5, tmp_path / "lenet5-fused", training=DEFAULT_OPTIONS) == conv | FUSED
    # the MLP: no convolution, no part GEMM (before: conv.c's dependencies gemm.c and gemm_part.c
    # were listed by hand; math.c was in every project)
    dense = BASE | {"copy", "gemm", "relu"}
    assert compiled(mlp, tmp_path / "mlp") == dense
    assert compiled(mlp, tmp_path / "mlp-ref", "reference") == dense
    # with the fused updates, fused.c calls the convolution's weight gradient (fused.c is one file)
    assert compiled(mlp, tmp_path / "mlp-fused", training=DEFAULT_OPTIONS) == dense | FUSED


def test_a_conv_only_project_has_no_gemm_part(tmp_path):
    """Before, every convolution project got gemm.c and gemm_part.c, then (fast) conv.c brought both because
    its weight gradient's part kernel called the part GEMM. Now the fast conv.c brings gemm.c only (a 1x1
    convolution is a GEMM) and the reference conv.c nothing; the part kernel is in conv_part.c."""
    model = conv_only_model(tmp_path / "conv_only.onnx")
    conv = {"conv", "copy", "math", "pool", "relu", "sgd", "softmax_xent"}
    assert compiled(model, tmp_path / "ref", "reference") == conv
    assert compiled(model, tmp_path / "fast") == conv | {"gemm"}
    for out in ("ref", "fast"):
        assert not {p.stem for p in (tmp_path / out).rglob("*.c")} & {"gemm_part", "conv_part"}


def rows_options(model: Path, out: Path, split: str, kernels: str = "fast") -> CompileOptions:
    """``model`` at batch 1 whose weight gradients run in row tiles with ``split`` 1KB (none with off)."""
    return replace(CompileOptions(model, "cortex-m4", 4 << 20, out, kernels=kernels), split=split)


@pytest.mark.parametrize("kernels", ["fast", "reference"])
def test_a_project_with_row_tiles_links_the_part_kernel_and_gives_the_unsplit_bits(tmp_path, kernels):
    """A 12x12 image at 1 KB tiles: the weight gradients run in row tiles (the part kernel, conv_part.c, whose
    fast file calls the part GEMM for the 1x1 conv's tiles), and the step keeps the unsplit step's bits."""
    need_tools("gcc")
    model = conv_only_model(tmp_path / "conv_only.onnx", 12)
    compile_model(rows_options(model, tmp_path / "rows", "1KB", kernels))
    code = (tmp_path / "rows" / "poet_model.c").read_text()
    assert "poet_conv2d_grad_weight_part_f32(" in code
    base = {"concat", "conv", "conv_part", "copy", "math", "pool", "relu", "sgd", "softmax_xent", "strided"}
    extra = {"gemm", "gemm_part"} if kernels == "fast" else set()
    assert project_kernels(tmp_path / "rows") == base | extra
    compile_model(rows_options(model, tmp_path / "whole", "off", kernels))
    assert "_part_f32(" not in (tmp_path / "whole" / "poet_model.c").read_text()
    whole = runner.run_project(tmp_path / "whole", "host", 3)
    rows = runner.run_project(tmp_path / "rows", "host", 3)
    assert [s.loss for s in rows.steps] == [s.loss for s in whole.steps]
    assert whole.params.keys() == rows.params.keys()
    for k, v in whole.params.items():
        assert np.array_equal(v, rows.params[k]), k


def test_every_target_compiles_each_function_in_its_section_and_collects_the_unused():
    for name in targets.available_targets():
        t = targets.load_target(name)
        assert {"-ffunction-sections", "-fdata-sections"} <= set(t.cflags), name
        assert "-Wl,--gc-sections" in t.ldflags, name


def symbols(nm: str, elf: Path) -> set[str]:
    out = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


@pytest.mark.parametrize("target", ["host", "qemu-cortex-m4"])
def test_a_dense_image_leaves_out_the_convolution_its_fused_updates_file_links(tmp_path, target):
    """The MLP with fused updates compiles conv.c and gemm_part.c (fused.c calls them); the image holds
    neither the convolution nor the part GEMM, which nothing it runs reaches (poet_adam_f32 stays: the
    fused update picks its optimizer at run time)."""
    t = targets.load_target(target)
    need_tools(t.cc, t.nm_tool)
    out = tmp_path / "out"
    assert "conv" in compiled(EXAMPLES / "mlp.onnx", out, training=DEFAULT_OPTIONS)
    srcs, incs = sources(out)
    built = targets.build(t, srcs, incs, tmp_path / "build", 256 << 10)
    names = symbols(t.nm_tool, built.elf)
    assert {"poet_train_step", "poet_gemm_f32", "poet_gemm_grad_update_f32", "poet_sgd_f32"} <= names
    gone = {"poet_conv2d_f32", "poet_conv2d_grad_weight_f32", "poet_conv2d_grad_weight_update_f32"}
    gone |= {"poet_gemm_part_f32"}
    assert not gone & names, gone & names


def test_the_generated_makefile_collects_unused_sections(tmp_path):
    need_tools("gcc", "make", "nm")
    out = tmp_path / "out"
    compiled(EXAMPLES / "mlp.onnx", out, training=DEFAULT_OPTIONS)
    subprocess.run(["make", "-s", "-C", str(out)], check=True, capture_output=True)
    names = symbols("nm", out / "poet_train")
    assert "poet_gemm_grad_update_f32" in names and "poet_conv2d_f32" not in names
