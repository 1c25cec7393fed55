"""poet calibrate --target T [-o PROFILE.toml] [--base NAME]"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from poet_edge import calibrate
from poet_edge.errors import PoetError
from poet_edge.profiles import load_profile
from poet_edge.targets import available_targets
from poet_edge.work import OpClass

QEMU_NOTE = (
    "On the QEMU targets the measurements are exact instruction counts (QEMU -icount), not cycles: "
    "the profile's cycles_per_* numbers then assume one instruction per cycle, which real Cortex-M "
    "cores do not achieve (loads, VFMA and taken branches take 2-3 cycles on an M4)."
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure the kernels on a target and fit a device profile's compute model",
        description="Run micro-benchmarks of every kernel class (dense, conv/depthwise when their "
        "kernels exist, elementwise, reduce, copy, loss, update) over a range of sizes on "
        "--target, fit the profile's compute model (units of work per class + a fixed cost per "
        "call, least squares on relative error; a MAC or element counts with its kernel-model weight, "
        "see bench/kernel_model.py), print the fit's error per class, and write a "
        f"profile TOML: --base with the measured [compute] numbers. {QEMU_NOTE}",
    )
    p.add_argument(
        "--target",
        default="qemu-cortex-m4",
        help=f"where to measure: {', '.join(available_targets())} (default qemu-cortex-m4)",
    )
    p.add_argument("-o", "--out", type=Path, help="profile TOML to write (default: print a summary only)")
    p.add_argument(
        "--base",
        default="cortex-m4",
        help="profile whose MCU, storage and unmeasured numbers the result keeps (default cortex-m4)",
    )
    p.add_argument("--name", help="name of the written profile (default: the output file's stem)")
    p.add_argument(
        "--in-place",
        type=Path,
        metavar="PROFILE.toml",
        help="replace only the [compute] table of this existing profile file (also its --base), keeping "
        "its comments and other tables",
    )
    p.add_argument(
        "--kernels",
        choices=("fast", "reference"),
        default="fast",
        help="kernel set to measure, as 'poet compile --kernels' selects it (default fast)",
    )
    p.add_argument(
        "--loss",
        choices=calibrate.LOSSES,
        default="both",
        help="loss kernels the loss rate is fitted to (one rate per class; softmax cross-entropy "
        "costs ~10x MSE per element; default both: one rate fitted to both)",
    )
    p.add_argument(
        "--cycles-per-instruction",
        type=float,
        default=1.0,
        metavar="F",
        help="write every fitted rate and per-call cost times F (cycles = F x instructions; the profile's "
        "source says so). Default 1.0: one instruction per cycle",
    )
    p.add_argument(
        "--sizes",
        type=int,
        choices=range(0, 4),
        default=2,
        metavar="0..3",
        help="how many sizes per kernel class (3 + N, largest last; default 2)",
    )


def run(args: argparse.Namespace) -> int:
    if args.cycles_per_instruction <= 0:
        raise PoetError("--cycles-per-instruction must be positive")
    base = load_profile(args.in_place or args.base)
    with tempfile.TemporaryDirectory(prefix="poet-calibrate-") as tmp:
        f, m = calibrate.calibrate(args.target, Path(tmp), args.sizes, args.kernels, print, args.loss)
    if not m.exact:
        print(f"note: {args.target} ticks are not deterministic instruction counts; the fit is rough")
    print(f"{'class':12s} {'rate':>10s} {'unit':12s} {'cases':>5s} {'rms err':>8s} {'max err':>8s}")
    errors = f.errors()
    for cls, rate in f.rates.items():
        rms, worst, n = errors[cls]
        unit = f"instr/{calibrate.UNITS.get(cls, 'element')}"
        print(f"{cls.value:12s} {rate:10.3f} {unit:12s} {n:5d} {100 * rms:7.2f}% {100 * worst:7.2f}%")
    print(
        f"{'per call':12s} {f.per_call:10.1f} instr        (empty-call loop overhead {m.empty_call:.1f} "
        "instr already subtracted)"
    )
    print(f"{'per conv call':12s} {f.per_call_conv:10.1f} instr")
    missing = [c.value for c in OpClass if c not in f.rates]
    if missing:
        print(f"not measured (kept from {base.name}): {', '.join(missing)}")
    if args.in_place:
        prof = calibrate.profile_from_fit(
            base,
            f,
            args.target,
            m.exact,
            args.kernels,
            base.name,
            loss=args.loss,
            cycles_per_instruction=args.cycles_per_instruction,
            note=calibrate.CYCLES_NOTES.get(base.name, ""),
        )
        path: Path = args.in_place
        path.write_text(calibrate.replace_compute_section(path.read_text(), prof))
        load_profile(path)  # the written file must load
        print(f"updated the [compute] table of {path}")
    if args.out:
        out: Path = args.out
        if out.suffix != ".toml":
            raise PoetError(f"-o {out}: the profile file must end in .toml")
        name = args.name or out.stem
        prof = calibrate.profile_from_fit(
            base,
            f,
            args.target,
            m.exact,
            args.kernels,
            name,
            loss=args.loss,
            cycles_per_instruction=args.cycles_per_instruction,
        )
        header = (
            f"Device profile written by 'poet calibrate --target {args.target} --base {base.name}'.\n"
            "Schema: profiles/cortex-m4.toml. " + QEMU_NOTE
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(calibrate.profile_toml(prof, header))
        load_profile(out)  # the written file must load
        print(f"wrote {out} (profile '{name}')")
    return 0
