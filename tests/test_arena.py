"""Arena planning: the verifier catches overlaps; plans are valid and never worse than TFLM's greedy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poet_edge import arena
from poet_edge.arena import ArenaPlan, Instance
from poet_edge.errors import PoetError
from poet_edge.schedule import Compute, Free, PageIn, PageOut, Schedule


def test_instances_follow_compute_free_and_page_in():
    s = Schedule(
        (
            Compute("a"),
            Compute("b"),
            PageOut("a"),
            Free("a"),
            Compute("c"),
            PageIn("a"),
            Free("b"),
            Compute("d"),
        ),
        "test",
    )
    insts = arena.instances(s, {"a": 10, "b": 20, "c": 0, "d": 4}, {"c": 100})
    assert [(i.value, i.size, i.start, i.end) for i in insts] == [
        ("a", 16, 0, 3),
        ("b", 32, 1, 6),
        ("c#ws", 112, 4, 4),
        ("a", 16, 5, 7),
        ("d", 16, 7, 7),
    ]


def test_verify_rejects_overlap():
    a, b = Instance("a", 16, 0, 2), Instance("b", 16, 1, 3)
    with pytest.raises(PoetError, match="overlap"):
        arena.verify(ArenaPlan((a, b), (0, 0), 16, 32, "bad"))
    arena.verify(ArenaPlan((a, b), (0, 16), 32, 32, "ok"))
    c = Instance("c", 16, 3, 4)  # lifetime disjoint from a: may share
    arena.verify(ArenaPlan((a, c), (0, 0), 16, 16, "ok"))
    with pytest.raises(PoetError, match="misaligned"):
        arena.verify(ArenaPlan((a,), (8,), 32, 16, "bad"))


instances = st.lists(
    st.tuples(st.integers(1, 64), st.integers(0, 30), st.integers(0, 10)).map(
        lambda t: Instance("v", 16 * t[0], t[1], t[1] + t[2])
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(instances)
def test_plans_are_valid_and_never_worse_than_tflm(insts):
    tflm = arena.plan_greedy_by_size(insts)
    best = arena.plan_best(insts)
    arena.verify(tflm)
    arena.verify(best)
    assert best.peak_live_bytes <= best.arena_bytes <= tflm.arena_bytes
