"""Where the non-Python parts of poet-edge live (the package is installed editable from the checkout), and
how an output folder is written (atomically, crash-safe, never deleting a user's files)."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from poet_edge.errors import PoetError

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_C = ROOT / "runtime_c"
PROFILES = ROOT / "profiles"
TARGETS = ROOT / "targets"
EXAMPLES = ROOT / "examples"


# ---- output folders ----------------------------------------------------------------------------------
# `poet compile -o OUT` writes the whole project into a hidden sibling ``.OUT.tmp-<pid>-<random>`` and
# swaps it in: OUT is renamed to ``.OUT.old-<pid>-<random>``, the new folder to OUT, the old one removed.
# A crash between those steps (a signal, a power cut) leaves hidden siblings; the next compile into OUT
# removes those whose process is gone. OUT lists the top-level entries poet wrote in MANIFEST; a
# recompile refuses to replace an OUT holding anything else (a file a user added there is never
# deleted), except `poet run`'s work folders (run-*, poet's too). A folder written before MANIFEST
# existed counts as poet's entirely.

MANIFEST = ".poet-files"
PLAN_FILE = "plan.json"  # what makes a folder a poet output folder
POET_WORK = "run-"  # prefix of `poet run`'s work folders inside OUT


def _siblings(out: Path) -> list[Path]:
    """Hidden leftovers of earlier swaps into ``out`` (see above)."""
    if not out.parent.is_dir():
        return []
    return sorted(p for kind in ("tmp", "old") for p in out.parent.glob(f".{glob.escape(out.name)}.{kind}-*"))


def _alive(leftover: Path) -> bool:
    """Whether the process that made ``leftover`` (its name's pid) still runs; unknown names: not."""
    pid = leftover.name.rsplit("-", 2)[-2] if leftover.name.count("-") >= 2 else ""
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clean_leftovers(out: Path) -> list[Path]:
    """Removes the hidden leftovers of interrupted swaps into ``out``; returns them."""
    gone = [p for p in _siblings(out.resolve()) if not _alive(p)]
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def user_entries(out: Path) -> list[str]:
    """The top-level entries of the poet folder ``out`` that poet did not write (sorted)."""
    listed = out / MANIFEST
    if not listed.is_file():
        return []
    ours = set(listed.read_text().split("\n"))
    return sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(POET_WORK))


def check_output(out: Path) -> None:
    """The cheap checks of ``-o OUT``, before any work: OUT must be a poet output folder holding only
    poet's files, or not exist with its nearest existing ancestor a writable folder."""
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise PoetError(f"-o {out}: a file is there, not a folder")
    if out.is_dir():
        if any(out.iterdir()) and not (out / PLAN_FILE).is_file():
            raise PoetError(f"{out} exists and is not a poet-edge output folder; refusing to overwrite it")
        mine = user_entries(out)
        if mine:
            raise PoetError(
                f"-o {out} holds files poet did not write ({', '.join(mine[:5])}"
                f"{', ...' if len(mine) > 5 else ''}); move them away or choose another -o, "
                "a recompile replaces the whole folder"
            )
    base = out.parent
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise PoetError(f"-o {out}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise PoetError(f"-o {out}: cannot write in {base} (permission denied or a read-only file system)")


@contextmanager
def atomic_dir(out: Path, entries: Iterable[str]) -> Iterator[Path]:
    """Yields a temporary folder next to ``out``; on success it replaces ``out`` (with MANIFEST listing
    ``entries``, the top-level names written), on error or a signal it vanishes."""
    out = Path(out).resolve()
    check_output(out)
    clean_leftovers(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-"
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{tag}", dir=out.parent))
    try:
        (tmp / MANIFEST).write_text("\n".join(sorted({*entries, MANIFEST})) + "\n")
        yield tmp
        old = out.with_name(f".{out.name}.old-{tag}{tmp.name[-8:]}")
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_project(out: Path, files: Mapping[str, str | bytes | Path]) -> None:
    """Writes ``files`` (relative path -> text, bytes, or a file to copy) as the folder ``out``."""
    with atomic_dir(out, {rel.split("/")[0] for rel in files}) as tmp:
        for rel, content in sorted(files.items()):
            dest = tmp / rel
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, Path):
                    shutil.copyfile(content, dest)
                elif isinstance(content, bytes):
                    dest.write_bytes(content)
                else:
                    dest.write_text(content)
            except OSError as e:  # a full disk, a file-size limit, a file system gone read-only
                raise PoetError(f"-o {Path(out).resolve()}: cannot write {rel}: {e.strerror or e}") from None


def check_file_target(option: str, path: Path | None) -> None:
    """A file an option will write later (``--json``, ``--dump-params``): checked before the work, so a
    missing folder or a folder in its place is one error up front, not a failure after the work."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise PoetError(f"{option} {path}: a folder is there, not a file")
    if not path.parent.is_dir():
        raise PoetError(f"{option} {path}: no folder {path.parent}")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise PoetError(f"{option} {path}: cannot write in {path.parent}")
