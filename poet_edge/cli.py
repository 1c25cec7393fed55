"""The `poet` command. Each subcommand lives in poet_edge/commands/<name>.py (add_parser + run)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from poet_edge import __version__
from poet_edge.errors import PoetError

COMMANDS = ("compile", "simulate", "run", "inspect", "profiles", "calibrate", "sweep", "solve")

DESCRIPTION = """poet-edge compiles the training of an ONNX model for a microcontroller: it builds
the training graph, schedules recomputation and paging so one training step fits the RAM budget,
plans a static arena and emits a C99 project. Typical use:

  poet compile model.onnx --device cortex-m4 --ram 256KB -o out
  poet simulate out
  poet run out --target host --steps 10
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="poet", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"poet-edge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = importlib.import_module(f"poet_edge.commands.{name}")
        module.add_parser(sub)
        sub.choices[name].set_defaults(run=module.run)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)  # an option's own parser (--ram, --gap) may raise PoetError
        return int(args.run(args) or 0)
    except PoetError as e:
        print(f"poet: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("poet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `poet simulate out | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 141


if __name__ == "__main__":
    sys.exit(main())
