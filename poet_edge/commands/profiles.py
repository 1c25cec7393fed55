"""`poet profiles [NAME]`: list the device profiles, or show one with its units and sources."""

from __future__ import annotations

import argparse
from typing import Any

from poet_edge.profiles import format_profile, list_profiles, load_profile


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "profiles",
        help="list device profiles, or show one",
        description="Without NAME, list the device profiles in profiles/. With NAME (a profile name "
        "or a path to a .toml file), show its numbers with units and their sources.",
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="profile name or path to a .toml file")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.name:
        print(format_profile(load_profile(args.name)))
        return 0
    for name in list_profiles():
        print(f"{name:16s} {load_profile(name).description}")
    return 0
