"""PNG plots (matplotlib, Agg canvas, default style, no timestamps): deterministic bytes for the same data.

Imported only by poet_edge.report.render and poet_edge.sweep when they draw; core modules never import it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import matplotlib.style
import matplotlib.ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from poet_edge.report.timeline import Timeline

# bottom to top of the stack
STACK = (
    "reserve",
    "inputs",
    "trainable parameters",
    "optimizer state",
    "activations",
    "gradients",
    "recomputed values",
    "paged-in copies",
    "workspace",
)
COLORS = {
    "reserve": "#d0d0d0",
    "inputs": "#9eb3d8",
    "trainable parameters": "#4c72b0",
    "optimizer state": "#64b5cd",
    "activations": "#55a868",
    "gradients": "#dd8452",
    "recomputed values": "#c44e52",
    "paged-in copies": "#8172b3",
    "workspace": "#ccb974",
}
SCHEDULER_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def memory_png(plan: dict[str, Any], tl: Timeline) -> bytes:
    """RAM in use per schedule step, stacked by kind, with the budget and page-out / page-in markers."""
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10, 4.8))
        ax = fig.subplots()
        _memory_axes(ax, plan, tl)
        fig.tight_layout()
        return _png(fig)


def _unit(peak: int) -> tuple[str, float]:
    return ("MiB", 1024.0 * 1024.0) if peak >= 4 * 1024 * 1024 else ("KiB", 1024.0)


def _memory_axes(ax: Any, plan: dict[str, Any], tl: Timeline) -> None:
    peak_bytes = max(tl.totals, default=0)
    unit, div = _unit(peak_bytes)
    x = list(range(tl.n_steps))
    lower = [0.0] * tl.n_steps
    for kind in STACK:
        vals = tl.layers[kind]
        if not any(vals):
            continue
        upper = [lo + v / div for lo, v in zip(lower, vals, strict=True)]
        ax.fill_between(x, lower, upper, step="mid", color=COLORS[kind], label=kind, linewidth=0)
        lower = upper
    total = [t / div for t in tl.totals]
    ax.step(x, total, where="mid", color="#333333", linewidth=0.8)
    top = max(peak_bytes, 1) / div * 1.15
    budget = tl.budget / div
    on_scale = budget <= 2 * top
    if on_scale:
        top = max(top, budget * 1.08)
        ax.axhline(
            budget, color="#c00000", linestyle="--", linewidth=1.2, label=f"budget {budget:.1f} {unit}"
        )
    else:
        ax.plot([], [], color="#c00000", linestyle="--", label=f"budget {budget:.1f} {unit} (far above)")
    for action, marker, color, label in (
        ("page_out", "v", "#5a2d91", "page-out"),
        ("page_in", "^", "#1b7837", "page-in"),
    ):
        steps = [e.step for e in tl.events if e.action == action]
        if steps:
            ax.plot(
                steps,
                [total[s] + 0.02 * top for s in steps],
                linestyle="none",
                marker=marker,
                color=color,
                markersize=6,
                label=label,
            )
    if tl.totals:
        peak = max(range(tl.n_steps), key=lambda i: (tl.totals[i], -i))
        ax.plot(
            [peak],
            [total[peak]],
            linestyle="none",
            marker="o",
            markersize=5,
            color="#000000",
            label=f"peak {total[peak]:.1f} {unit} (step {peak})",
        )
    ax.set_xlim(-0.5, max(tl.n_steps - 0.5, 0.5))
    ax.set_ylim(0, top)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_xlabel("schedule step")
    ax.set_ylabel(f"RAM in use ({unit})")
    ax.set_title(
        f"{plan['model']} on {plan['device']}, batch {plan['batch']}: RAM during one training step "
        f"({plan['schedule']['solver']} schedule)",
        fontsize=10,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)


@dataclass(frozen=True)
class ParetoPoint:
    scheduler: str
    budget_bytes: int
    energy_j: float
    latency_s: float


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def pareto_png(
    points: Sequence[ParetoPoint],
    failed: Sequence[tuple[str, int]],
    schedulers: Sequence[str],
    budgets: Sequence[int],
    floor_bytes: int | None,
    log_x: bool,
    title: str,
) -> bytes:
    """Energy and latency of one training step vs the RAM budget, one line per scheduler; ``failed``
    (scheduler, budget) points are crosses on the x axis."""
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(11, 4.4))
        axes = fig.subplots(1, 2)
        for ax, attr, unit in (
            (axes[0], "energy_j", "energy per step (mJ)"),
            (axes[1], "latency_s", "latency per step (ms)"),
        ):
            _pareto_axes(ax, attr, points, failed, schedulers, floor_bytes)
            _budget_axis(ax, budgets, log_x)
            ax.set_ylabel(unit)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        return _png(fig)


def _pareto_axes(
    ax: Any,
    attr: str,
    points: Sequence[ParetoPoint],
    failed: Sequence[tuple[str, int]],
    schedulers: Sequence[str],
    floor_bytes: int | None,
) -> None:
    for k, name in enumerate(schedulers):
        color, marker = SCHEDULER_COLORS[k % len(SCHEDULER_COLORS)], MARKERS[k % len(MARKERS)]
        pts = sorted((p for p in points if p.scheduler == name), key=lambda p: p.budget_bytes)
        ax.plot(
            [p.budget_bytes / 1024 for p in pts],
            [getattr(p, attr) * 1e3 for p in pts],
            color=color,
            marker=marker,
            markersize=max(3.0, 8.0 - 1.5 * k),
            linestyle=LINESTYLES[k % len(LINESTYLES)],
            linewidth=1.4,
            label=name,
        )
        bad = [b / 1024 for s, b in failed if s == name]
        if bad:
            ax.plot(
                bad, [0.0] * len(bad), linestyle="none", marker="x", color=color, markersize=7, clip_on=False
            )
    if floor_bytes is not None:
        ax.axvline(
            floor_bytes / 1024,
            color="#c00000",
            linestyle="--",
            linewidth=1.0,
            label=f"memory floor {floor_bytes / 1024:.1f} KiB",
        )
    if failed:
        ax.plot([], [], linestyle="none", marker="x", color="#555555", label="infeasible")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _budget_axis(ax: Any, budgets: Sequence[int], log_x: bool) -> None:
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("RAM budget (KiB)")
    if 0 < len(budgets) <= 12:
        ax.set_xticks([b / 1024 for b in budgets], [f"{b / 1024:.4g}" for b in budgets], rotation=45)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if budgets:
        lo, hi = min(budgets) / 1024, max(budgets) / 1024
        pad = (hi / lo) ** 0.05 if log_x and lo > 0 else 1.0
        margin = 0.0 if log_x else 0.05 * (hi - lo or 1.0)
        ax.set_xlim(lo / pad - margin, hi * pad + margin)
