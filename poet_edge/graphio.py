"""Read and write plain scheduling graphs as networkx node-link JSON (without depending on networkx).

Accepted node conventions (the first that matches a node is used):

* ours: ``id`` plus every :class:`ProblemNode` field (``out_bytes``, ``compute_s``, ``compute_j``,
  ``page_out_s``, ... ``kind``), as written by :func:`write_graph`;
* Checkmate-style remat benchmarks: ``id``, ``cost_ram`` (output bytes), ``cost_cpu`` (compute cost);
* name-keyed remat benchmarks: ``name``, ``out_cost`` (output bytes), ``duration`` (compute cost),
  optional ``param_cost`` (bytes added to ``fixed_bytes``).

For the two published conventions the compute cost goes into both ``compute_s`` and ``compute_j``,
``cost_unit`` is "cost", page costs are 0 and nodes are **not pageable** (those graphs have no storage
tier), unless a node carries our own keys (``pageable``, ``page_in_s``...), which always win.

Links are objects with ``source``/``target`` or ``"0"``/``"1"`` keys, or plain ``[u, v]`` pairs, under
``links`` (or ``edges``, newer networkx). Node keys are compared as strings. Graph-level keys (under
``graph``, a dict or a list of [key, value] pairs): ``budget_bytes``, ``fixed_bytes``,
``storage_bytes``, ``max_latency_s``, ``cost_unit``, ``invalidated_by`` (list of [a, b] node keys).
Nodes are put in a topological order (stable: file order wherever the links allow it).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
from pathlib import Path
from typing import Any

from poet_edge.errors import PoetError
from poet_edge.problem import ProblemNode, SchedulingProblem

FORMAT = "poet-edge-graph"
_FIELDS = {f.name: f for f in dataclasses.fields(ProblemNode)}


def _as_bytes(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise PoetError(f"{where} must be a non-negative number of bytes, got {value!r}")
    return int(math.ceil(value))


def _convert(key: str, value: Any, where: str) -> Any:
    kind = _FIELDS[key].type
    if kind == "int":
        return _as_bytes(value, where)
    if kind == "bool":
        if not isinstance(value, bool):
            raise PoetError(f"{where} must be true or false")
        return value
    if kind == "str":
        return str(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PoetError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _node_fields(raw: dict[str, Any], where: str) -> tuple[str, dict[str, Any], int]:
    """(key, ProblemNode fields, param bytes) of one JSON node."""
    if not isinstance(raw, dict):
        raise PoetError(f"{where}: a node must be an object, got {raw!r:.40}")
    if "out_bytes" in raw or "cost_ram" in raw:
        key = raw.get("id", raw.get("name"))
    else:
        key = raw.get("name", raw.get("id"))
    if key is None:
        raise PoetError(f"{where}: node without 'id' or 'name'")
    fields: dict[str, Any] = {"name": str(key)}
    params = 0
    if "out_bytes" not in raw:
        if "cost_ram" in raw:
            out, cost = raw["cost_ram"], raw.get("cost_cpu", 0.0)
        elif "out_cost" in raw:
            out, cost = raw["out_cost"], raw.get("duration", 0.0)
            params = _as_bytes(raw.get("param_cost", 0), f"{where}: param_cost")
        else:
            raise PoetError(f"{where}: node {key!r} has none of out_bytes, cost_ram, out_cost")
        fields.update(
            out_bytes=_as_bytes(out, f"{where}: output size"),
            pageable=False,
            compute_s=_convert("compute_s", cost, f"{where}: compute cost"),
        )
        fields["compute_j"] = fields["compute_s"]
    for k, v in raw.items():
        if k in _FIELDS and k != "name":
            fields[k] = _convert(k, v, f"{where}: {k}")
    return str(key), fields, params


def _link(raw: Any, where: str) -> tuple[str, str]:
    if isinstance(raw, dict):
        for a, b in (("source", "target"), ("0", "1")):
            if a in raw and b in raw:
                return str(raw[a]), str(raw[b])
    elif isinstance(raw, (list, tuple)) and len(raw) >= 2:
        return str(raw[0]), str(raw[1])
    raise PoetError(f"{where}: cannot read link {raw!r}")


def _topological(n: int, edges: list[tuple[int, int]], names: list[str]) -> list[int]:
    """Kahn's algorithm taking the smallest file position first; PoetError on a cycle."""
    indeg = [0] * n
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succs[u].append(v)
        indeg[v] += 1
    ready = [v for v in range(n) if indeg[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, v)
    if len(order) < n:
        stuck = [names[v] for v in range(n) if indeg[v] > 0][:10]
        raise PoetError(f"graph has a cycle through some of: {', '.join(stuck)}")
    return order


def _graph_attrs(data: dict[str, Any]) -> dict[str, Any]:
    attrs = data.get("graph", {})
    if isinstance(attrs, list):
        if not all(isinstance(kv, list) and len(kv) == 2 for kv in attrs):
            raise PoetError("'graph' as a list must hold [key, value] pairs")
        attrs = {str(k): v for k, v in attrs}
    if not isinstance(attrs, dict):
        raise PoetError("'graph' must be an object")
    return attrs


def problem_from_node_link(
    data: Any, budget_bytes: int | None = None, where: str = "graph"
) -> SchedulingProblem:
    """Build a problem from parsed node-link JSON (see the module docstring)."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise PoetError(f"{where}: not a node-link graph (no 'nodes' list, or an empty one)")
    attrs = _graph_attrs(data)
    parsed = [_node_fields(raw, f"{where} node {i}") for i, raw in enumerate(data["nodes"])]
    keys = [k for k, _, _ in parsed]
    pos = {k: i for i, k in enumerate(keys)}
    if len(pos) != len(keys):
        raise PoetError(f"{where}: duplicate node keys")
    edges: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    links: Any = data.get("links", data.get("edges")) or []
    if not isinstance(links, list):
        raise PoetError(f"{where}: 'links' must be a list")
    for raw in links:
        a, b = _link(raw, where)
        if a not in pos or b not in pos:
            raise PoetError(f"{where}: link {a} -> {b} names an unknown node")
        if (pos[a], pos[b]) not in seen:
            seen.add((pos[a], pos[b]))
            edges.append((pos[a], pos[b]))
    order = _topological(len(keys), edges, keys)
    new = {old: i for i, old in enumerate(order)}
    nodes = tuple(ProblemNode(**parsed[old][1]) for old in order)
    pairs = attrs.get("invalidated_by") or []
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise PoetError(f"{where}: invalidated_by must be a list of [a, b] node pairs")
    if any(str(a) not in pos or str(b) not in pos for a, b in pairs):
        raise PoetError(f"{where}: invalidated_by names an unknown node")
    inval = tuple((new[pos[str(a)]], new[pos[str(b)]]) for a, b in pairs)
    budget = budget_bytes if budget_bytes is not None else attrs.get("budget_bytes")
    if budget is None:
        raise PoetError(f"{where}: no RAM budget given and none in the file")
    storage = attrs.get("storage_bytes")
    latency = attrs.get("max_latency_s")
    return SchedulingProblem(
        nodes=nodes,
        edges=tuple((new[u], new[v]) for u, v in edges),
        budget_bytes=_as_bytes(budget, "budget"),
        fixed_bytes=_as_bytes(attrs.get("fixed_bytes", 0), "fixed_bytes") + sum(p for _, _, p in parsed),
        storage_bytes=None if storage is None else _as_bytes(storage, "storage_bytes"),
        max_latency_s=None if latency is None else _convert("compute_s", latency, "max_latency_s"),
        invalidated_by=inval,
        cost_unit=str(attrs.get("cost_unit", "cost")),
    )


def read_graph(path: str | Path, budget_bytes: int | None = None) -> SchedulingProblem:
    """Read a node-link JSON graph file; ``budget_bytes`` overrides the file's ``budget_bytes``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PoetError(f"cannot read graph {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise PoetError(f"{path}: invalid JSON: {exc}") from None
    return problem_from_node_link(data, budget_bytes, str(path))


def problem_to_node_link(problem: SchedulingProblem) -> dict[str, Any]:
    """Our own convention: every ProblemNode field on every node, problem fields under ``graph``."""
    names = [n.name for n in problem.nodes]
    graph = {
        "format": FORMAT,
        "budget_bytes": problem.budget_bytes,
        "fixed_bytes": problem.fixed_bytes,
        "storage_bytes": problem.storage_bytes,
        "max_latency_s": problem.max_latency_s,
        "cost_unit": problem.cost_unit,
        "invalidated_by": [[names[a], names[b]] for a, b in problem.invalidated_by],
    }
    nodes = [
        {"id": n.name, **{k: v for k, v in dataclasses.asdict(n).items() if k != "name"}}
        for n in problem.nodes
    ]
    links = [{"source": names[u], "target": names[v]} for u, v in problem.edges]
    return {"directed": True, "multigraph": False, "graph": graph, "nodes": nodes, "links": links}


def write_graph(problem: SchedulingProblem, path: str | Path) -> None:
    """Write ``problem`` so that :func:`read_graph` gives it back unchanged."""
    Path(path).write_text(json.dumps(problem_to_node_link(problem), indent=1) + "\n", encoding="utf-8")
