"""Arena planner overhead (arena / peak live bytes) vs TensorFlow Lite Micro's greedy-by-size planner,
on the same schedules: every zoo model; every baseline scheduler, scale and the MILP (10 s limit); budgets =
device RAM, half of it, and 1.1x the memory floor. Then the large graphs, where planning time matters: the
unrolled GRU (examples/zoo/gru_unrolled.onnx, 1,817 nodes) and random 2,000-node DAGs, under the greedy
scheduler. Run: .venv/bin/python bench/arena.py  (--large: only the large graphs)"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import MODELS, ZOO, table, training  # noqa: E402

from poet_edge import arena, autodiff, frontend, graphgen, planning  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers import BASELINES, SCHEDULERS  # noqa: E402
from poet_edge.schedulers.milp import MilpOptions, schedule_milp  # noqa: E402
from poet_edge.schedulers.scale import schedule_scale  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

DEVICE = "cortex-m4"
MILP_SECONDS = 10.0  # the MILP's time limit here: its arena, not its optimality, is measured
SOLVERS = {
    **{name: SCHEDULERS[name] for name in BASELINES},
    "scale": schedule_scale,
    "milp": lambda p: schedule_milp(p, MilpOptions(time_limit_s=MILP_SECONDS)),
}


def _large_row(name: str, insts: list[arena.Instance]) -> dict[str, object]:
    t0 = time.perf_counter()
    ours = arena.plan_best(insts)
    seconds = time.perf_counter() - t0
    tflm = arena.plan_greedy_by_size(insts)
    arena.verify(ours)
    return {
        "graph": name,
        "instances": len(insts),
        "peak live": ours.peak_live_bytes,
        "tflm arena": tflm.arena_bytes,
        "ours arena": ours.arena_bytes,
        "ours %": f"{100 * (ours.overhead - 1):.2f}",
        "planner": ours.planner,
        "plan s": f"{seconds:.2f}",
    }


def large() -> str:
    """The unrolled GRU at 100 KB and 2,000-node random DAGs halfway between floor and no-remat peak."""
    profile = load_profile(DEVICE)
    greedy = SCHEDULERS["greedy"]
    rows = []
    tg = autodiff.training_graph(frontend.load(ZOO / "gru_unrolled.onnx", 1))
    spec = planning.spec_from_graph(tg, profile.mcu.ram_reserve_bytes)
    problem = planning.price(spec, profile, 100 * 1024 - spec.fixed.total)
    ws = {n.name: n.workspace_bytes for n in problem.nodes}
    insts = arena.instances(greedy(problem), {n.name: n.out_bytes for n in spec.nodes}, ws)
    rows.append(_large_row(f"gru_unrolled ({len(tg.nodes)} nodes), 100K", insts))
    for seed in (1, 2):
        p = graphgen.random_layered_dag(2000, seed=seed, bytes_range=(16, 4096))
        unlimited = replace(p, budget_bytes=1 << 62)
        peak = simulate(unlimited, SCHEDULERS["none"](unlimited)).peak_ram_bytes
        q = replace(p, budget_bytes=(peak + memory_floor(unlimited).bytes) // 2)
        ws = {n.name: n.workspace_bytes for n in q.nodes}
        insts = arena.instances(greedy(q), {n.name: n.out_bytes for n in q.nodes}, ws)
        rows.append(_large_row(f"random DAG 2000 nodes, seed {seed}", insts))
    cols = ["graph", "instances", "peak live", "tflm arena", "ours arena", "ours %", "planner", "plan s"]
    return table(rows, cols)


def main() -> int:
    if "--large" in sys.argv:
        print(large())
        return 0
    profile = load_profile(DEVICE)
    rows = []
    worst = 1.0
    slowest = 0.0
    validated: dict[str, int] = {}
    for m in MODELS:
        tg, spec = training(m, profile)
        floor = memory_floor(planning.price(spec, profile, 1 << 62)).bytes
        sizes = planning.value_bytes(tg)
        ram = profile.mcu.ram_bytes
        for label, budget in (("RAM", ram), ("RAM/2", ram // 2), ("1.1x floor", int(1.1 * floor))):
            problem = planning.price(spec, profile, budget)
            for name, fn in SOLVERS.items():
                row: dict[str, object] = {
                    "model": m.name,
                    "budget": f"{label} {budget // 1024}K",
                    "scheduler": name,
                }
                try:
                    sched = fn(problem)
                except PoetError:
                    rows.append({**row, "instances": "no schedule"})
                    continue
                simulate(problem, sched, profile)  # raises InvalidSchedule: every schedule is replayed
                validated[name] = validated.get(name, 0) + 1
                ws = {n.name: n.workspace_bytes for n in problem.nodes}
                insts = arena.instances(sched, sizes, ws)
                t0 = time.perf_counter()
                ours = arena.plan_best(insts)
                seconds = time.perf_counter() - t0
                tflm = arena.plan_greedy_by_size(insts)
                arena.verify(ours)
                arena.verify(tflm)
                worst = max(worst, ours.overhead)
                slowest = max(slowest, seconds)
                rows.append(
                    {
                        **row,
                        "instances": len(insts),
                        "peak live": ours.peak_live_bytes,
                        "tflm arena": tflm.arena_bytes,
                        "tflm %": f"{100 * (tflm.overhead - 1):.2f}",
                        "ours arena": ours.arena_bytes,
                        "ours %": f"{100 * (ours.overhead - 1):.2f}",
                        "planner": ours.planner,
                        "plan s": f"{seconds:.2f}",
                    }
                )
    print(
        table(
            rows,
            [
                "model",
                "budget",
                "scheduler",
                "instances",
                "peak live",
                "tflm arena",
                "tflm %",
                "ours arena",
                "ours %",
                "planner",
                "plan s",
            ],
        )
    )
    counts = ", ".join(f"{k} {v}" for k, v in validated.items())
    print(f"\nschedules replayed by the simulator, all valid: {counts}")
    print(f"worst overhead of our planner: {100 * (worst - 1):.2f}% over peak live bytes (target <= 2%)")
    print(f"slowest plan of our planner: {slowest:.2f} s (plan s: wall time of plan_best, machine-dependent)")
    print()
    print(large())
    return 0


if __name__ == "__main__":
    sys.exit(main())
