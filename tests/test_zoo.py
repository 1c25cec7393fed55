"""Every zoo model: forward vs onnxruntime, whole-model gradients vs finite differences,
C training vs numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import EXAMPLES, need_tools
from oputil import c_vs_reference, fd_check, max_rel_err, ort_outputs

from poet_edge import autodiff, frontend, reference, trainable

ZOO = sorted((EXAMPLES / "zoo").glob("*.onnx"))
LOSS = {"autoencoder": "mse"}


def _ids(paths):
    return [p.stem for p in paths]


def test_zoo_is_complete():
    assert {p.stem for p in ZOO} >= {
        "resnet8",
        "dscnn",
        "mobilenetv1_025",
        "autoencoder",
        "mobilenetv2_035",
        "lenet5",
        "bert_tiny",
    }
    assert sum(p.stat().st_size for p in ZOO) < 5_000_000


@pytest.mark.parametrize("path", ZOO, ids=_ids(ZOO))
def test_forward_matches_onnxruntime(path):
    g = frontend.load(path, batch=2)
    x = np.random.default_rng(0).standard_normal(g.shape(g.inputs[0])).astype(np.float32)
    ours = reference.run(g, {g.inputs[0]: x})[g.outputs[0]]
    (theirs,) = ort_outputs(onnx.load(str(path)), {g.inputs[0]: x})
    assert max_rel_err(ours, theirs) <= 1e-4


@pytest.mark.parametrize("path", ZOO, ids=_ids(ZOO))
def test_gradients_match_finite_differences(path):
    g = frontend.load(path, batch=1)
    loss = autodiff.Loss(LOSS.get(path.stem, "cross-entropy"))
    tg = autodiff.training_graph(g, loss)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(g.shape(g.inputs[0]))
    y = (
        rng.integers(0, tg.shape(g.outputs[0])[1], 1)
        if loss == autodiff.Loss.CROSS_ENTROPY
        else rng.standard_normal(tg.shape("labels"))
    )
    # a sample of parameters: the first, a middle and the last one (in graph order) whose gradient is large
    # enough for float64 central differences to resolve (random-init MobileNets have vanishing gradients
    # upstream, ~1e-11, far below the ~1e-10 round-off of a difference quotient)
    grads = reference.train_step(
        tg, x, y, {k: np.asarray(v, np.float64) for k, v in tg.params.items()}, 0.0, np.float64
    ).grads
    first_use = {p: min(i for i, n in enumerate(tg.nodes) if p in n.inputs) for p in tg.trainable}
    names = [
        p for p in sorted(tg.trainable, key=lambda p: (first_use[p], p)) if np.abs(grads[p]).max() > 1e-4
    ]
    assert len(names) >= 3
    pick = frozenset({names[0], names[len(names) // 2], names[-1]})
    sub = autodiff.training_graph(g, loss, pick)
    assert (
        fd_check(sub, x, y, samples=4, eps=(1e-5, 1e-6, 1e-7)) <= 1e-5
    )  # deep nets: round-off costs a digit


@pytest.mark.parametrize("train", ["all", "bias"])
@pytest.mark.parametrize("path", ZOO, ids=_ids(ZOO))
def test_c_training_matches_reference(path, tmp_path, train):
    need_tools("gcc")
    g = frontend.load(path)
    trainable.select(g, train)
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        path, tmp_path / "out", steps=5, loss=LOSS.get(path.stem, "cross-entropy"), train=train, ram="64MB"
    )
    assert max_rel_err(c_losses, ref_losses) <= 1e-4
    for name, ref in ref_params.items():
        assert max_rel_err(c_params[name], ref) <= 1e-4, name
