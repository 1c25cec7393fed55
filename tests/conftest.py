"""Shared fixtures. Tests that need a toolchain fail under CI=true when it is missing, skip locally."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

INSTALL_HINT = "install with: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        msg = f"missing {', '.join(missing)}; {INSTALL_HINT}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def need_module(module: str, hint: str) -> None:
    """Like :func:`need_tools`, for a Python package an extra installs (``hint``: how to install it)."""
    if importlib.util.find_spec(module) is None:
        msg = f"{module} is not installed: {hint}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def poet(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the real command line in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "poet_edge", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=900,
    )


@pytest.fixture
def mlp_path() -> Path:
    return EXAMPLES / "mlp.onnx"
