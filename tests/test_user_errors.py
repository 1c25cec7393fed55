"""What a user bringing a model meets first: every unsupported op and attribute in one error, a --batch a
static export cannot take, zero initial states that must not train, bad training data, a --ram the
device does not have, a failed run's whole report, and what inspect says about parameters and gradients."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import need_tools, poet
from onnx import TensorProto, helper, numpy_helper

from poet_edge import autodiff, frontend, runner, sanity, trainable
from poet_edge.cli import main
from poet_edge.compiler import CompileOptions, plan_json, plan_training
from poet_edge.errors import PoetError
from poet_edge.inspect_model import format_inspection, inspect
from poet_edge.ir import Phase
from poet_edge.profiles import load_profile

k = helper.make_node


def _save(nodes, x_shape, y_name, y_shape, inits=(), path: Path | None = None) -> onnx.ModelProto:
    m = helper.make_model(
        helper.make_graph(
            nodes,
            "m",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, y_shape)],
            list(inits),
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    onnx.checker.check_model(m)
    if path is not None:
        onnx.save(m, str(path))
    return m


# ---- 1. every unsupported op and attribute in one error ---------------------------------------------
def _four_problems(path: Path | None = None) -> onnx.ModelProto:
    """3 unsupported ops (LRN, Einsum, TopK) and one unsupported attribute (Conv dilations=2); the nodes
    between them (Relu, Flatten) read refused outputs and must not add errors of their own."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    kk = numpy_helper.from_array(np.array([10], np.int64), "kk")
    nodes = [
        k("Conv", ["x", "w"], ["c"], name="conv1", dilations=[2, 2], pads=[2, 2, 2, 2]),
        k("LRN", ["c"], ["n"], name="norm1", size=3),
        k("Relu", ["n"], ["r"], name="relu1"),
        k("Einsum", ["r"], ["e"], name="mix", equation="nchw->nchw"),
        k("Flatten", ["e"], ["f"], name="flat"),
        k("TopK", ["f", "kk"], ["t", "ti"], name="top10"),
    ]
    return _save(nodes, [1, 3, 8, 8], "t", [1, 10], [w, kk], path)


def _problem_lines(message: str) -> list[str]:
    return [ln for ln in message.splitlines() if ln.startswith("  - ")]


def test_all_unsupported_ops_and_attributes_in_one_error():
    with pytest.raises(PoetError) as e:
        frontend.to_ir(_four_problems())
    lines = _problem_lines(str(e.value))
    assert len(lines) == 4, str(e.value)
    assert "node 'conv1' (Conv): unsupported attribute dilations=[2, 2]" in lines[0]
    assert [re.search(r"unsupported op (\w+)", ln).group(1) for ln in lines[1:]] == ["LRN", "Einsum", "TopK"]
    assert ["norm1", "mix", "top10"] == [re.search(r"node '(\w+)'", ln).group(1) for ln in lines[1:]]
    assert str(e.value).count("supported: ") == 1 and "Conv, " in str(e.value)  # listed once, at the end


def test_one_problem_keeps_the_one_line_error():
    m = _save(
        [k("Relu", ["x"], ["r"]), k("LRN", ["r"], ["y"], name="n1", size=3)], [1, 3, 4, 4], "y", [1, 3, 4, 4]
    )
    with pytest.raises(PoetError, match=r"^node 'n1': unsupported op LRN; supported: .*Conv") as e:
        frontend.to_ir(m)
    assert "\n" not in str(e.value)


I64S = (("zero", 0), ("axes", [0]), ("minus1", [-1]))


def test_a_refusal_does_not_cascade_through_shape_computations():
    """TorchScript's flatten after a refused op: Shape/Gather/Unsqueeze/Concat/Reshape on an unknown shape
    and a Gemm on an unknown value add no error of their own."""
    w = numpy_helper.from_array(np.ones((48, 2), np.float32), "w")
    nodes = [
        k("LRN", ["x"], ["n"], name="norm1", size=3),
        k("Shape", ["n"], ["s"]),
        k("Gather", ["s", "zero"], ["b"], axis=0),
        k("Unsqueeze", ["b", "axes"], ["b1"]),
        k("Concat", ["b1", "minus1"], ["shape"], axis=0),
        k("Reshape", ["n", "shape"], ["f"]),
        k("Gemm", ["f", "w"], ["y"], name="fc"),
    ]
    inits = [w, *(numpy_helper.from_array(np.array(v, np.int64), n) for n, v in I64S)]
    with pytest.raises(PoetError, match=r"^node 'norm1': unsupported op LRN; supported: ") as e:
        frontend.to_ir(_save(nodes, [1, 3, 4, 4], "y", [1, 2], inits))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("command", ["compile", "inspect"])
def test_cli_reports_every_problem_and_writes_nothing(tmp_path, command):
    model = tmp_path / "four.onnx"
    _four_problems(model)
    out = tmp_path / "out"
    args = ("--ram", "64KB", "-o", out) if command == "compile" else ()
    r = poet(command, model, *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("poet: error: the model has 4 problems")
    for needle in ("conv1", "dilations", "norm1", "LRN", "mix", "Einsum", "top10", "TopK"):
        assert needle in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["four.onnx"]


# ---- 2. --batch on a static-batch export --------------------------------------------------------------
def _static(path: Path, batch: int) -> Path:
    w = numpy_helper.from_array(np.full((4, 3), 0.1, np.float32), "fc.weight")
    b = numpy_helper.from_array(np.zeros(3, np.float32), "fc.bias")
    _save(
        [k("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], name="fc")],
        [batch, 4],
        "y",
        [batch, 3],
        [w, b],
        path,
    )
    return path


def test_batch_on_a_fixed_batch_dimension_is_refused(tmp_path):
    model = _static(tmp_path / "static1.onnx", 1)
    for command, args in (("compile", ("--ram", "64KB", "-o", tmp_path / "out")), ("inspect", ())):
        r = poet(command, model, "--batch", "4", *args)
        assert r.returncode == 2, r.stderr
        assert "the model's batch dimension is fixed at 1" in r.stderr
        assert "--batch 4 cannot apply; re-export with a dynamic batch dimension" in r.stderr
        assert r.stderr.rstrip().endswith("or drop --batch")
        assert not (tmp_path / "out").exists()
    assert poet("inspect", model, "--batch", "1").returncode == 0  # the same batch is no conflict
    with pytest.raises(PoetError, match="fixed at 1, --batch 4 cannot apply"):
        frontend.load(model, 4)  # the library refuses it too
    assert frontend.graph_batch(frontend.load(_static(tmp_path / "static3.onnx", 3))) == 3  # default 1


def test_inspect_and_plan_show_the_batch_used(tmp_path):
    model = _static(tmp_path / "static2.onnx", 2)
    r = poet("inspect", model, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["batch"] == 2
    # the library's default (batch=1) does not override a fixed batch, and plan.json says which was used
    opts = CompileOptions(model, "host", 64 * 1024, tmp_path / "out")
    assert opts.batch == 1
    assert plan_json(opts, plan_training(opts))["batch"] == 2
    assert frontend.batch_of(model) == 2 and frontend.batch_of(tmp_path / "static2.onnx", 2) == 2


def test_batch_on_a_dynamic_dimension_applies(mlp_path):
    assert frontend.batch_of(mlp_path, 4) == 4 and frontend.batch_of(mlp_path) == 1
    assert inspect(mlp_path, 4).batch == 4


# ---- 3. a zero initial state is not trained ------------------------------------------------------------
def _gru_like(path: Path | None = None) -> onnx.ModelProto:
    """One unrolled recurrent step, as exporters write it: h0 = zeros is an initializer read as data by a
    MatMul (left operand), a Sub and a Mul; zero biases (Gemm C, an Add after a MatMul) must still train."""
    rng = np.random.default_rng(0)

    def init(name, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), name)

    inits = [
        init("h0", np.zeros((2, 5))),
        init("W_ih", rng.standard_normal((4, 5)) * 0.3),
        init("W_hh", rng.standard_normal((5, 5)) * 0.3),
        init("b_hh", np.zeros(5)),
        init("W_z", rng.standard_normal((5, 4)) * 0.3),
        init("b_z", np.zeros(4)),
        init("W_out", rng.standard_normal((4, 5)) * 0.3),
    ]
    nodes = [
        k("MatMul", ["x", "W_ih"], ["gi"]),
        k("MatMul", ["h0", "W_hh"], ["gh0"]),
        k("Add", ["gh0", "b_hh"], ["gh"]),
        k("Add", ["gi", "gh"], ["pre"]),
        k("Tanh", ["pre"], ["n"]),
        k("Gemm", ["n", "W_z", "b_z"], ["zl"]),
        k("Sigmoid", ["zl"], ["z"]),
        k("MatMul", ["z", "W_out"], ["zo"]),
        k("Sub", ["h0", "n"], ["d"]),
        k("Mul", ["zo", "d"], ["zd"]),
        k("Add", ["n", "zd"], ["h1"]),
        k("Gemm", ["h1", "W_z", "b_z"], ["y"]),
    ]
    return _save(nodes, [2, 4], "y", [2, 4], inits, path)


def test_zero_initial_state_is_not_trained_but_zero_biases_are():
    g = frontend.to_ir(_gru_like())
    assert g.trainable == {"W_ih", "W_hh", "b_hh", "W_z", "b_z", "W_out"}
    assert trainable.zero_states(g.nodes, g.params) == {"h0"}
    tg = autodiff.training_graph(g)
    assert "h0" not in {n.inputs[0] for n in tg.nodes if n.phase == Phase.UPDATE}
    for spec in ("all", "bias", "last:3"):
        assert "h0" not in trainable.select(g, spec)
    assert trainable.select(g, "^h0$") == {"h0"}  # named explicitly, it trains


def test_inspect_counts_the_zero_state_as_frozen(tmp_path):
    r = inspect(Path(_gru_like(tmp_path / "gru.onnx") and tmp_path / "gru.onnx"))
    assert r.params_trainable[0] == 6 and r.params_frozen == (1, 4 * 10)


# ---- 4. training data is checked before anything runs --------------------------------------------------
@pytest.mark.parametrize(
    ("y", "x_bad", "message"),
    [
        (np.array([1, 2, 10, 3]), False, r"label y\[2\] is 10, outside \[0, 10\): the model has 10 classes"),
        (np.array([1, -1, 0, 3]), False, r"label y\[1\] is -1, outside \[0, 10\)"),
        (np.array([1.0, 2.0, 2.5, 3.0]), False, r"y has dtype float64; labels must be integers"),
        (np.array([1.0, np.nan, 2.0, 3.0]), False, r"y has dtype float64; labels must be integers"),
        (np.array([1.0, 2.0, 0.0, 3.0]), False, r"y has dtype float64; labels must be integers"),
        (np.array([True, False, True, True]), False, r"y has dtype bool; labels must be integers"),
        (np.array([1, 2, 2**31 - 1, 3]), False, r"label y\[2\] is 2147483647, outside \[0, 10\)"),
        (np.array([1, 2**40, 0, 3]), False, r"label y\[1\] is 1099511627776, outside \[0, 10\)"),
        (np.array(["a", "b", "c", "d"]), False, r"y has dtype <U1; numbers"),
        (np.array([1, 2, 3, 4]), True, r"x\[2, 0, 5, 1\] is inf; inputs must be finite float32 numbers"),
    ],
)
def test_bad_training_data_names_the_first_bad_value(y, x_bad, message):
    x = np.zeros((4, 1, 8, 8), np.float32)
    if x_bad:
        x[2, 0, 5, 1] = np.inf
        x[3, 0, 0, 0] = np.nan
    with pytest.raises(PoetError, match=message):
        runner.check_data("--data d.npz", x, y, 10)


def test_float64_beyond_float32_is_not_finite():
    x = np.zeros((2, 3))
    x[1, 2] = 1e300  # finite in float64, inf on the device
    with pytest.raises(PoetError, match=r"x\[1, 2\] is 1e\+300; inputs must be finite float32 numbers"):
        runner.check_data("d", x, np.array([0, 1]), 10)
    with pytest.raises(PoetError, match=r"y\[0, 1\] is -1e\+40; targets must be finite float32 numbers"):
        runner.check_data("d", x[:1], np.array([[0.0, -1e40]]), 0)


def test_integer_labels_of_any_width_and_finite_targets_pass():
    x = np.ones((3, 2), np.float32)
    for dtype in (np.int8, np.uint16, np.int32, np.int64, np.uint64):
        runner.check_data("d", x, np.array([0, 9, 3], dtype), 10)
    runner.check_data("d", x, np.array([[0.5], [-2.0], [1e9]]), 0)  # regression targets: any finite value
    with pytest.raises(PoetError, match=r"y\[1, 0\] is nan; targets must be finite"):
        runner.check_data("d", x, np.array([[0.5], [np.nan], [1.0]]), 0)


def test_run_refuses_out_of_range_labels_before_building(mlp_path, tmp_path):
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out, "--batch", "2").returncode == 0
    x = np.zeros((4, 1, 8, 8), np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=np.array([0, 3, 12, 1]))
    r = poet("run", out, "--data", tmp_path / "d.npz")
    assert r.returncode == 2 and "label y[2] is 12, outside [0, 10)" in r.stderr, r.stderr
    assert not (out / "run-host" / "build").exists()


# ---- 5. --ram above the device's RAM -------------------------------------------------------------------
def test_ram_above_the_device_warns(mlp_path, tmp_path):
    r = poet("compile", mlp_path, "--device", "cortex-m0plus", "--ram", "64KB", "-o", tmp_path / "out", "-q")
    assert r.returncode == 0, r.stderr
    assert (
        "poet: warning: --ram 65536 B (64.0 KiB) is more than the RAM of cortex-m0plus, 32768 B" in r.stderr
    )
    r = poet(
        "sweep", mlp_path, "--device", "cortex-m0plus", "--ram", "40KB,48KB", "--schedulers", "none",
        "-o", tmp_path / "sw", "-j", "1", "--no-report", "-q",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "--ram 49152 B (48.0 KiB) is more than the RAM of cortex-m0plus" in r.stderr
    r = poet("compile", mlp_path, "--device", "cortex-m4", "--ram", "64KB", "-o", tmp_path / "ok", "-q")
    assert r.returncode == 0 and "warning" not in r.stderr


# ---- 6. a failed run shows its whole report ------------------------------------------------------------
def test_failure_report_keeps_the_sanitizer_report(tmp_path):
    report = ["=" * 65, "==7==ERROR: AddressSanitizer: global-buffer-overflow on address 0x55"]
    report += [f"    #{i} 0x55 in poet_frame_{i} poet_model.c:{i}" for i in range(80)]
    stderr = (
        "some earlier line\n" + "\n".join(report) + "\nSUMMARY: AddressSanitizer: global-buffer-overflow\n"
    )
    msg = runner.failure_report(1, "step 0 loss_bits 00000000\n", stderr, tmp_path / "run.log")
    lines = msg.splitlines()
    assert lines[1] == "==7==ERROR: AddressSanitizer: global-buffer-overflow on address 0x55"
    assert lines[1 : 1 + runner.REPORT_LINES] == report[1 : 1 + runner.REPORT_LINES]
    assert lines[-2] == "... 22 more lines" and lines[-1] == f"the whole output is in {tmp_path / 'run.log'}"
    assert "SUMMARY: AddressSanitizer" in (tmp_path / "run.log").read_text()


def test_sanitized_run_shows_the_report(mlp_path, tmp_path):
    need_tools("gcc")
    out = tmp_path / "out"
    assert poet("compile", mlp_path, "--ram", "64KB", "-o", out, "--batch", "2").returncode == 0
    src = out / "poet_model.c"  # a bug planted in the generated code: a read past the end of a global
    src.write_text(
        src.read_text()
        + "\nstatic const float poet_planted[4] = {1, 2, 3, 4};\n"
        + "const float *volatile poet_planted_p = poet_planted;\n"  # volatile: UBSan cannot see the bound
        + "float poet_planted_read(void) { return poet_planted_p[4]; }\n"
    )
    harness = out / "harness" / "main.c"
    text = harness.read_text()
    main = re.search(r"int main\([^)]*\)\s*\{", text)
    assert main, "harness has no main"
    harness.write_text(
        text[: main.start()]
        + "float poet_planted_read(void);\nvolatile float poet_planted_sink;\n"
        + text[main.start() : main.end()]
        + "\n    poet_planted_sink = poet_planted_read();\n"
        + text[main.end() :]
    )
    r = poet("run", out, "--sanitize", "--steps", "1")
    assert r.returncode != 0
    assert "ERROR: AddressSanitizer: global-buffer-overflow" in r.stderr, r.stderr
    assert re.search(r"#0 .* in poet_planted_read", r.stderr), r.stderr
    assert "SUMMARY: AddressSanitizer" in r.stderr and "Shadow bytes" in r.stderr  # the whole report
    assert "the whole output is in" in r.stderr and (out / "run-host-sanitize" / "run.log").is_file()


# ---- 7. inspect: parameters and gradients ---------------------------------------------------------------
@pytest.mark.parametrize(("train", "grad_bytes"), [("all", 13864), ("bias", 4 * (32 + 32 + 10))])
def test_inspect_shows_parameters_and_gradients_apart(mlp_path, train, grad_bytes):
    r = inspect(mlp_path, 8, train=train)
    assert r.gradient_bytes == grad_bytes == r.params_trainable[1]
    text = format_inspection(r)
    assert "with gradients" not in text
    assert re.search(rf"^gradients +{grad_bytes:,} B", text, re.M), text


# ---- 8. sizes are checked before any per-element work (issue 59) ---------------------------------------
def _shapes_only(x_shape, conv: bool = False) -> onnx.ModelProto:
    """x -> (3x3 Conv, 2 channels |) Relu -> Flatten: tiny files, whatever the declared shape."""
    w = [numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")] if conv else []
    first = k("Conv", ["x", "w"], ["c"]) if conv else k("Identity", ["x"], ["c"])
    m = helper.make_model(
        helper.make_graph(
            [first, k("Relu", ["c"], ["r"]), k("Flatten", ["r"], ["y"], axis=1)],
            "m",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
            w,
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    return m


def _phases_until_error(opts: CompileOptions) -> tuple[list[str], str]:
    """The phases plan_training began before it refused ``opts``, and its error."""
    seen: list[str] = []
    with pytest.raises(PoetError) as e:
        plan_training(opts, report=seen.append)
    return seen, str(e.value)


@pytest.mark.parametrize(
    ("x_shape", "conv", "batch", "message"),
    [
        (
            [1, 1, 31623, 31623],
            True,
            1,
            "'x' (input, shape [1, 1, 31623, 31623]) has 1,000,014,129 elements",
        ),
        ([2**31, 2**31], False, 1, "has 4,611,686,018,427,387,904 elements"),
        (
            ["N", 64],
            False,
            100_000_000,
            "'x' (input, shape [100000000, 64]) has 6,400,000,000 elements",
        ),
    ],
)
def test_huge_shapes_are_refused_right_after_load(tmp_path, x_shape, conv, batch, message):
    path = tmp_path / "huge.onnx"
    onnx.save(_shapes_only(x_shape, conv), str(path))
    assert path.stat().st_size < 1000
    seen, err = _phases_until_error(CompileOptions(path, "cortex-m4", 64 * 1024, tmp_path / "o", batch=batch))
    assert seen == ["load"] and message in err and "more than --ram (65536 B" in err, err
    assert ("use a smaller --batch" in err) == (x_shape[0] != 1)  # the batch dimension is the one to cut
    with pytest.raises(PoetError, match="more than the 32-bit address space"):  # no device: the hard cap
        sanity.check_graph(frontend.load(path, batch))


def test_size_errors_through_the_cli(mlp_path, tmp_path):
    for args in (("--batch", "100000000"), ("--ram", "1e30")):
        r = poet("compile", mlp_path, "--ram", "64KB", *args, "-o", tmp_path / "o")
        assert r.returncode == 2 and r.stderr.splitlines()[-1].startswith("poet: error:"), r.stderr
        assert not (tmp_path / "o").exists()
    r = poet("inspect", mlp_path, "--batch", "100000000")
    assert r.returncode == 2 and "6,400,000,000 elements" in r.stderr and "address space" in r.stderr


def _mlp_with(tmp_path: Path, name: str, value: float) -> Path:
    m = onnx.load(str(frontend_examples() / "mlp.onnx"))
    for t in m.graph.initializer:
        if t.name == name:
            a = numpy_helper.to_array(t).copy()
            a.flat[7] = value
            t.CopyFrom(numpy_helper.from_array(a, name))
    path = tmp_path / "w.onnx"
    onnx.save(m, str(path))
    return path


def frontend_examples() -> Path:
    return Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("value", [np.nan, -np.inf])
def test_non_finite_weights_are_named_before_the_training_graph(tmp_path, value):
    path = _mlp_with(tmp_path, "fc1.weight", value)
    seen, err = _phases_until_error(CompileOptions(path, "cortex-m4", 64 * 1024, tmp_path / "o"))
    assert seen == ["load"], seen
    assert (
        err
        == f"weight 'fc1.weight' holds {value} at [0, 7] (1 non-finite values); weights must be "
        + "finite numbers"
    )


def test_output_folder_is_checked_before_anything_runs(mlp_path, tmp_path):
    (tmp_path / "f.txt").write_text("x")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "a.txt").write_text("x")
    from poet_edge.compiler import compile_model

    for out, message in (
        (tmp_path / "f.txt", "a file is there, not a folder"),
        (tmp_path / "f.txt" / "o", f"{tmp_path / 'f.txt'} is a file, not a folder"),
        (foreign, "is not a poet-edge output folder"),
    ):
        seen: list[str] = []
        with pytest.raises(PoetError, match=re.escape(message)):
            compile_model(CompileOptions(mlp_path, "cortex-m4", 64 * 1024, out), phase=seen.append)
        assert seen == []


def test_parameters_above_the_flash_warn_and_run_refuses_the_target(tmp_path, capsys):
    """5 MB of frozen weights: compiling for cortex-m4 (1 MB flash) warns; `poet run` refuses the
    4 MB-flash QEMU board before building anything (the link would fail)."""
    w = numpy_helper.from_array(np.full((1280, 1024), 0.5, np.float32), "big")
    head = numpy_helper.from_array(np.full((10, 1280), 0.1, np.float32), "head")
    nodes = [k("Gemm", ["x", "big"], ["h"], transB=1), k("Gemm", ["h", "head"], ["y"], transB=1)]
    path, out = tmp_path / "big.onnx", tmp_path / "o"
    _save(nodes, ["N", 1024], "y", ["N", 10], [w, head], path)
    argv = ["compile", str(path), "--ram", "200KB", "--device", "cortex-m4", "--train", "head", "-q"]
    assert main([*argv, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "poet: warning: the parameters need 5294080 B (5170.0 KiB) of flash (frozen 5242880 B" in err, err
    assert "1048576 B (1024.0 KiB) of cortex-m4" in err
    assert main(["run", str(out), "--target", "qemu-cortex-m4", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("poet: error: the parameters need 5294080 B (5170.0 KiB) of flash, more than the ")
    assert (
        "of target qemu-cortex-m4; the link would fail" in err and not (out / "run-qemu-cortex-m4").exists()
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lr", "nan"], "--lr nan: must be a finite number >= 0"),
        (["--lr", "-0.5"], "--lr -0.5: must be a finite number >= 0"),
        (["--time-limit", "nan"], "--time-limit nan: must be a finite number > 0"),
        (["--time-limit", "-1"], "--time-limit -1: must be a finite number > 0"),
        (["--max-latency", "nan"], "--max-latency nan: must be a finite number > 0"),
        (["--max-latency", "infx"], "--max-latency inf: must be a finite number > 0"),
        (["--threads", "0"], "--threads 0: must be at least 1"),
    ],
)
def test_bad_numbers_in_options_are_refused(mlp_path, tmp_path, capsys, argv, message):
    code = main(["compile", str(mlp_path), "--ram", "64KB", "-o", str(tmp_path / "o"), "-q", *argv])
    assert code == 2 and capsys.readouterr().err == f"poet: error: {message}\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("key", "value"), [("clock_hz", "nan"), ("active_power_w", "inf"), ("ram_bytes", "nan")]
)
def test_non_finite_numbers_in_a_profile_are_refused(tmp_path, key, value):
    text = (Path(__file__).resolve().parent.parent / "profiles" / "cortex-m4.toml").read_text()
    lines = [f"{key} = {value}" if ln.split("=")[0].strip() == key else ln for ln in text.splitlines()]
    (tmp_path / "d.toml").write_text("\n".join(lines))
    with pytest.raises(PoetError, match=rf"\[mcu\]\.{key} is {value}; it must be a finite number"):
        load_profile(tmp_path / "d.toml")


def test_a_model_without_outputs_is_one_line(tmp_path):
    m = onnx.load(str(frontend_examples() / "mlp.onnx"))
    del m.graph.output[:]
    onnx.save(m, str(tmp_path / "m.onnx"))
    r = poet("compile", tmp_path / "m.onnx", "--ram", "64KB", "-o", tmp_path / "o")
    assert (
        r.returncode == 2
        and r.stderr
        == "poet: error: the model has no graph outputs; poet trains its first output with the loss\n"
    )


# ---- 9. damaged plan.json, run's output files, internal errors -----------------------------------------
@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plan") / "out"
    assert (
        poet(
            "compile", frontend_examples() / "mlp.onnx", "--ram", "64KB", "-o", out, "--no-report"
        ).returncode
        == 0
    )
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: "{not json", "not JSON"),
        (lambda p: "[1, 2]", "device is missing or not a str"),
        (lambda p: json.dumps({**p, "schedule": {"steps": "x", "solver": "s"}}), "schedule.steps is missing"),
        (lambda p: json.dumps({**p, "ram_budget_bytes": "lots"}), "ram_budget_bytes is missing or not a int"),
        (lambda p: json.dumps({**p, "lr": float("nan")}), "ram_budget_bytes or lr out of range"),
        (lambda p: json.dumps({**p, "problem": {**p["problem"], "nodes": [{"x": 1}]}}), "KeyError"),
    ],
)
@pytest.mark.parametrize("command", ["simulate", "run"])
def test_a_damaged_plan_is_one_line(compiled, tmp_path, damage, message, command, capsys):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(compiled, out)
    plan = json.loads((out / "plan.json").read_text())
    (out / "plan.json").write_text(damage(plan))
    code = main([command, str(out)])
    err = capsys.readouterr().err
    if command == "run" and message == "KeyError":  # run builds the C: it does not read the problem
        assert code == 0, err
        return
    assert (
        code == 2 and err.startswith(f"poet: error: {out / 'plan.json'} is damaged (") and message in err
    ), err
    assert err.endswith("; compile the model again\n") and err.count("\n") == 1


def test_run_checks_its_output_files_and_numbers_first(compiled, tmp_path, capsys):
    for argv, message in (
        (
            ["--json", str(tmp_path / "no" / "r.json")],
            f"--json {tmp_path / 'no' / 'r.json'}: no folder {tmp_path / 'no'}",
        ),
        (["--dump-params", str(tmp_path)], f"--dump-params {tmp_path}: a folder is there, not a file"),
        (["--lr", "nan"], "--lr nan: must be a finite number >= 0"),
        (["--timeout", "-1"], "--timeout -1: must be a finite number > 0"),
    ):
        assert main(["run", str(compiled), *argv]) == 2
        assert capsys.readouterr().err == f"poet: error: {message}\n"
    assert not (compiled / "run-host").exists()


def test_an_internal_error_is_classified_not_hidden(monkeypatch, capsys):
    """A bug (any exception but PoetError and OSError) prints one line saying so, exit 70; POET_DEBUG=1
    shows the traceback."""
    from poet_edge.commands import profiles

    def broken(args):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(profiles, "run", broken)
    assert main(["profiles"]) == 70
    err = capsys.readouterr().err
    assert (
        err.startswith("poet: internal error: ZeroDivisionError: planted at ")
        and "test_user_errors.py" in err
    )
    assert "bug in poet-edge" in err and err.count("\n") == 1
    monkeypatch.setenv("POET_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["profiles"])
