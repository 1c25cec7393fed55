"""The generated project's README.md (templates/README.md.in): API, board port, memory placement and this
plan's predicted numbers."""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

import numpy as np

from poet_edge import __version__
from poet_edge.arena import ArenaPlan
from poet_edge.ir import Graph
from poet_edge.schedule import Schedule

TEMPLATE = Path(__file__).parent / "templates" / "README.md.in"
SIM_KEYS = (
    "sim_peak",
    "peak_step",
    "latency_ms",
    "energy_mj",
    "n_computes",
    "n_recomputations",
    "n_page_outs",
    "n_page_ins",
    "storage_written",
    "storage_read",
    "erase_blocks",
)
FIXED_KEYS = ("fixed_bytes", "trainable_bytes", "inputs_bytes", "reserve_bytes")


def md_text(text: str) -> str:
    """A name on one line of a Markdown table: escapes for line breaks and other control characters, no
    backquote or column bar."""
    return text.encode("unicode_escape").decode("ascii").replace("|", "\\|").replace("`", "'")


def _param_rows(tg: Graph) -> tuple[str, int]:
    rows, frozen = [], 0
    for i, name in enumerate(sorted(tg.params)):
        count, trainable = int(np.asarray(tg.params[name]).size), name in tg.trainable
        frozen += 0 if trainable else 4 * count
        where = "RAM (`.data`)" if trainable else "flash (`const`)"
        rows.append(f"| {i} | `{md_text(name)}` | {count} | {'yes' if trainable else 'no'} | {where} |")
    return "\n".join(rows), frozen


def _paging_note(storage_bytes: int, input_bytes: int) -> str:
    if input_bytes:
        paged = storage_bytes - input_bytes
        return (
            f"The step reads the batch from storage ({input_bytes} bytes at offset 0) with "
            f"`poet_storage_read`"
            + (f" and pages values through the next {paged} bytes." if paged > 0 else "; it never pages.")
        )
    if storage_bytes == 0:
        return (
            "This schedule never pages: `poet_storage_write` and `poet_storage_read` are not called, "
            "and stubs that return 0 are enough. Compile with a smaller `--ram` and a paging scheduler "
            "to use them."
        )
    return (
        f"This schedule pages: it writes values out with `poet_storage_write` and reads them back with "
        f"`poet_storage_read`, using {storage_bytes} bytes of storage."
    )


def _sim_values(sim: Any) -> dict[str, object]:
    if sim is None:
        return dict.fromkeys(SIM_KEYS, "?")
    blocks = sim.erase_blocks_per_step
    values = (
        sim.peak_ram_bytes,
        sim.peak_step,
        f"{sim.latency_s * 1e3:.3f}",
        f"{sim.energy_j * 1e3:.4f}",
        sim.n_computes,
        sim.n_recomputations,
        sim.n_page_outs,
        sim.n_page_ins,
        sim.storage_bytes_written,
        sim.storage_bytes_read,
        "0" if blocks is None else f"{blocks:.4g}",
    )
    return dict(zip(SIM_KEYS, values, strict=True))


def _fixed_values(fixed: Any) -> dict[str, object]:
    if fixed is None:
        return dict.fromkeys(FIXED_KEYS, "?")
    values = (fixed.total, fixed.trainable_params, fixed.inputs, fixed.reserve)
    return dict(zip(FIXED_KEYS, values, strict=True))


def render_readme(
    tg: Graph,
    schedule: Schedule,
    plan: ArenaPlan,
    storage_bytes: int,
    meta: dict[str, Any],
    input_bytes: int = 0,
) -> str:
    """``meta``: model, predicted_ram_bytes, and (from the compiler) device, budget_bytes, fixed (FixedRam),
    sim (SimResult), storage_kind; missing ones show as "?"."""
    x, labels = tg.tensor(tg.inputs[0]), tg.tensor(tg.inputs[1])
    is_int = labels.dtype == "int32"
    rows, frozen = _param_rows(tg)
    budget, ram = meta.get("budget_bytes"), meta["predicted_ram_bytes"]
    values: dict[str, object] = {
        "version": __version__,
        "model": md_text(str(meta["model"])),
        "device": meta.get("device", "?"),
        "budget_bytes": "?" if budget is None else budget,
        "budget_kib": "?" if budget is None else f"{budget / 1024:.1f}",
        "loss_name": "cross-entropy" if is_int else "mean-squared-error",
        "solver": schedule.solver,
        "num_steps": len(schedule.steps),
        "label_kind": "int32 class labels" if is_int else "float targets",
        "label_c_type": "int32_t" if is_int else "float",
        "batch": x.shape[0],
        "input_elems": x.size,
        "label_elems": labels.size,
        "labels_are_int": int(is_int),
        "num_params": len(tg.params),
        "arena_bytes": meta.get("arena_bytes", plan.arena_bytes),  # shared with the inference plans
        "output_elems": meta.get("output_elems", "?"),
        "storage_bytes": storage_bytes,
        "predicted_ram": ram,
        "predicted_kib": f"{ram / 1024:.1f}",
        "param_rows": rows,
        "frozen_bytes": frozen,
        "paging_note": _paging_note(storage_bytes, input_bytes),
        "input_in_storage": int(input_bytes > 0),
        "storage_kind": meta.get("storage_kind", "?"),
        **_fixed_values(meta.get("fixed")),
        **_sim_values(meta.get("sim")),
    }
    return Template(TEMPLATE.read_text()).substitute({k: str(v) for k, v in values.items()})
