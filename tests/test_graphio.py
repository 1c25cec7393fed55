"""Plain graph files: both published node-link conventions parse; our own convention round-trips."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from poet_edge.errors import PoetError
from poet_edge.graphgen import random_layered_dag
from poet_edge.graphio import read_graph, write_graph


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    return path


def test_checkmate_convention(tmp_path: Path) -> None:
    data = {
        "directed": True,
        "multigraph": False,
        "graph": {},
        "nodes": [{"id": 0, "cost_ram": 100, "cost_cpu": 2.5}, {"id": 1, "cost_ram": 50.2, "cost_cpu": 1}],
        "links": [{"source": 0, "target": 1}],
    }
    p = read_graph(_write(tmp_path, data), 1000)
    assert [n.name for n in p.nodes] == ["0", "1"]
    assert [n.out_bytes for n in p.nodes] == [100, 51]
    assert [n.compute_s for n in p.nodes] == [2.5, 1.0] == [n.compute_j for n in p.nodes]
    assert p.edges == ((0, 1),) and p.budget_bytes == 1000 and p.cost_unit == "cost"
    assert not any(n.pageable for n in p.nodes) and all(n.recomputable for n in p.nodes)
    assert all(n.page_in_j == 0.0 for n in p.nodes)


def test_name_convention_reordered_topologically(tmp_path: Path) -> None:
    data = {
        "graph": [["name", "x"]],
        "nodes": [
            {"name": "c", "out_cost": 3, "duration": 3.0},
            {"name": "a", "out_cost": 1, "duration": 1.0, "param_cost": 40},
            {"name": "b", "out_cost": 2, "duration": 2.0, "param_cost": 2},
            {"name": "d", "out_cost": 4, "duration": 4.0},
        ],
        "links": [{"0": "a", "1": "c"}, {"0": "b", "1": "c"}, {"0": "a", "1": "b"}],
    }
    p = read_graph(_write(tmp_path, data), 500)
    assert [n.name for n in p.nodes] == ["a", "b", "c", "d"]  # d stays after c: stable by file order
    index = p.index()
    assert set(p.edges) == {(index["a"], index["c"]), (index["b"], index["c"]), (index["a"], index["b"])}
    assert p.fixed_bytes == 42
    assert [n.out_bytes for n in p.nodes] == [1, 2, 3, 4]


def test_edges_key_pairs_and_our_keys_override(tmp_path: Path) -> None:
    data = {
        "nodes": [
            {"id": "u", "cost_ram": 8, "cost_cpu": 1, "pageable": True, "page_in_s": 0.5},
            {"id": "v", "cost_ram": 8, "cost_cpu": 1},
        ],
        "edges": [["u", "v"], ["u", "v"]],
        "graph": {"budget_bytes": 64, "fixed_bytes": 4},
    }
    p = read_graph(_write(tmp_path, data))
    assert p.budget_bytes == 64 and p.fixed_bytes == 4 and p.edges == ((0, 1),)
    assert p.nodes[0].pageable and p.nodes[0].page_in_s == 0.5 and not p.nodes[1].pageable


@pytest.mark.parametrize(
    "data,message",
    [
        (
            {
                "nodes": [{"id": 0, "cost_ram": 1}, {"id": 1, "cost_ram": 1}],
                "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}],
            },
            "cycle",
        ),
        ({"nodes": [{"id": 0, "cost_ram": 1}], "links": [{"source": 0, "target": 9}]}, "unknown node"),
        ({"nodes": [{"id": 0, "cost_ram": -1}], "links": []}, "non-negative"),
        ({"nodes": [{"id": 0, "size": 1}], "links": []}, "none of out_bytes"),
        ({"nodes": [{"id": 0, "cost_ram": 1}, {"id": 0, "cost_ram": 1}], "links": []}, "duplicate"),
        ({"links": []}, "no 'nodes' list"),
    ],
)
def test_bad_graphs(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(PoetError, match=message):
        read_graph(_write(tmp_path, data), 100)


def test_missing_budget_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(PoetError, match="no RAM budget"):
        read_graph(_write(tmp_path, {"nodes": [{"id": 0, "cost_ram": 1}], "links": []}))
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(PoetError, match="invalid JSON"):
        read_graph(bad, 1)
    with pytest.raises(PoetError, match="cannot read"):
        read_graph(tmp_path / "missing.json", 1)


@pytest.mark.parametrize("seed", range(5))
def test_round_trip(tmp_path: Path, seed: int) -> None:
    problem = random_layered_dag(
        30,
        seed,
        fixed_bytes=12,
        unrecomputable_prob=0.2,
        unpageable_prob=0.2,
        n_invalidations=3,
        budget_bytes=777,
    )
    odd = seed % 2 == 1
    problem = replace(
        problem,
        storage_bytes=5000 if odd else None,
        max_latency_s=2.5 if odd else None,
        cost_unit="J",
        nodes=tuple(replace(n, kind="backward") if i % 3 else n for i, n in enumerate(problem.nodes)),
    )
    path = tmp_path / "rt.json"
    write_graph(problem, path)
    assert read_graph(path) == problem
    assert read_graph(path, 123) == replace(problem, budget_bytes=123)
