"""Board ports: build and run tests/target_smoke/ on the host and on every QEMU Cortex-M target.

Locally, a missing toolchain skips these tests with the install command; with CI=true it fails them.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import struct
from pathlib import Path

import pytest

from poet_edge.errors import PoetError
from poet_edge.targets import (
    ARM_INSTALL_HINT,
    BuildResult,
    RunResult,
    Target,
    available_targets,
    build,
    check_toolchain,
    load_target,
    run,
)

SMOKE_DIR = Path(__file__).resolve().parent / "target_smoke"
QEMU_TARGETS = ["qemu-cortex-m4", "qemu-cortex-m7", "qemu-cortex-m33"]
ALL_TARGETS = ["host", *QEMU_TARGETS]
RAM_BYTES = 64 * 1024
TIMEOUT_S = 60.0
SmokeRuns = dict[str, tuple[BuildResult, list[RunResult], Path]]


def _require(name: str) -> Target:
    target = load_target(name)
    try:
        check_toolchain(target)
    except PoetError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"toolchain missing in CI: {exc}")
        pytest.skip(str(exc))
    return target


def _smoke_input() -> bytes:
    rng = random.Random(1234)
    xs = [rng.uniform(-1.0, 1.0) for _ in range(128)]
    return b"".join(struct.pack("<ff", x, 3.0 * x - 1.0 + rng.uniform(-0.1, 0.1)) for x in xs)


def _build_run(
    target: Target, program: str, tmp: Path, ram: int = RAM_BYTES, **kwargs: object
) -> tuple[BuildResult, RunResult]:
    result = build(target, [SMOKE_DIR / program], [], tmp / "build", ram, **kwargs)  # type: ignore[arg-type]
    return result, run(target, result, tmp, TIMEOUT_S)


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> SmokeRuns:
    """smoke.c built once per available target and run twice (for the determinism check)."""
    runs: SmokeRuns = {}
    for name in ALL_TARGETS:
        target = load_target(name)
        try:
            check_toolchain(target)
        except PoetError:
            continue
        cwd = tmp_path_factory.mktemp(name)
        (cwd / "smoke_in.bin").write_bytes(_smoke_input())
        built = build(target, [SMOKE_DIR / "smoke.c"], [], cwd / "build", RAM_BYTES)
        runs[name] = (built, [run(target, built, cwd, TIMEOUT_S) for _ in range(2)], cwd)
    return runs


def _ticks(stdout: str) -> dict[str, int]:
    match = re.search(r"ticks input=(\d+) compute=(\d+) storage=(\d+)", stdout)
    assert match, stdout
    return dict(zip(("input", "compute", "storage"), map(int, match.groups()), strict=True))


# ---- descriptions and toolchain ------------------------------------------------------------------


def test_available_targets() -> None:
    assert set(ALL_TARGETS) <= set(available_targets())


def test_unknown_target_lists_available() -> None:
    with pytest.raises(PoetError, match="qemu-cortex-m4") as info:
        load_target("qemu-cortex-m99")
    assert "unknown target" in str(info.value) and "host" in str(info.value)


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("qemu-cortex-m4", ["-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mthumb"]),
        ("qemu-cortex-m7", ["-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard", "-mthumb"]),
        ("qemu-cortex-m33", ["-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard", "-mthumb"]),
        ("host", []),
    ],
)
def test_target_flags(name: str, flags: list[str]) -> None:
    target = load_target(name)
    assert list(target.cpu_flags) == flags
    for flag in ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"):
        assert flag in target.cflags
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.name = "other"  # type: ignore[misc]


def test_missing_toolchain_says_how_to_install() -> None:
    target = dataclasses.replace(load_target("qemu-cortex-m4"), cc="arm-none-eabi-gcc-not-installed")
    with pytest.raises(PoetError) as info:
        check_toolchain(target)
    assert ARM_INSTALL_HINT in str(info.value)
    assert "arm-none-eabi-gcc-not-installed" in str(info.value)


def test_qemu_rejects_sanitizers_and_oversized_budget(tmp_path: Path) -> None:
    target = _require("qemu-cortex-m4")
    with pytest.raises(PoetError, match="sanitizers"):
        build(target, [SMOKE_DIR / "exit_code.c"], [], tmp_path, RAM_BYTES, sanitize=True)
    with pytest.raises(PoetError, match="RAM budget"):
        build(target, [SMOKE_DIR / "exit_code.c"], [], tmp_path, 1 << 30)


# ---- the smoke program ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_TARGETS)
def test_smoke_passes(name: str, smoke_runs: SmokeRuns) -> None:
    _require(name)
    built, runs, cwd = smoke_runs[name]
    for result in runs:
        assert result.exit_code == 0, result.stdout + result.stderr
        assert f"smoke: target {name}" in result.stdout
    assert (cwd / "smoke_out.bin").stat().st_size == (40 + 2 + 16) * 4
    assert built.sections["text"] > 0 and built.ram_static_bytes > 0


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_smoke_output_bit_identical_to_host(name: str, smoke_runs: SmokeRuns) -> None:
    _require("host")
    _require(name)
    host_out = (smoke_runs["host"][2] / "smoke_out.bin").read_bytes()
    assert (smoke_runs[name][2] / "smoke_out.bin").read_bytes() == host_out
    host_lines = [ln for ln in smoke_runs["host"][1][0].stdout.splitlines() if ln.startswith(("epoch", "w="))]
    qemu_lines = [ln for ln in smoke_runs[name][1][0].stdout.splitlines() if ln.startswith(("epoch", "w="))]
    assert qemu_lines == host_lines


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_ticks_deterministic_and_nonzero(name: str, smoke_runs: SmokeRuns) -> None:
    _require(name)
    first, second = (_ticks(r.stdout) for r in smoke_runs[name][1])
    assert first == second
    assert all(v > 0 for v in first.values()), first


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_memory_accounting(name: str, smoke_runs: SmokeRuns) -> None:
    _require(name)
    built, runs, _ = smoke_runs[name]
    sections = built.sections
    assert built.ram_static_bytes == sections["data"] + sections["bss"] + sections["heap"]
    assert built.ram_static_bytes + sections["stack"] == RAM_BYTES
    match = re.search(r"stack_used=(\d+) stack_size=(\d+) heap_used=(\d+) heap_size=(\d+)", runs[0].stdout)
    assert match, runs[0].stdout
    stack_used, stack_size, heap_used, heap_size = map(int, match.groups())
    assert stack_size == sections["stack"] and heap_size == sections["heap"]
    assert 0 < stack_used < 8192 and 0 < heap_used <= heap_size


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_instructions_per_tick(name: str, tmp_path: Path) -> None:
    target = _require(name)
    _, result = _build_run(target, "tick_calibration.c", tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr
    instructions, ticks = map(int, re.findall(r"=(\d+)", result.stdout))
    assert target.instructions_per_tick
    assert abs(ticks * target.instructions_per_tick - instructions) <= 2 * target.instructions_per_tick


# ---- exit codes, streaming, timeouts -------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_TARGETS)
def test_exit_code_propagates(name: str, tmp_path: Path) -> None:
    target = _require(name)
    _, result = _build_run(target, "exit_code.c", tmp_path)
    assert result.exit_code == 3
    assert "exiting with 3" in result.stdout


@pytest.mark.parametrize("name", ["host", "qemu-cortex-m4"])
def test_defines_reach_the_program(name: str, tmp_path: Path) -> None:
    target = _require(name)
    _, result = _build_run(target, "exit_code.c", tmp_path, defines={"SMOKE_EXIT_CODE": "7"})
    assert result.exit_code == 7


@pytest.mark.parametrize("name", ["host", "qemu-cortex-m4"])
def test_stdout_streams_to_callback(name: str, tmp_path: Path) -> None:
    target = _require(name)
    built = build(target, [SMOKE_DIR / "exit_code.c"], [], tmp_path / "build", RAM_BYTES)
    lines: list[str] = []
    result = run(target, built, tmp_path, TIMEOUT_S, on_line=lines.append)
    assert lines == ["exiting with 3"] and result.exit_code == 3


@pytest.mark.parametrize("name", ["host", "qemu-cortex-m4"])
def test_timeout_kills_program(name: str, tmp_path: Path) -> None:
    target = _require(name)
    built = build(target, [SMOKE_DIR / "spin.c"], [], tmp_path / "build", RAM_BYTES)
    with pytest.raises(PoetError, match="did not finish within 1 s"):
        run(target, built, tmp_path, 1.0)


# ---- RAM budget enforced at link time ------------------------------------------------------------


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_over_budget_fails_at_link_time(name: str, tmp_path: Path) -> None:
    target = _require(name)
    with pytest.raises(PoetError, match=r"region `RAM' overflowed by \d+ bytes"):
        build(target, [SMOKE_DIR / "big_static.c"], [], tmp_path, 32 * 1024)


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_stack_reserve_assert_is_exact(name: str, tmp_path: Path) -> None:
    target = _require(name)
    sources = [SMOKE_DIR / "exit_code.c"]
    static = build(target, sources, [], tmp_path / "probe", RAM_BYTES).ram_static_bytes
    fits = build(target, sources, [], tmp_path / "fits", static + 8192)
    assert fits.sections["stack"] == 8192
    assert run(target, fits, tmp_path, TIMEOUT_S).exit_code == 3
    with pytest.raises(PoetError, match="stack reserve does not fit"):
        build(target, sources, [], tmp_path / "short", static + 8191)
    with pytest.raises(PoetError, match="stack reserve does not fit"):
        build(target, sources, [], tmp_path / "big", static + 8192, stack_reserve_bytes=16384)


@pytest.mark.parametrize("name", QEMU_TARGETS)
def test_stack_high_water_mark(name: str, tmp_path: Path) -> None:
    target = _require(name)
    _, result = _build_run(target, "deep_stack.c", tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr
    used = int(re.search(r"stack_used=(\d+)", result.stdout).group(1))  # type: ignore[union-attr]
    assert 6144 <= used < 6144 + 1024


def test_m33_stack_overflow_faults(tmp_path: Path) -> None:
    """v8-M's MSPLIM turns a stack overflow into a fault (exit 125) instead of silent corruption."""
    target = _require("qemu-cortex-m33")
    sources = [SMOKE_DIR / "deep_stack.c"]
    static = build(target, sources, [], tmp_path / "probe", RAM_BYTES).ram_static_bytes
    built = build(target, sources, [], tmp_path / "small", static + 4096, stack_reserve_bytes=4096)
    result = run(target, built, tmp_path, TIMEOUT_S)
    assert result.exit_code == 125
    assert "poet: fault" in result.stdout + result.stderr


# ---- options -------------------------------------------------------------------------------------


def test_host_sanitizers(tmp_path: Path) -> None:
    target = _require("host")
    (tmp_path / "smoke_in.bin").write_bytes(_smoke_input())
    _, result = _build_run(target, "smoke.c", tmp_path, sanitize=True)
    assert result.exit_code == 0, result.stdout + result.stderr


def test_dwt_ticks_option_builds(tmp_path: Path) -> None:
    """-DPOET_TICKS_DWT is for silicon: it builds and runs, but QEMU's DWT cycle counter reads 0."""
    target = _require("qemu-cortex-m4")
    (tmp_path / "smoke_in.bin").write_bytes(_smoke_input())
    _, result = _build_run(target, "smoke.c", tmp_path, defines={"POET_TICKS_DWT": ""})
    assert result.exit_code == 32  # SMOKE_FAIL_TICKS only: every other check passes


def test_object_cache_reuses_identical_units_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _require("host")
    monkeypatch.setenv("POET_CACHE_DIR", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):  # the same source in two projects (as every generated project copies the runtime)
        d.mkdir()
        (d / "smoke.c").write_bytes((SMOKE_DIR / "smoke.c").read_bytes())
    first = build(target, [a / "smoke.c"], [], a / "build", RAM_BYTES)
    cached = sorted((tmp_path / "cache").iterdir())
    assert len(cached) == 1 + len(target.sources)  # one object per translation unit
    second = build(target, [b / "smoke.c"], [], b / "build", RAM_BYTES)
    assert sorted((tmp_path / "cache").iterdir()) == cached  # nothing compiled again
    assert first.elf.read_bytes() == second.elf.read_bytes()
    build(target, [a / "smoke.c"], [], a / "sanitized", RAM_BYTES, sanitize=True)
    assert len(list((tmp_path / "cache").iterdir())) == 2 * len(cached)  # other flags, other objects
    monkeypatch.setenv("POET_CACHE_DIR", "")
    off = build(target, [a / "smoke.c"], [], a / "uncached", RAM_BYTES)
    assert off.elf.read_bytes() == first.elf.read_bytes()
    assert len(list((tmp_path / "cache").iterdir())) == 2 * len(cached)
