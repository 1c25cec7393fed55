"""What a user sees after `poet compile`: report.html and memory.png, made from plan.json data only.

``render(plan)`` is a compiler renderer (``poet_edge.compiler.Renderer``): it takes the plan.json
dict and returns ``{"report.html": str, "memory.png": bytes}``, byte-identical for the same plan.
matplotlib is imported only inside ``render`` so importing this package (and the CLI) stays light.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from poet_edge.report.timeline import Story, Timeline, replay, stories

REPORT = "report.html"
MEMORY_PNG = "memory.png"

__all__ = ["MEMORY_PNG", "REPORT", "Story", "Timeline", "render", "render_dir", "replay", "stories"]


def render(plan: dict[str, Any]) -> dict[str, bytes | str]:
    from poet_edge.report import html, plots

    tl = replay(plan)
    png = plots.memory_png(plan, tl)
    return {REPORT: html.page(plan, tl, stories(plan, tl), png), MEMORY_PNG: png}


def render_dir(out: Path) -> None:
    """(Re)writes the report files of an existing compile output folder from its plan.json."""
    plan = json.loads((Path(out) / "plan.json").read_text())
    for name, content in render(plan).items():
        path = Path(out) / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
