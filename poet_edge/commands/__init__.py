"""The subcommands of ``poet``, one module each, and the options several of them share."""

from __future__ import annotations

import argparse

from poet_edge.schedulers.milp import MilpOptions
from poet_edge.units import GAP_HELP, parse_gap


def add_solve_limits(p: argparse.ArgumentParser | argparse._ArgumentGroup, who: str = "") -> None:
    """--time-limit and --gap, as compile, solve and sweep take them; ``who`` heads their help (the
    schedulers they apply to, where the group's title does not say)."""
    limit = MilpOptions.time_limit_s
    p.add_argument(
        "--time-limit",
        type=float,
        default=limit,
        metavar="S",
        help=f"{who}solver time limit in seconds, per solve (default {limit:g})",
    )
    p.add_argument("--gap", type=parse_gap, metavar="G", help=f"{who}{GAP_HELP}")
