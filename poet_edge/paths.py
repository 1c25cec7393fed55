"""Where the non-Python parts of poet-edge live (the package is installed editable from the checkout)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_C = ROOT / "runtime_c"
PROFILES = ROOT / "profiles"
TARGETS = ROOT / "targets"
EXAMPLES = ROOT / "examples"
