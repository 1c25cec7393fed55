"""Every relative link in the README, docs/, the benchmark tables and the examples' READMEs names a file
that exists (the README is a front door: what it links must be there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "bench" / "results").glob("*.md")),
    *sorted((ROOT / "examples").rglob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def relative_links(page: Path) -> list[str]:
    """The page's Markdown link targets outside code blocks, without anchors; web links left out."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    out = []
    for target in LINK.findall(text):
        path = target.split("#")[0]
        if path and not re.match(r"[a-z]+:", path):
            out.append(path)
    return out


def test_pages_found() -> None:
    assert ROOT / "README.md" in PAGES and len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    fenced = "```\n[e](y.md)\n```\n"
    page.write_text("[a](there.md) [b](missing.md#part) [c](https://example.org) `[d](x.md)`\n" + fenced)
    assert relative_links(page) == ["there.md", "missing.md", "x.md"]
    assert [t for t in relative_links(page) if not (page.parent / t).exists()] == ["missing.md", "x.md"]
