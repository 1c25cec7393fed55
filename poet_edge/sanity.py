"""Cheap checks that run before any per-element work (issue 59): the options, then the model's shapes,
weights and parameter bytes against the device and a hard cap, right after shape inference. Each costs
a pass over the tensor table or the weights, so a 1e9-element input, a 2^31 x 2^31 input or
``--batch 100000000`` is refused in well under a second instead of after minutes of cost estimates
(:mod:`poet_edge.kernel_model` counts kernel blocks in Python loops), and a NaN weight is named before
the solve rather than after it."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from poet_edge.errors import PoetError
from poet_edge.ir import DTYPE_BYTES, Graph, Role
from poet_edge.profiles import Profile
from poet_edge.units import fmt_bytes

# Every target is a 32-bit machine: no tensor, and no RAM budget, can exceed its address space.
HARD_CAP_BYTES = 1 << 32


def positive_finite(option: str, value: float | None, zero_ok: bool = False) -> None:
    """``value`` (when given) must be a finite number above 0 (or 0 itself, ``zero_ok``)."""
    if value is not None and not (math.isfinite(value) and (value > 0 or (zero_ok and value == 0))):
        raise PoetError(f"{option} {value:g}: must be a finite number {'>=' if zero_ok else '>'} 0")


def check_options(lr: float, time_limit_s: float | None, threads: int | None, ram_bytes: int) -> None:
    """The compile options a model does not need to judge."""
    positive_finite("--lr", lr, zero_ok=True)  # 0: training steps that change nothing
    positive_finite("--time-limit", time_limit_s)
    if threads is not None and threads < 1:
        raise PoetError(f"--threads {threads}: must be at least 1")
    if ram_bytes > HARD_CAP_BYTES:
        raise PoetError(
            f"--ram {fmt_bytes(ram_bytes)} is beyond the {fmt_bytes(HARD_CAP_BYTES)} a 32-bit device "
            "can address"
        )


def _count(shape: tuple[int, ...]) -> int:
    return math.prod(int(d) for d in shape)  # Python integers: no overflow whatever the shape


def check_onnx(model: onnx.ModelProto) -> None:
    """Each initializer's stored values match its declared shape (a damaged or hand-edited file), named;
    the same conversion the frontend makes, done first so a mismatch is an error of the file."""
    for t in model.graph.initializer:
        try:
            numpy_helper.to_array(t)
        except (ValueError, TypeError) as e:
            raise PoetError(
                f"initializer '{t.name}' (dims {list(t.dims)}) does not hold the values its shape says ({e})"
            ) from None


def check_graph(
    g: Graph, ram_bytes: int | None = None, split: bool = False, rows: int = 0, input_rows: bool = False
) -> None:
    """The model right after shape inference: it has an output, every tensor fits the hard cap and,
    except parameters, (a kernel reads and writes its values in RAM) the RAM budget ``ram_bytes``; every
    weight is finite. ``split`` (operator splitting may run): an activation of rank >= 3 may be cut into
    channel tiles, so only one channel of it must fit ``ram_bytes`` (the memory floor judges the rest);
    with ``rows`` (the fewest rows of a row tile), a 4-D one only ``rows`` rows of one channel, and with
    ``input_rows`` (the batch read from storage in windows of rows) the batch too."""
    if not g.outputs:
        raise PoetError("the model has no graph outputs; poet trains its first output with the loss")
    limit = HARD_CAP_BYTES if ram_bytes is None else min(ram_bytes, HARD_CAP_BYTES)
    for t in g.tensors.values():
        n = _count(t.shape)
        size = n * DTYPE_BYTES.get(t.dtype, 4)
        windowed = input_rows and t.role == Role.INPUT and len(t.shape) == 4
        tiled = split and (t.role == Role.ACTIVATION or windowed) and len(t.shape) >= 3 and t.shape[1] > 0
        unit = size // t.shape[1] if tiled else size
        if tiled and rows and len(t.shape) == 4 and t.shape[2] > rows:
            unit = unit * rows // t.shape[2]
        if tiled and size <= HARD_CAP_BYTES and unit <= limit:
            continue  # one channel tile (or a few rows of it) fits
        # a parameter may stay in flash (frozen): check_flash and the memory floor judge those
        if size > (HARD_CAP_BYTES if t.role == Role.PARAMETER else limit):
            where = (
                "--ram"
                if ram_bytes is not None and ram_bytes < HARD_CAP_BYTES
                else "the 32-bit address space"
            )
            raise PoetError(
                f"tensor '{t.name}' ({t.role.value}, shape {list(t.shape)}) has {n:,} elements, "
                f"{fmt_bytes(size)}: more than {where} ({fmt_bytes(limit)}); a kernel needs its values in RAM"
                + ("; use a smaller --batch" if t.role == Role.INPUT and t.shape and t.shape[0] > 1 else "")
                + (
                    f"; even the smallest tile of it ({fmt_bytes(unit)}) is, so tiles cannot help"
                    if tiled
                    else ""
                )
            )
    for name in sorted(g.params):  # a constant may be +-inf (an attention mask's fill), never NaN
        check_finite(f"weight '{name}'", g.params[name], infinite_ok=name not in g.trainable)


def check_finite(what: str, a: np.ndarray, infinite_ok: bool = False) -> None:
    """``a`` holds no NaN (and, unless ``infinite_ok``, no infinity); the error names ``what`` and the
    first bad index."""
    if a.dtype.kind != "f":
        return
    bad = np.flatnonzero(np.isnan(a) if infinite_ok else ~np.isfinite(a))
    if bad.size:
        index = [int(i) for i in np.unravel_index(bad[0], a.shape)]
        raise PoetError(
            f"{what} holds {a.flat[bad[0]]} at {index} ({bad.size:,} non-finite values); "
            "weights must be finite numbers"
        )


def flash_excess(tg: Graph, profile: Profile) -> str | None:
    """Every parameter's initial values are in flash (frozen ones as constants, trainable ones as the
    image RAM is initialised from). When their bytes exceed the device's flash: the warning to print
    (the compile goes on: a board with more flash, such as QEMU's, may run it; `poet run` refuses a
    target whose flash is too small before linking)."""
    frozen = sum(tg.tensor(p).nbytes for p in tg.params if p not in tg.trainable)
    trained = sum(tg.tensor(p).nbytes for p in tg.params if p in tg.trainable)
    if frozen + trained <= profile.mcu.flash_bytes:
        return None
    return (
        f"the parameters need {fmt_bytes(frozen + trained)} of flash (frozen {fmt_bytes(frozen)}, "
        f"initial values of the trained ones {fmt_bytes(trained)}), more than the "
        f"{fmt_bytes(profile.mcu.flash_bytes)} of {profile.name} (flash_bytes of its profile); the program "
        "will not fit that device"
    )


def check_target_flash(param_bytes: int, target: str, flash_bytes: int) -> None:
    """Before a link: the parameters alone must fit the target's flash."""
    if param_bytes > flash_bytes:
        raise PoetError(
            f"the parameters need {fmt_bytes(param_bytes)} of flash, more than the {fmt_bytes(flash_bytes)} "
            f"of target {target}; the link would fail (choose another target or a smaller model)"
        )
