"""Inference in the training runtime: the forward-only graph of ``poet_predict`` and the forward + loss
graph of ``poet_eval_step``, cut from the training graph so they read the same parameter arrays.

Each is scheduled on its own (same scheduler, same ``--ram``; poet_predict from poet_eval_step's schedule
where the forward pass must recompute or page: :func:`without_loss`) and shares the training step's
arena: the three functions run at different times, so the arena is as large as the largest of the three
plans, and the fixed RAM (parameters, the caller's x / labels / logits buffers, the reserve) is the same
for all."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from poet_edge.arena import ArenaPlan
from poet_edge.codegen.emit import StoragePlan
from poet_edge.ir import Graph, Node, Phase, Role
from poet_edge.planning import FixedRam, ProblemSpec
from poet_edge.problem import SchedulingProblem
from poet_edge.schedule import Move, Schedule, SolveReport
from poet_edge.simulator import SimResult

PREDICT = "predict"
EVAL = "eval"
MODES = (PREDICT, EVAL)


def logits(tg: Graph) -> str:
    """The model output: the first input of the training graph's loss node."""
    return next(n.inputs[0] for n in tg.nodes if n.phase == Phase.LOSS)


def _needed(nodes: list[Node], outputs: tuple[str, ...]) -> tuple[Node, ...]:
    """The nodes ``outputs`` depend on, in their original order."""
    want, keep = set(outputs), []
    for n in reversed(nodes):
        if want & set(n.outputs):
            keep.append(n)
            want.update(n.inputs)
    return tuple(reversed(keep))


def mode_graph(tg: Graph, mode: str) -> Graph:
    """predict: forward nodes to the logits, inputs (x,). eval: forward + loss nodes, inputs (x, labels),
    output the loss. Parameters (and which are trainable) are the training graph's."""
    phases = (Phase.FORWARD,) if mode == PREDICT else (Phase.FORWARD, Phase.LOSS)
    outputs = (logits(tg),) if mode == PREDICT else tg.outputs
    nodes = _needed([n for n in tg.nodes if n.phase in phases], outputs)
    inputs = tuple(t for t in tg.inputs if mode == EVAL or tg.tensor(t).role != Role.LABEL)
    used = {t for n in nodes for t in (*n.inputs, *n.outputs)} | set(inputs)
    tensors = {k: v for k, v in tg.tensors.items() if k in used}
    return Graph(tensors, nodes, inputs, outputs, tg.params, tg.trainable)


def without_loss(problem: SchedulingProblem, ev: Schedule) -> Schedule:
    """poet_predict's schedule from poet_eval_step's (``ev``): its steps on ``problem``'s nodes (the loss
    nodes' and the arena's moves dropped), so what is resident is at every step a subset of what ``ev``
    held there. The eval graph is the predict graph and the loss, so the least-cost predict schedule is,
    but for the loss, the least-cost eval one (resnet8 --train bias at 96 KB, --effort quick: a scale run
    of its own takes long and finds a costlier schedule than this one, which costs poet_eval_step's
    energy less the loss)."""
    names = {n.name for n in problem.nodes}
    steps = tuple(s for s in ev.steps if s.node in names and not isinstance(s, Move))
    report = SolveReport.of(status="feasible", schedule_from="poet_eval_step's schedule without the loss")
    return Schedule(steps, ev.solver, report)


def with_fixed(spec: ProblemSpec, fixed: FixedRam) -> ProblemSpec:
    """``spec`` with the training step's fixed RAM: the buffers that exist whatever function runs."""
    return replace(spec, fixed=fixed)


@dataclass(frozen=True)
class ModePlan:
    """One inference function, planned: its graph, schedule, simulation and arena plan."""

    mode: str
    graph: Graph
    spec: ProblemSpec
    problem: SchedulingProblem
    schedule: Schedule
    sim: SimResult
    arena: ArenaPlan
    storage: StoragePlan

    def to_json(self, deterministic_info: tuple[str, ...]) -> dict[str, Any]:
        return {
            "nodes": [n.name for n in self.graph.nodes],
            "output_shape": list(self.graph.shape(self.graph.outputs[0])),
            "problem": self.spec.to_json(),
            "schedule": {
                "solver": self.schedule.solver,
                "steps": self.schedule.to_json(),
                "info": self.schedule.report.to_json(deterministic_info),
            },
            "simulation": self.sim.to_json(),
            "arena_bytes": self.arena.arena_bytes,
            "ram_bytes": self.spec.fixed.total + self.arena.arena_bytes,
            "storage": {"bytes": self.storage.total_bytes, "offsets": self.storage.offsets},
        }
