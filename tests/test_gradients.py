"""Backward rules vs central finite differences in float64 (rel. error <= 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
from oputil import fd_check, load_model, mse_training, single_op_model

from poet_edge import autodiff, frontend

CASES = [
    ("Gemm", [(3, 4), (4, 5), (5,)], {}),
    ("Gemm", [(3, 4), (5, 4), (1, 5)], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", [(4, 3), (4, 5), (3, 1)], {"transA": 1}),
    ("Gemm", [(4, 3), (5, 4), (3, 5)], {"transA": 1, "transB": 1, "beta": -1.5}),
    ("Gemm", [(3, 4), (4, 5)], {}),
    ("MatMul", [(3, 4), (4, 6)], {}),
    ("Add", [(2, 3, 4), (4,)], {}),
    ("Add", [(2, 3, 4), (3, 1)], {}),
    ("Add", [(2, 1, 4), (2, 3, 1)], {}),
    ("Relu", [(3, 7)], {}),
    ("Flatten", [(2, 3, 4)], {"axis": 2}),
]


@pytest.mark.parametrize("op,shapes,attrs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_gradient(op, shapes, attrs):
    tg = mse_training(load_model(single_op_model(op, shapes, attrs)))
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shapes[0])
    y = rng.standard_normal(tg.shape("labels"))
    assert fd_check(tg, x, y) <= 1e-6


def test_reshape_gradient():
    model = single_op_model("Reshape", [(2, 6), (3,)], consts={1: np.array([3, -1, 2], np.int64)})
    tg = mse_training(load_model(model))
    rng = np.random.default_rng(2)
    assert fd_check(tg, rng.standard_normal((2, 6)), rng.standard_normal((3, 2, 2))) <= 1e-6


@pytest.mark.parametrize("loss", list(autodiff.Loss))
def test_mlp_gradient(mlp_path, loss):
    g = frontend.load(mlp_path, batch=3)
    tg = autodiff.training_graph(g, loss)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1, 8, 8))
    y = rng.integers(0, 10, 3) if loss == autodiff.Loss.CROSS_ENTROPY else rng.standard_normal((3, 10))
    assert fd_check(tg, x, y, samples=8) <= 1e-6


def test_cross_entropy_matches_torch_definition(mlp_path):
    """torch.nn.functional.cross_entropy(reduction='mean'): mean_i(logsumexp(z_i) - z_i[y_i])."""
    from poet_edge import reference

    g = frontend.load(mlp_path, batch=5)
    tg = autodiff.training_graph(g)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((5, 1, 8, 8)), rng.integers(0, 10, 5)
    env = reference.run(tg, {"input": x, "labels": y}, dtype=np.float64)
    z = env["logits"]
    expect = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(5), y])
    assert abs(env["loss"] - expect) <= 1e-12 * abs(expect)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    p[np.arange(5), y] -= 1
    np.testing.assert_allclose(env[tg.nodes[7].outputs[0]], p / 5, rtol=1e-12)


def test_sgd_update_is_p_minus_lr_g(mlp_path):
    from poet_edge import reference

    tg = autodiff.training_graph(frontend.load(mlp_path, batch=2))
    rng = np.random.default_rng(5)
    params = {k: np.asarray(v, np.float64) for k, v in tg.params.items()}
    r = reference.train_step(
        tg, rng.standard_normal((2, 1, 8, 8)), np.array([1, 2]), params, 0.25, np.float64
    )
    for p in params:
        np.testing.assert_array_equal(r.params[p], params[p] - 0.25 * r.grads[p])
