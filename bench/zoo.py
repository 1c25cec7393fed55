"""The models the benchmarks run on, with the loss and trainable set each one is trained with."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "examples" / "zoo"
sys.path.insert(0, str(ROOT))

from poet_edge import autodiff, frontend, planning, trainable  # noqa: E402
from poet_edge.ir import Graph  # noqa: E402
from poet_edge.profiles import Profile  # noqa: E402


@dataclass(frozen=True)
class ZooModel:
    name: str
    path: Path
    loss: str = "cross-entropy"
    train: str = "all"
    batch: int = 1


MODELS = (
    ZooModel("mlp", ROOT / "examples" / "mlp.onnx", batch=8),
    ZooModel("autoencoder", ZOO / "autoencoder.onnx", loss="mse", train="bias", batch=4),
    ZooModel("lenet5", ZOO / "lenet5.onnx", train="all"),
    ZooModel("resnet8", ZOO / "resnet8.onnx", train="bias"),
    ZooModel("dscnn", ZOO / "dscnn.onnx", train="bias"),
    ZooModel("mobilenetv1_025", ZOO / "mobilenetv1_025.onnx", train="bias"),
    ZooModel("mobilenetv2_035", ZOO / "mobilenetv2_035.onnx", train="bias"),
    ZooModel("bert_tiny", ZOO / "bert_tiny.onnx", train="bias"),
)


def training(m: ZooModel, profile: Profile) -> tuple[Graph, planning.ProblemSpec]:
    """The model's training graph (its loss and trainable set) and the device-independent problem spec."""
    g = frontend.load(m.path, m.batch)
    tg = autodiff.training_graph(g, autodiff.Loss(m.loss), trainable.select(g, m.train))
    return tg, planning.spec_from_graph(tg, profile.mcu.ram_reserve_bytes)


def table(rows: list[dict[str, object]], columns: list[str]) -> str:
    """A plain fixed-width text table."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    line = "  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=False))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=False)) for row in cells]
    return "\n".join(out)
