"""poet compile MODEL.onnx --device D --ram SIZE [-o OUT]"""

from __future__ import annotations

import argparse
from pathlib import Path

from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.schedulers import SCHEDULERS
from poet_edge.trainable import TRAIN_HELP
from poet_edge.units import SIZE_HELP, fmt_bytes, parse_size


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="build the training program for a device and RAM budget",
                       description="Build the training graph of MODEL, schedule it into --ram on --device, plan "
                                   "the arena and write plan.json plus a C99 project into -o OUT (atomically).")
    p.add_argument("model", type=Path, help="ONNX model (float32, static shapes except the batch dimension)")
    p.add_argument("--device", default="host", help="device profile name or TOML path (see 'poet profiles')")
    p.add_argument("--ram", required=True, help=f"RAM budget for one training step, {SIZE_HELP}")
    p.add_argument("-o", "--out", type=Path, help="output folder (default: <model name>.poet)")
    p.add_argument("--batch", type=int, default=1, help="batch size; resolves a dynamic first dimension (default 1)")
    p.add_argument("--loss", choices=[x.value for x in Loss], default=Loss.CROSS_ENTROPY.value,
                   help="loss poet adds after the model output (default cross-entropy with integer labels)")
    p.add_argument("--lr", type=float, default=0.01, help="SGD learning rate used by 'poet run' (default 0.01)")
    p.add_argument("--reserve", help=f"RAM kept for stack and runtime, {SIZE_HELP} (default: the device "
                                     "profile's ram_reserve_bytes, 8KB on the Cortex-M profiles)")
    p.add_argument("--train", default="all", help=f"trainable parameters: {TRAIN_HELP}")
    p.add_argument("--scheduler", choices=sorted(SCHEDULERS), default="none",
                   help="how to fit the budget (default none: every node once, freed after last use)")


def run(args: argparse.Namespace) -> int:
    out = args.out or args.model.with_suffix(".poet")
    opts = CompileOptions(args.model, args.device, parse_size(args.ram), out, args.batch, Loss(args.loss), args.lr,
                          parse_size(args.reserve) if args.reserve else None, args.scheduler, args.train)
    c = compile_model(opts, print)
    print(f"schedule: {c.schedule.solver}, {len(c.schedule.steps)} steps")
    print(f"RAM: {fmt_bytes(c.predicted_ram_bytes)} of {fmt_bytes(opts.ram_bytes)} "
          f"(arena {fmt_bytes(c.arena.arena_bytes)}, overhead {100 * (c.arena.overhead - 1):.1f}% over live peak; "
          f"fixed {fmt_bytes(c.fixed.total)})")
    print(f"predicted step: {c.sim.latency_s * 1e3:.3f} ms, {c.sim.energy_j * 1e3:.4f} mJ on {c.profile.name}")
    print(f"wrote {out}/ (plan.json, poet_model.c, poet_model.h, Makefile)")
    return 0
