"""The subcommands of ``poet``, one module each, and the options several of them share."""

from __future__ import annotations

import argparse
import sys

from poet_edge.profiles import load_profile
from poet_edge.schedulers.effort import EFFORTS, SAFETY_S
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.units import GAP_HELP, fmt_bytes, parse_gap

BATCH_HELP = (
    "batch size of a model exported with a dynamic batch dimension (default 1); a model whose batch "
    "dimension is fixed uses its own, and another --batch is refused"
)


def add_batch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=None, metavar="N", help=BATCH_HELP)


def warn_ram_above_device(ram_bytes: int, device: str) -> None:
    """A budget larger than the device's RAM cannot be met on the device: say so on stderr, go on."""
    profile = load_profile(device)
    if ram_bytes > profile.mcu.ram_bytes:
        print(
            f"poet: warning: --ram {fmt_bytes(ram_bytes)} is more than the RAM of {profile.name}, "
            f"{fmt_bytes(profile.mcu.ram_bytes)} (ram_bytes of its profile); the program will not fit "
            "that device",
            file=sys.stderr,
        )


def add_talk(p: argparse.ArgumentParser, quiet: str, verbose: str) -> None:
    """-q/--quiet and -v/--verbose (one or the other), with their help for this command."""
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true", help=quiet)
    talk.add_argument("-v", "--verbose", action="store_true", help=verbose)


def add_solve_limits(p: argparse.ArgumentParser | argparse._ArgumentGroup, who: str = "") -> None:
    """--time-limit and --gap, as compile, solve and sweep take them; ``who`` heads their help (the
    schedulers they apply to, where the group's title does not say)."""
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help=f"{who}solver time limit in seconds: scale's safety stop (default {SAFETY_S:g}; a run it cuts "
        f"says so and may differ between runs), the MILP's limit (default {MilpOptions.time_limit_s:g})",
    )
    p.add_argument(
        "--effort",
        choices=tuple(EFFORTS),
        default=MilpOptions.effort,
        help=f"{who}scale's work, counted (not timed): the same input gives the same schedule; a larger "
        "effort does the smaller one's work first, then more (default %(default)s)",
    )
    p.add_argument("--gap", type=parse_gap, metavar="G", help=f"{who}{GAP_HELP}")
