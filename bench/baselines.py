"""Baseline schedulers on cortex-m4: peak RAM, latency and energy of none / recompute-all / page-all / greedy
at the device RAM (256 KB) and half of it. Run: .venv/bin/python bench/baselines.py [model ...]"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import MODELS, table, training  # noqa: E402

from poet_edge import planning  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402
from poet_edge.memory_floor import memory_floor  # noqa: E402
from poet_edge.profiles import load_profile  # noqa: E402
from poet_edge.schedulers import SCHEDULERS  # noqa: E402
from poet_edge.simulator import simulate  # noqa: E402

BASELINES = ("none", "recompute-all", "page-all", "greedy")


def main(names: list[str]) -> int:
    profile = load_profile("cortex-m4")
    rows = []
    for m in MODELS:
        if names and m.name not in names:
            continue
        _, spec = training(m, profile)
        floor = memory_floor(planning.price(spec, profile, 1 << 62)).bytes
        for budget in (profile.mcu.ram_bytes, profile.mcu.ram_bytes // 2):
            problem = planning.price(spec, profile, budget)
            for name in BASELINES:
                row = {
                    "model": f"{m.name} ({m.train})",
                    "budget KB": budget // 1024,
                    "floor KB": floor // 1024,
                    "scheduler": name,
                }
                try:
                    sim = simulate(problem, SCHEDULERS[name](problem), profile)
                except PoetError as e:
                    rows.append({**row, "peak KB": "—", "note": str(e).split(";")[0][:70]})
                    continue
                rows.append(
                    {
                        **row,
                        "peak KB": f"{sim.peak_ram_bytes / 1024:.1f}",
                        "latency ms": f"{sim.latency_s * 1e3:.1f}",
                        "energy mJ": f"{sim.energy_j * 1e3:.2f}",
                        "recomp": sim.n_recomputations,
                        "page-outs": sim.n_page_outs,
                    }
                )
    print(
        table(
            rows,
            [
                "model",
                "budget KB",
                "floor KB",
                "scheduler",
                "peak KB",
                "latency ms",
                "energy mJ",
                "recomp",
                "page-outs",
                "note",
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
