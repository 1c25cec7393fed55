"""Backward pruning per zoo model: training-graph nodes, backward MACs, trainable bytes, memory floor and
no-remat peak for --train all, bias and last:1 (batch 1; autoencoder with MSE).
Run: .venv/bin/python bench/pruning.py"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import MODELS, table  # noqa: E402

from poet_edge.autodiff import Loss  # noqa: E402
from poet_edge.inspect_model import inspect  # noqa: E402


def main() -> int:
    rows = []
    for m in MODELS:
        for train in ("all", "bias", "last:1"):
            r = inspect(m.path, 1, Loss(m.loss), train)
            rows.append(
                {
                    "model": m.name,
                    "train": train,
                    "fwd nodes": r.forward_nodes,
                    "train nodes": sum(r.training_nodes.values()),
                    "bwd nodes": r.training_nodes["backward"],
                    "fwd MACs": f"{r.forward_macs:,}",
                    "bwd MACs": f"{r.backward_macs:,}",
                    "trainable B": f"{r.params_trainable[1]:,}",
                    "floor B": f"{r.floor_bytes:,}",
                    "no-remat peak B": f"{r.no_remat_peak_bytes:,}",
                }
            )
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
