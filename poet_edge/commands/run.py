"""poet run OUT [--target T] [--steps N] [--data FILE.npz] [--dump-params FILE.npz]"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from poet_edge.runner import StepLog, run_project
from poet_edge.targets import available_targets


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="build a compiled project and train it on the host or an emulated board",
                       description="Build OUT for --target, run --steps training steps on deterministic synthetic "
                                   "data (or --data), print the loss of each step.")
    p.add_argument("out", type=Path, help="folder written by 'poet compile'")
    p.add_argument("--target", default="host", help=f"one of: {', '.join(available_targets())} (default host)")
    p.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    p.add_argument("--data", type=Path, help="npz with arrays x (N, ...) and y (N, ...); step i uses batch i, cycling")
    p.add_argument("--lr", type=float, help="learning rate (default: the one given to compile)")
    p.add_argument("--dump-params", type=Path, help="write the parameters after training to this npz")
    p.add_argument("--sanitize", action="store_true", help="host only: build with ASan + UBSan")
    p.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit in seconds (default 600)")


def run(args: argparse.Namespace) -> int:
    def show(s: StepLog) -> None:
        print(f"step {s.step:4d}  loss {s.loss:.6f}  ticks {s.ticks}  storage written {s.bytes_written} B "
              f"read {s.bytes_read} B", flush=True)

    r = run_project(args.out, args.target, args.steps, args.data, args.lr, args.sanitize, args.timeout, show)
    if args.dump_params:
        np.savez(args.dump_params, **r.params)
        print(f"wrote {args.dump_params}")
    return 0
