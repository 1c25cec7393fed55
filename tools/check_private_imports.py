"""Fails when a module uses a private name of another module (issue 55: no module imports another's
private names).

A private name has one leading underscore (``_solve``, ``_Lp``); dunders (``__version__``) are public
protocol. For every ``.py`` file given (directories are walked) the checker reports:

* ``from poet_edge.x import _name`` / ``from .x import _name``, the name not a submodule of
  ``poet_edge.x`` (a parenthesised import over several lines is one AST node, so it is seen whole);
* ``import poet_edge.x._private`` / ``from poet_edge.x import _private``, a private submodule, from
  outside package ``poet_edge.x``;
* ``module._name`` (also ``poet_edge.x.module._name``, ``module.other._name``, ``module.Class._name``)
  where ``module`` is bound by an import of a first-party module: any private name reached through
  another module's namespace, in any scope (function-level imports included).

* ``monkeypatch.setattr(module, "_name", ...)`` (any ``x.setattr`` call whose first argument is bound
  to a first-party module and whose second is a private name as a string constant): a test that
  patches another module's private name (pass a policy or options object instead, or patch public API).

Only first-party modules (``FIRST_PARTY``) are checked: ``sys._getframe`` is the standard library's
business. A module may use its own private names. Other strings are not names: ``getattr(m, "_name")``
is not checked. ``make lint`` runs it on poet_edge, bench and tests.

Usage: ``python tools/check_private_imports.py [--root DIR] PATH...``: one line per use
(``file:line:col: message``) and exit status 1 when there is any, else 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FIRST_PARTY = ("poet_edge",)


@dataclass(frozen=True)
class Violation:
    """One use of a private name of another module."""

    path: Path
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


def is_private(name: str) -> bool:
    """True for ``_name``, false for public names and dunders."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, root: Path) -> str | None:
    """Dotted module name of ``path`` under ``root`` (``pkg/__init__.py`` -> ``pkg``); None outside it."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts else None


def _is_first_party(module: str) -> bool:
    return module.split(".")[0] in FIRST_PARTY


def _is_submodule(module: str, root: Path) -> bool:
    base = root.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve_from(node: ast.ImportFrom, current: str | None, is_package: bool) -> str | None:
    """Absolute module named by ``from X import ...`` (relative imports resolved against ``current``)."""
    if node.level == 0:
        return node.module
    if current is None:
        return None
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    drop = node.level - 1
    if drop > len(parts):
        return None
    base = parts[: len(parts) - drop] if drop else parts
    return ".".join([*base, node.module] if node.module else base)


def _inside(current: str | None, package: str) -> bool:
    return current is not None and (current == package or current.startswith(package + "."))


def _private_segment(module: str, current: str | None) -> str | None:
    """The first private segment of dotted ``module`` that ``current`` is not inside, if any."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if is_private(part) and not _inside(current, ".".join(parts[:i])):
            return ".".join(parts[: i + 1])
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _patched_private(
    node: ast.AST, modules: dict[str, str], dotted_roots: set[str]
) -> tuple[str, str] | None:
    """(module, name) of ``x.setattr(module, "_name", ...)`` with ``module`` bound to a first-party module;
    None for any other node."""
    if not (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"
    ):
        return None
    if (
        len(node.args) < 2
        or not isinstance(node.args[1], ast.Constant)
        or not isinstance(node.args[1].value, str)
    ):
        return None
    name, base = node.args[1].value, _dotted(node.args[0])
    if base is None or not is_private(name):
        return None
    head, _, rest = base.partition(".")
    if head in modules:
        return modules[head] + (f".{rest}" if rest else ""), name
    if head in dotted_roots:
        return base, name
    return None


def check_file(path: Path, root: Path) -> list[Violation]:
    """All uses of other modules' private names in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    current = module_name(path, root)
    is_package = path.name == "__init__.py"
    found: list[Violation] = []
    # local name -> first-party module it is bound to (``import a.b as m``, ``from a import b``)
    modules: dict[str, str] = {}
    # local top-level names of plain ``import poet_edge.x.y`` (the chain ``poet_edge.x.y._n`` is checked)
    dotted_roots: set[str] = set()

    def add(node: ast.AST, message: str) -> None:
        found.append(Violation(path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1, message))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_first_party(alias.name):
                    continue
                bad = _private_segment(alias.name, current)
                if bad is not None:
                    add(node, f"imports private module `{bad}`")
                if alias.asname is not None:
                    modules[alias.asname] = alias.name
                else:
                    dotted_roots.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_from(node, current, is_package)
            if source is None or not _is_first_party(source):
                continue
            bad = _private_segment(source, current)
            if bad is not None:
                add(node, f"imports from private module `{bad}`")
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if alias.name != "*" and _is_submodule(full, root):
                    modules[alias.asname or alias.name] = full
                    if is_private(alias.name) and not _inside(current, source):
                        add(node, f"imports private module `{full}`")
                elif is_private(alias.name) and source != current:
                    add(node, f"imports private name `{alias.name}` from `{source}`")

    for node in ast.walk(tree):
        patched = _patched_private(node, modules, dotted_roots)
        if patched is not None and patched[0] != current:
            add(node, f"patches private name `{patched[1]}` of `{patched[0]}`")
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        base = _dotted(node.value)
        if base is None:
            continue
        head, _, rest = base.partition(".")
        if head in modules:
            target = modules[head] + (f".{rest}" if rest else "")
        elif head in dotted_roots:
            target = base
        else:
            continue
        if target == current:
            continue
        if _is_submodule(f"{target}.{node.attr}", root) and _inside(current, target):
            continue
        add(node, f"uses private name `{node.attr}` of `{target}`")
    return sorted(found, key=lambda v: (v.line, v.col, v.message))


def python_files(paths: list[Path]) -> Iterator[Path]:
    """The ``.py`` files under ``paths``, in sorted order."""
    for p in paths:
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.py") if ".venv" not in q.parts)
        else:
            yield p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    violations = [v for f in python_files(args.paths) for v in check_file(f, args.root)]
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} use(s) of another module's private names", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
