"""The reliability probe of issue 59: bad models, options, output folders, training data, corrupted plans,
odd graph files and interruptions, each run through the real command line in its own process.

Every case is judged on what a user would see: a clean error (non-zero exit, stderr starting with
"poet: error:"), a success where one is right, never a Python traceback, never a hang, never a silent
success where an error is due, and no leftovers (hidden .X.tmp-*/.X.old-* folders, poet-proof-* temp
folders, a half-written output folder, a child process still alive).

Run: PYTHONPATH=. .venv/bin/python bench/probe.py [--only SUBSTRING] [--jobs N]
Writes bench/results/probe.md and probe.json (with machine, commit and date); exits 1 when a case fails.
Cases that need root (tiny or read-only tmpfs mounts) are skipped without it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "examples" / "mlp.onnx"
HANG_S = 120.0  # a case still running after this is a hang
SLOW_S = 5.0  # size checks must answer within this (the issue asks for a second; the machine is shared)
ERROR = "poet: error:"
USAGE = re.compile(r"^poet \w+: error: ")  # argparse's own refusal (after its usage line)
TRACEBACK_MARKS = ("Traceback (most recent call last)", "internal error")


@dataclass
class Ctx:
    """A case's own folder (its cwd, TMPDIR and output parent) and the shared compiled projects."""

    dir: Path
    mlp_out: Path  # compiled examples/mlp.onnx (cross-entropy, 10 classes)
    mse_out: Path  # compiled examples/mlp.onnx with --loss mse


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    make: Callable[[Ctx], list[str]]  # prepares files in ctx.dir, returns the poet arguments
    expect: str = "error"  # "error" or "ok"
    needs_root: bool = False
    signal_after: tuple[str, int] | None = None  # (stdout/stderr text to wait for, signal number)
    slow_limit: float | None = None  # seconds the case must answer within (size checks)
    out_must_not_exist: str | None = None  # an output folder name (in ctx.dir) a failure must not leave


@dataclass
class Outcome:
    name: str
    group: str
    verdict: str  # clean, ok, traceback, hang, silent, unclean, leftover, slow, skipped
    exit_code: int | None
    seconds: float
    detail: str = ""
    leftovers: list[str] = field(default_factory=list)


# ---- models ------------------------------------------------------------------------------------------


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    m = helper.make_model(
        helper.make_graph(nodes, "m", inputs, outputs, list(inits)),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    m.ir_version = 8
    return m


def _vi(name: str, shape, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _save(ctx: Ctx, m: onnx.ModelProto, name: str = "m.onnx") -> str:
    path = ctx.dir / name
    onnx.save(m, str(path))
    return str(path)


def huge_relu(shape) -> onnx.ModelProto:
    """x -> Relu -> Flatten -> (output): only shapes, no big initializer."""
    return _model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Flatten", ["r"], ["y"], axis=1)],
        [_vi("x", shape)],
        [_vi("y", ["a", "b"])],
    )


def huge_conv(n: int) -> onnx.ModelProto:
    """A 1x1xNxN conv input (3x3 kernel, 2 channels): N*N elements, 36 bytes of weights."""
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Flatten", ["c"], ["y"], axis=1)],
        [_vi("x", [1, 1, n, n])],
        [_vi("y", ["a", "b"])],
        [w],
    )


def mlp_with(weight: float) -> onnx.ModelProto:
    m = onnx.load(str(MLP))
    for t in m.graph.initializer:
        if t.name == "fc1.weight":
            a = numpy_helper.to_array(t).copy()
            a[3, 5] = weight
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    return m


def mlp_no_outputs() -> onnx.ModelProto:
    m = onnx.load(str(MLP))
    del m.graph.output[:]
    return m


def mlp_fixed_batch() -> onnx.ModelProto:
    m = onnx.load(str(MLP))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    return m


def mlp_frozen_big() -> onnx.ModelProto:
    """A frozen 4 MB weight (a constant scale no trainable parameter path reaches) on a 1 MB-flash device."""
    m = onnx.load(str(MLP))
    big = numpy_helper.from_array(np.full((1024, 1024), 0.5, np.float32), "big")
    m.graph.initializer.append(big)
    return m


# ---- data, plans, graphs, profiles -------------------------------------------------------------------


def npz(ctx: Ctx, name: str = "d.npz", **arrays) -> str:
    path = ctx.dir / name
    np.savez(path, **arrays)
    return str(path)


def xs(n: int = 8) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, 1, 8, 8)).astype(np.float32)


def labels(*values, dtype=np.int64) -> np.ndarray:
    return np.array(list(values) + [0] * (8 - len(values)), dtype)


def with_x(bad: float) -> np.ndarray:
    x = xs().astype(np.float64)
    x[2, 0, 3, 4] = bad
    return x


def copied_plan(ctx: Ctx, edit: Callable[[dict], object] | None = None, text: str | None = None) -> str:
    """A copy of the mlp project with its plan.json edited (``edit`` changes the dict) or replaced."""
    import shutil

    out = ctx.dir / "p.poet"
    shutil.copytree(ctx.mlp_out, out, ignore=shutil.ignore_patterns("run-*"))
    if text is not None:
        (out / "plan.json").write_text(text)
    elif edit is not None:
        plan = json.loads((out / "plan.json").read_text())
        edit(plan)
        (out / "plan.json").write_text(json.dumps(plan))
    return str(out)


def graph_file(ctx: Ctx, content: object | str) -> str:
    path = ctx.dir / "g.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


GOOD_GRAPH = {
    "nodes": [{"id": 0, "cost_ram": 100, "cost_cpu": 1.0}, {"id": 1, "cost_ram": 100, "cost_cpu": 2.0}],
    "links": [{"source": 0, "target": 1}],
}


def profile_with(ctx: Ctx, key: str, value: str) -> str:
    text = (ROOT / "profiles" / "cortex-m4.toml").read_text()
    lines = [f"{key} = {value}" if ln.split("=")[0].strip() == key else ln for ln in text.splitlines()]
    path = ctx.dir / "dev.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _sed(d: dict, path: str, value: object) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        d = d[int(k)] if isinstance(d, list) else d[k]
    d[keys[-1]] = value  # type: ignore[index]


# ---- output folders ------------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[None]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def compile_args(model: str, out: str, *extra: str) -> list[str]:
    return ["compile", model, "--ram", "64KB", "-o", out, "--no-report", "-q", *extra]


def _file(ctx: Ctx, name: str) -> Path:
    p = ctx.dir / name
    p.write_text("x")
    return p


def _foreign(ctx: Ctx) -> str:
    d = ctx.dir / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    return str(d)


def _with_user_file(ctx: Ctx) -> list[str]:
    import shutil

    out = ctx.dir / "keep.poet"
    shutil.copytree(ctx.mlp_out, out, ignore=shutil.ignore_patterns("run-*"))
    (out / "notes.txt").write_text("mine")
    return compile_args(str(MLP), str(out))


def _crash_leftovers(ctx: Ctx) -> list[str]:
    for name in (".lo.poet.old-abc12345", ".lo.poet.tmp-xyz98765"):
        (ctx.dir / name).mkdir()
        (ctx.dir / name / "plan.json").write_text("{}")
    return compile_args(str(MLP), str(ctx.dir / "lo.poet"))


# ---- the cases -------------------------------------------------------------------------------------------


def _run(ctx: Ctx, data: str, *extra: str) -> list[str]:
    return ["run", str(ctx.mlp_out), "--steps", "2", "--data", data, *extra]


def data_cases() -> list[Case]:
    D = "data"
    bad = [
        ("label above range", lambda c: npz(c, x=xs(), y=labels(10))),
        ("label negative", lambda c: npz(c, x=xs(), y=labels(0, -1))),
        ("label 2^31-1", lambda c: npz(c, x=xs(), y=labels(2**31 - 1))),
        ("label int64 beyond int32", lambda c: npz(c, x=xs(), y=labels(2**40 + 3))),
        ("label NaN", lambda c: npz(c, x=xs(), y=labels(float("nan"), dtype=np.float32))),
        ("label float 2.5", lambda c: npz(c, x=xs(), y=labels(2.5, dtype=np.float32))),
        ("label float 3.0", lambda c: npz(c, x=xs(), y=labels(3.0, dtype=np.float32))),
        ("label bool", lambda c: npz(c, x=xs(), y=np.zeros(8, bool))),
        ("label complex", lambda c: npz(c, x=xs(), y=labels(1, dtype=np.complex64))),
        ("label strings", lambda c: npz(c, x=xs(), y=np.array(["a"] * 8))),
        ("label uint64 huge", lambda c: npz(c, x=xs(), y=labels(2**63, dtype=np.uint64))),
        ("x NaN", lambda c: npz(c, x=with_x(float("nan")), y=labels())),
        ("x +Inf", lambda c: npz(c, x=with_x(float("inf")), y=labels())),
        ("x float64 overflowing float32", lambda c: npz(c, x=with_x(1e300), y=labels())),
        ("x strings", lambda c: npz(c, x=np.array(["a"] * 8), y=labels())),
        ("x object (pickled)", lambda c: npz(c, x=np.array([None] * 8, object), y=labels())),
        ("x complex", lambda c: npz(c, x=xs().astype(np.complex64), y=labels())),
        ("x wrong shape", lambda c: npz(c, x=np.zeros((8, 3)), y=labels())),
        ("x 0-d", lambda c: npz(c, x=np.float32(1), y=labels())),
        ("x and y lengths differ", lambda c: npz(c, x=xs(6), y=labels())),
        ("empty arrays", lambda c: npz(c, x=xs(0), y=labels()[:0])),
        ("key y missing", lambda c: npz(c, x=xs())),
        ("keys misnamed", lambda c: npz(c, inputs=xs(), targets=labels())),
        ("not an npz", lambda c: (c.dir / "d.npz").write_bytes(b"garbage" * 10) and str(c.dir / "d.npz")),
        ("npz is a folder", lambda c: (c.dir / "d").mkdir() or str(c.dir / "d")),
        ("npz missing", lambda c: str(c.dir / "none.npz")),
        ("truncated npz", lambda c: _truncated_npz(c)),
    ]
    cases = [Case(n, D, lambda c, f=f: _run(c, f(c))) for n, f in bad]
    cases.append(Case("labels int64 in range", D, lambda c: _run(c, npz(c, x=xs(), y=labels(9, 1))), "ok"))
    cases.append(
        Case(
            "mse target NaN",
            D,
            lambda c: [
                "run",
                str(c.mse_out),
                "--steps",
                "1",
                "--data",
                npz(c, x=xs(), y=_mse_y(float("nan"))),
            ],
        )
    )
    cases.append(
        Case(
            "mse int targets",
            D,
            lambda c: [
                "run",
                str(c.mse_out),
                "--steps",
                "1",
                "--data",
                npz(c, x=xs(), y=np.ones((8, 10), np.int64)),
            ],
            "ok",
        )
    )
    return cases


def _mse_y(bad: float) -> np.ndarray:
    y = np.zeros((8, 10), np.float32)
    y[1, 2] = bad
    return y


def _truncated_npz(ctx: Ctx) -> str:
    path = npz(ctx, x=xs(), y=labels())
    raw = Path(path).read_bytes()
    Path(path).write_bytes(raw[: len(raw) // 2])
    return path


def size_cases() -> list[Case]:
    S = "size"

    def c(name: str, make: Callable[[Ctx], list[str]]) -> Case:
        return Case(name, S, make, slow_limit=SLOW_S, out_must_not_exist="o.poet")

    def out(ctx: Ctx) -> str:
        return str(ctx.dir / "o.poet")

    return [
        c("1e9-element conv input", lambda x: compile_args(_save(x, huge_conv(31623)), out(x))),
        c("2^31 x 2^31 input", lambda x: compile_args(_save(x, huge_relu([2**31, 2**31])), out(x))),
        c("1e9-element relu input", lambda x: compile_args(_save(x, huge_relu([1, 10**9])), out(x))),
        c("2^40-element relu input", lambda x: compile_args(_save(x, huge_relu([2**20, 2**20])), out(x))),
        c("--batch 100000000", lambda x: compile_args(str(MLP), out(x), "--batch", "100000000")),
        c("--batch 2^40", lambda x: compile_args(str(MLP), out(x), "--batch", str(2**40))),
        c("--batch 0", lambda x: compile_args(str(MLP), out(x), "--batch", "0")),
        c("--batch -3", lambda x: compile_args(str(MLP), out(x), "--batch", "-3")),
        c("--batch 1e8 (not an integer)", lambda x: compile_args(str(MLP), out(x), "--batch", "1e8")),
        c(
            "1e9-element conv, --scheduler milp",
            lambda x: compile_args(_save(x, huge_conv(31623)), out(x), "--scheduler", "milp"),
        ),
        c("1e9 input, inspect", lambda x: ["inspect", _save(x, huge_conv(31623))]),
        c("--batch 1e8, inspect", lambda x: ["inspect", str(MLP), "--batch", "100000000"]),
        c(
            "--ram 1e30 bytes",
            lambda x: compile_args(str(MLP), out(x))[:3] + ["1000000000000000000000000000000", "-o", out(x)],
        ),
        Case(  # compiles with a warning: a board with more flash may run it
            "frozen weight above flash (warns)",
            S,
            lambda x: compile_args(
                _save(x, _frozen_on_big_flash()), out(x), "--device", "cortex-m0plus", "--train", "fc2"
            ),
            "ok",
        ),
    ]


def _frozen_on_big_flash() -> onnx.ModelProto:
    """mlp with fc0 made 64 -> 32 x 8192 (8 MB of weights): frozen (--train fc2) it lives in flash."""
    m = onnx.load(str(MLP))
    inits = {t.name: t for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4096, 64)).astype(np.float32) * 0.01
    w1 = rng.standard_normal((32, 4096)).astype(np.float32) * 0.01
    inits["fc0.weight"].CopyFrom(numpy_helper.from_array(w0, "fc0.weight"))
    inits["fc0.bias"].CopyFrom(numpy_helper.from_array(np.zeros(4096, np.float32), "fc0.bias"))
    inits["fc1.weight"].CopyFrom(numpy_helper.from_array(w1, "fc1.weight"))
    return m


def option_cases() -> list[Case]:
    opt = "options"

    def c(name: str, *extra: str, expect: str = "error") -> Case:
        return Case(
            name,
            opt,
            lambda x: compile_args(str(MLP), str(x.dir / "o.poet"), *extra),
            expect,
            out_must_not_exist="o.poet" if expect == "error" else None,
        )

    def r(name: str, *extra: str, expect: str = "error") -> Case:
        return Case(name, opt, lambda x: ["run", str(x.mlp_out), "--steps", "1", *extra], expect)

    cases = [
        c("--max-latency nan", "--max-latency", "nan"),
        c("--max-latency inf", "--max-latency", "inf"),
        c("--max-latency -1", "--max-latency", "-1"),
        c("--max-latency 0x", "--max-latency", "0x"),
        c("--max-latency abc", "--max-latency", "abc"),
        c("--max-latency nanx", "--max-latency", "nanx"),
        c("--lr nan", "--lr", "nan"),
        c("--lr inf", "--lr", "inf"),
        c("--lr -0.1", "--lr", "-0.1"),
        c("--time-limit -1", "--time-limit", "-1"),
        c("--time-limit nan", "--time-limit", "nan"),
        c("--time-limit inf", "--time-limit", "inf"),
        c("--time-limit 0", "--time-limit", "0"),
        c("--gap nan", "--gap", "nan"),
        c("--gap -1", "--gap", "-1"),
        c("--threads 0", "--threads", "0"),
        c("--threads -2", "--threads", "-2"),
        c("--ram 0", "--ram", "0"),
        c("--ram -5KB", "--ram", "-5KB"),
        c("--ram nan", "--ram", "nan"),
        c("--ram inf", "--ram", "inf"),
        c("--ram 1.5B", "--ram", "1.5B"),
        c("--reserve 1GB", "--reserve", "1GB"),
        c("--reserve -1", "--reserve", "-1"),
        c("--train nosuchparam", "--train", "nosuchparam"),
        c("--device nosuch", "--device", "nosuch"),
        c("--ram above device RAM (warns)", "--ram", "1MB", "--device", "cortex-m0plus", expect="ok"),
        Case(
            "--batch 8 on a fixed-batch (4) model",
            opt,
            lambda x: compile_args(_save(x, mlp_fixed_batch()), str(x.dir / "o.poet"), "--batch", "8"),
            out_must_not_exist="o.poet",
        ),
        Case(
            "--batch 4 on a fixed-batch (4) model",
            opt,
            lambda x: compile_args(_save(x, mlp_fixed_batch()), str(x.dir / "o.poet"), "--batch", "4"),
            "ok",
        ),
        Case(
            "profile ram_bytes nan",
            opt,
            lambda x: compile_args(
                str(MLP), str(x.dir / "o.poet"), "--device", profile_with(x, "ram_bytes", "nan")
            ),
            out_must_not_exist="o.poet",
        ),
        Case(
            "profile clock_hz nan",
            opt,
            lambda x: compile_args(
                str(MLP), str(x.dir / "o.poet"), "--device", profile_with(x, "clock_hz", "nan")
            ),
            out_must_not_exist="o.poet",
        ),
        Case(
            "profile active_power_w inf",
            opt,
            lambda x: compile_args(
                str(MLP), str(x.dir / "o.poet"), "--device", profile_with(x, "active_power_w", "inf")
            ),
            out_must_not_exist="o.poet",
        ),
        Case(
            "profile clock_hz 0",
            opt,
            lambda x: compile_args(
                str(MLP), str(x.dir / "o.poet"), "--device", profile_with(x, "clock_hz", "0")
            ),
            out_must_not_exist="o.poet",
        ),
        Case(
            "profile not TOML",
            opt,
            lambda x: compile_args(str(MLP), str(x.dir / "o.poet"), "--device", str(_file(x, "bad.toml"))),
            out_must_not_exist="o.poet",
        ),
        Case(
            "simulate --device profile nan",
            opt,
            lambda x: ["simulate", str(x.mlp_out), "--device", profile_with(x, "clock_hz", "nan")],
        ),
        r("run --lr nan", "--lr", "nan"),
        r("run --lr inf", "--lr", "inf"),
        r("run --steps 0", "--steps", "0"),
        r("run --steps -1", "--steps", "-1"),
        r("run --timeout nan", "--timeout", "nan"),
        r("run --timeout -1", "--timeout", "-1"),
        r("run --target nosuch", "--target", "nosuch"),
        r("run --sanitize on qemu", "--sanitize", "--target", "qemu-cortex-m4"),
        Case(
            "run --json into a missing folder",
            opt,
            lambda x: ["run", str(x.mlp_out), "--steps", "1", "--json", str(x.dir / "no" / "r.json")],
        ),
        Case(
            "run --dump-params into a missing folder",
            opt,
            lambda x: ["run", str(x.mlp_out), "--steps", "1", "--dump-params", str(x.dir / "no" / "p.npz")],
        ),
        Case(
            "sweep --time-limit nan",
            opt,
            lambda x: ["sweep", str(MLP), "--ram", "64KB", "--time-limit", "nan", "-o", str(x.dir / "sw")],
        ),
    ]
    return cases


def model_cases() -> list[Case]:
    M = "model"

    def c(name: str, make_model: Callable[[Ctx], str], expect: str = "error") -> Case:
        return Case(
            name,
            M,
            lambda x: compile_args(make_model(x), str(x.dir / "o.poet")),
            expect,
            out_must_not_exist="o.poet",
        )

    return [
        c("not ONNX (text)", lambda x: str(_file(x, "m.onnx"))),
        c("empty file", lambda x: (x.dir / "m.onnx").write_bytes(b"") or str(x.dir / "m.onnx")),
        c("truncated ONNX", lambda x: _truncate(x)),
        c("missing file", lambda x: str(x.dir / "none.onnx")),
        c("a folder", lambda x: (x.dir / "d.onnx").mkdir() or str(x.dir / "d.onnx")),
        c("no graph outputs", lambda x: _save(x, mlp_no_outputs())),
        c("NaN weight", lambda x: _save(x, mlp_with(float("nan")))),
        c("Inf weight", lambda x: _save(x, mlp_with(float("-inf")))),
        c(
            "output not produced",
            lambda x: _save(
                x, _model([helper.make_node("Relu", ["x"], ["r"])], [_vi("x", [1, 4])], [_vi("zz", [1, 4])])
            ),
        ),
        c("no inputs", lambda x: _save(x, _model([], [], [_vi("y", [1, 4])]))),
        c(
            "int8 input",
            lambda x: _save(
                x,
                huge_relu.__call__([1, 4])
                if False
                else _model(
                    [helper.make_node("Relu", ["x"], ["y"])],
                    [_vi("x", [1, 4], TensorProto.INT8)],
                    [_vi("y", [1, 4], TensorProto.INT8)],
                ),
            ),
        ),
        c(
            "cycle",
            lambda x: _save(
                x,
                _model(
                    [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                    [_vi("x", [1, 4])],
                    [_vi("b", [1, 4])],
                ),
            ),
        ),
        c("negative dim", lambda x: _save(x, huge_relu([1, -4]))),
        c("zero dim", lambda x: _save(x, huge_relu([1, 0]))),
        c("symbolic non-batch dim", lambda x: _save(x, huge_relu([1, "n"]))),
        c(
            "opset 1",
            lambda x: _save(
                x,
                _model(
                    [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, 4])], [_vi("y", [1, 4])], opset=1
                ),
            ),
        ),
        c("flipped bytes", lambda x: _flipped(x)),
    ]


def _truncate(ctx: Ctx) -> str:
    raw = MLP.read_bytes()
    (ctx.dir / "m.onnx").write_bytes(raw[: len(raw) // 3])
    return str(ctx.dir / "m.onnx")


def _flipped(ctx: Ctx) -> str:
    raw = bytearray(MLP.read_bytes())
    rng = np.random.default_rng(7)
    for i in rng.integers(0, 200, 6):
        raw[int(i)] ^= 0xFF
    (ctx.dir / "m.onnx").write_bytes(bytes(raw))
    return str(ctx.dir / "m.onnx")


def output_cases() -> list[Case]:
    W = "output"
    return [
        Case("-o at a file", W, lambda x: compile_args(str(MLP), str(_file(x, "f.txt")))),
        Case("-o under a file", W, lambda x: compile_args(str(MLP), str(_file(x, "f.txt") / "o.poet"))),
        Case("-o a non-poet folder", W, lambda x: compile_args(str(MLP), _foreign(x))),
        Case(
            "-o read-only filesystem",
            W,
            lambda x: compile_args(str(MLP), str(x.dir / "ro" / "o.poet")),
            needs_root=True,
        ),
        Case(
            "-o full disk (64 KB tmpfs)",
            W,
            lambda x: compile_args(str(MLP), str(x.dir / "full" / "o.poet")),
            needs_root=True,
        ),
        Case("recompile keeps... refuses a user file", W, _with_user_file),
        Case("leftovers of a crash are cleaned", W, _crash_leftovers, "ok"),
        Case("-o the model file itself", W, lambda x: compile_args(str(MLP), str(MLP))),
        Case(
            "run --json at a folder",
            W,
            lambda x: ["run", str(x.mlp_out), "--steps", "1", "--json", str(x.dir)],
        ),
    ]


def plan_cases() -> list[Case]:
    P = "plan"
    edits: list[tuple[str, Callable[[Ctx], str]]] = [
        ("not JSON", lambda x: copied_plan(x, text="{not json")),
        ("truncated", lambda x: copied_plan(x, text=(x.mlp_out / "plan.json").read_text()[:500])),
        ("empty object", lambda x: copied_plan(x, text="{}")),
        ("a list", lambda x: copied_plan(x, text="[1, 2]")),
        ("binary", lambda x: copied_plan(x, text="\x00\xff\x00")),
        ("schedule removed", lambda x: copied_plan(x, lambda p: p.pop("schedule"))),
        ("problem nodes a string", lambda x: copied_plan(x, lambda p: _sed(p, "problem.nodes", "abc"))),
        (
            "schedule step unknown node",
            lambda x: copied_plan(x, lambda p: p["schedule"]["steps"].insert(0, ["compute", "nosuch"])),
        ),
        ("ram budget a string", lambda x: copied_plan(x, lambda p: _sed(p, "ram_budget_bytes", "lots"))),
        ("device unknown", lambda x: copied_plan(x, lambda p: _sed(p, "device", "nosuch"))),
        ("training inputs empty", lambda x: copied_plan(x, lambda p: _sed(p, "training_graph.inputs", []))),
        ("lr a string", lambda x: copied_plan(x, lambda p: _sed(p, "lr", "fast"))),
    ]
    run_ignores = ("schedule step unknown node", "device unknown")  # run builds the C; it reads neither
    cases = []
    for name, make in edits:
        cases.append(Case(f"simulate: {name}", P, lambda x, m=make: ["simulate", m(x)]))
        expect = "ok" if name in run_ignores else "error"
        cases.append(Case(f"run: {name}", P, lambda x, m=make: ["run", m(x), "--steps", "1"], expect))
    cases.append(Case("simulate: a missing folder", P, lambda x: ["simulate", str(x.dir / "none")]))
    return cases


def graph_cases() -> list[Case]:
    G = "graph"
    contents: list[tuple[str, object]] = [
        ("not JSON", "{nope"),
        ("empty file", ""),
        ("a number", "42"),
        ("a list", "[1, 2, 3]"),
        ("no nodes key", {"links": []}),
        ("nodes a string", {"nodes": "abc", "links": []}),
        ("zero nodes", {"nodes": [], "links": []}),
        ("node without costs", {"nodes": [{"id": 0}], "links": []}),
        ("negative cost", {"nodes": [{"id": 0, "cost_ram": -5, "cost_cpu": 1}], "links": []}),
        ("NaN cost", '{"nodes": [{"id": 0, "cost_ram": 5, "cost_cpu": NaN}], "links": []}'),
        ("Infinity bytes", '{"nodes": [{"id": 0, "cost_ram": Infinity, "cost_cpu": 1}], "links": []}'),
        ("link to unknown node", {"nodes": GOOD_GRAPH["nodes"], "links": [{"source": 0, "target": 9}]}),
        ("cycle", {"nodes": GOOD_GRAPH["nodes"], "links": [[0, 1], [1, 0]]}),
        ("self loop", {"nodes": GOOD_GRAPH["nodes"], "links": [[0, 0]]}),
        ("duplicate ids", {"nodes": GOOD_GRAPH["nodes"] * 2, "links": []}),
        ("link a number", {"nodes": GOOD_GRAPH["nodes"], "links": [5]}),
        ("graph key a string", {"graph": "x", **GOOD_GRAPH}),
        (
            "max_latency_s NaN",
            '{"graph": {"max_latency_s": NaN}, "nodes": [{"id": 0, "cost_ram": 5, "cost_cpu": 1}], '
            '"links": []}',
        ),
        ("huge bytes", {"nodes": [{"id": 0, "cost_ram": 1e300, "cost_cpu": 1}], "links": []}),
        ("deep nesting", "[" * 100000 + "]" * 100000),
    ]
    cases = [
        Case(f"solve: {n}", G, lambda x, c=c: ["solve", graph_file(x, c), "--ram", "1KB"])
        for n, c in contents
    ]
    cases.append(
        Case("solve: good graph", G, lambda x: ["solve", graph_file(x, GOOD_GRAPH), "--ram", "1KB"], "ok")
    )
    cases.append(
        Case("solve: missing file", G, lambda x: ["solve", str(x.dir / "none.json"), "--ram", "1KB"])
    )
    cases.append(
        Case(
            "solve: --time-limit nan",
            G,
            lambda x: ["solve", graph_file(x, GOOD_GRAPH), "--ram", "1KB", "--time-limit", "nan"],
        )
    )
    cases.append(Case("solve: --ram 0", G, lambda x: ["solve", graph_file(x, GOOD_GRAPH), "--ram", "0"]))
    return cases


def sweep_args(ctx: Ctx, model: str) -> list[str]:
    """Three points near mobilenetv1_025's floor on the host profile, two workers."""
    grid = ["--ram", "1423382,1500000,1600000", "--device", "host", "--schedulers", "scale"]
    return ["sweep", model, *grid, "-j", "2", "-o", str(ctx.dir / "sw"), "--time-limit", "30"]


def signal_cases() -> list[Case]:
    X = "signal"
    long_run = lambda t: lambda x: ["run", str(x.mlp_out), "--steps", "200000", "--target", t]  # noqa: E731
    big = ROOT / "examples" / "zoo" / "mobilenetv1_025.onnx"

    def solve(x: Ctx) -> list[str]:
        # 1.1x its memory floor on the host profile: scale solves ~7 s with its proof processes
        return [
            "compile",
            str(big),
            "--ram",
            "1423382",
            "--device",
            "host",
            "-o",
            str(x.dir / "o.poet"),
            "--no-report",
            "-v",
            "--time-limit",
            "20",
        ]

    return [
        Case(
            "SIGTERM during run (qemu)",
            X,
            long_run("qemu-cortex-m4"),
            signal_after=("step    0", signal.SIGTERM),
        ),
        Case(
            "SIGINT to poet alone during run (qemu)",
            X,
            long_run("qemu-cortex-m4"),
            signal_after=("step    0", signal.SIGINT),
        ),
        Case("SIGTERM during run (host)", X, long_run("host"), signal_after=("step    0", signal.SIGTERM)),
        Case(
            "SIGTERM during the solve",
            X,
            solve,
            signal_after=("schedule", signal.SIGTERM),
            out_must_not_exist="o.poet",
        ),
        Case(
            "SIGINT during the solve",
            X,
            solve,
            signal_after=("schedule", signal.SIGINT),
            out_must_not_exist="o.poet",
        ),
        Case("SIGTERM during load", X, solve, signal_after=("", signal.SIGTERM), out_must_not_exist="o.poet"),
        Case(
            "SIGTERM during a sweep (2 workers)",
            X,
            lambda x: sweep_args(x, str(big)),
            signal_after=("", signal.SIGTERM),
        ),
        Case(
            "SIGTERM during codegen",
            X,
            solve,
            signal_after=("  schedule ", signal.SIGTERM),
            out_must_not_exist="o.poet",
        ),
    ]


def all_cases() -> list[Case]:
    return (
        data_cases()
        + size_cases()
        + option_cases()
        + model_cases()
        + output_cases()
        + plan_cases()
        + graph_cases()
        + signal_cases()
    )


# ---- running a case --------------------------------------------------------------------------------------


def _session_pids(sid: int) -> list[str]:
    """Processes of session ``sid`` still alive (each case runs in a new session)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(f"{d.name} {stat[stat.index('(') + 1 : stat.rindex(')')]}")
    return found


def _leftovers(ctx: Ctx, case: Case, tmp: Path, sid: int) -> list[str]:
    found = [p.name for p in ctx.dir.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]
    found += [f"TMPDIR/{p.name}" for p in tmp.iterdir()]
    if case.out_must_not_exist and (ctx.dir / case.out_must_not_exist).exists():
        found.append(f"{case.out_must_not_exist} written")
    deadline = time.monotonic() + 3.0
    while (alive := _session_pids(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found + [f"process {p}" for p in alive]


def _communicate(proc: subprocess.Popen, case: Case) -> tuple[str, str, bool]:
    """stdout, stderr, hung. With ``case.signal_after``: the signal goes to poet's pid alone once the
    marker text was printed (and a moment more, so the work under way is the one meant)."""
    if case.signal_after is None:
        try:
            out, err = proc.communicate(timeout=HANG_S)
            return out, err, False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return out, err, True
    marker, signum = case.signal_after
    seen: list[str] = []
    import threading

    def pump(stream, sink):
        for line in iter(stream.readline, ""):
            sink.append(line)

    out_lines: list[str] = []
    threads = [
        threading.Thread(target=pump, args=(proc.stdout, out_lines), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, seen), daemon=True),
    ]
    for t in threads:
        t.start()
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < HANG_S:
        if any(marker in ln for ln in out_lines + seen):
            time.sleep(1.5)
            os.kill(proc.pid, signum)
            break
        time.sleep(0.05)
    try:
        proc.wait(timeout=30)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        hung = True
    for t in threads:
        t.join(timeout=5)
    return "".join(out_lines), "".join(seen), hung


MEMORY_CAP = 6 << 30  # address space of a case: a runaway allocation fails instead of swapping the machine


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_case(case: Case, shared: tuple[Path, Path], base: Path) -> Outcome:
    if case.needs_root and os.geteuid() != 0:
        return Outcome(case.name, case.group, "skipped", None, 0.0, "needs root")
    ctx = Ctx(Path(tempfile.mkdtemp(prefix="case-", dir=base)), *shared)
    tmp = ctx.dir / ".tmpdir-of-case"
    tmp.mkdir()
    mounts = []
    if case.name.startswith("-o read-only"):
        mounts.append(tmpfs(ctx.dir / "ro", "ro,size=1m"))
    if case.name.startswith("-o full disk"):
        mounts.append(tmpfs(ctx.dir / "full", "size=64k"))
    with contextlib.ExitStack() as stack:
        for m in mounts:
            stack.enter_context(m)
        argv = case.make(ctx)
        env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
        began = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "poet_edge", *argv],
            cwd=ctx.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_limit_memory,
        )
        out, err, hung = _communicate(proc, case)
        seconds = time.monotonic() - began
        left = _leftovers(ctx, case, tmp, proc.pid)
    code = proc.returncode
    o = Outcome(case.name, case.group, "", code, round(seconds, 2), "", left)
    said = [ln for ln in err.strip().splitlines() if not ln.startswith("poet: warning:")]
    err = "\n".join(said)
    last = said[-1] if said else ""
    o.detail = (err.splitlines() or [""])[0][:200] if code else (out.strip().splitlines() or [""])[-1][:200]
    if hung:
        o.verdict = "hang"
    elif any(m in err for m in TRACEBACK_MARKS):
        o.verdict, o.detail = "traceback", last[:200]
    elif left:
        o.verdict = "leftover"
    elif case.signal_after is not None:
        o.verdict = "clean" if code != 0 and "Traceback" not in err else "unclean"
    elif case.expect == "error" and code == 0:
        o.verdict = "silent"
    elif case.expect == "ok":
        o.verdict = "ok" if code == 0 else "unclean"
    else:
        o.verdict = "clean" if err.startswith(ERROR) or USAGE.match(last) else "unclean"
    if o.verdict in ("clean", "ok") and case.slow_limit and seconds > case.slow_limit:
        o.verdict = "slow"
    return o


def _shared(base: Path) -> tuple[Path, Path]:
    outs = base / "mlp.poet", base / "mlp_mse.poet"
    for out, extra in zip(outs, ([], ["--loss", "mse"]), strict=True):
        subprocess.run(
            [sys.executable, "-m", "poet_edge", *compile_args(str(MLP), str(out), *extra)],
            check=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    return outs


BAD = ("traceback", "hang", "silent", "leftover", "unclean", "slow")


def table(outcomes: list[Outcome]) -> str:
    groups = sorted({o.group for o in outcomes}, key=[o.group for o in outcomes].index)
    columns = ("clean", "ok", *BAD, "skipped")
    head = "| group | cases | clean errors | ok | tracebacks | hangs | silent wrong | leftovers | unclean "
    lines = [head + "| slow | skipped |", "|" + "---|" * 11]
    for g in [*groups, "all"]:
        sel = [o for o in outcomes if g in ("all", o.group)]
        counts = [str(sum(o.verdict == v for o in sel)) for v in columns]
        lines.append(f"| {g} | {len(sel)} | " + " | ".join(counts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the cases whose name or group contains this")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only (for a partial run)")
    args = ap.parse_args(argv)
    cases = [c for c in all_cases() if not args.only or args.only == c.group or args.only in c.name]
    with tempfile.TemporaryDirectory(prefix="poet-probe-") as base_s:
        base = Path(base_s)
        shared = _shared(base)
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda c: run_case(c, shared, base), cases))
    for o in outcomes:
        flag = "  " if o.verdict in ("clean", "ok", "skipped") else "!!"
        print(
            f"{flag} {o.verdict:9s} {o.group:8s} {o.name:45s} exit {o.exit_code} {o.seconds:6.2f}s  "
            + o.detail[:110]
            + (f"  leftovers: {o.leftovers}" if o.leftovers else "")
        )
    print()
    print(table(outcomes))
    if not args.no_write:
        _write(outcomes)
    return 1 if any(o.verdict in BAD for o in outcomes) else 0


def _write(outcomes: list[Outcome]) -> None:
    res = ROOT / "bench" / "results"
    res.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    meta = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
        "commit": commit,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "root": os.geteuid() == 0,
    }
    (res / "probe.json").write_text(
        json.dumps({**meta, "cases": [o.__dict__ for o in outcomes]}, indent=1) + "\n"
    )
    rows = "\n".join(
        f"| {o.group} | {o.name} | {o.verdict} | {o.exit_code} | {o.detail.replace('|', '/')[:140]} |"
        for o in outcomes
    )
    (res / "probe.md").write_text(
        f"# Reliability probe (issue 59)\n\n{meta['machine']}, commit {commit}, {meta['date']}, "
        f"root: {meta['root']}. Re-run: `PYTHONPATH=. python bench/probe.py`.\n\n{table(outcomes)}\n\n"
        f"| group | case | verdict | exit | first line of stderr |\n|---|---|---|---|---|\n{rows}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
