"""docs/tutorial.md cannot rot: every `$ poet ...` line of its ```console blocks runs and exits 0, and the
output pasted under it still comes out (lines that vary between runs are skipped)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, need_tools

TUTORIAL = ROOT / "docs" / "tutorial.md"
# Lines that measure the generated code: QEMU's per-step ticks move by one or two, and the instruction count
# and measured RAM change whenever the C kernels do.
UNSTABLE = tuple(map(re.compile, (r"\bticks \d+", r"^instructions per step: ", r"^RAM: measured ")))


@dataclass(frozen=True)
class Example:
    command: str
    output: tuple[str, ...]


def examples(text: str) -> list[Example]:
    out: list[Example] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                current = []
                out.append(Example(line[2:], ()))
                continue
            if current is not None and out:
                out[-1] = Example(out[-1].command, (*out[-1].output, line))
    return out


def expected_lines(ex: Example) -> list[str]:
    return [ln.rstrip() for ln in ex.output if ln.strip() and not any(p.search(ln) for p in UNSTABLE)]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh folder that looks like the repository root (examples/), so build/ outputs land in tmp."""
    d = tmp_path_factory.mktemp("tutorial")
    (d / "examples").symlink_to(ROOT / "examples")
    return d


EXAMPLES = examples(TUTORIAL.read_text())


def test_tutorial_has_the_whole_path() -> None:
    commands = [shlex.split(e.command)[:2] for e in EXAMPLES]
    assert all(c[0] == "poet" for c in commands), "console blocks should only hold poet commands"
    for sub in ("compile", "simulate", "run", "sweep"):
        assert ["poet", sub] in commands
    assert any("qemu-cortex-m4" in e.command for e in EXAMPLES)


def _check(ex: Example, workdir: Path) -> str:
    """ "" if the command exits 0 and prints the pasted lines, else what went wrong."""
    argv = shlex.split(ex.command)
    r = subprocess.run(
        [sys.executable, "-m", "poet_edge", *argv[1:]],
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=600,
    )
    if r.returncode != 0:
        return f"`{ex.command}` exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    got = {ln.rstrip() for ln in r.stdout.splitlines()}
    missing = [ln for ln in expected_lines(ex) if ln not in got]
    if missing:
        return (
            f"docs/tutorial.md is out of date for `{ex.command}`; these lines no longer come "
            f"out:\n" + "\n".join(missing) + "\n--- actual output:\n" + r.stdout
        )
    return ""


def test_tutorial_commands(workdir: Path) -> None:
    """Every command in order, in one test: they build on each other (compile, then simulate and run the
    same folder), so they must not be spread over test workers."""
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    errors = [e for e in (_check(ex, workdir) for ex in EXAMPLES) if e]
    assert not errors, "\n\n".join(errors)
