"""The generated project's CMake build: from a clean folder, the STM32F405 bare-metal image with
arm-none-eabi-gcc (cmake/arm-none-eabi.cmake; the storage drivers and poet_train_step linked, vector table
at 0x08000000, RAM within the 128 KB SRAM) and the host build with plain cmake (library + harness)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from conftest import ROOT, need_tools, poet


def cmake(*args: str | Path, cwd: Path) -> None:
    r = subprocess.run(["cmake", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_stm32f405_project_builds_with_cmake_for_the_board_and_the_host(tmp_path):
    need_tools("cmake", "gcc", "arm-none-eabi-gcc", "arm-none-eabi-nm")
    out = tmp_path / "out"
    r = poet(
        "compile",
        ROOT / "examples" / "mlp.onnx",
        "--device",
        "cortex-m4",
        "--ram",
        "128KB",
        "--no-report",
        "-o",
        out,
    )
    assert r.returncode == 0, r.stderr
    for f in (
        "CMakeLists.txt",
        "cmake/arm-none-eabi.cmake",
        "examples/bare_metal/main.c",
        "drivers/poet_nor_log.c",
    ):
        assert (out / f).is_file(), f
    src = tmp_path / "clean" / "project"  # a copy somewhere else: nothing refers back to the compile folder
    shutil.copytree(out, src)

    arm = tmp_path / "build-arm"
    cmake(
        "-S", src, "-B", arm, f"-DCMAKE_TOOLCHAIN_FILE={src / 'cmake' / 'arm-none-eabi.cmake'}", cwd=tmp_path
    )
    cmake("--build", arm, "-j", "2", cwd=tmp_path)
    elf, binary = arm / "poet_example.elf", arm / "poet_example.bin"
    assert elf.is_file() and binary.is_file()
    nm = subprocess.run(
        ["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True, check=True
    ).stdout
    syms = {
        m[3]: (int(m[0], 16), int(m[1] or "0", 16))
        for m in re.findall(r"^(\w+) (?:(\w+) )?(\w) (\S+)$", nm, re.M)
    }
    for name in (
        "poet_train_step",
        "poet_checkpoint_restore",
        "poet_nor_log_mount",
        "poet_stm32f4_flash_device",
        "poet_storage_write",
        "Reset_Handler",
    ):
        assert name in syms, name
    assert syms["poet_vectors"][0] == 0x08000000  # the vector table where the STM32 boots from
    assert 0x08000000 <= syms["Reset_Handler"][0] < 0x08080000  # code in sectors 0-7, 8-11 left to storage
    assert syms["_estack"][0] == 0x20020000
    ram_end = syms["_ebss"][0]
    assert 0x20000000 < ram_end <= 0x20020000 - 2048
    assert syms["poet_arena"][1] > 0 and 0x20000000 <= syms["poet_arena"][0] < ram_end
    assert binary.stat().st_size < 512 * 1024
    header = (out / "poet_model.h").read_text()
    assert int(re.search(r"POET_PREDICTED_RAM_BYTES (\d+)u", header)[1]) <= 128 * 1024

    host = tmp_path / "build-host"
    cmake("-S", src, "-B", host, cwd=tmp_path)
    cmake("--build", host, "-j", "2", cwd=tmp_path)
    for f in ("libpoet_model.a", "libpoet_drivers.a", "poet_train"):
        assert (host / f).is_file(), f


def test_board_files_are_deterministic_and_follow_the_core(tmp_path):
    from poet_edge.codegen.emit import board_files

    a, b = board_files("cortex-m4"), board_files("cortex-m4")
    assert a == b
    assert a["drivers/poet_nor_log.c"] == (ROOT / "runtime_c" / "drivers" / "poet_nor_log.c").read_text()
    assert '"-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard"' in a["cmake/arm-none-eabi.cmake"]
    assert 'POET_BOARD "stm32f405"' in a["cmake/arm-none-eabi.cmake"]
    m3 = board_files("cortex-m3")["cmake/arm-none-eabi.cmake"]
    assert "-mfloat-abi=soft" in m3 and 'POET_BOARD ""' in m3
