"""gap_repair.restore_evicting on random gaps of random DAGs, its steps replayed here: every computation
has its inputs in RAM and may run in the gap, every page-in is of a stored value, the RAM never exceeds
the room, and the gap ends with what it must keep."""

from __future__ import annotations

import random

import pytest

from poet_edge.graphgen import random_layered_dag
from poet_edge.schedule import Compute, Free, PageIn
from poet_edge.schedulers import stage_model
from poet_edge.schedulers.engine import analyse
from poet_edge.schedulers.gap_repair import restore_evicting


@pytest.mark.parametrize("seed", range(4))
def test_restore_evicting_replays_within_the_room(seed: int) -> None:
    problem = random_layered_dag(30, seed, n_invalidations=seed)
    nodes, n = problem.nodes, len(problem.nodes)
    an = analyse(problem, True)
    index = problem.index()
    rng = random.Random(seed)
    repaired = failed = 0
    for _ in range(200):
        stage = rng.randrange(5, n)
        before = [v for v in range(stage) if nodes[v].out_bytes > 0]
        ram = set(rng.sample(before, rng.randint(0, min(6, len(before)))))
        stored = set(rng.sample(before, rng.randint(0, len(before) // 2)))
        keep = {q for q in an.preds[stage] if nodes[q].out_bytes > 0} | set(rng.sample(before, 2))
        todo = [(v, "i" if v in stored and rng.random() < 0.5 else "c") for v in before if v not in ram]
        todo = [
            (v, k) for v, k in todo if k == "i" or (nodes[v].recomputable and stage <= an.recomp_until[v])
        ]
        orders = stage_model.restoration_orders(
            nodes, an, stage_model.needed_restorations(an, todo, ram, keep)
        )
        order = orders[0]
        plain = stage_model.restore_gap(nodes, an, order, ram, stored, keep)[2]
        room = rng.randint(plain // 2, plain)
        out = restore_evicting(nodes, an, stage, order, ram, stored, keep, room)
        if out is None:
            failed += 1
            continue
        steps, after, peak, spent = out
        repaired += room < plain
        held = set(ram)
        most, energy = 0, 0.0
        for step in steps:
            v = index[step.node]
            if isinstance(step, Free):
                assert v in held
                held.discard(v)
                continue
            assert v not in held
            energy += nodes[v].page_in_j if isinstance(step, PageIn) else nodes[v].compute_j
            if isinstance(step, PageIn):
                assert v in stored
                most = max(most, sum(nodes[u].out_bytes for u in held) + nodes[v].out_bytes)
            else:
                assert isinstance(step, Compute)
                assert nodes[v].recomputable and stage <= an.recomp_until[v]
                assert all(u in held for u in an.preds[v] if nodes[u].out_bytes > 0)
                most = max(
                    most,
                    sum(nodes[u].out_bytes for u in held) + nodes[v].out_bytes + nodes[v].workspace_bytes,
                )
            held.add(v)
        assert held == after and most == peak <= room and energy == pytest.approx(spent)
        assert after <= keep
        assert (set(ram) | {v for v, _ in order}) & keep <= after
    assert repaired > 0 and failed > 0
