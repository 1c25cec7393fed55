"""--train selection, backward pruning, frozen parameters in flash, and `poet inspect`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import need_tools, poet
from oputil import c_vs_reference, fd_check, max_rel_err

from poet_edge import autodiff, frontend, trainable
from poet_edge.errors import PoetError
from poet_edge.ir import Phase


def test_selections(mlp_path):
    g = frontend.load(mlp_path)
    assert trainable.select(g, "bias") == {"fc0.bias", "fc1.bias", "fc2.bias"}
    assert trainable.select(g, "last:1") == {"fc2.weight", "fc2.bias"}
    assert trainable.select(g, "last:2") == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert trainable.select(g, r"^fc0\.") == {"fc0.weight", "fc0.bias"}
    for bad in ("last:0", "last:9", "nomatch", "[", "last:x"):
        with pytest.raises(PoetError, match="--train"):
            trainable.select(g, bad)


def test_pruning_last_layer_has_no_upstream_backward(mlp_path):
    g = frontend.load(mlp_path)
    tg = autodiff.training_graph(g, trainable=trainable.select(g, "last:1"))
    back = [n for n in tg.nodes if n.phase == Phase.BACKWARD]
    assert {n.op for n in back} == {"SoftmaxCrossEntropyGrad", "Gemm", "ReduceSumTo"}
    assert not any("fc1" in n.name or "fc0" in n.name or "relu" in n.name for n in back)


def test_pruning_bias_has_no_weight_gradients(mlp_path):
    g = frontend.load(mlp_path, batch=2)
    tg = autodiff.training_graph(g, trainable=trainable.select(g, "bias"))
    updated = {n.inputs[0] for n in tg.nodes if n.op == "SGDUpdate"}
    assert updated == {"fc0.bias", "fc1.bias", "fc2.bias"}
    weight_grads = [n for n in tg.nodes if n.op == "Gemm" and n.phase == Phase.BACKWARD and n.attr("transA")]
    assert not weight_grads  # dW = Aᵀ dY never appears
    rng = np.random.default_rng(0)
    assert fd_check(tg, rng.standard_normal((2, 1, 8, 8)), rng.integers(0, 10, 2)) <= 1e-6


@pytest.mark.parametrize("train", ["bias", "last:1"])
def test_partial_training_in_c(mlp_path, tmp_path, train):
    need_tools("gcc")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        mlp_path, tmp_path / "out", steps=5, batch=2, loss="cross-entropy", train=train, lr=0.1
    )
    assert max_rel_err(c_losses, ref_losses) <= 1e-5
    g = frontend.load(mlp_path)
    chosen = trainable.select(g, train)
    for name in g.params:
        assert max_rel_err(c_params[name], ref_params[name]) <= 1e-5
        if name not in chosen:  # frozen: untouched, and declared const (flash)
            assert np.array_equal(c_params[name], g.params[name].reshape(-1))
    src = (tmp_path / "out" / "poet_model.c").read_text()
    for name in g.params:
        var = "poet_param_" + name.replace(".", "_")
        qual = "static float" if name in chosen else "static const float"
        assert f"{qual} {var}[" in src


def test_frozen_parameters_take_no_ram(mlp_path, tmp_path):
    sizes = {}
    for train in ("all", "bias"):
        r = poet("compile", mlp_path, "--ram", "64KB", "-o", tmp_path / train, "--train", train)
        assert r.returncode == 0, r.stderr
        plan = json.loads((tmp_path / train / "plan.json").read_text())
        sizes[train] = plan["problem"]["fixed_ram"]["trainable_params"]
    assert sizes["all"] == 4 * (64 * 32 + 32 + 32 * 32 + 32 + 32 * 10) + 48  # fc2.bias (40 B) aligned to 48
    assert sizes["bias"] == 4 * (32 + 32) + 48


def test_inspect(mlp_path):
    r = poet("inspect", mlp_path, "--train", "last:1", "--json", "--no-fused-updates")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["forward_macs"] == 64 * 32 + 32 * 32 + 32 * 10
    assert d["backward_macs"] == 32 * 10  # only dW of the last layer
    assert d["training_nodes"] == {"forward": 6, "loss": 1, "backward": 3, "update": 2}
    fused = json.loads(poet("inspect", mlp_path, "--train", "last:1", "--json").stdout)
    assert fused["backward_macs"] == 32 * 10  # the same dW, computed by the fused update node
    assert fused["training_nodes"] == {"forward": 6, "loss": 1, "backward": 2, "update": 2}
    assert d["params_trainable"] == [2, 4 * (320 + 10)]
    assert d["floor_bytes"] <= d["no_remat_peak_bytes"]
    text = poet("inspect", mlp_path).stdout
    assert "memory floor" in text and "MACs per step" in text
