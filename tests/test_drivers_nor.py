"""The board storage drivers (runtime_c/drivers/) on host simulations of NOR flash (tests/nor_sim/): the
STM32F4 internal-flash driver over a simulated flash interface (RM0090 register block) and the SPI NOR
driver over a simulated chip. Programming only clears bits, an erase sets a whole sector to 0xFF, and the
simulators count every protocol violation. Paged tensors make many round trips through the wear-spreading
log, erases are counted per sector, a build that skips the erase must be caught, and a generated training
step pages through each driver with the same parameter bits as through plain RAM."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, need_tools, poet

DRIVERS = ROOT / "runtime_c" / "drivers"
SIM = ROOT / "tests" / "nor_sim"
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"]
INCLUDES = [f"-I{ROOT / 'runtime_c' / 'include'}", f"-I{DRIVERS}", f"-I{SIM}"]
DEVICES = {
    "stm32f4": (
        ["-DSIM_F4", '-DPOET_STM32F4_HOOKS="stm32f4_hooks.h"'],
        [SIM / "stm32f4_sim.c", DRIVERS / "poet_stm32f4_flash.c"],
    ),
    "spi_nor": (["-DSIM_SPI"], [SIM / "spi_nor_sim.c", DRIVERS / "poet_spi_nor.c"]),
}


def build(out: Path, device: str, sources: list[Path], *flags: str, extra_inc: tuple[str, ...] = ()) -> Path:
    defs, dev_sources = DEVICES[device]
    cmd = [
        "gcc",
        *CFLAGS,
        *INCLUDES,
        *extra_inc,
        *defs,
        *flags,
        "-o",
        str(out),
        *map(str, sources),
        str(SIM / "sim_device.c"),
        str(DRIVERS / "poet_nor_log.c"),
        *map(str, dev_sources),
        "-lm",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def counts(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", line))


def run_roundtrip(tmp_path: Path, device: str, *flags: str, steps: int = 200) -> tuple[int, dict[str, str]]:
    exe = build(tmp_path / f"rt_{device}", device, [SIM / "nor_roundtrip.c"], *flags)
    r = subprocess.run([str(exe), str(steps)], capture_output=True, text=True, timeout=120)
    return r.returncode, counts(r.stdout.strip().splitlines()[-1])


def roundtrip_unit_writes(steps: int) -> int:
    """256-byte units nor_roundtrip.c writes: its layout (16-byte aligned tensors, then two 1536-byte
    checkpoint slots on a 256-byte boundary), every tensor each step, a checkpoint slot every 7th step."""
    sizes, top, spans = [3136, 1600, 400, 2048, 1200, 100, 4, 4100, 1296], 0, []
    for n in sizes:
        spans.append((top, n))
        top += -(-n // 16) * 16
    top = -(-top // 256) * 256

    def units(off: int, n: int) -> int:
        return (off + n - 1) // 256 - off // 256 + 1

    per_step = sum(units(o, n) for o, n in spans)
    return steps * per_step + (steps // 7) * units(top, 1536)


# erases per sector after 200 steps of the round trip (deterministic): STM32F4 sectors 8-11 (128 KB,
# 481 slots each), SPI NOR 24 sectors of 4 KB (15 slots each)
EXPECTED_ERASES = {"stm32f4": 26, "spi_nor": 872}


@pytest.mark.parametrize("device", ["stm32f4", "spi_nor"])
def test_paged_tensors_round_trip_with_wear_spread(tmp_path, device):
    need_tools("gcc")
    rc, c = run_roundtrip(tmp_path, device)
    assert rc == 0, c
    assert c["mismatches"] == "0" and c["driver_errors"] == "0"
    assert c["violations"] == "0" and c["bit_violations"] == "0" and c["outside_ok"] == "1"
    assert c["remounts"] == "5"  # the data survived 5 re-mounts from the device alone
    assert int(c["unit_writes"]) == roundtrip_unit_writes(200)
    erases = [int(e) for e in c["erases"].split(",")]
    used = erases[8:] if device == "stm32f4" else erases
    assert sum(erases) == int(c["log_erases"]) == EXPECTED_ERASES[device]
    assert device != "stm32f4" or erases[:8] == [0] * 8  # the firmware's sectors are never erased
    assert min(used) > 0 and max(used) - min(used) <= 1, used  # every sector in turn: wear spread evenly


@pytest.mark.parametrize("device", ["stm32f4", "spi_nor"])
def test_simulator_catches_a_driver_that_skips_the_erase(tmp_path, device):
    need_tools("gcc")
    rc, c = run_roundtrip(tmp_path, device, "-DPOET_NOR_TEST_SKIP_ERASE")
    assert rc != 0
    assert int(c["bit_violations"]) > 0  # programs that needed a 0 bit to become 1
    assert int(c["mismatches"]) + int(c["driver_errors"]) > 0
    assert sum(int(e) for e in c["erases"].split(",")) == 0


def test_generated_step_pages_through_each_driver_bit_identically(tmp_path):
    """dscnn (--train bias, page-all at 128 KB: 7 page-outs, 220 KB of storage) trains 6 steps with its
    storage on simulated STM32F4 flash (sectors 5-11), on simulated SPI NOR (96 sectors) and on a RAM array:
    the same losses and parameter bits; after a re-mount the checkpoint restores them."""
    need_tools("gcc")
    out = tmp_path / "ds"
    r = poet(
        "compile",
        ROOT / "examples" / "zoo" / "dscnn.onnx",
        "--device",
        "cortex-m4",
        "--ram",
        "128KB",
        "--train",
        "bias",
        "--scheduler",
        "page-all",
        "--kernels",
        "reference",
        "--no-report",
        "--no-fused-updates",  # the plain graph: 7 page-outs, 220 KB of storage (the rewrites page less)
        "--no-relu-masks",
        "-o",
        out,
    )
    assert r.returncode == 0, r.stderr
    model_c = (out / "poet_model.c").read_text()
    assert model_c.count("poet_storage_write(") >= 7
    inc = (f"-I{out}", f"-I{out / 'runtime' / 'include'}")
    objs = []
    for src in [out / "poet_model.c", *sorted((out / "runtime" / "src" / "kernels").glob("*.c"))]:
        obj = tmp_path / (src.stem + ".o")
        subprocess.run(["gcc", *CFLAGS, *inc, "-c", str(src), "-o", str(obj)], check=True)
        objs.append(obj)
    main = SIM / "model_main.c"
    ram = tmp_path / "ram"
    subprocess.run(
        ["gcc", *CFLAGS, *INCLUDES, *inc, "-DRAM_STORAGE", "-o", str(ram), str(main), *map(str, objs), "-lm"],
        check=True,
    )
    nor_main = [main, DRIVERS / "poet_storage_nor.c", *objs]
    exes = {
        "stm32f4": build(tmp_path / "f4", "stm32f4", nor_main, "-DSIM_F4_WIDE", extra_inc=inc),
        "spi_nor": build(tmp_path / "spi", "spi_nor", nor_main, "-DSPI_SECTORS=96u", extra_inc=inc),
    }
    ref = subprocess.run([str(ram), "6"], capture_output=True, text=True, timeout=120)
    assert ref.returncode == 0, ref.stdout
    lines = ref.stdout.splitlines()
    trained = next(x for x in lines if x.startswith("trained"))
    assert lines[-3:-1] == ["restore ok", trained.replace("trained", "restored")]
    for device, exe in exes.items():
        got = subprocess.run([str(exe), "6"], capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, (device, got.stdout)
        glines = got.stdout.splitlines()
        assert glines[: len(lines) - 1] == lines[:-1], device  # losses, parameters, restore: the same bits
        c = counts(glines[-1])
        assert c["violations"] == "0" and c["bit_violations"] == "0" and c["outside_ok"] == "1", device
        erases = [int(e) for e in c["erases"].split(",")]
        assert sum(erases) > 0, device  # the step's 220 KB went round the ring


def test_drivers_compile_for_the_stm32f405(tmp_path):
    need_tools("arm-none-eabi-gcc")
    for src in sorted(DRIVERS.glob("*.c")):
        subprocess.run(
            [
                "arm-none-eabi-gcc",
                "-mcpu=cortex-m4",
                "-mthumb",
                "-mfpu=fpv4-sp-d16",
                "-mfloat-abi=hard",
                *CFLAGS,
                "-pedantic",
                f"-I{ROOT / 'runtime_c' / 'include'}",
                f"-I{DRIVERS}",
                "-c",
                str(src),
                "-o",
                str(tmp_path / (src.stem + ".o")),
            ],
            check=True,
        )
