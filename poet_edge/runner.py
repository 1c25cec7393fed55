"""`poet run`: build a compiled project for a target, feed it batches, collect losses and parameters."""

from __future__ import annotations

import json
import math
import re
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from poet_edge import sanity, splitting, targets
from poet_edge.compiler import PLAN
from poet_edge.errors import PoetError

# The linker guarantees at least this much stack. The plan's reserve (8 KB by default) covers the stack plus
# the C library's own RAM (newlib with semihosting: ~3.3 KB data+bss and a 2 KB heap on the QEMU targets).
MIN_STACK_BYTES = 2048

_KIND = re.compile(r"kind (\S+) calls (\d+) ticks (\d+)")
_DONE = re.compile(r"done stack_used (\d+) heap_used (\d+)")
_STEP = re.compile(r"step (\d+) loss_bits ([0-9a-f]{8}) ticks (\d+) written (\d+) read (\d+)")
_STORAGE_FILE = re.compile(r"storage_file bytes_written (\d+) bytes_read (\d+) writes (\d+) reads (\d+)")
_EVAL = re.compile(r"eval ([01]) batch (\d+) loss_bits ([0-9a-f]{8}) predict_ticks (\d+) eval_ticks (\d+)")
EVAL_FILE, LOGITS_FILE, LOAD_FILE = "poet_eval.bin", "poet_logits.bin", "poet_load.bin"


@dataclass(frozen=True)
class StepLog:
    step: int
    loss: float
    ticks: int
    bytes_written: int
    bytes_read: int


def _bits_float(hexbits: str) -> float:
    return float(struct.unpack("<f", struct.pack("<I", int(hexbits, 16)))[0])


@dataclass(frozen=True)
class Evaluation:
    """--eval-data run through poet_predict and poet_eval_step, before (phase 0) or after (1) training.
    The samples are cut into batches of the compiled batch; the last is filled up by wrapping around, and
    only the first ``samples`` outputs count in the accuracy."""

    phase: int
    samples: int
    outputs: np.ndarray  # (samples, ...) the model outputs (logits) from poet_predict
    batch_losses: tuple[float, ...]  # poet_eval_step per batch
    predict_ticks: tuple[int, ...]
    eval_ticks: tuple[int, ...]
    accuracy: float | None  # argmax of the outputs vs the labels (cross-entropy models), else None

    @property
    def loss(self) -> float:
        """The mean of the batch losses."""
        return float(np.mean(self.batch_losses))


@dataclass(frozen=True)
class RunOutcome:
    steps: tuple[StepLog, ...]
    params: dict[str, np.ndarray]
    build: targets.BuildResult
    target: targets.Target
    stdout: str
    kinds: dict[str, tuple[int, int]]  # op -> (calls, ticks) over all steps, with --profile
    stack_used: int  # painted-stack high-water mark (0 where unmeasured)
    evals: tuple[Evaluation, ...] = ()  # with eval data: before and after training
    # with storage_file: (bytes written, bytes read, writes, reads) through the host file, counted by the
    # platform layer (targets/common/cortex_m/platform.c) over the whole run
    storage_file_traffic: tuple[int, int, int, int] | None = None

    @property
    def measured_ram_bytes(self) -> int:
        """Static RAM (data + bss + heap, from the ELF) plus the stack high-water mark, plus the second RAM
        bank's section (.ccmram) on a target that has one."""
        return self.build.ram_static_bytes + self.stack_used + self.build.sections.get("bank1", 0)

    @property
    def measured_bank_bytes(self) -> tuple[int, ...]:
        """Measured RAM per bank: the first holds the static RAM and the stack; the second (on a target
        with one) the section .ccmram."""
        first = self.build.ram_static_bytes + self.stack_used
        return (first,) if "bank1" not in self.build.sections else (first, self.build.sections["bank1"])

    def instructions(self, ticks: int) -> int | None:
        per = self.target.instructions_per_tick
        return round(ticks * per) if per else None


RUN_LOG = "run.log"  # a failed run's whole output, in the run's work folder
REPORT_LINES = 60  # of a failed run's report shown in the error


def failure_report(exit_code: int, stdout: str, stderr: str, log: Path) -> str:
    """The error of a failed run: the start of its report (a sanitizer's report from its first line, else
    the end of the output) and where the whole output was written."""
    log.write_text(f"exit code {exit_code}\n--- stdout\n{stdout}--- stderr\n{stderr}")
    lines = stderr.strip().splitlines() or stdout.strip().splitlines()[-REPORT_LINES:]
    start = next((i for i, ln in enumerate(lines) if "Sanitizer" in ln or "runtime error:" in ln), 0)
    shown = lines[start : start + REPORT_LINES]
    more = len(lines) - start - len(shown)
    return "\n".join(
        [f"the training program exited with code {exit_code}; its report:", *shown]
        + ([f"... {more} more lines"] if more else [])
        + [f"the whole output is in {log}"]
    )


# The keys of plan.json that simulate and run read, with their JSON types (a '.' descends).
PLAN_KEYS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("device", str),
    ("ram_budget_bytes", int),
    ("peak_ram_bytes", int),
    ("lr", (int, float)),
    ("training_graph", dict),
    ("training_graph.inputs", list),
    ("training_graph.nodes", list),
    ("training_graph.tensors", dict),
    ("problem", dict),
    ("problem.nodes", list),
    ("problem.fixed_ram", dict),
    ("problem.fixed_ram.reserve", int),
    ("schedule", dict),
    ("schedule.steps", list),
    ("schedule.solver", str),
)


def corrupted(out: Path, why: str) -> PoetError:
    return PoetError(f"{Path(out) / PLAN} is damaged ({why}); compile the model again")


def load_plan(out: Path) -> dict[str, Any]:
    """plan.json of the folder ``out``, its structure checked (PLAN_KEYS) so a damaged file is one error."""
    path = Path(out) / PLAN
    if not path.is_file():
        raise PoetError(f"{out}: no {PLAN} here; run 'poet compile' first")
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise corrupted(out, f"not JSON: {e}") from None
    for key, kind in PLAN_KEYS:
        value: Any = plan
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise corrupted(out, f"{key} is missing or not a {getattr(kind, '__name__', 'number')}")
    if not (plan["ram_budget_bytes"] > 0 and math.isfinite(plan["lr"]) and plan["lr"] >= 0):
        raise corrupted(out, "ram_budget_bytes or lr out of range")
    inputs, tensors = plan["training_graph"]["inputs"], plan["training_graph"]["tensors"]
    if len(inputs) != 2 or not all(isinstance(t, str) and isinstance(tensors.get(t), dict) for t in inputs):
        raise corrupted(out, "training_graph.inputs must name the data and label tensors")
    return plan


def batches(
    plan: dict[str, Any], steps: int, data: Path | None = None, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Step i uses the i-th batch of `batch` samples (cycling), or deterministic synthetic data."""
    tensors = plan["training_graph"]["tensors"]
    xin, lab = plan["training_graph"]["inputs"]
    xshape, yshape = tuple(tensors[xin]["shape"]), tuple(tensors[lab]["shape"])
    is_int = tensors[lab]["dtype"] == "int32"
    b = xshape[0]
    if data is None:
        x, y = synthetic(xshape, yshape, is_int, _num_classes(plan) if is_int else 0, seed)
    else:
        x, y = _load_npz(Path(data), xshape, yshape, _num_classes(plan) if is_int else 0)
    return [
        (
            np.take(x, range(i * b, i * b + b), axis=0, mode="wrap"),
            np.take(y, range(i * b, i * b + b), axis=0, mode="wrap"),
        )
        for i in range(steps)
    ]


def synthetic(
    xshape: tuple[int, ...], yshape: tuple[int, ...], is_int: bool, classes: int, seed: int, samples: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """A small learnable data set: random inputs, labels (or targets) from a fixed random linear teacher."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, *xshape[1:])).astype(np.float32)
    flat = x.reshape(samples, -1)
    if is_int:
        teacher = rng.standard_normal((flat.shape[1], classes))
        return x, np.argmax(flat @ teacher, axis=1).astype(np.int32)
    teacher = rng.standard_normal((flat.shape[1], int(np.prod(yshape[1:], dtype=np.int64)))) / np.sqrt(
        flat.shape[1]
    )
    return x, np.tanh(flat @ teacher).reshape(samples, *yshape[1:]).astype(np.float32)


def _num_classes(plan: dict[str, Any]) -> int:
    loss_node = next(n for n in plan["training_graph"]["nodes"] if n["phase"] == "loss")
    return int(plan["training_graph"]["tensors"][loss_node["inputs"][0]]["shape"][1])


def _load_npz(
    path: Path, xshape: tuple[int, ...], yshape: tuple[int, ...], classes: int, option: str = "--data"
) -> tuple[np.ndarray, np.ndarray]:
    """x and y of an npz file, checked (see check_data); ``classes`` > 0: y holds integer class labels."""
    if not path.is_file():
        raise PoetError(f"{option} {path}: no such file")
    try:
        with np.load(path) as z:
            x, y = z["x"], z["y"]
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise PoetError(f"{option} {path}: needs arrays 'x' and 'y' in an .npz file ({e})") from None
    if tuple(x.shape[1:]) != xshape[1:] or tuple(y.shape[1:]) != yshape[1:] or len(x) != len(y) or not len(x):
        raise PoetError(
            f"{option} {path}: x{tuple(x.shape)} / y{tuple(y.shape)} do not match the model's "
            f"x(N, {', '.join(map(str, xshape[1:]))}) / y(N{''.join(', ' + str(d) for d in yshape[1:])})"
        )
    check_data(f"{option} {path}", x, y, classes)
    return x.astype(np.float32), (y.astype(np.int32) if classes else y.astype(np.float32))


def check_data(where: str, x: np.ndarray, y: np.ndarray, classes: int) -> None:
    """Refuses data a training step would silently misuse, naming the first bad value: x must be real
    numbers finite as float32; class labels (``classes`` > 0) of an integer dtype, in [0, classes) (so
    they also fit the device's int32); regression targets (``classes`` == 0) finite as float32."""
    _check_real(where, "x", x)
    _check_real(where, "y", y)
    first = _first(~_finite32(x))
    if first is not None:
        raise PoetError(f"{where}: x{list(first)} is {x[first]}; inputs must be finite float32 numbers")
    if not classes:
        first = _first(~_finite32(y))
        if first is not None:
            raise PoetError(f"{where}: y{list(first)} is {y[first]}; targets must be finite float32 numbers")
        return
    if y.dtype.kind not in "iu":
        raise PoetError(
            f"{where}: y has dtype {y.dtype}; labels must be integers (class indices), e.g. "
            "y.astype(np.int64) where its values are whole"
        )
    first = _first((y < 0) | (y >= classes))
    if first is not None:
        raise PoetError(
            f"{where}: label y{list(first)} is {y[first]}, outside [0, {classes}): the model has "
            f"{classes} classes"
        )


def _finite32(a: np.ndarray) -> np.ndarray:
    """Where ``a`` stays finite as float32 (the device's type: 1e300 in a float64 array does not)."""
    with np.errstate(over="ignore"):
        return np.isfinite(a.astype(np.float32))


def _check_real(where: str, name: str, a: np.ndarray) -> None:
    if a.dtype.kind not in "biuf":
        raise PoetError(f"{where}: {name} has dtype {a.dtype}; numbers (integer or float) are needed")


def _first(bad: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first True element (row-major), or None."""
    flat = np.flatnonzero(bad)
    return tuple(int(i) for i in np.unravel_index(flat[0], bad.shape)) if flat.size else None


def write_data(path: Path, data: list[tuple[np.ndarray, np.ndarray]], lr: float) -> None:
    x0, y0 = data[0]
    is_int = y0.dtype == np.int32
    with open(path, "wb") as f:
        f.write(b"POETDAT1" + struct.pack("<IIIIf", len(data), x0.size, y0.size, int(is_int), lr))
        for x, y in data:
            f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())
            f.write(np.ascontiguousarray(y, dtype="<i4" if is_int else "<f4").tobytes())


def eval_batches(plan: dict[str, Any], data: Path) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """--eval-data cut into batches of the compiled batch (the last filled up by wrapping), and the labels."""
    tensors = plan["training_graph"]["tensors"]
    xin, lab = plan["training_graph"]["inputs"]
    xshape, yshape = tuple(tensors[xin]["shape"]), tuple(tensors[lab]["shape"])
    is_int = tensors[lab]["dtype"] == "int32"
    x, y = _load_npz(Path(data), xshape, yshape, _num_classes(plan) if is_int else 0, "--eval-data")
    b = xshape[0]
    idx = [range(i, i + b) for i in range(0, len(x), b)]
    return [(np.take(x, r, axis=0, mode="wrap"), np.take(y, r, axis=0, mode="wrap")) for r in idx], y


def write_eval(path: Path, data: list[tuple[np.ndarray, np.ndarray]]) -> None:
    is_int = data[0][1].dtype == np.int32
    with open(path, "wb") as f:
        f.write(b"POETEVL1" + struct.pack("<I", len(data)))
        for x, y in data:
            f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())
            f.write(np.ascontiguousarray(y, dtype="<i4" if is_int else "<f4").tobytes())


def _evaluations(
    plan: dict[str, Any], lines: list[re.Match[str]], logits: Path, labels: np.ndarray
) -> tuple[Evaluation, ...]:
    out_shape = plan["inference"]["predict"]["output_shape"]
    raw = np.fromfile(logits, "<f4")
    per_phase = len(lines) // 2 * int(np.prod(out_shape, dtype=np.int64))
    if len(lines) % 2 or not lines or raw.size != 2 * per_phase:
        raise PoetError(f"the program evaluated {len(lines)} batches and wrote {raw.size} outputs")
    raw = raw.reshape(2, -1, *out_shape[1:])
    n, out = len(labels), []
    for phase in (0, 1):
        ms = [m for m in lines if int(m.group(1)) == phase]
        outputs = raw[phase, :n]
        acc = float(np.mean(np.argmax(outputs, axis=1) == labels)) if labels.dtype == np.int32 else None
        out.append(
            Evaluation(
                phase,
                n,
                outputs,
                tuple(_bits_float(m.group(3)) for m in ms),
                tuple(int(m.group(4)) for m in ms),
                tuple(int(m.group(5)) for m in ms),
                acc,
            )
        )
    return tuple(out)


def write_load(path: Path, plan: dict[str, Any], params: Path) -> None:
    """--load-params: the npz's parameters in the poet_params.bin format. Every trainable parameter must
    be given; a frozen one (const in flash) may be, and the program refuses it unless it equals the
    compiled value bit for bit (changing it needs a new compile)."""
    if not params.is_file():
        raise PoetError(f"--load-params {params}: no such file")
    try:
        with np.load(params) as z:
            given = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise PoetError(f"--load-params {params}: not an npz file ({e})") from None
    try:
        given = splitting.cut_blocks(given, param_blocks(plan))
    except ValueError as e:
        raise PoetError(f"--load-params {params}: {e}") from None
    known = {p["name"]: p for p in plan["parameters"]}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise PoetError(f"--load-params {params}: {unknown[0]!r} is not a parameter of this model")
    rows = []
    for name, p in sorted(known.items()):
        if name not in given:
            continue
        v = np.asarray(given[name], dtype=np.float32)
        if v.size != int(np.prod(p["shape"], dtype=np.int64)) or not np.all(np.isfinite(v)):
            raise PoetError(f"--load-params {params}: {name!r} must hold {p['shape']} finite values")
        rows.append((name, v.reshape(-1)))
    missing = [n for n, p in sorted(known.items()) if p["trainable"] and n not in given]
    if missing:
        raise PoetError(f"--load-params {params}: the trainable parameter {missing[0]!r} is missing")
    with open(path, "wb") as f:
        f.write(b"POETPAR1" + struct.pack("<I", len(rows)))
        for name, v in rows:
            enc = name.encode()
            f.write(struct.pack("<I", len(enc)) + enc + struct.pack("<I", v.size) + v.astype("<f4").tobytes())


def param_blocks(plan: dict[str, Any]) -> dict[str, list[list[object]]]:
    """Parameters the compile cut into blocks (operator splitting): name -> its blocks, from plan.json."""
    tiles = plan.get("tiles") or {}
    return dict(tiles.get("parameters", {})) if isinstance(tiles, dict) else {}


def read_params(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    if raw[:8] != b"POETPAR1":
        raise PoetError(f"{path}: not a poet parameter dump")
    (count,), pos, out = struct.unpack_from("<I", raw, 8), 12, {}
    for _ in range(count):
        (ln,) = struct.unpack_from("<I", raw, pos)
        name = raw[pos + 4 : pos + 4 + ln].decode()
        (n,) = struct.unpack_from("<I", raw, pos + 4 + ln)
        start = pos + 8 + ln
        out[name] = np.frombuffer(raw, "<f4", n, start).copy()
        pos = start + 4 * n
    return out


def sources(out: Path) -> tuple[list[Path], list[Path]]:
    out = Path(out).resolve()
    srcs = [
        out / "poet_model.c",
        *sorted((out / "runtime" / "src" / "kernels").glob("*.c")),
        out / "harness" / "main.c",
    ]
    return srcs, [out, out / "runtime" / "include", out / "target"]


def run_project(
    out: Path,
    target_name: str = "host",
    steps: int = 5,
    data: Path | None = None,
    lr: float | None = None,
    sanitize: bool = False,
    timeout_s: float = 600.0,
    on_step: Callable[[StepLog], None] | None = None,
    profile: bool = False,
    eval_data: Path | None = None,
    load_params: Path | None = None,
    storage_file: Path | None = None,
) -> RunOutcome:
    """``eval_data``: an npz (x, y) run through poet_predict / poet_eval_step before and after training;
    ``load_params``: an npz of parameters (e.g. from --dump-params) set before the first step;
    ``storage_file``: on a QEMU target, the paging storage is this host file (created or emptied when the
    program first pages), reached through semihosting (see :func:`storage_file_define`)."""
    out = Path(out).resolve()
    plan = load_plan(out)
    if steps < 1:
        raise PoetError(f"--steps must be at least 1, got {steps}")
    if eval_data is not None and "predict" not in plan.get("inference", {}):
        raise PoetError(f"{out}: compiled without poet_predict (an older poet-edge); compile it again")
    if eval_data is not None and profile:
        raise PoetError("--profile counts kernel time per training step; run it without --eval-data")
    sanity.positive_finite("--lr", lr, zero_ok=True)
    sanity.positive_finite("--timeout", timeout_s)
    try:
        fed = batches(plan, steps, data)
    except (KeyError, TypeError, ValueError, IndexError, StopIteration) as e:
        raise corrupted(out, f"training graph: {type(e).__name__} {e}") from None
    target = targets.load_target(target_name)
    defines = storage_file_define(target, storage_file) if storage_file is not None else {}
    if profile:
        defines["POET_PROFILE"] = ""
    sims = [plan.get("simulation", {}), *(m["simulation"] for m in plan.get("inference", {}).values())]
    targets.check_storage(target, max(int(s.get("storage_peak_bytes", 0)) for s in sims))
    ram_bytes, bank1 = _banks(out, plan, target, sims, storage_file, defines)
    if target.memory is not None:
        flash = sum(int(p.get("bytes", 0)) for p in plan.get("parameters", []) if isinstance(p, dict))
        sanity.check_target_flash(flash, target.name, target.memory.flash_bytes)
    work = out / f"run-{target.name}{'-sanitize' if sanitize else ''}{'-profile' if profile else ''}"
    work.mkdir(exist_ok=True)
    write_data(work / "poet_data.bin", fed, plan["lr"] if lr is None else lr)
    for stale in (EVAL_FILE, LOGITS_FILE, LOAD_FILE):
        (work / stale).unlink(missing_ok=True)
    labels = None
    if eval_data is not None:
        evals, labels = eval_batches(plan, eval_data)
        write_eval(work / EVAL_FILE, evals)
    if load_params is not None:
        write_load(work / LOAD_FILE, plan, Path(load_params))
    srcs, incs = sources(out)
    built = targets.build(
        target,
        srcs,
        incs,
        work / "build",
        ram_bytes,
        defines=defines,
        sanitize=sanitize,
        stack_reserve_bytes=min(MIN_STACK_BYTES, plan["problem"]["fixed_ram"]["reserve"]),
        bank1_bytes=bank1,
    )
    logs: list[StepLog] = []
    kinds: dict[str, tuple[int, int]] = {}
    done: list[int] = []
    eval_lines: list[re.Match[str]] = []
    file_traffic: list[tuple[int, int, int, int]] = []

    def on_line(line: str) -> None:
        m = _STEP.match(line)
        if m:
            bits = int(m.group(2), 16)
            s = StepLog(
                int(m.group(1)),
                struct.unpack("<f", struct.pack("<I", bits))[0],
                int(m.group(3)),
                int(m.group(4)),
                int(m.group(5)),
            )
            logs.append(s)
            if on_step:
                on_step(s)
        elif m := _KIND.match(line):
            kinds[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif m := _DONE.match(line):
            done.append(int(m.group(1)))
        elif m := _EVAL.match(line):
            eval_lines.append(m)
        elif m := _STORAGE_FILE.match(line):
            file_traffic.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))))

    res = targets.run(target, built, work, timeout_s, on_line)
    if res.exit_code != 0:
        raise PoetError(failure_report(res.exit_code, res.stdout, res.stderr, work / RUN_LOG))
    if len(logs) != steps or not done:
        raise PoetError(
            f"the training program printed {len(logs)} of {steps} steps; output ends: "
            + " | ".join(res.stdout.strip().splitlines()[-3:])
        )
    evaluated = () if labels is None else _evaluations(plan, eval_lines, work / LOGITS_FILE, labels)
    params = splitting.join_blocks(read_params(work / "poet_params.bin"), param_blocks(plan))
    traffic = file_traffic[0] if file_traffic else None
    if storage_file is not None and traffic is None and any(s.bytes_written or s.bytes_read for s in logs):
        raise PoetError("the program paged but did not report its storage file traffic")
    return RunOutcome(tuple(logs), params, built, target, res.stdout, kinds, done[0], evaluated, traffic)


def _banks(
    out: Path,
    plan: dict[str, Any],
    target: targets.Target,
    sims: list[dict[str, Any]],
    storage_file: Path | None,
    defines: dict[str, str],
) -> tuple[int, int]:
    """The first RAM bank's budget and the second's (0: one bank) that the program is linked with. A plan
    for two banks (--ram A+B) runs on the host or on a target with a second bank (qemu-stm32f405, whose
    second bank under QEMU takes the memory it otherwise pages to: then pages through --storage-file, a
    file of the target's storage size)."""
    banks = plan.get("ram_banks")
    if not banks:
        return int(plan["ram_budget_bytes"]), 0
    try:
        first, second = (int(b["bytes"]) for b in banks)
    except (TypeError, KeyError, ValueError):
        raise corrupted(out, "ram_banks must list two banks with their bytes") from None
    mem = target.memory
    if mem is None:
        return first, second
    if not mem.bank1_max_bytes:
        raise PoetError(
            f"{out} is planned for two RAM banks ({first}+{second} bytes); target {target.name} has one RAM "
            "region: run it on qemu-stm32f405 or the host, or compile it with one --ram size"
        )
    paged = max(int(s.get("storage_peak_bytes", 0)) for s in sims)
    if storage_file is None and paged > mem.storage_bytes - second:
        raise PoetError(
            f"the plan pages through {paged} bytes; on {target.name} the second RAM bank takes {second} of "
            f"the {mem.storage_bytes} bytes QEMU otherwise pages to: page through a host file with "
            "--storage-file"
        )
    if storage_file is not None:
        defines["POET_STORAGE_FILE_BYTES"] = f"{mem.storage_bytes}u"
    return first, second


def storage_file_define(target: targets.Target, path: Path) -> dict[str, str]:
    """The build define that makes a QEMU Cortex-M target page through the host file ``path`` (semihosting
    SYS_OPEN/SEEK/READ/WRITE in targets/common/cortex_m/platform.c) instead of its memory region. The
    file's folder must exist; the file is created, or emptied, when the program first pages."""
    if not target.is_qemu:
        raise PoetError(f"--storage-file needs a QEMU target; {target.name} pages to its own storage")
    path = Path(path).resolve()
    text = str(path)
    if not path.parent.is_dir():
        raise PoetError(f"--storage-file {path}: the folder {path.parent} does not exist")
    if path.is_dir():
        raise PoetError(f"--storage-file {path}: is a folder")
    if any(c in text for c in '"\\') or not text.isprintable() or not text.isascii():
        raise PoetError(
            f"--storage-file {path}: the path must be printable ASCII without quotes or backslashes"
        )
    return {"POET_STORAGE_FILE": f'"{text}"'}
