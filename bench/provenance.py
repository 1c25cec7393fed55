"""Where and when a benchmark table was measured: the machine, the commit and the date (UTC), which every
bench script writes next to its results in bench/results/."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    """CPU model, visible cores and OS, e.g. "AMD EPYC 7B13, 2 cores visible, Linux 6.1.0"."""
    cpu = platform.processor() or platform.machine()
    try:
        names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores visible, {platform.system()} {platform.release()}"


def commit() -> str:
    """The checkout's short commit hash ("" outside a git checkout)."""
    cmd = ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return done.stdout.strip()


def speed() -> float:
    """Seconds of a fixed pure-Python loop (the best of three): how fast this machine runs the
    interpreter now, so that seconds measured on different days (or under other jobs' load) can be
    compared. Lower is faster."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - began)
    return round(best, 3)


def provenance() -> dict[str, str]:
    """{"machine", "commit", "date"} for a results file."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return {"machine": machine(), "commit": commit(), "date": now}


def markdown_table(rows: list[dict[str, object]]) -> str:
    """A Markdown table of ``rows`` (dicts with the same keys, the first one's order as the columns)."""
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out)
