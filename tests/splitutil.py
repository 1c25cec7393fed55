"""Helpers of the operator-splitting tests: small ONNX models saved from nodes, and the numpy step of a
split graph against the unsplit one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from oputil import max_rel_err

from poet_edge import autodiff, frontend, planning, reference, runner, splitting, trainable
from poet_edge.ir import Graph
from poet_edge.memory_floor import memory_floor
from poet_edge.profiles import load_profile


class Params:
    """Random float32 initializers drawn in turn from one seed: ``param(name, *shape)`` adds one (normal,
    times ``scale``) to ``inits`` and returns its name."""

    def __init__(self, seed: int, scale: float) -> None:
        self.rng = np.random.default_rng(seed)
        self.scale = scale
        self.inits: list[onnx.TensorProto] = []

    def __call__(self, name: str, *shape: int) -> str:
        x = (self.scale * self.rng.standard_normal(shape)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(x, name))
        return name


def save_model(path: Path, name: str, nodes: list, inits: list, x: list[int], y: list[int]) -> Path:
    """An opset-17 model of ``nodes`` from input x (float, shape ``x``) to output y, saved at ``path``."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def assert_split_close(tg: Graph, s: splitting.Split, lr: float, steps: int) -> None:
    """The numpy steps of the split graph (blocks joined) within 1e-6 of the unsplit graph's: losses and
    parameters, each as max|a - b| / max|b|."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(tg.shape(tg.inputs[0])).astype(np.float32)
    y = rng.integers(0, 5, tg.shape(tg.inputs[1])).astype(np.int32)
    la, a = reference.train(tg, [(x, y)] * steps, lr)
    lb, b = reference.train(s.graph, [(x, y)] * steps, lr)
    b = s.join_params(b)
    assert max_rel_err(np.array(lb), np.array(la)) <= 1e-6
    for k in a:
        assert max_rel_err(b[k], a[k]) <= 1e-6, k


def assert_same_bits(plain_dir: Path, split_dir: Path, steps: int) -> runner.RunOutcome:
    """The split project gives the unsplit project's losses and parameters bit for bit, on the host and
    on qemu-cortex-m4; the split project's host run."""
    plain = runner.run_project(plain_dir, "host", steps)
    host = runner.run_project(split_dir, "host", steps)
    qemu = runner.run_project(split_dir, "qemu-cortex-m4", steps)
    assert [s.loss for s in plain.steps] == [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k, v in plain.params.items():
        assert np.array_equal(v, host.params[k]) and np.array_equal(v, qemu.params[k]), k
    return host


def training_graph(path: Path, train: str = "all") -> Graph:
    """The model at ``path``, cross-entropy, ``train``'s parameters, with the default exact rewrites."""
    g = frontend.load(path)
    chosen = trainable.select(g, train)
    return autodiff.training_graph(g, autodiff.Loss.CROSS_ENTROPY, chosen, options=autodiff.DEFAULT_OPTIONS)


def stored_floor(tg: Graph, reserve: int = 1024) -> int:
    """The memory floor of ``tg`` on the host profile, every trainable parameter in storage."""
    spec = planning.spec_from_graph(tg, reserve, stored=frozenset(tg.trainable))
    return memory_floor(planning.price(spec, load_profile("host"), 1 << 40)).bytes
