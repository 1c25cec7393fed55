"""Device profiles: one TOML file per device in ``profiles/`` (schema in ``profiles/cortex-m4.toml``).

Every number carries its unit in its name and every section has a ``source`` string saying where
its numbers come from. :func:`load_profile` validates a file completely (missing, unknown, negative
or mistyped keys are errors) and returns a frozen :class:`Profile`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poet_edge.errors import PoetError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,unused-ignore]

PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"


@dataclass(frozen=True)
class Mcu:
    """The processor and its memories.

    ``ram_reserve_bytes`` is RAM kept for stack and runtime and counted against the budget;
    ``active_power_w`` is the whole MCU's power while it runs a kernel or waits on a transfer."""

    core: str
    clock_hz: float
    ram_bytes: int
    flash_bytes: int
    ram_reserve_bytes: int
    active_power_w: float
    source: str


@dataclass(frozen=True)
class ComputeModel:
    """Cycles per unit of work for each :class:`poet_edge.work.OpClass`, plus a fixed cost per call
    (``cycles_per_call_conv`` for convolutions, whose set-up costs far more; ``cycles_per_call`` else).

    MAC-priced classes: dense, conv, depthwise. Element-priced: elementwise, reduce, loss, update.
    Copy is priced per byte written."""

    cycles_per_mac_dense: float
    cycles_per_mac_conv: float
    cycles_per_mac_depthwise: float
    cycles_per_element_elementwise: float
    cycles_per_element_reduce: float
    cycles_per_byte_copy: float
    cycles_per_element_loss: float
    cycles_per_element_update: float
    cycles_per_call: float  # fixed cost of a kernel call
    cycles_per_call_conv: float  # fixed cost of a conv/depthwise call (window and border set-up)
    source: str


@dataclass(frozen=True)
class Storage:
    """The paging storage (SD card, external or internal flash).

    A transfer costs its latency plus its bytes rounded up to ``block_bytes`` over the throughput;
    writes add ``erase_time_s`` per erase block written (0 when the device hides erases, like SD
    cards). ``endurance_cycles`` is the erase cycles each erase block survives."""

    kind: str
    capacity_bytes: int
    read_latency_s: float
    read_throughput_bytes_per_s: float
    write_latency_s: float
    write_throughput_bytes_per_s: float
    block_bytes: int
    erase_bytes: int
    erase_time_s: float
    endurance_cycles: int
    active_power_w: float
    source: str


@dataclass(frozen=True)
class Profile:
    """A device: its MCU, its compute cost model and its paging storage."""

    name: str
    description: str
    mcu: Mcu
    compute: ComputeModel
    storage: Storage
    path: str = ""


_SECTIONS: dict[str, type] = {"mcu": Mcu, "compute": ComputeModel, "storage": Storage}
_POSITIVE = {
    "clock_hz",
    "ram_bytes",
    "block_bytes",
    "erase_bytes",
    "endurance_cycles",
    "capacity_bytes",
    "read_throughput_bytes_per_s",
    "write_throughput_bytes_per_s",
}


def list_profiles(directory: Path | None = None) -> list[str]:
    """Names of the profiles shipped in ``directory`` (default: the project's ``profiles/``)."""
    folder = PROFILES_DIR if directory is None else directory
    return sorted(p.stem for p in folder.glob("*.toml"))


def resolve_profile(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    candidate = Path(text)
    if text.endswith(".toml") or "/" in text or "\\" in text:
        if candidate.is_file():
            return candidate
        raise PoetError(f"profile file not found: {text}")
    path = PROFILES_DIR / f"{text}.toml"
    if path.is_file():
        return path
    raise PoetError(f"unknown device profile '{text}'; available: {', '.join(list_profiles())}")


def _field_value(where: str, f: dataclasses.Field[Any], value: Any) -> Any:
    want = f.type if isinstance(f.type, str) else f.type.__name__
    if want == "str":
        if not isinstance(value, str):
            raise PoetError(f"{where}.{f.name} must be a string")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PoetError(f"{where}.{f.name} must be a number")
    if not math.isfinite(value):
        raise PoetError(f"{where}.{f.name} is {value}; it must be a finite number")
    if value < 0 or (f.name in _POSITIVE and value == 0):
        raise PoetError(f"{where}.{f.name} must be {'positive' if f.name in _POSITIVE else '>= 0'}")
    if want == "int":
        if value != int(value):
            raise PoetError(f"{where}.{f.name} must be an integer")
        return int(value)
    return float(value)


def _build(cls: type, where: str, table: Any) -> Any:
    if not isinstance(table, dict):
        raise PoetError(f"{where} must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    missing = sorted(set(fields) - set(table))
    if unknown:
        raise PoetError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise PoetError(f"{where}: missing key(s) {', '.join(missing)}")
    return cls(**{k: _field_value(where, f, table[k]) for k, f in fields.items()})


def profile_from_dict(data: dict[str, Any], where: str = "profile") -> Profile:
    """Validate a parsed TOML document and build the :class:`Profile`."""
    top = {"name", "description", *_SECTIONS}
    unknown = sorted(set(data) - top)
    missing = sorted(top - set(data))
    if unknown:
        raise PoetError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise PoetError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("name", "description"):
        if not isinstance(data[key], str):
            raise PoetError(f"{where}: {key} must be a string")
    parts = {key: _build(cls, f"{where} [{key}]", data[key]) for key, cls in _SECTIONS.items()}
    return Profile(name=data["name"], description=data["description"], path="", **parts)


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a profile by name (``cortex-m4``) or by path to a ``.toml`` file."""
    path = resolve_profile(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PoetError(f"{path}: invalid TOML: {exc}") from exc
    return dataclasses.replace(profile_from_dict(data, str(path)), path=str(path))


def _si(value: float, unit: str) -> str:
    prefixes = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
    for factor, prefix in prefixes:
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _bytes(n: int) -> str:
    for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n} B ({n / factor:.4g} {unit})"
    return f"{n} B"


def _pretty(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if key.endswith("_bytes"):
        return _bytes(int(value))
    units = (("_hz", "Hz"), ("_power_w", "W"), ("_s", "s"), ("_bytes_per_s", "B/s"))
    for suffix, unit in sorted(units, key=lambda u: -len(u[0])):
        if key.endswith(suffix):
            return _si(float(value), unit)
    return f"{value:g}"


def format_profile(p: Profile) -> str:
    """Human-readable listing of a profile, every value with its unit, sources last per section."""
    lines = [f"{p.name}: {p.description}"]
    if p.path:
        lines.append(f"  file: {p.path}")
    for key in _SECTIONS:
        section = getattr(p, key)
        lines.append(f"[{key}]")
        for f in dataclasses.fields(section):
            if f.name != "source":
                lines.append(f"  {f.name:32s} {_pretty(f.name, getattr(section, f.name))}")
        lines.append(f"  {'source':32s} {' '.join(section.source.split())}")
    return "\n".join(lines)
