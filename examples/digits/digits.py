"""The adaptation demo's model: a small CNN for the 8x8 digits, and the step that writes trained
parameters back into its ONNX initializers.

    python examples/digits/digits.py model OUT.onnx                  # the CNN, random weights (seed 0)
    python examples/digits/digits.py export IN.onnx PARAMS.npz OUT.onnx
        # IN.onnx with every initializer found in PARAMS.npz (from `poet run --dump-params`) replaced

input (batch, 1, 8, 8) -> Conv 3x3 (8) -> Relu -> MaxPool 2 -> Conv 3x3 (16) -> Relu -> MaxPool 2
-> Flatten (64) -> Gemm (32) -> Relu -> Gemm (10) -> logits. 3,658 parameters. Deterministic bytes."""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def he(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    inits = {
        "conv1.weight": he(8, 1, 3, 3),
        "conv1.bias": np.zeros(8, np.float32),
        "conv2.weight": he(16, 8, 3, 3),
        "conv2.bias": np.zeros(16, np.float32),
        "fc1.weight": he(32, 64),
        "fc1.bias": np.zeros(32, np.float32),
        "fc2.weight": he(10, 32) / 2,
        "fc2.bias": np.zeros(10, np.float32),
    }
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", **conv),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", **pool),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", **conv),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", **pool),
        helper.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r3"], name="relu3"),
        helper.make_node("Gemm", ["r3", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="poet-edge")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def export(model: onnx.ModelProto, params: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` whose initializers named in ``params`` hold those values (flat or shaped)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, init in enumerate(out.graph.initializer):
        if init.name in params:
            shape = tuple(init.dims)
            value = np.asarray(params[init.name], np.float32).reshape(shape)
            out.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, init.name))
    onnx.checker.check_model(out)
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["model"] and len(argv) == 2:
        onnx.save(make_model(), argv[1])
    elif argv[:1] == ["export"] and len(argv) == 4:
        with np.load(argv[2]) as z:
            params = {k: z[k] for k in z.files}
        onnx.save(export(onnx.load(argv[1]), params), argv[3])
    else:
        print(__doc__)
        return 2
    print(f"wrote {argv[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
