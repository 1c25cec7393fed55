"""`poet calibrate`: measure the kernels on a target and fit a device profile's compute model.

Every kernel class of the cost model (:class:`poet_edge.work.OpClass`) that has kernels in this checkout is
run over a range of sizes (through :mod:`poet_edge.microbench`: the same C calls codegen emits, built by the
target's toolchain). The model of :mod:`poet_edge.cost` is then fitted by least squares::

    measured(call) ~ rate[class] * quantity(call) + per_call

where quantity is the call's work times its weight (:attr:`poet_edge.work.Work.quantity`): a MAC of a
batch-1 dense layer or of a convolution's border weighs more than one of a large GEMM
(:mod:`poet_edge.kernel_model`, whose own coefficients bench/kernel_model.py fits), so the MAC rates are
per MAC of a large GEMM and the conv per-call cost mostly moves into the weights.

with ``per_call`` shared by the convolution classes (``cycles_per_call_conv``) and one shared by all
other classes (``cycles_per_call``, the elementwise kernels' fixed cost: they make most of a step's calls):
a convolution's window and border set-up costs thousands of instructions, a ReLU's call a few dozen, and
one constant for both misprices both. Rows are weighted by 1 / measured, so the fit minimises relative
error and a large GEMM does not drown a small ReLU. The cases are the calls training steps make: forward,
input-gradient and weight-gradient GEMMs and convolutions of typical layers, bias gradients, strided and
contiguous copies, both losses (one rate: see ``_loss``).

On the QEMU targets the measurement is an exact instruction count (``-icount shift=0``), not cycles: the
written profile's ``cycles_per_*`` numbers are instructions per unit, i.e. they assume one instruction per
cycle. Real Cortex-M cores take more (loads 2 cycles on the M4, VFMA 3, taken branches ~3); calibrate on a
board with DWT->CYCCNT for cycles. The profile's ``source`` says which.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from poet_edge import microbench as mb
from poet_edge.cost import CONV_CLASSES, node_cycles
from poet_edge.errors import PoetError
from poet_edge.planning import ProblemSpec, move_work
from poet_edge.profiles import Profile
from poet_edge.schedule import Compute, Move, Schedule
from poet_edge.work import OpClass

RATE_KEYS: dict[OpClass, str] = {
    OpClass.DENSE: "cycles_per_mac_dense",
    OpClass.CONV: "cycles_per_mac_conv",
    OpClass.DEPTHWISE: "cycles_per_mac_depthwise",
    OpClass.ELEMENTWISE: "cycles_per_element_elementwise",
    OpClass.REDUCE: "cycles_per_element_reduce",
    OpClass.COPY: "cycles_per_byte_copy",
    OpClass.LOSS: "cycles_per_element_loss",
    OpClass.UPDATE: "cycles_per_element_update",
}
UNITS = {OpClass.DENSE: "MAC", OpClass.CONV: "MAC", OpClass.DEPTHWISE: "MAC", OpClass.COPY: "byte"}

# Cycles per QEMU instruction the shipped Cortex-M profiles are written with (`poet calibrate
# --cycles-per-instruction`; each profile's compute source states its factor). Cortex-M4F: the
# register-blocked float kernels take about 3.4 cycles per MAC for 2.75 instructions with Cortex-M4
# instruction timings (REFERENCES.md), 1.24 cycles per instruction. Cortex-M33: the same (single-issue,
# FPU of the same class, as that profile has always assumed). Cortex-M7: half the Cortex-M4F cycles (dual
# issue, that profile's convention), 0.62. Dividing a profile's rates by its factor gives back the fit.
CYCLES_PER_INSTRUCTION: dict[str, float] = {"cortex-m4": 1.24, "cortex-m33": 1.24, "cortex-m7": 0.62}
CYCLES_NOTES: dict[str, str] = {
    "cortex-m4": "Cycles per instruction 1.24: the register-blocked kernels take about 3.4 cycles per MAC "
    "for 2.75 instructions with Cortex-M4 instruction timings (VLDR 2, VMUL/VADD 1, taken branch 3; "
    "REFERENCES.md); the naive kernels this profile priced before took 11.2 cycles for 7.1 instructions.",
    "cortex-m33": "Cycles per instruction 1.24, as on the Cortex-M4F (single-issue pipeline, "
    "single-precision FPU of the same class: this profile's convention).",
    "cortex-m7": "Cycles per instruction 0.62: half the Cortex-M4F's 1.24 (dual-issue pipeline, caches: "
    "this profile's convention of half the Cortex-M4F cycle counts).",
}


def _dense(scale: int) -> list[mb.KernelCase]:
    """Forward (A·Bᵀ + bias), input-gradient (A·B) and weight-gradient (Aᵀ·B) GEMMs, batch 8, as training
    graphs call them, over layer widths from a classifier head to the autoencoder's 640. (Tinier layers
    are mostly per-call cost; with equal weight per call their relative errors set the per-MAC rate
    instead of the layers that make a step's instructions.)"""
    layers = [(32, 10), (64, 32), (128, 128), (256, 64), (400, 120), (640, 128)][: 3 + scale]
    cases = []
    for fan_in, fan_out in layers:
        cases += [
            mb.gemm_case(8, fan_out, fan_in, 0, 1, bias="row"),
            mb.gemm_case(8, fan_in, fan_out, 0, 0),
            mb.gemm_case(fan_out, fan_in, 8, 1, 0),
        ]
    return cases


def _sizes(scale: int) -> list[int]:
    return [16, 64, 256, 1024, 4096, 16384][: 3 + scale]


def _elementwise(scale: int) -> list[mb.KernelCase]:
    out = []
    for n in _sizes(scale):
        out += [
            mb.op_case("Relu", [(8, n // 8)]),
            mb.op_case("ReluGrad", [(8, n // 8), (8, n // 8)]),
            mb.op_case("Add", [(8, n // 8), (n // 8,)]),
        ]
    return out


def _reduce(scale: int) -> list[mb.KernelCase]:
    """Bias gradients (ReduceSumTo of a dense layer's output gradient, ChannelSum of a conv's) and a global
    average pool, as training steps call them."""
    out = []
    for n in _sizes(scale):
        out.append(mb.op_case("ReduceSumTo", [(8, n // 8)], {"shape": (n // 8,), "scale": 1.0}))
        side = max(1, int(math.isqrt(n // 8)))
        out.append(mb.op_case("ChannelSum", [(1, 8, side, side)]))
    out += [mb.op_case("GlobalAveragePool", [(1, 32, s, s)]) for s in (3, 8)]
    return out


def _copy(scale: int) -> list[mb.KernelCase]:
    """Contiguous copies (Flatten) and the strided ones of attention heads (Transpose of [1, seq, heads,
    dim] to [1, heads, seq, dim]): one rate per byte for both, so it is a compromise between them."""
    out = [mb.op_case("Flatten", [(8, n // 8, 1, 1)], {"axis": 1}) for n in _sizes(scale)]
    out += [mb.op_case("Transpose", [(1, s, 2, 16)], {"perm": (0, 2, 1, 3)}) for s in (8, 32)]
    return out


LOSS_OPS = {
    "cross-entropy": ("SoftmaxCrossEntropy", "SoftmaxCrossEntropyGrad"),
    "mse": ("MeanSquaredError", "MeanSquaredErrorGrad"),
}
LOSSES = (*LOSS_OPS, "both")


def _loss(scale: int, loss: str = "both") -> list[mb.KernelCase]:
    """The loss and its gradient (each called once per training step, so one rate prices the pair). The
    cost model has one rate for the loss class, and softmax cross-entropy costs ~10x what MSE does per
    element: ``loss`` "cross-entropy" or "mse" calibrates for one of them, "both" fits one rate to both
    (cross-entropy tensors are usually small, a batch of class scores, and MSE ones large, reconstructions,
    so the mixed rate misprices neither by much in a whole step)."""
    out = []
    for kind in LOSS_OPS if loss == "both" else (loss,):
        for n, c in [(8, 2), (8, 10), (32, 10), (8, 100), (64, 100), (64, 640)][: 3 + scale]:
            for op in LOSS_OPS[kind]:
                if kind == "mse":
                    out.append(mb.op_case(op, [(n, c), (n, c)]))
                else:
                    out.append(mb.op_case(op, [(n, c), (n,)], int_inputs=(1,), label_classes=c))
    return out


def _update(scale: int) -> list[mb.KernelCase]:
    return [mb.op_case("SGDUpdate", [(n,), (n,)]) for n in _sizes(scale)]


# Convolutions as training steps call them: (X shape, W shape, stride, padding), each measured as forward
# (with bias), input gradient and weight gradient (the three kernels share one rate). General: 3x3 layers
# at strides 1 and 2, a strided 1x1 shortcut, a 5x5 layer, first layers with 1 and 3 input channels,
# pointwise layers on large and small maps. Depthwise 3x3 at strides 1 and 2 on maps from 48x48 to 3x3.
_CONV_LAYERS = [
    ((1, 8, 8, 8), (8, 8, 3, 3), 1, 1),
    ((1, 16, 16, 16), (16, 16, 3, 3), 1, 1),
    ((1, 16, 16, 16), (32, 16, 3, 3), 2, 1),
    ((1, 3, 32, 32), (8, 3, 3, 3), 2, 1),
    ((1, 16, 16, 16), (32, 16, 1, 1), 2, 0),
    ((1, 32, 8, 8), (64, 32, 1, 1), 1, 0),
    ((1, 64, 3, 3), (64, 64, 1, 1), 1, 0),
    ((1, 4, 12, 12), (8, 4, 5, 5), 1, 0),
    ((1, 1, 28, 28), (8, 1, 5, 5), 1, 2),
    ((1, 32, 32, 32), (32, 32, 3, 3), 1, 1),
    ((1, 16, 48, 48), (32, 16, 1, 1), 1, 0),
    ((1, 64, 16, 16), (64, 64, 3, 3), 2, 1),
]
_DEPTHWISE_LAYERS = [
    ((1, 16, 24, 24), 1),
    ((1, 32, 12, 12), 2),
    ((1, 64, 6, 6), 1),
    ((1, 64, 3, 3), 1),
    ((1, 16, 48, 48), 1),
    ((1, 32, 24, 24), 2),
    ((1, 64, 12, 12), 1),
    ((1, 128, 6, 6), 2),
    ((1, 32, 48, 48), 2),
]


def _conv(scale: int, depthwise: bool) -> list[mb.KernelCase]:
    """Forward, input-gradient and weight-gradient calls of typical layers (more layers with ``scale``)."""
    out = []
    n = 4 + 2 * scale
    if depthwise:
        layers = [(x, (x[1], 1, 3, 3), s, 1, x[1]) for x, s in _DEPTHWISE_LAYERS[: n - 1]]
    else:
        layers = [(x, w, s, p, 1) for x, w, s, p in _CONV_LAYERS[:n]]
    for x, w, s, p, g in layers:
        for kind in ("forward", "input grad", "weight grad"):
            out.append(mb.conv_case(x, w, kind, (s, s), (p, p, p, p), g))
    return out


CASES: dict[OpClass, Callable[[int], list[mb.KernelCase]]] = {
    OpClass.DENSE: _dense,
    OpClass.CONV: lambda s: _conv(s, False),
    OpClass.DEPTHWISE: lambda s: _conv(s, True),
    OpClass.ELEMENTWISE: _elementwise,
    OpClass.REDUCE: _reduce,
    OpClass.COPY: _copy,
    OpClass.LOSS: _loss,
    OpClass.UPDATE: _update,
}


def calibration_cases(
    scale: int = 2, log: Callable[[str], None] = lambda s: None, loss: str = "both"
) -> list[mb.KernelCase]:
    """Cases of every class whose kernels exist here (conv and depthwise only when their op and C kernel
    do); ``scale`` 0..3 sets how many (and how large) sizes each class gets; ``loss`` which loss kernels."""
    cases: list[mb.KernelCase] = []
    for cls, make in CASES.items():
        try:
            made = _loss(scale, loss) if cls == OpClass.LOSS else make(scale)
        except (PoetError, KeyError, ValueError, TypeError) as e:  # op or kernel not in this checkout
            log(f"skipping {cls.value}: {e}")
            continue
        made = [c for c in made if c.op_class == cls]
        missing = [c.source for c in made if not (mb.KERNELS_DIR / f"{c.source}.c").is_file()]
        if missing or not made:
            log(f"skipping {cls.value}: no kernel {missing[0] if missing else ''}")
            continue
        cases += made
    return cases


@dataclass(frozen=True)
class Fit:
    """Fitted rates (instructions per unit of each class), the shared per-call cost, and per-case errors."""

    rates: dict[OpClass, float]
    per_call: float  # every class but the convolutions
    per_call_conv: float  # conv and depthwise
    rows: tuple[tuple[mb.KernelCase, float, float], ...]  # case, measured, predicted

    def errors(self) -> dict[OpClass, tuple[float, float, int]]:
        """Per class: RMS and max relative error of the fit, and the number of cases."""
        out: dict[OpClass, tuple[float, float, int]] = {}
        for cls in self.rates:
            rel = [(p - m) / m for c, m, p in self.rows if c.op_class == cls and m > 0]
            if rel:
                out[cls] = (math.sqrt(sum(r * r for r in rel) / len(rel)), max(abs(r) for r in rel), len(rel))
        return out


def _weighted_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    w = 1.0 / np.maximum(np.abs(y), 1.0)
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return np.asarray(coef)


def fit(cases: Sequence[mb.KernelCase], measured: Sequence[float]) -> Fit:
    """Fits ``measured ~ rate[class] * quantity + per_call[group]`` by least squares on relative error (rows
    weighted by 1 / measured). The convolutions' per-call cost is the median of the intercepts of separate
    per-class fits (clipped at 0); everything else shares the elementwise class's intercept (its kernels
    are most of a training step's calls; the median of the group's intercepts without elementwise cases,
    the other group's when a group has none); the rates are then refitted with those fixed."""
    if len(cases) != len(measured) or not cases:
        raise PoetError("fit needs one measurement per case")
    y_all = np.asarray(measured, dtype=np.float64)
    q_all = np.asarray([c.priced for c in cases], dtype=np.float64)
    classes = sorted({c.op_class for c in cases}, key=lambda c: list(OpClass).index(c))
    members = {cls: np.asarray([c.op_class == cls for c in cases]) for cls in classes}
    intercepts: dict[bool, list[float]] = {True: [], False: []}  # conv group?
    own: dict[OpClass, float] = {}
    for cls in classes:
        q, y = q_all[members[cls]], y_all[members[cls]]
        if len(set(q.tolist())) >= 2:
            b = float(_weighted_lstsq(np.stack([q, np.ones_like(q)], axis=1), y)[1])
            intercepts[cls in CONV_CLASSES].append(b)
            own[cls] = b
    median = {g: max(0.0, float(np.median(v))) for g, v in intercepts.items() if v}
    per_call = median.get(False, median.get(True, 0.0))
    if OpClass.ELEMENTWISE in own:  # the most frequent calls of a training step set the shared fixed cost
        per_call = max(0.0, own[OpClass.ELEMENTWISE])
    per_call_conv = median.get(True, per_call)
    fixed = {cls: per_call_conv if cls in CONV_CLASSES else per_call for cls in classes}
    rates: dict[OpClass, float] = {}
    for cls in classes:
        q, y = q_all[members[cls]], y_all[members[cls]] - fixed[cls]
        w = 1.0 / np.maximum(np.abs(y_all[members[cls]]), 1.0)
        denom = float(np.sum((q * w) ** 2))
        rates[cls] = max(0.0, float(np.sum(q * w * y * w)) / denom) if denom > 0 else 0.0
    pred = [rates[c.op_class] * c.priced + fixed[c.op_class] for c in cases]
    rows = tuple((c, float(m), float(p)) for c, m, p in zip(cases, measured, pred, strict=True))
    return Fit(rates, per_call, per_call_conv, rows)


def calibrate(
    target: str,
    work: Path,
    scale: int = 2,
    kernels: str = "fast",
    log: Callable[[str], None] = lambda s: None,
    loss: str = "both",
) -> tuple[Fit, mb.Measurement]:
    """Measures the calibration cases on ``target`` with the ``kernels`` set and fits the compute model."""
    cases = calibration_cases(scale, log, loss)
    log(f"measuring {len(cases)} kernel calls on {target} ({kernels} kernels)")
    m = mb.measure(target, cases, work, (kernels,))
    return fit(cases, [m.instructions[(c.name, kernels)] for c in cases]), m


def profile_from_fit(
    base: Profile,
    f: Fit,
    target: str,
    exact: bool,
    kernels: str,
    name: str,
    date: datetime.date | None = None,
    loss: str = "both",
    cycles_per_instruction: float = 1.0,
    note: str | None = None,
) -> Profile:
    """``base`` with the measured compute rates (classes not measured keep the base's numbers), each fitted
    rate and per-call cost multiplied by ``cycles_per_instruction`` (1.0: one instruction per cycle). The
    source ends with ``note`` when given, else with the base profile's compute source."""
    day = (date or datetime.date.today()).isoformat()
    what = "instruction counts, not cycles" if exact else "timer ticks of a non-deterministic clock"
    unmeasured = [RATE_KEYS[c] for c in RATE_KEYS if c not in f.rates]
    kept = f"Not measured, kept from {base.name}: {', '.join(unmeasured)}. " if unmeasured else ""
    k = cycles_per_instruction
    loss_text = "softmax cross-entropy and MSE together" if loss == "both" else loss
    fitted = "; ".join(f"{cls.value} {r:.3f} instr/{UNITS.get(cls, 'element')}" for cls, r in f.rates.items())
    fitted += f"; per call {f.per_call:.1f} instr, per conv call {f.per_call_conv:.1f} instr"
    if k == 1.0:
        scaling = (
            "QEMU counts instructions: these 'cycles' assume one instruction per cycle (real Cortex-M "
            "loads, VFMA and taken branches take more)."
        )
    else:
        scaling = (
            f"QEMU counts instructions: every rate here is the fitted instruction count times {k:g} "
            f"cycles per instruction (cycles = {k:g} x instructions; divide by {k:g} for instructions)."
        )
    source = (
        f"measured with poet calibrate on {target} ({what}) on {day}, {kernels} kernels; "
        f"least-squares fit of rate x work + cycles_per_call(_conv) over {len(f.rows)} kernel calls. "
        f"Fitted: {fitted}. {scaling} The loss rate is for {loss_text}. {kept}"
        + (note if note is not None else f"Base profile {base.name}: {' '.join(base.compute.source.split())}")
    )
    values: dict[str, Any] = {RATE_KEYS[c]: round(r * k, 4) for c, r in f.rates.items()}
    compute = dataclasses.replace(
        base.compute,
        **values,
        cycles_per_call=round(f.per_call * k, 2),
        cycles_per_call_conv=round(f.per_call_conv * k, 2),
        source=source,
    )
    return dataclasses.replace(
        base,
        name=name,
        compute=compute,
        path="",
        description=f"{base.description}; compute model calibrated on {target}",
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        text = v.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{text}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def profile_toml(p: Profile, header: str = "") -> str:
    """The profile in the schema of profiles/*.toml (loadable by poet_edge.profiles.load_profile)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"name = {_toml_value(p.name)}", f"description = {_toml_value(p.description)}"]
    for key, section in (("mcu", p.mcu), ("compute", p.compute), ("storage", p.storage)):
        lines += ["", f"[{key}]"]
        lines += [
            f"{fl.name} = {_toml_value(getattr(section, fl.name))}" for fl in dataclasses.fields(section)
        ]
    return "\n".join(lines) + "\n"


def _toml_long_string(text: str, width: int = 100) -> str:
    """A TOML multi-line basic string, wrapped with line-ending backslashes (which TOML removes together
    with the newline and the next line's leading whitespace)."""
    words = text.replace("\\", "\\\\").replace('"', '\\"').split()
    lines, cur = [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return '"""' + " \\\n".join(lines) + '"""'


def replace_compute_section(toml_text: str, p: Profile) -> str:
    """``toml_text`` (a profile file) with its [compute] table replaced by ``p``'s, everything else (header
    comments, the other tables) kept as it is."""
    lines = toml_text.splitlines()
    try:
        start = lines.index("[compute]")
    except ValueError as e:
        raise PoetError("profile file has no [compute] table") from e
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    body = ["[compute]"]
    for fl in dataclasses.fields(p.compute):
        v = getattr(p.compute, fl.name)
        body.append(f"{fl.name} = {_toml_long_string(v) if fl.name == 'source' else _toml_value(v)}")
    return "\n".join([*lines[:start], *body, "", *lines[end:]]) + "\n"


def instruction_profile(profile: Profile, cycles_per_instruction: float) -> Profile:
    """``profile`` with every compute rate and per-call cost divided by ``cycles_per_instruction``: the
    instruction counts a profile written with that factor was fitted to."""
    c = profile.compute
    scaled: dict[str, Any] = {
        fl.name: getattr(c, fl.name) / cycles_per_instruction
        for fl in dataclasses.fields(c)
        if fl.name.startswith("cycles_per_")
    }
    return dataclasses.replace(profile, compute=dataclasses.replace(c, **scaled))


def predicted_step_instructions(plan: dict[str, Any], profile: Profile) -> float:
    """What the profile's compute model predicts for one training step of a compiled plan (every Compute
    step of its schedule with its fused epilogues, recomputations included, and every Move in the arena
    as a copy of its value; paging is not compute)."""
    spec = ProblemSpec.from_json(plan["problem"])
    works = {n.name: n.works for n in spec.nodes}  # a node's own kernel and its fused epilogues
    sizes = {n.name: n.out_bytes for n in spec.nodes}
    schedule = Schedule.from_json(plan["schedule"]["steps"])
    moves = sum(node_cycles(profile, move_work(sizes[s.node])) for s in schedule.steps if isinstance(s, Move))
    return moves + sum(
        node_cycles(profile, w) for s in schedule.steps if isinstance(s, Compute) for w in works[s.node]
    )
