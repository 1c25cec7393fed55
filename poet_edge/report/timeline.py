"""Replays plan.json's schedule to get RAM in use per step, by kind, and the story of every value that is
recomputed or paged. Pure Python on the plan.json data (no plotting, no model, no profile).

RAM in use during step i follows the simulator's rule: the fixed bytes plus every resident value before
the step, plus the value the step creates (Compute, PageIn) and, for a Compute, its transient workspace.
So ``Timeline.totals`` equals ``plan["simulation"]["ram_curve"]`` exactly (tests check this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from poet_edge.units import align

FIXED_KINDS = ("trainable parameters", "inputs", "optimizer state", "reserve")
VALUE_KINDS = ("activations", "gradients", "recomputed values", "paged-in copies", "workspace")
KINDS = FIXED_KINDS + VALUE_KINDS

_FIXED_KEYS = {
    "trainable parameters": "trainable_params",
    "inputs": "inputs",
    "optimizer state": "optimizer_state",
    "reserve": "reserve",
}
_NODE_KIND = {"forward": "activations", "loss": "activations", "backward": "gradients", "update": "gradients"}


@dataclass(frozen=True)
class Event:
    """One schedule step that the report marks: a page-out, page-in, recompute or free."""

    step: int
    action: str  # compute, recompute, page_out, page_in, free
    node: str


@dataclass(frozen=True)
class Story:
    """Why one value is recomputed or paged: one sentence per recompute / page-in."""

    node: str
    kind: str
    bytes: int
    recomputes: int
    page_outs: int
    page_ins: int
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Timeline:
    """RAM in use per schedule step, by kind (``layers[kind][i]``), and the marked events."""

    layers: dict[str, tuple[int, ...]]
    totals: tuple[int, ...]
    events: tuple[Event, ...]
    budget: int

    @property
    def n_steps(self) -> int:
        return len(self.totals)

    def at(self, step: int) -> dict[str, int]:
        return {k: v[step] for k, v in self.layers.items()}


def _workspace(node: dict[str, Any]) -> int:
    ws = int(node["work"]["workspace_bytes"])
    return align(ws) if ws else 0


def replay(plan: dict[str, Any]) -> Timeline:
    problem = plan["problem"]
    nodes = {n["name"]: n for n in problem["nodes"]}
    fixed = {k: int(problem["fixed_ram"][key]) for k, key in _FIXED_KEYS.items()}
    resident: dict[str, str] = {}  # node -> kind of its RAM copy
    ran: set[str] = set()
    rows: list[dict[str, int]] = []
    events: list[Event] = []
    for i, (action, name) in enumerate(plan["schedule"]["steps"]):
        node = nodes[name]
        row = dict(fixed) | dict.fromkeys(VALUE_KINDS, 0)
        for held, kind in resident.items():
            row[kind] += int(nodes[held]["out_bytes"])
        if action == "compute":
            kind = "recomputed values" if name in ran else _NODE_KIND.get(node["kind"], "activations")
            row[kind] += int(node["out_bytes"])
            row["workspace"] += _workspace(node)
            events.append(Event(i, "recompute" if name in ran else "compute", name))
            ran.add(name)
            resident[name] = kind
        elif action == "page_in":
            row["paged-in copies"] += int(node["out_bytes"])
            resident[name] = "paged-in copies"
            events.append(Event(i, action, name))
        else:
            if action == "free":
                resident.pop(name, None)
            events.append(Event(i, action, name))
        rows.append(row)
    layers = {k: tuple(r[k] for r in rows) for k in KINDS}
    totals = tuple(sum(r.values()) for r in rows)
    return Timeline(layers, totals, tuple(events), int(plan["ram_budget_bytes"]))


def _consumers(plan: dict[str, Any]) -> dict[str, set[str]]:
    names = [n["name"] for n in plan["problem"]["nodes"]]
    out: dict[str, set[str]] = {n: set() for n in names}
    for u, v in plan["problem"]["edges"]:
        out[names[u]].add(names[v])
    return out


def _needed_by(events: tuple[Event, ...], start: int, consumers: set[str]) -> str:
    for e in events[start + 1 :]:
        if e.action in ("compute", "recompute") and e.node in consumers:
            return f"needed by {e.node} at step {e.step}"
    return "needed later"


def _why_freed(tl: Timeline, free_step: int, back: int, size: int) -> str:
    between = tl.totals[free_step + 1 : back]
    keep = max(between) + size if between else tl.totals[free_step]
    if keep > tl.budget:
        return f"keeping it would have needed {keep:,} B > budget {tl.budget:,} B"
    return f"keeping it would have fit ({keep:,} B ≤ budget); the scheduler chose this"


def _reason(tl: Timeline, ev: Event, history: list[Event], size: int, consumers: set[str]) -> str:
    frees = [e.step for e in history if e.action == "free"]
    outs = [e.step for e in history if e.action == "page_out"]
    freed = frees[-1] if frees else ev.step
    verb = "recomputed" if ev.action == "recompute" else "paged in"
    where = f" (paged out at step {outs[-1]})" if ev.action == "page_in" and outs else ""
    return (
        f"{verb} at step {ev.step}{where}: freed at step {freed} "
        f"({_why_freed(tl, freed, ev.step, size)}), {_needed_by(tl.events, ev.step, consumers)}"
    )


def stories(plan: dict[str, Any], tl: Timeline) -> tuple[Story, ...]:
    """One :class:`Story` per value that is recomputed or paged, in order of first such event."""
    nodes = {n["name"]: n for n in plan["problem"]["nodes"]}
    consumers = _consumers(plan)
    history: dict[str, list[Event]] = {}
    reasons: dict[str, list[str]] = {}
    for ev in tl.events:
        past = history.setdefault(ev.node, [])
        if ev.action in ("recompute", "page_in"):
            size = int(nodes[ev.node]["out_bytes"])
            reasons.setdefault(ev.node, []).append(_reason(tl, ev, past, size, consumers[ev.node]))
        elif ev.action == "page_out":
            reasons.setdefault(ev.node, [])
        past.append(ev)
    out = []
    for name, why in reasons.items():
        acts = [e.action for e in history[name]]
        out.append(
            Story(
                name,
                nodes[name]["kind"],
                int(nodes[name]["out_bytes"]),
                acts.count("recompute"),
                acts.count("page_out"),
                acts.count("page_in"),
                tuple(why),
            )
        )
    return tuple(out)
