"""Test helpers: single-op ONNX models, finite-difference gradient checks, onnxruntime comparisons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from poet_edge import autodiff, frontend, reference
from poet_edge.ir import Graph


def single_op_model(
    op: str,
    shapes: Sequence[tuple[int, ...]],
    attrs: Mapping[str, object] | None = None,
    consts: Mapping[int, np.ndarray] | None = None,
    seed: int = 0,
    opset: int = 17,
    n_outputs: int = 1,
    scale: float = 1.0,
) -> onnx.ModelProto:
    """y = op(x + p0, p1, p2, ...): input i is a parameter of shapes[i], so every input's gradient is
    checked as a parameter gradient. ``consts`` gives inputs that are constants (e.g. a Reshape shape)."""
    rng = np.random.default_rng(seed)
    consts = dict(consts or {})
    inits, names = [], []
    nodes = []
    for i, shape in enumerate(shapes):
        if i in consts:
            inits.append(numpy_helper.from_array(np.asarray(consts[i]), f"c{i}"))
            names.append(f"c{i}")
            continue
        p = (scale * rng.standard_normal(shape)).astype(np.float32)
        inits.append(numpy_helper.from_array(p, f"p{i}"))
        names.append(f"p{i}")
    nodes.append(helper.make_node("Add", ["x", names[0]], ["t0"], name="input_add"))
    names[0] = "t0"
    outs = [f"y{k}" for k in range(n_outputs)]
    nodes.append(helper.make_node(op, names, outs, name="op", **dict(attrs or {})))
    final = outs[0]  # the loss is taken on the first output only
    graph = helper.make_graph(
        nodes,
        f"single_{op}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shapes[0]))],
        [helper.make_tensor_value_info(final, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    info = {vi.name: vi for vi in inferred.graph.value_info} | {vi.name: vi for vi in inferred.graph.output}
    model.graph.output[0].CopyFrom(info[final])
    return model


def load_model(model: onnx.ModelProto, batch: int = 1) -> Graph:
    onnx.checker.check_model(model)
    return frontend.to_ir(model, batch)


def mse_training(g: Graph, trainable: frozenset[str] | None = None) -> Graph:
    return autodiff.training_graph(g, autodiff.Loss.MSE, trainable)


def loss64(tg: Graph, x: np.ndarray, y: np.ndarray, params: Mapping[str, np.ndarray]) -> float:
    env = reference.run(tg, {tg.inputs[0]: x, tg.inputs[1]: y}, params, np.float64)
    return float(env["loss"])


def fd_check(
    tg: Graph,
    x: np.ndarray,
    y: np.ndarray,
    samples: int = 12,
    eps: float | tuple[float, ...] = 1e-6,
    seed: int = 0,
) -> float:
    """Worst relative error, over the trainable parameters, between autodiff gradients and central finite
    differences (float64) on up to ``samples`` elements of each: max|fd - autodiff| / max|autodiff| over the
    sampled elements (elementwise ratios would divide round-off by gradients that are nearly zero).

    With several step sizes each element takes the closest difference quotient: in a deep ReLU/ReLU6 net some
    step straddles a kink of one of ~1e5 activations, while a wrong rule is wrong at every step size."""
    steps = (eps,) if isinstance(eps, float) else tuple(eps)
    params = {k: np.asarray(v, np.float64) for k, v in tg.params.items()}
    grads = reference.train_step(tg, x, y, params, 0.0, np.float64).grads
    rng = np.random.default_rng(seed)
    worst = 0.0
    for p in sorted(tg.trainable):
        flat = params[p].reshape(-1)
        idx = rng.choice(flat.size, min(samples, flat.size), replace=False)
        an = grads[p].reshape(-1)[idx]
        diffs = np.full(len(idx), np.inf)
        for k, i in enumerate(idx):
            orig = flat[i]
            for h in steps:
                flat[i] = orig + h
                up = loss64(tg, x, y, params)
                flat[i] = orig - h
                down = loss64(tg, x, y, params)
                diffs[k] = min(diffs[k], abs((up - down) / (2 * h) - an[k]))
            flat[i] = orig
        scale = max(float(np.max(np.abs(an))), 1e-12)
        worst = max(worst, float(np.max(diffs)) / scale)
    return worst


def ort_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(feeds))


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """Relative error of a tensor in the max norm: max|a - b| / max|b| (elementwise ratios blow up on
    entries near zero, where float32 summation order alone changes the last bits)."""
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    assert a.shape == b.shape, (a.shape, b.shape)
    same_inf = np.isinf(a) & (a == b)  # an infinite constant (a mask's fill) that both sides keep
    if same_inf.any():
        a, b = a[~same_inf], b[~same_inf]
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)) if a.size else 0.0


def c_vs_reference(
    model_path,
    out_dir,
    steps: int = 5,
    batch: int = 1,
    loss: str = "mse",
    ram: str = "64MB",
    scheduler: str = "none",
    target: str = "host",
    sanitize: bool = False,
    lr: float = 0.01,
    device: str = "host",
    train: str = "all",
    optimizer=None,
):
    """Compiles ``model_path``, trains ``steps`` steps in C on ``target`` and in the numpy reference (float32)
    on the same data (``optimizer``: a poet_edge.optimizer.Optimizer, default plain SGD). Returns
    (c_losses, ref_losses, c_params, ref_params, outcome)."""
    from dataclasses import replace
    from pathlib import Path

    from poet_edge import runner
    from poet_edge.compiler import CompileOptions, compile_model
    from poet_edge.units import parse_size

    opts = CompileOptions(
        Path(model_path),
        device,
        parse_size(ram),
        Path(out_dir),
        batch,
        autodiff.Loss(loss),
        lr,
        8192,
        scheduler,
        train,
    )
    if optimizer is not None:
        opts = replace(opts, optimizer=optimizer)
    c = compile_model(opts)
    plan = runner.load_plan(Path(out_dir))
    data = runner.batches(plan, steps)
    ref_losses, ref_params = reference.train(c.training, data, lr)
    outcome = runner.run_project(Path(out_dir), target, steps, sanitize=sanitize)
    return [s.loss for s in outcome.steps], ref_losses, outcome.params, ref_params, outcome


def rel_close(a, b, rtol: float) -> bool:
    return max_rel_err(np.asarray(a), np.asarray(b)) <= rtol


def chain_model(steps, in_shape, opset=17, seed=0, scale=0.5):
    """x -> op_1 -> op_2 -> ...: each step is (op, extra inputs, attrs); an extra input is a parameter shape
    (tuple, drawn normal with standard deviation ``scale``), ``("pos", shape)`` for a parameter in
    [0.5, 1.5) (divisors), or a constant numpy array."""
    rng = np.random.default_rng(seed)
    inits, nodes, cur = [], [], "x"
    for i, (op, extras, attrs) in enumerate(steps):
        names = [cur]
        for j, e in enumerate(extras):
            name = f"{op.lower()}{i}_{j}"
            if isinstance(e, np.ndarray):
                value = e
            elif e[0] == "pos":
                value = rng.uniform(0.5, 1.5, e[1]).astype(np.float32)
            else:
                value = (scale * rng.standard_normal(e)).astype(np.float32)
            inits.append(numpy_helper.from_array(value, name))
            names.append(name)
        cur = f"t{i}"
        nodes.append(helper.make_node(op, names, [cur], name=f"{op.lower()}{i}", **attrs))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    model.graph.output[0].CopyFrom(inferred.graph.output[0])
    return model


def cli_and_qemu_bit_identical(model: onnx.ModelProto, tmp_path) -> None:
    """``poet inspect`` / ``compile`` / ``run`` (host) on the command line for ``model`` (batch 2, mse,
    cortex-m4 at 128 KB), then 3 steps on qemu-cortex-m4 give the host's bits."""
    from conftest import need_tools, poet

    from poet_edge import runner

    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    r = poet("inspect", path, "--batch", "2", "--loss", "mse")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    r = poet(
        "compile", path, "--device", "cortex-m4", "--ram", "128KB", "--batch", "2", "--loss", "mse", "-o", out
    )
    assert r.returncode == 0, r.stderr
    r = poet("run", out, "--steps", "2")
    assert r.returncode == 0 and "loss" in r.stdout, r.stderr
    host = runner.run_project(out, "host", 3)
    qemu = runner.run_project(out, "qemu-cortex-m4", 3)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]  # float equality: bit for bit
    for k, v in host.params.items():
        assert np.array_equal(v, qemu.params[k]), k
