"""report.html and memory.png: produced by `poet compile`, deterministic, numbers equal to plan.json's,
and they render in a real browser (headless Chromium) without network or console errors."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, ROOT, poet

from poet_edge import report
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model, plan_json, plan_training
from poet_edge.errors import PoetError
from poet_edge.progress import Progress, Verbosity, relative_gap

CHROMIUM_HINT = "install with: apt-get install chromium (or: make toolchain)"
AE = EXAMPLES / "zoo" / "autoencoder.onnx"


def plan_of(opts: CompileOptions) -> dict[str, Any]:
    """plan.json's data without writing a project (the report is made from this dict only)."""
    return json.loads(json.dumps(plan_json(opts, plan_training(opts))))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    assert data[-8:-4] == b"IEND", "PNG is truncated"
    return struct.unpack(">II", data[16:24])


def html_value(html: str, ident: str) -> str:
    m = re.search(rf'id="{ident}" data-value="([^"]*)"', html)
    assert m, f"no #{ident} in the report"
    return m.group(1)


def check_report(plan: dict[str, Any], files: dict[str, bytes | str]) -> None:
    png, html = files[report.MEMORY_PNG], files[report.REPORT]
    assert isinstance(png, bytes) and isinstance(html, str)
    w, h = png_size(png)
    assert w >= 600 and h >= 300 and len(png) > 5000
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in html
    assert int(html_value(html, "ram-budget")) == plan["ram_budget_bytes"]
    assert int(html_value(html, "peak-ram")) == plan["peak_ram_bytes"]
    assert int(html_value(html, "simulated-peak")) == plan["simulation"]["peak_ram_bytes"]
    assert int(html_value(html, "arena")) == plan["arena"]["arena_bytes"]
    assert float(html_value(html, "energy-total")) == plan["simulation"]["energy_j"]
    assert float(html_value(html, "latency-total")) == plan["simulation"]["latency_s"]
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html), "the report must not load anything"
    tl = report.replay(plan)
    assert list(tl.totals) == plan["simulation"]["ram_curve"]
    for i in range(tl.n_steps):
        assert sum(tl.at(i).values()) == tl.totals[i]


def mlp_opts(out: Path) -> CompileOptions:
    return CompileOptions(EXAMPLES / "mlp.onnx", "cortex-m4", 256 * 1024, out, 8)


@pytest.fixture(scope="module")
def mlp_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "mlp"
    compile_model(mlp_opts(out), renderers=[report.render])
    return out


@pytest.fixture(scope="module")
def ae_paging() -> dict[str, Any]:
    return plan_of(
        CompileOptions(
            AE, "cortex-m4", 56 * 1024, Path("unused"), 4, Loss.MSE, scheduler="greedy", train="bias"
        )
    )


def test_compile_writes_report(mlp_out: Path) -> None:
    plan = json.loads((mlp_out / "plan.json").read_text())
    files = {
        report.MEMORY_PNG: (mlp_out / report.MEMORY_PNG).read_bytes(),
        report.REPORT: (mlp_out / report.REPORT).read_text(),
    }
    check_report(plan, files)
    assert 'id="remat-none"' in files[report.REPORT]


def test_report_is_deterministic(mlp_out: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    compile_model(mlp_opts(again), renderers=[report.render])
    for name in (report.REPORT, report.MEMORY_PNG, "plan.json", "poet_model.c", "README.md"):
        assert (again / name).read_bytes() == (mlp_out / name).read_bytes(), name


def test_paging_report_explains_each_paged_value(ae_paging: dict[str, Any]) -> None:
    files = report.render(ae_paging)
    check_report(ae_paging, files)
    assert report.render(ae_paging) == files
    stories = report.stories(ae_paging, report.replay(ae_paging))
    assert len(stories) == ae_paging["simulation"]["n_page_outs"] > 0
    for s in stories:
        assert s.page_outs == s.page_ins == 1 and len(s.reasons) == 1
        assert re.match(
            r"paged in at step \d+ \(paged out at step \d+\): freed at step \d+ \(keeping it "
            r"would have needed [\d,]+ B > budget [\d,]+ B\), needed by \S+ at step \d+",
            s.reasons[0],
        )
    html = str(files[report.REPORT])
    assert 'id="remat"' in html and html.count("paged in at step") == len(stories)
    tl = report.replay(ae_paging)
    assert any(tl.layers["paged-in copies"])


def test_recompute_report() -> None:
    plan = plan_of(
        CompileOptions(
            AE, "cortex-m4", 80 * 1024, Path("unused"), 4, Loss.MSE, scheduler="recompute-all", train="bias"
        )
    )
    check_report(plan, report.render(plan))
    stories = report.stories(plan, report.replay(plan))
    assert sum(s.recomputes for s in stories) == plan["simulation"]["n_recomputations"] > 0
    assert all(r.startswith("recomputed at step") for s in stories for r in s.reasons)
    assert any(report.replay(plan).layers["recomputed values"])


ZOO = sorted((EXAMPLES / "zoo").glob("*.onnx"))


@pytest.mark.parametrize("model", ZOO, ids=[m.stem for m in ZOO])
def test_zoo_reports(model: Path) -> None:
    loss = Loss.MSE if model.stem == "autoencoder" else Loss.CROSS_ENTROPY
    opts = CompileOptions(model, "cortex-m4", 1 << 30, Path("unused"), 1, loss)
    try:
        plan = plan_of(opts)
    except PoetError as e:
        if "unsupported op" in str(e):
            pytest.skip(f"{model.name}: {e}"[:200])
        raise
    check_report(plan, report.render(plan))


def test_no_report_and_quiet(tmp_path: Path) -> None:
    r = poet("compile", EXAMPLES / "mlp.onnx", "--ram", "64KB", "--no-report", "-q", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert (tmp_path / "o" / "plan.json").is_file() and not (tmp_path / "o" / report.REPORT).exists()
    r = poet("compile", EXAMPLES / "mlp.onnx", "--ram", "64KB", "-v", "-o", tmp_path / "v")
    assert r.returncode == 0, r.stderr
    for phase in ("load", "training graph", "schedule", "simulate", "arena", "codegen"):
        assert re.search(rf"^  {phase} +\d+\.\d+ s$", r.stdout, re.M), phase


def test_core_modules_do_not_import_matplotlib() -> None:
    code = (
        "import sys, poet_edge.cli, poet_edge.compiler, poet_edge.report, poet_edge.sweep, "
        "poet_edge.progress; poet_edge.cli.parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"missing chromium; {CHROMIUM_HINT}")
        pytest.skip(f"missing chromium; {CHROMIUM_HINT}")
    return exe


PROBE = """<script>
window.addEventListener('load', () => {
  const img = document.getElementById('memory-plot');
  const ok = img.complete && img.naturalWidth > 0;
  document.body.dataset.img = ok ? img.naturalWidth + 'x' + img.naturalHeight : 'broken';
  document.body.dataset.tables = document.querySelectorAll('table').length;
});
</script></body>"""


def dump_dom(page: Path, profile: Path) -> tuple[str, str]:
    r = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, "\n".join(console)


def test_report_renders_in_chromium(mlp_out: Path, ae_paging: dict[str, Any], tmp_path: Path) -> None:
    chromium()
    (tmp_path / report.REPORT).write_text(str(report.render(ae_paging)[report.REPORT]))
    dom, console = dump_dom(tmp_path / report.REPORT, tmp_path / "profile")
    assert not console, console
    for ident in ("summary", "costs", "storage", "remat", "params", "ram-at-peak"):
        assert f'<table id="{ident}">' in dom, ident
    paged = next(v for action, v in ae_paging["schedule"]["steps"] if action == "page_out")
    assert paged in dom and 'id="memory-plot"' in dom
    # the same page with a probe script (the report itself has none): does the embedded PNG decode?
    csp = "style-src 'unsafe-inline'"
    html = (mlp_out / report.REPORT).read_text().replace(csp, f"{csp}; script-src 'unsafe-inline'")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", PROBE))
    dom, console = dump_dom(probe, tmp_path / "profile2")
    assert not console, console
    w, h = png_size((mlp_out / report.MEMORY_PNG).read_bytes())
    assert f'data-img="{w}x{h}"' in dom
    assert re.search(r'data-tables="[1-9]\d*"', dom)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def fake_clock(step: float = 1.0) -> Callable[[], float]:
    t = [0.0]

    def now() -> float:
        t[0] += step
        return t[0]

    return now


def test_progress_levels() -> None:
    quiet = io.StringIO()
    p = Progress(Verbosity.QUIET, quiet)
    p.phase("load")
    p.info("hidden")
    p.update(incumbent=2.0, bound=1.0)
    p.done()
    assert quiet.getvalue() == "" and [name for name, _ in p.phases] == ["load"]

    plain = io.StringIO()
    p = Progress(Verbosity.NORMAL, plain, clock=fake_clock(), plain_interval_s=5.0)
    p.phase("schedule")
    for k in range(10):
        p.update(incumbent=10.0 - k, bound=5.0)
    p.info("message")
    p.done()
    lines = plain.getvalue().splitlines()
    assert "\r" not in plain.getvalue() and lines[-1] == "message"
    assert 1 <= sum("incumbent" in ln for ln in lines) <= 3  # throttled on a pipe
    assert "gap 50.00%" in lines[0]

    verbose = io.StringIO()
    p = Progress(Verbosity.VERBOSE, verbose, clock=fake_clock())
    p.phase("load")
    p.detail("shown")
    p.phase("arena")
    p.done()
    assert re.findall(r"^  (\w+) +(\d+\.\d+) s$", verbose.getvalue(), re.M) == [
        ("load", "1.000"),
        ("arena", "1.000"),
    ]
    assert "shown" in verbose.getvalue()


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    tty = FakeTty()
    p = Progress(Verbosity.NORMAL, tty, clock=fake_clock())
    p.phase("schedule")
    p.update(incumbent=3.0, bound=3.0, note="nodes 10")
    p.info("a message")
    p.done()
    out = tty.getvalue()
    assert "\rschedule ..." in out and "gap 0.00%  nodes 10" in out
    assert "a message\n" in out and out.endswith("\r")
    assert relative_gap(None, 1.0) is None and relative_gap(4.0, 3.0) == 0.25


def plan_keys(node: Any, parent: str = "") -> set[str]:
    """Every key name in a plan, not counting the keys of name-keyed maps (tensors, storage offsets)."""
    keys: set[str] = set()
    if isinstance(node, dict):
        named = parent in ("tensors", "offsets")
        for k, v in node.items():
            if not named:
                keys.add(k)
            keys |= plan_keys(v, "" if named else k)
    elif isinstance(node, list):
        for v in node[:3]:
            keys |= plan_keys(v, parent)
    return keys


def test_plan_format_doc_covers_every_key(mlp_out: Path, ae_paging: dict[str, Any]) -> None:
    doc = (ROOT / "docs" / "plan-format.md").read_text()
    plan = json.loads((mlp_out / "plan.json").read_text())
    missing = sorted(
        k
        for k in plan_keys(plan) | plan_keys(ae_paging)
        if not re.search(rf"`[^`\n]*\b{re.escape(k)}\b[^`\n]*`", doc)
    )
    assert not missing, f"docs/plan-format.md does not explain: {', '.join(missing)}"
