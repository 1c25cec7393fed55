"""Device profiles: every shipped profile loads and validates; bad files are rejected clearly."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from poet_edge.commands import profiles as profiles_command
from poet_edge.errors import PoetError
from poet_edge.profiles import PROFILES_DIR, format_profile, list_profiles, load_profile

EXPECTED = {"cortex-m0plus", "cortex-m4", "cortex-m7", "cortex-m33", "rpi-a72", "host"}


def test_all_shipped_profiles_load() -> None:
    assert EXPECTED <= set(list_profiles())
    for name in list_profiles():
        p = load_profile(name)
        assert p.name == name
        assert p.mcu.clock_hz > 0 and p.mcu.ram_bytes > 0
        assert p.mcu.source and p.compute.source and p.storage.source


def test_cortex_m4_uses_poet_and_reference_numbers() -> None:
    p = load_profile("cortex-m4")
    assert p.mcu.clock_hz == 64e6 and p.mcu.ram_bytes == 256 * 1024 and p.mcu.flash_bytes == 1024 * 1024
    # calibrated with the fast kernels (fitted instructions x 1.24 cycles per instruction, stated in source)
    # per MAC of a large GEMM (kernel_model weights price smaller shapes): 2.33 instructions on the M4
    assert 2.2 * 1.24 < p.compute.cycles_per_mac_dense < 2.6 * 1.24 and "poet calibrate" in p.compute.source
    s = p.storage
    assert (s.read_latency_s, s.read_throughput_bytes_per_s) == (0.000109, 4.62e6)
    assert (s.write_latency_s, s.write_throughput_bytes_per_s) == (0.000113, 4.44e6)
    assert s.active_power_w == 0.33


def test_unknown_profile_lists_available() -> None:
    with pytest.raises(PoetError) as err:
        load_profile("cortex-m99")
    assert "cortex-m99" in str(err.value) and "cortex-m4" in str(err.value) and "host" in str(err.value)


def test_load_by_path_and_missing_path(tmp_path: Path) -> None:
    assert load_profile(PROFILES_DIR / "host.toml").name == "host"
    with pytest.raises(PoetError, match="not found"):
        load_profile(tmp_path / "nope.toml")


def _write_variant(tmp_path: Path, old: str, new: str) -> Path:
    text = (PROFILES_DIR / "host.toml").read_text()
    assert old in text
    path = tmp_path / "variant.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("clock_hz = 3_000_000_000", "clock_hz = -3", "clock_hz must be positive"),
        ("clock_hz = 3_000_000_000", "clock_mhz = 3000", "unknown key"),
        ("block_bytes = 4_096", "", "missing key(s) block_bytes"),
        ("block_bytes = 4_096", "block_bytes = 4096.5", "must be an integer"),
        ('kind = "ram-disk"', "kind = 3", "must be a string"),
        ("[compute]", "[computer]", "unknown key"),
        ("name = ", "name = = ", "invalid TOML"),
    ],
)
def test_bad_profiles_rejected(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(PoetError) as err:
        load_profile(_write_variant(tmp_path, old, new))
    assert message in str(err.value)


def test_format_profile_shows_units_and_sources() -> None:
    text = format_profile(load_profile("cortex-m4"))
    for piece in ("64 MHz", "256 KiB", "109 us", "4.62 MB/s", "330 mW", "source", "nRF52840"):
        assert piece in text


def test_profiles_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    profiles_command.add_parser(parser.add_subparsers())
    assert profiles_command.run(parser.parse_args(["profiles"])) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in EXPECTED)
    assert profiles_command.run(parser.parse_args(["profiles", "cortex-m7"])) == 0
    assert "216 MHz" in capsys.readouterr().out
    with pytest.raises(PoetError):
        profiles_command.run(parser.parse_args(["profiles", "nope"]))
