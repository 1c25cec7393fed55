"""Writes examples/mlp.onnx: a 2-hidden-layer MLP (64 -> 32 -> 32 -> 10) built with onnx.helper.

Run: .venv/bin/python examples/make_mlp.py  (deterministic: same bytes every time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_mlp(sizes: tuple[int, ...] = (64, 32, 32, 10), seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "x"
    nodes.append(helper.make_node("Flatten", ["input"], ["x"], name="flatten", axis=1))
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        w = (rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32)
        b = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"), numpy_helper.from_array(b, f"fc{i}.bias")]
        out = f"fc{i}" if i < len(sizes) - 2 else "logits"
        nodes.append(
            helper.make_node("Gemm", [prev, f"fc{i}.weight", f"fc{i}.bias"], [out], name=f"fc{i}", transB=1)
        )
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"], name=f"relu{i}"))
            prev = f"relu{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", sizes[-1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="poet-edge")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    out = Path(__file__).with_name("mlp.onnx")
    onnx.save(make_mlp(), str(out))
    print(f"wrote {out}")
