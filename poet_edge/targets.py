"""Board ports: load a target description, check its toolchain, build C sources for it, run the result.

A target is a folder ``targets/<name>/`` with a ``target.toml`` (compiler, CPU flags, memory map, how
to run, tick source), its platform code, and for QEMU boards a linker-script template whose RAM region
is exactly the budget, so a program that does not fit fails at link time.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template
from typing import IO, Any

from poet_edge.errors import PoetError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TARGETS_DIR = Path(__file__).resolve().parent.parent / "targets"
RUNTIME_INCLUDE_DIR = Path(__file__).resolve().parent.parent / "runtime_c" / "include"
# every function and object in its own section: the targets link with --gc-sections (ldflags in target.toml),
# which keeps only what the program reaches
SECTION_FLAGS: tuple[str, ...] = ("-ffunction-sections", "-fdata-sections")
COMMON_CFLAGS: tuple[str, ...] = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off")
COMMON_CFLAGS += SECTION_FLAGS
ARM_INSTALL_HINT = "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
HOST_INSTALL_HINT = "apt-get install gcc binutils"
DEFAULT_STACK_RESERVE_BYTES = 8192
_LD_PATH = re.compile(r"^\S*/ld: ")
_RAM_SHORT = re.compile(r"region .RAM. overflowed|stack reserve does not fit")
_LINK_ERROR_PATTERN = re.compile(r"overflowed|poet:|undefined reference|multiple definition|error:", re.I)


@dataclass(frozen=True)
class Memory:
    """Memory map of a QEMU board (bytes and addresses)."""

    flash_origin: int
    flash_bytes: int
    ram_origin: int
    ram_max_bytes: int
    storage_origin: int
    storage_bytes: int
    heap_bytes: int
    bank1_max_bytes: int = 0  # a second RAM bank for the arena (--ram A+B, section .ccmram); 0: none


@dataclass(frozen=True)
class Target:
    """One board port, as described by ``targets/<name>/target.toml``."""

    name: str
    description: str
    kind: str  # "host" or "qemu"
    directory: Path
    cc: str
    size_tool: str
    nm_tool: str
    cpu_flags: tuple[str, ...]
    ldflags: tuple[str, ...]
    libs: tuple[str, ...]
    sanitize_flags: tuple[str, ...]
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    linker_template: Path | None
    linker_include_dirs: tuple[Path, ...]
    memory: Memory | None
    qemu: str | None
    machine: str | None
    qemu_args: tuple[str, ...]
    fpu: str
    tick_source: str
    ticks_deterministic: bool
    cpu_clock_hz: int | None
    instructions_per_tick: float | None  # e.g. 31.25 on a 32 MHz board (1e9 / 32e6)

    @property
    def is_qemu(self) -> bool:
        return self.kind == "qemu"

    @property
    def cflags(self) -> tuple[str, ...]:
        """CPU flags followed by the flags every target compiles with."""
        return self.cpu_flags + COMMON_CFLAGS


@dataclass(frozen=True)
class BuildResult:
    """A linked program. ``sections`` has text/data/bss/heap bytes (and on QEMU targets ``stack``: the
    RAM left for the stack); ``ram_static_bytes`` is all RAM except the stack (data + bss + heap)."""

    elf: Path
    sections: dict[str, int]
    ram_static_bytes: int
    target: str = ""
    ram_bytes: int = 0
    stack_reserve_bytes: int = 0
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str
    wall_s: float = 0.0


# ---- loading ------------------------------------------------------------------------------------


def available_targets() -> list[str]:
    """Names of all folders under ``targets/`` that have a ``target.toml``."""
    return sorted(p.parent.name for p in TARGETS_DIR.glob("*/target.toml"))


def load_target(name: str) -> Target:
    """Load ``targets/<name>/target.toml``; an unknown name lists the available targets."""
    path = TARGETS_DIR / name / "target.toml"
    if not name or "/" in name or not path.is_file():
        raise PoetError(f"unknown target '{name}'; available targets: {', '.join(available_targets())}")
    with path.open("rb") as f:
        raw = tomllib.load(f)
    try:
        return _target_from_toml(path.parent, raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise PoetError(f"{path}: invalid target description ({exc!r})") from exc


def _target_from_toml(directory: Path, raw: Mapping[str, Any]) -> Target:
    tool, run, ticks = raw["toolchain"], raw["run"], raw["ticks"]

    def paths(key: str, table: Mapping[str, Any] = tool) -> tuple[Path, ...]:
        return tuple((directory / p).resolve() for p in table.get(key, []))

    template = tool.get("linker_template")
    mem = raw.get("memory")
    return Target(
        name=str(raw["name"]),
        description=str(raw.get("description", "")),
        kind=str(raw["kind"]),
        directory=directory,
        cc=str(tool["cc"]),
        size_tool=str(tool["size"]),
        nm_tool=str(tool["nm"]),
        cpu_flags=tuple(tool.get("cpu_flags", [])),
        ldflags=tuple(tool.get("ldflags", [])),
        libs=tuple(tool.get("libs", [])),
        sanitize_flags=tuple(tool.get("sanitize_flags", [])),
        sources=paths("sources"),
        include_dirs=paths("include_dirs"),
        linker_template=(directory / template).resolve() if template else None,
        linker_include_dirs=paths("linker_include_dirs"),
        memory=Memory(**{k: int(v) for k, v in mem.items()}) if mem else None,
        qemu=run.get("qemu"),
        machine=run.get("machine"),
        qemu_args=tuple(run.get("args", [])),
        fpu=str(tool.get("fpu", "")),
        tick_source=str(ticks["source"]),
        ticks_deterministic=bool(ticks.get("deterministic", False)),
        cpu_clock_hz=ticks.get("cpu_clock_hz"),
        instructions_per_tick=_opt_float(ticks.get("instructions_per_tick")),
    )


def _opt_float(value: Any) -> float | None:
    """A TOML number as float (an integer stays exact), or None when absent."""
    return None if value is None else float(value)


# ---- toolchain ----------------------------------------------------------------------------------


def check_toolchain(target: Target) -> None:
    """Raise PoetError, saying how to install them, if the compiler, binutils, newlib or QEMU are missing."""
    problem = _toolchain_problem(target)
    if problem:
        hint = ARM_INSTALL_HINT if target.is_qemu else HOST_INSTALL_HINT
        raise PoetError(f"target {target.name}: {problem}. Install with: sudo {hint}")


@cache
def _toolchain_problem(target: Target) -> str:
    tools = [target.cc, target.size_tool, target.nm_tool] + ([target.qemu] if target.qemu else [])
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH"
    if target.is_qemu and not _has_rdimon(target):
        return f"newlib's semihosting library (rdimon.specs, librdimon.a) not found for {target.cc}"
    return ""


def _has_rdimon(target: Target) -> bool:
    for name in ("rdimon.specs", "librdimon.a"):
        out = subprocess.run(
            [target.cc, *target.cpu_flags, f"-print-file-name={name}"], capture_output=True, text=True
        )
        if not Path(out.stdout.strip()).is_absolute():
            return False
    return True


# ---- build --------------------------------------------------------------------------------------


def build(
    target: Target,
    sources: list[Path],
    include_dirs: list[Path],
    out_dir: Path,
    ram_bytes: int,
    defines: Mapping[str, str] | None = None,
    sanitize: bool = False,
    stack_reserve_bytes: int = DEFAULT_STACK_RESERVE_BYTES,
    heap_bytes: int | None = None,
    bank1_bytes: int = 0,
) -> BuildResult:
    """Compile and link ``sources`` with the target's platform code into ``out_dir``.

    On QEMU targets the RAM region is exactly ``ram_bytes`` and must hold .data, .bss, the heap
    (``heap_bytes``, default from target.toml) and at least ``stack_reserve_bytes`` of stack; if not,
    the linker's error is raised as PoetError. On the host, ``ram_bytes`` is recorded only.
    A define with an empty value is passed as ``-DNAME``. ``bank1_bytes``: the second RAM bank's budget
    (--ram A+B; ``ram_bytes`` is then the first bank's), the length of the linker region that holds
    section .ccmram on a target with a second bank; its bytes are ``sections["bank1"]``.
    """
    check_toolchain(target)
    _check_build_args(target, ram_bytes, sanitize, stack_reserve_bytes)
    if bank1_bytes and target.memory is not None and not 0 < bank1_bytes <= target.memory.bank1_max_bytes:
        raise PoetError(
            f"a second RAM bank of {bank1_bytes} bytes: target {target.name} has "
            + (f"{target.memory.bank1_max_bytes} bytes there" if target.memory.bank1_max_bytes else "none")
        )
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    elf = out_dir / ("program" if not target.is_qemu else "program.elf")
    flags = [
        *target.cflags,
        *(target.sanitize_flags if sanitize else ()),
        f'-DPOET_TARGET_NAME="{target.name}"',
        *_define_args(defines or {}),
        *(f"-I{d}" for d in [*include_dirs, RUNTIME_INCLUDE_DIR, *target.include_dirs]),
    ]
    objects = [_object(target, flags, Path(src), out_dir / "obj") for src in [*sources, *target.sources]]

    def link(folder: Path, ram: int) -> list[str]:
        """The link command of a program in ``folder`` whose (first) RAM region is ``ram`` bytes."""
        folder.mkdir(parents=True, exist_ok=True)
        return [
            target.cc,
            *target.cflags,
            *(target.sanitize_flags if sanitize else ()),
            *(str(o) for o in objects),
            *target.ldflags,
            *_link_args(target, folder, ram, stack_reserve_bytes, heap_bytes, bank1_bytes),
            "-o",
            str(folder / elf.name),
            *target.libs,
        ]

    cmd = link(out_dir, ram_bytes)
    try:
        _run_compiler(target, cmd)
    except PoetError as e:  # the program does not fit: say by how much
        if target.memory is None or not _RAM_SHORT.search(str(e)):
            raise
        short = _ram_shortfall(target, link, out_dir / "ram-measure", ram_bytes, stack_reserve_bytes, str(e))
        raise PoetError(short) from None
    sections = _section_sizes(target, elf)
    ram_static = sections["data"] + sections["bss"] + sections["heap"]
    return BuildResult(elf, sections, ram_static, target.name, ram_bytes, stack_reserve_bytes, tuple(cmd))


def _ram_shortfall(
    target: Target,
    link: Callable[[Path, int], list[str]],
    probe: Path,
    ram_bytes: int,
    stack: int,
    error: str,
) -> str:
    """``error`` (a link that did not fit the RAM region) with the RAM the program needs: the same objects
    linked again (``link(folder, ram)``: the link command) in ``probe`` into the target's whole RAM."""
    assert target.memory is not None
    try:
        cmd = link(probe, target.memory.ram_max_bytes)
        _run_compiler(target, cmd)
        s = _section_sizes(target, Path(cmd[cmd.index("-o") + 1]))
    except (PoetError, subprocess.CalledProcessError, KeyError):
        return error
    need = s["data"] + s["bss"] + s["heap"] + stack
    head, _, tail = error.partition("\n")
    return (
        f"{head}\nthe program needs {need} bytes of RAM (.data {s['data']} + .bss {s['bss']} + heap "
        f"{s['heap']} + stack reserve {stack}); its RAM budget is {ram_bytes} bytes, {need - ram_bytes} short"
        f"\n{tail}"
    )


def cache_dir() -> Path | None:
    """Where compiled objects are kept between builds: $POET_CACHE_DIR, else ~/.cache/poet-edge/objects
    ($XDG_CACHE_HOME honoured); POET_CACHE_DIR set to an empty string turns the cache off."""
    env = os.environ.get("POET_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "poet-edge" / "objects"


@cache
def _compiler_identity(cc: str) -> str:
    proc = subprocess.run([cc, "--version"], capture_output=True, text=True)
    return f"{shutil.which(cc)}\n{proc.stdout}"


def _object(target: Target, flags: list[str], src: Path, obj_dir: Path) -> Path:
    """Compile one translation unit. The object is looked up in (and stored to) :func:`cache_dir` under
    the hash of the compiler's identity, the flags and the preprocessed source, so the same kernel file
    copied into many projects is compiled once (the object is the same as a fresh compile's)."""
    obj_dir.mkdir(parents=True, exist_ok=True)
    local = obj_dir / f"{src.stem}-{hashlib.sha256(str(src).encode()).hexdigest()[:8]}.o"
    store = cache_dir()
    if store is None:
        _run_compiler(target, [target.cc, *flags, "-c", str(src), "-o", str(local)])
        return local
    pre = subprocess.run([target.cc, *flags, "-E", "-P", str(src)], capture_output=True)
    if pre.returncode != 0:  # the real compile reports the error
        _run_compiler(target, [target.cc, *flags, "-c", str(src), "-o", str(local)])
        return local
    key = hashlib.sha256()  # -I paths differ per project; what they bring in is in the preprocessed text
    for part in (_compiler_identity(target.cc), "\0".join(f for f in flags if not f.startswith("-I"))):
        key.update(part.encode() + b"\0")
    key.update(pre.stdout)
    cached = store / f"{key.hexdigest()}.o"
    if not cached.is_file():
        store.mkdir(parents=True, exist_ok=True)
        _run_compiler(target, [target.cc, *flags, "-c", str(src), "-o", str(local)])
        tmp = store / f".{cached.name}.{os.getpid()}.{threading.get_ident()}"
        shutil.copyfile(local, tmp)
        os.replace(tmp, cached)  # atomic: parallel builds never see half an object
        return local
    shutil.copyfile(cached, local)
    return local


def check_storage(target: Target, storage_bytes: int) -> None:
    """Raise PoetError when a plan pages through more storage than ``target`` has (the generated code
    would see its storage writes fail; the STM32F405 target, for one, has only 64 KiB under QEMU)."""
    if target.memory is not None and storage_bytes > target.memory.storage_bytes:
        raise PoetError(
            f"the plan pages through {storage_bytes} bytes of storage; target {target.name} has "
            f"{target.memory.storage_bytes} bytes: use a larger --ram or another target"
        )


def _check_build_args(target: Target, ram_bytes: int, sanitize: bool, stack_reserve_bytes: int) -> None:
    if stack_reserve_bytes < 0:
        raise PoetError(f"stack reserve must be >= 0 bytes, got {stack_reserve_bytes}")
    if sanitize and target.is_qemu:
        raise PoetError(f"sanitizers are only available on the host target, not {target.name}")
    if target.memory and not 0 < ram_bytes <= target.memory.ram_max_bytes:
        raise PoetError(
            f"RAM budget {ram_bytes} bytes is outside what {target.name} has "
            f"(1 .. {target.memory.ram_max_bytes} bytes)"
        )


def _define_args(defines: Mapping[str, str]) -> list[str]:
    return [f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in defines.items()]


def _link_args(
    target: Target,
    out_dir: Path,
    ram_bytes: int,
    stack_reserve: int,
    heap_bytes: int | None,
    bank1_bytes: int = 0,
) -> list[str]:
    if target.linker_template is None or target.memory is None:
        return []
    heap = target.memory.heap_bytes if heap_bytes is None else heap_bytes
    if heap < 0 or heap % 8:
        raise PoetError(f"heap size must be a non-negative multiple of 8 bytes, got {heap}")
    script = out_dir / "link.ld"
    text = Template(target.linker_template.read_text()).substitute(
        ram_bytes=ram_bytes, heap_bytes=heap, stack_reserve_bytes=stack_reserve, bank1_bytes=bank1_bytes
    )
    script.write_text(text)
    dirs = [f"-L{d}" for d in target.linker_include_dirs]
    return ["-T", str(script), *dirs, f"-Wl,-Map={out_dir / 'program.map'}"]


def _run_compiler(target: Target, cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    output = (proc.stderr + proc.stdout).strip()
    lines = output.splitlines()
    key = [_LD_PATH.sub("ld: ", line.strip()) for line in lines if _LINK_ERROR_PATTERN.search(line)]
    summary = "; ".join(dict.fromkeys(key[:6])) or "compiler failed"
    tail = "\n".join(lines[-40:])
    raise PoetError(f"build for target {target.name} failed: {summary}\n{tail}")


def _section_sizes(target: Target, elf: Path) -> dict[str, int]:
    """Bytes of text (code + constants in flash), data, bss, heap, and (QEMU) the stack area.

    On QEMU targets the RAM numbers come from the linker script's symbols, so they include
    alignment padding and sum exactly to the RAM below the stack; text/data/bss on the host come
    from Berkeley ``size``.
    """
    out = subprocess.run([target.size_tool, "-B", str(elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in out.stdout.splitlines()[1].split()[:3])
    if target.memory is None:
        return {"text": text, "data": data, "bss": bss, "heap": 0}
    sym = _symbols(target, elf)
    ram = {
        "data": sym["__poet_bss_start"] - target.memory.ram_origin,
        "bss": sym["__poet_heap_start"] - sym["__poet_bss_start"],
        "heap": sym["__poet_stack_limit"] - sym["__poet_heap_start"],
        "stack": sym["__poet_stack_top"] - sym["__poet_stack_limit"],
    }
    if "__poet_bank1_start" in sym:  # the second RAM bank (section .ccmram)
        ram["bank1"] = sym["__poet_bank1_end"] - sym["__poet_bank1_start"]
    return {"text": text + data - (sym["__poet_data_end"] - sym["__poet_data_start"]), **ram}


def _symbols(target: Target, elf: Path) -> dict[str, int]:
    out = subprocess.run([target.nm_tool, str(elf)], capture_output=True, text=True, check=True)
    symbols: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("__poet_"):
            symbols[parts[2]] = int(parts[0], 16)
    return symbols


# ---- run ----------------------------------------------------------------------------------------


def run_command(target: Target, elf: Path) -> list[str]:
    """The command line that runs ``elf`` on ``target`` (QEMU with semihosting, or the program itself)."""
    if not target.is_qemu:
        return [str(Path(elf).resolve())]
    assert target.qemu and target.machine
    return [target.qemu, "-M", target.machine, *target.qemu_args, "-kernel", str(Path(elf).resolve())]


def run(
    target: Target,
    build: BuildResult,
    cwd: Path,
    timeout_s: float,
    on_line: Callable[[str], None] | None = None,
) -> RunResult:
    """Run a built program with ``cwd`` as its working directory (semihosting files are relative to it).

    ``on_line`` receives each stdout line (without newline) as it arrives. A run longer than
    ``timeout_s`` seconds of wall-clock time is killed and raised as PoetError.
    """
    check_toolchain(target)
    cmd = run_command(target, build.elf)
    start = time.monotonic()
    # stdin is not inherited: QEMU -nographic would switch a terminal to raw mode.
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_run_env()
    )
    out_lines: list[str] = []
    err_chunks: list[str] = []
    readers = [
        threading.Thread(target=_pump_lines, args=(proc.stdout, out_lines, on_line), daemon=True),
        threading.Thread(target=_pump_lines, args=(proc.stderr, err_chunks, None), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        exit_code = proc.wait(timeout=timeout_s)
    except BaseException as e:  # the time limit, or a signal (cli.Interrupted): the program must end too
        proc.kill()
        proc.wait()
        _join(readers)
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        tail = "".join(out_lines[-5:]).strip()
        raise PoetError(
            f"{target.name}: program did not finish within {timeout_s:g} s and was killed; "
            f"last output: {tail or '(none)'}"
        ) from None
    _join(readers)
    return RunResult(exit_code, "".join(out_lines), "".join(err_chunks), time.monotonic() - start)


def _run_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    return env


def _pump_lines(stream: IO[bytes] | None, sink: list[str], on_line: Callable[[str], None] | None) -> None:
    if stream is None:
        return
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        sink.append(line)
        if on_line is not None:
            on_line(line.rstrip("\r\n"))
    stream.close()


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=5.0)
