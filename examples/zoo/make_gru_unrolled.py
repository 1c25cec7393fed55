"""Writes examples/zoo/gru_unrolled.onnx: a keyword spotter with an unrolled GRUCell, built with onnx.helper.

Input batch x 49 x 10 (49 MFCC frames of 10 coefficients), hidden 32, one GRUCell step per frame (the
weights are shared by all 49 steps), the last hidden state -> Gemm -> 12 classes. Each step is what
torch.onnx exports for ``nn.GRUCell`` (torch's gru_cell decomposition)::

    gi = x_t W_ih^T + b_ih      gh = h W_hh^T + b_hh       (Gemm, Gemm)
    i_r, i_z, i_n = split(gi)   h_r, h_z, h_n = split(gh)  (Split, Split)
    r = sigmoid(i_r + h_r)      z = sigmoid(i_z + h_z)
    n = tanh(i_n + r * h_n)     h' = n + z * (h - n)

The initial state is zero, so step 0 has gh = b_hh and h' = n - z * n (no zero tensor in the file: an
initializer would be a trainable parameter). Weights are drawn like PyTorch's default init,
U(-1/sqrt(hidden), 1/sqrt(hidden)), from a fixed seed.

Run: .venv/bin/python examples/zoo/make_gru_unrolled.py  (deterministic: same bytes every time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STEPS, FEATURES, HIDDEN, CLASSES = 49, 10, 32, 12


def _step(t: int, x: str, h: str | None) -> tuple[list[onnx.NodeProto], str]:
    """The nodes of GRUCell step ``t`` on input ``x`` (batch x FEATURES) and state ``h`` (None: zero)."""
    p, node = f"s{t}/", helper.make_node
    nodes = [node("Gemm", [x, "W_ih", "b_ih"], [p + "gi"], name=p + "gemm_x", transB=1)]
    nodes.append(node("Split", [p + "gi"], [p + "i_r", p + "i_z", p + "i_n"], name=p + "split_x", axis=1))
    if h is None:
        nodes.append(node("Split", ["b_hh"], [p + "h_r", p + "h_z", p + "h_n"], name=p + "split_h", axis=0))
    else:
        nodes.append(node("Gemm", [h, "W_hh", "b_hh"], [p + "gh"], name=p + "gemm_h", transB=1))
        nodes.append(node("Split", [p + "gh"], [p + "h_r", p + "h_z", p + "h_n"], name=p + "split_h", axis=1))
    nodes += [
        node("Add", [p + "i_r", p + "h_r"], [p + "r_in"], name=p + "add_r"),
        node("Sigmoid", [p + "r_in"], [p + "r"], name=p + "sig_r"),
        node("Add", [p + "i_z", p + "h_z"], [p + "z_in"], name=p + "add_z"),
        node("Sigmoid", [p + "z_in"], [p + "z"], name=p + "sig_z"),
        node("Mul", [p + "r", p + "h_n"], [p + "rh"], name=p + "mul_r"),
        node("Add", [p + "i_n", p + "rh"], [p + "n_in"], name=p + "add_n"),
        node("Tanh", [p + "n_in"], [p + "n"], name=p + "tanh_n"),
    ]
    if h is None:
        nodes += [
            node("Mul", [p + "z", p + "n"], [p + "zn"], name=p + "mul_z"),
            node("Sub", [p + "n", p + "zn"], [p + "h"], name=p + "sub_h"),
        ]
    else:
        nodes += [
            node("Sub", [h, p + "n"], [p + "d"], name=p + "sub_d"),
            node("Mul", [p + "z", p + "d"], [p + "zd"], name=p + "mul_z"),
            node("Add", [p + "n", p + "zd"], [p + "h"], name=p + "add_h"),
        ]
    return nodes, p + "h"


def make_gru_unrolled(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    k = 1.0 / np.sqrt(HIDDEN)

    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-k, k, shape).astype(np.float32)

    weights = {
        "W_ih": u(3 * HIDDEN, FEATURES),
        "W_hh": u(3 * HIDDEN, HIDDEN),
        "b_ih": u(3 * HIDDEN),
        "b_hh": u(3 * HIDDEN),
        "fc.weight": u(CLASSES, HIDDEN),
        "fc.bias": u(CLASSES),
    }
    consts = [numpy_helper.from_array(np.array([t], np.int64), f"t{t}") for t in range(STEPS + 1)]
    consts.append(numpy_helper.from_array(np.array([1], np.int64), "time_axis"))
    nodes: list[onnx.NodeProto] = []
    h: str | None = None
    for t in range(STEPS):  # frame t: input[:, t:t+1, :] flattened to batch x FEATURES
        frame = [f"s{t}/frame", f"s{t}/x"]
        nodes.append(
            helper.make_node(
                "Slice", ["input", f"t{t}", f"t{t + 1}", "time_axis"], frame[:1], name=f"s{t}/slice"
            )
        )
        nodes.append(helper.make_node("Flatten", frame[:1], frame[1:], name=f"s{t}/flatten", axis=1))
        step, h = _step(t, frame[1], h)
        nodes += step
    nodes.append(helper.make_node("Gemm", [h, "fc.weight", "fc.bias"], ["output"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes,
        "gru_unrolled",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", STEPS, FEATURES])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", CLASSES])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()] + consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="poet-edge")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    out = Path(__file__).with_name("gru_unrolled.onnx")
    onnx.save(make_gru_unrolled(), str(out))
    print(f"wrote {out}")
