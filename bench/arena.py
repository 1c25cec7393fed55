"""Arena planner overhead (arena / peak live bytes) vs TensorFlow Lite Micro's greedy-by-size planner,
on the same schedules: every zoo model; every baseline scheduler, scale and the MILP (10 s limit); budgets =
device RAM, half of it, and 1.1x the memory floor. Run: .venv/bin/python bench/arena.py"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import MODELS, table, training  # noqa: E402

from poet_edge import arena, planning  # noqa: E402
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


def main() -> int:
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
