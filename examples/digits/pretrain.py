"""Pretrains the digits CNN on the host with poet-edge itself and writes its ONNX with the trained weights.

    python examples/digits/pretrain.py [OUT.onnx]      # default: examples/digits/digits_pretrained.onnx

Compiles ``digits_cnn.onnx`` (random weights) for the host, runs ``STEPS`` SGD steps of the generated C on
``upright_train.npz`` (``poet run --data``), evaluates on ``upright_test.npz`` before and after
(``--eval-data``), and writes the parameters after training into the ONNX initializers (digits.export).
The generated C gives the same bits on every target, so the output file is the same on every machine."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import onnx

from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.runner import run_project

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from digits import export  # noqa: E402

STEPS, BATCH, LR = 1500, 16, 0.05
PRETRAINED = HERE / "digits_pretrained.onnx"


def pretrain(out: Path = PRETRAINED, work: Path | None = None) -> dict[str, float | None]:
    """Writes ``out``; returns the upright test accuracy before and after pretraining."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(work or tmp) / "pretrain"
        compile_model(CompileOptions(HERE / "digits_cnn.onnx", "host", 1 << 20, project, BATCH, lr=LR))
        r = run_project(
            project, "host", STEPS, HERE / "upright_train.npz", eval_data=HERE / "upright_test.npz"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(export(onnx.load(HERE / "digits_cnn.onnx"), r.params), out)
    return {("before", "after")[e.phase]: e.accuracy for e in r.evals}


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PRETRAINED
    acc = pretrain(target)
    print(
        f"pretrained on the host ({STEPS} steps, batch {BATCH}, lr {LR}): upright test accuracy "
        f"{100 * (acc['before'] or 0):.1f}% -> {100 * (acc['after'] or 0):.1f}%; wrote {target}"
    )
