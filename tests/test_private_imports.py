"""tools/check_private_imports.py (run by ``make lint``): no module of poet_edge (or bench/, tests/) uses
another module's private names, and no test patches one. The checker is run on the real tree (it must
pass) and on a small package written here with one violation of each kind it knows, and the allowed uses
next to them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "tools" / "check_private_imports.py"


def _check(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_package_uses_no_private_name_of_another_module() -> None:
    run = _check("poet_edge", "bench", "tests")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == ""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_every_kind_of_violation_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "poet_edge/__init__.py": "",
            "poet_edge/a.py": "_x = 1\nX = 2\n__all__ = ['X']\n\n\ndef _f():\n    return _x\n",
            "poet_edge/pkg/__init__.py": "",
            "poet_edge/pkg/_impl.py": "Y = 1\n",
            "poet_edge/pkg/inner.py": "from poet_edge.pkg import _impl\nfrom . import _impl as again\n",
            "poet_edge/ok.py": (
                "import sys\n"
                "from poet_edge import a\n"
                "from poet_edge.a import X, __all__\n"
                "print(a.X, a.__all__, sys._getframe, X, __all__)\n"
            ),
            "poet_edge/bad.py": (
                "from poet_edge.a import (\n"
                "    X,\n"
                "    _x,\n"
                ")\n"
                "from .a import _f\n"
                "import poet_edge.a\n"
                "import poet_edge.a as alias\n"
                "from poet_edge import a\n"
                "from poet_edge.pkg import _impl\n"
                "import poet_edge.pkg._impl\n"
                "\n"
                "\n"
                "def g():\n"
                "    from poet_edge import a as late\n"
                "    return late._f, alias._x, a._f(), poet_edge.a._x, X, _x\n"
            ),
        },
    )
    run = _check("--root", tmp_path, tmp_path / "poet_edge", cwd=tmp_path)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert all(line.startswith(str(tmp_path / "poet_edge" / "bad.py")) for line in lines), lines
    found = sorted(line.split(": ", 1)[1] for line in lines)
    assert found == sorted(
        [
            "imports private name `_x` from `poet_edge.a`",  # the parenthesised import over four lines
            "imports private name `_f` from `poet_edge.a`",  # relative
            "imports private module `poet_edge.pkg._impl`",
            "imports private module `poet_edge.pkg._impl`",
            "uses private name `_f` of `poet_edge.a`",  # late._f, a function-level import
            "uses private name `_x` of `poet_edge.a`",  # alias._x
            "uses private name `_f` of `poet_edge.a`",  # a._f()
            "uses private name `_x` of `poet_edge.a`",  # poet_edge.a._x
        ]
    )
    assert [line.split(":")[1] for line in lines if "from `poet_edge.a`" in line] == ["1", "5"]
    assert "8 use(s)" in run.stderr


def test_a_private_name_reached_through_another_modules_import_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "poet_edge/__init__.py": "",
            "poet_edge/gemm.py": "def _mnk():\n    return 1\n",
            "poet_edge/fused.py": "from poet_edge import gemm\n\nM = gemm.__name__\n",
            "poet_edge/user.py": "from poet_edge import fused\n\nprint(fused.gemm._mnk())\n",
        },
    )
    run = _check("--root", tmp_path, tmp_path / "poet_edge", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        f"{tmp_path / 'poet_edge' / 'user.py'}:3:7: uses private name `_mnk` of `poet_edge.fused.gemm`"
    ]


def test_a_test_patching_a_private_name_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "poet_edge/__init__.py": "",
            "poet_edge/a.py": "_LIMIT = 1\nLIMIT = 2\n",
            "tests/test_a.py": (
                "import os\n"
                "from poet_edge import a\n"
                "import poet_edge.a as alias\n"
                "\n"
                "\n"
                "def test_x(monkeypatch):\n"
                "    monkeypatch.setattr(a, '_LIMIT', 3)\n"
                "    monkeypatch.setattr(alias, '_LIMIT', 3)\n"
                "    monkeypatch.setattr(a, 'LIMIT', 3)\n"
                "    monkeypatch.setattr(os, '_exit', None)\n"
                "    monkeypatch.setattr(a, name, 3)\n"
            ),
        },
    )
    run = _check("--root", tmp_path, tmp_path / "tests", cwd=tmp_path)
    assert run.returncode == 1
    found = [line.split(": ", 1)[1] for line in run.stdout.splitlines()]
    assert found == ["patches private name `_LIMIT` of `poet_edge.a`"] * 2, found
