"""Fails when a module other than the HiGHS layer (``poet_edge/highs.py``) imports highspy (issue 55: one
public HiGHS layer; the schedulers and the arena go through it).

For every ``.py`` file given (directories are walked) the checker reports, in any scope (function-level
imports included):

* ``import highspy`` / ``import highspy.x`` (with or without ``as``);
* ``from highspy import ...`` / ``from highspy.x import ...``;
* ``importlib.import_module("highspy...")`` / ``__import__("highspy...")`` with a constant string.

The layer itself is ``LAYER`` under ``--root`` (default: the current directory). Tests may use highspy
as an oracle for the layer (tests/test_highs.py); ``make lint`` runs this on poet_edge, bench, tools
and examples.

Usage: ``python tools/check_highs_imports.py [--root DIR] PATH...``: one line per import
(``file:line:col: message``) and exit status 1 when there is any, else 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

LAYER = Path("poet_edge") / "highs.py"
MODULE = "highspy"


def _is_highspy(name: str | None) -> bool:
    return name is not None and (name == MODULE or name.startswith(MODULE + "."))


def _dynamic(node: ast.Call) -> str | None:
    """The module a call ``importlib.import_module("...")`` / ``import_module("...")`` /
    ``__import__("...")`` names as a constant, else None."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def check_file(path: Path) -> Iterator[tuple[int, int, str]]:
    """(line, column, message) for every import of highspy in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_highspy(alias.name):
                    yield node.lineno, node.col_offset, f"imports `{alias.name}`"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_highspy(node.module):
                yield node.lineno, node.col_offset, f"imports from `{node.module}`"
        elif isinstance(node, ast.Call):
            name = _dynamic(node)
            if _is_highspy(name):
                yield node.lineno, node.col_offset, f"imports `{name}` dynamically"


def files(paths: list[Path]) -> Iterator[Path]:
    for p in paths:
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.py") if ".venv" not in q.parts)
        elif p.suffix == ".py":
            yield p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository (where LAYER is)")
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    layer = (args.root / LAYER).resolve()
    found = 0
    for path in files(args.paths):
        if path.resolve() == layer:
            continue
        for line, col, message in check_file(path):
            print(f"{path}:{line}:{col}: {message} (only {LAYER} may: use poet_edge.highs)")
            found += 1
    if found:
        print(f"{found} import(s) of highspy outside {LAYER}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
