"""report.html: one self-contained page (inline CSS, the plot as a data: URI, no scripts, no network)."""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from poet_edge.report.timeline import KINDS, Story, Timeline

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { background: #4c72b0; height: 0.8em; display: inline-block; }
img { max-width: 100%; } .note { color: #666; } code { font-size: 0.95em; }
details pre { max-height: 30em; overflow: auto; background: #f6f6f6; padding: 0.5em; }
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def fmt_bytes(n: int) -> str:
    return f"{n:,} B ({n / 1024:.1f} KiB)" if n >= 1024 else f"{n:,} B"


def _row(cells: list[str], head: bool = False) -> str:
    tag = "th" if head else "td"
    return "<tr>" + "".join(c if c.startswith("<t") else f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"


def _num(text: str, ident: str = "", data: str = "") -> str:
    attrs = (f' id="{ident}"' if ident else "") + (f' data-value="{data}"' if data else "")
    return f'<td class="num"{attrs}>{text}</td>'


def _table(ident: str, header: list[str], rows: list[list[str]]) -> str:
    head = _row([f'<th class="num">{h[1:]}</th>' if h.startswith("#") else h for h in header], head=True)
    body = "\n".join(map(_row, rows))
    return f'<table id="{ident}">\n<thead>{head}</thead>\n<tbody>\n{body}\n</tbody></table>'


def _summary(plan: dict[str, Any]) -> str:
    sim, budget, peak = plan["simulation"], plan["ram_budget_bytes"], plan["peak_ram_bytes"]
    sim_peak = sim["peak_ram_bytes"]
    rows = [
        ["model", f"<code>{escape(plan['model'])}</code> (sha256 {plan['model_sha256'][:12]}…)"],
        ["device", escape(plan["device"])],
        ["batch · loss · trained", f"{plan['batch']} · {escape(plan['loss'])} · {escape(plan['train'])}"],
        ["schedule", f"{escape(plan['schedule']['solver'])}, {len(plan['schedule']['steps'])} steps"],
        ["RAM budget", _num(fmt_bytes(budget), "ram-budget", str(budget))],
        ["peak RAM (fixed + arena)", _num(fmt_bytes(peak), "peak-ram", str(peak))],
        ["simulated peak", _num(fmt_bytes(sim_peak), "simulated-peak", str(sim_peak))],
        ["headroom", _num(fmt_bytes(budget - peak), "headroom", str(budget - peak))],
        ["fixed (parameters, inputs, optimizer state, reserve)", _num(fmt_bytes(plan["fixed_ram_bytes"]))],
        *_optimizer_row(plan),
        ["arena", _num(fmt_bytes(plan["arena"]["arena_bytes"]), "arena", str(plan["arena"]["arena_bytes"]))],
        ["peak at step", f"{sim['peak_step']} (<code>{escape(sim['peak_node'])}</code>)"],
    ]
    return _table("summary", ["", ""], rows)


def _optimizer_row(plan: dict[str, Any]) -> list[list[str]]:
    """The optimizer and the RAM of its state (plans written before --optimizer have neither)."""
    opt = plan.get("optimizer")
    if not opt:
        return []
    state = int(opt["state_bytes"])
    return [
        [f"optimizer state ({escape(opt['kind'])})", _num(fmt_bytes(state), "optimizer-state", str(state))]
    ]


def _units(sim: dict[str, Any]) -> tuple[str, float, str, float]:
    if sim["cost_unit"] == "J":
        return "ms", 1e3, "mJ", 1e3
    return sim["cost_unit"], 1.0, sim["cost_unit"], 1.0


def _costs(sim: dict[str, Any]) -> str:
    tu, ts, eu, es = _units(sim)
    parts = (
        ("compute", "compute"),
        ("recompute", "recompute"),
        ("page-in", "page_in"),
        ("page-out", "page_out"),
        *((("moves in RAM", "move"),) if sim.get("n_moves") else ()),
    )
    total_e = sim["energy_j"] or 1.0
    rows = []
    for label, key in parts:
        t, e = sim[f"latency_{key}_s"], sim[f"energy_{key}_j"]
        share = 100 * e / total_e
        rows.append(
            [
                label,
                _num(f"{t * ts:.4f}", f"latency-{key}", repr(t)),
                _num(f"{e * es:.5f}", f"energy-{key}", repr(e)),
                _num(f"{share:.1f}%"),
                f'<td><span class="bar" style="width:{share * 2:.1f}px"></span></td>',
            ]
        )
    rows.append(
        [
            "<b>total</b>",
            _num(f"<b>{sim['latency_s'] * ts:.4f}</b>", "latency-total", repr(sim["latency_s"])),
            _num(f"<b>{sim['energy_j'] * es:.5f}</b>", "energy-total", repr(sim["energy_j"])),
            _num("100.0%"),
            "",
        ]
    )
    return _table("costs", ["", f"#latency ({tu})", f"#energy ({eu})", "#energy share", ""], rows)


def _storage(sim: dict[str, Any]) -> str:
    endurance = sim["steps_until_endurance"]
    blocks = sim["erase_blocks_per_step"]
    rows = [
        ["page-outs / page-ins", _num(f"{sim['n_page_outs']} / {sim['n_page_ins']}")],
        ["written per step", _num(fmt_bytes(sim["storage_bytes_written"]), "storage-written")],
        ["read per step", _num(fmt_bytes(sim["storage_bytes_read"]), "storage-read")],
        ["storage used", _num(fmt_bytes(sim["storage_peak_bytes"]))],
        ["erase blocks per step", _num("n/a" if blocks is None else f"{blocks:.4g}")],
        ["steps until flash endurance", _num("unlimited" if endurance is None else f"{endurance:.4g}")],
    ]
    return _table("storage", ["", ""], rows)


def _inference(plan: dict[str, Any]) -> str:
    """poet_predict and poet_eval_step: their own schedules, replayed by the simulator, in the same arena."""
    rows = [
        [
            f"<code>{name}</code>",
            _num(fmt_bytes(m["ram_bytes"]), f"{mode}-ram", str(m["ram_bytes"])),
            _num(str(len(m["schedule"]["steps"]))),
            _num(f"{m['simulation']['n_recomputations']} / {m['simulation']['n_page_ins']}"),
            _num(
                f"{m['simulation']['latency_s'] * 1e3:.4f}",
                f"{mode}-latency",
                repr(m["simulation"]["latency_s"]),
            ),
            _num(
                f"{m['simulation']['energy_j'] * 1e3:.5f}",
                f"{mode}-energy",
                repr(m["simulation"]["energy_j"]),
            ),
        ]
        for mode, name in (("predict", "poet_predict"), ("eval", "poet_eval_step"))
        if (m := plan.get("inference", {}).get(mode))
    ]
    header = [
        "",
        "#RAM (fixed + own arena)",
        "#steps",
        "#recomputations / page-ins",
        "#latency (ms)",
        "#energy (mJ)",
    ]
    return _table("inference", header, rows)


def _at_peak(tl: Timeline, step: int) -> str:
    if step < 0 or step >= tl.n_steps:
        return ""
    at = tl.at(step)
    rows = [[kind, _num(fmt_bytes(at[kind]))] for kind in KINDS if at[kind]]
    rows.append(["<b>total</b>", _num(f"<b>{fmt_bytes(tl.totals[step])}</b>")])
    return _table("ram-at-peak", ["kind", "#bytes"], rows)


def _stories(stories: tuple[Story, ...]) -> str:
    if not stories:
        return (
            '<p id="remat-none">Nothing is recomputed or paged: every value is computed once and stays '
            "in RAM until its last use.</p>"
        )
    rows = [
        [
            f"<code>{escape(s.node)}</code>",
            escape(s.kind),
            _num(f"{s.bytes:,}"),
            _num(str(s.recomputes)),
            _num(str(s.page_outs)),
            _num(str(s.page_ins)),
            "<br>".join(escape(r) for r in s.reasons) or "paged out, never read back",
        ]
        for s in stories
    ]
    return _table("remat", ["value", "kind", "#bytes", "#recomputed", "#paged out", "#paged in", "why"], rows)


def _params(plan: dict[str, Any]) -> str:
    rows = [
        [
            f"<code>{escape(p['name'])}</code>",
            "×".join(map(str, p["shape"])),
            "RAM (trainable)" if p["trainable"] else "flash (frozen, const)",
            _num(f"{p['bytes']:,}"),
        ]
        for p in plan["parameters"]
    ]
    return _table("params", ["parameter", "shape", "lives in", "#bytes"], rows)


def _tiles(plan: dict[str, Any]) -> str:
    """Operator splitting: the tiled tensors and their tile counts (plan.json ``tiles``), or a line."""
    tiles = plan.get("tiles")
    if not tiles:
        flag = escape(str(plan.get("split", "off")))
        return f'<p class="note">No operator was split (<code>--split {flag}</code>).</p>'
    in_rows = tiles.get("rows", {})
    rows = [
        [f"<code>{escape(t)}</code>", "tensor, rows" if t in in_rows else "tensor", _num(str(k))]
        for t, k in tiles["tensors"].items()
    ]
    blocks = tiles.get("parameters", {})
    rows += [[f"<code>{escape(p)}</code>", "parameter", _num(str(len(b)))] for p, b in blocks.items()]
    note = (
        f'<p class="note">Tiles of at most {fmt_bytes(tiles["tile_bytes"])}: {len(tiles["tensors"])} '
        "tensors in channel tiles (tile i of a tensor is the value <code>&lt;tensor&gt;/t&lt;i&gt;</code> "
        f"in the plot and the schedule), {len(in_rows)} of them also in row tiles "
        "(<code>&lt;tensor&gt;/t&lt;i&gt;r&lt;r&gt;</code>), "
        f"{len(blocks)} parameters in blocks (block names in plan.json "
        f"<code>tiles.parameters</code>), {len(tiles['nodes'])} nodes run tile by tile "
        "(docs/splitting.md).</p>"
    )
    return note + _table("tiles", ["tensor or parameter", "kind", "#tiles or blocks"], rows)


def _schedule(plan: dict[str, Any], tl: Timeline) -> str:
    lines = [
        f"{i:5d}  {tl.totals[i]:>9,} B  {action:<9s} {name}"
        for i, (action, name) in enumerate(plan["schedule"]["steps"])
    ]
    return (
        "<details><summary>all schedule steps (RAM in use during each)</summary><pre>"
        + escape("\n".join(lines))
        + "</pre></details>"
    )


def page(plan: dict[str, Any], tl: Timeline, stories: tuple[Story, ...], memory_png: bytes) -> str:
    sim = plan["simulation"]
    img = base64.b64encode(memory_png).decode("ascii")
    kib = plan["ram_budget_bytes"] / 1024
    title = f"poet-edge report: {plan['model']} on {plan['device']} in {kib:.1f} KiB"
    body = [
        f"<h1>{escape(title)}</h1>",
        _summary(plan),
        "<h2>RAM during one training step</h2>",
        f'<img id="memory-plot" alt="RAM in use per schedule step, stacked by kind" '
        f'src="data:image/png;base64,{img}">',
        '<p class="note">One bar per schedule step: the fixed parts (trainable parameters, the input batch '
        "and labels, the reserve for stack and runtime) plus every value resident in RAM during the step, by "
        "kind. ▼ page-out, ▲ page-in; the dashed line is the budget. Also in <code>memory.png</code>.</p>",
        f"<h3>At the peak (step {sim['peak_step']})</h3>",
        _at_peak(tl, sim["peak_step"]),
        "<h2>Energy and latency of one training step</h2>",
        _costs(sim),
        "<h2>Inference on the device: one batch</h2>",
        _inference(plan),
        f'<p class="note">Each function has its own schedule at the same budget and shares the arena '
        f"({fmt_bytes(plan.get('runtime_arena_bytes', 0))}, the largest of the three plans).</p>",
        "<h2>Paging storage</h2>",
        _storage(sim),
        "<h2>Recomputed and paged values</h2>",
        _stories(stories),
        "<h2>Parameters</h2>",
        _params(plan),
        "<h2>Operator splitting</h2>",
        _tiles(plan),
        "<h2>Schedule</h2>",
        _schedule(plan, tl),
        f'<p class="note">poet-edge {escape(plan["poet_edge_version"])}; every number on this page comes '
        "from <code>plan.json</code> next to it (see docs/plan-format.md).</p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
