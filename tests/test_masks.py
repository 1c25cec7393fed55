"""1-bit masks (autodiff.TrainingOptions.relu_masks): ReluGrad / ClipGrad read a packed mask instead of a
float tensor, with the same bits in the numpy reference and in the generated C, and the planner frees the
float tensor (the floor never grows)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import need_tools
from test_fused_updates import cnn

from poet_edge import autodiff, frontend, planning, runner, trainable
from poet_edge.autodiff import Loss, TrainingOptions
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.memory_floor import memory_floor
from poet_edge.ops import clip, mask
from poet_edge.profiles import load_profile

MASKS = TrainingOptions(relu_masks=True)


def test_pack_round_trip():
    rng = np.random.default_rng(0)
    for n in (1, 31, 32, 33, 100):
        bits = rng.random(n) < 0.5
        words = mask.pack(bits)
        assert words.dtype == np.uint32 and words.shape == (mask.words(n),)
        assert np.array_equal(mask.unpack(words, n), bits)
    assert mask.pack(np.array([True, False, True])).tolist() == [0b101]


@pytest.mark.parametrize("lo, hi", [(0.0, 6.0), (None, 1.0), (-1.0, None), (2.0, -2.0), (0.5, 0.5)])
def test_clip_mask_of_y_equals_clip_grad_of_x(lo, hi):
    """ClipGrad tests X; the mask tests Y = Clip(X): the same selection for every X, NaN, infinities and
    signed zeros included, and for empty ranges (min >= max)."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 6.0, 5.99, 1.0, -1.0, 0.5, 3.0, -7.0], np.float32)
    attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
    dy = np.arange(1, x.size + 1, dtype=np.float32)
    (y,) = clip.forward([x], attrs)
    (m,) = mask.mask_forward([y], attrs)
    (want,) = clip.grad_forward([x, dy], attrs)
    (got,) = mask.grad_forward([m, dy], {})
    assert np.array_equal(want, got)


def _floor(tg) -> int:
    spec = planning.spec_from_graph(tg, 8192)
    return memory_floor(planning.price(spec, load_profile("host"), 1 << 62)).bytes


def test_rewrite_where_nothing_else_reads(tmp_path):
    path = cnn(tmp_path / "cnn.onnx", batch=1)
    for train, n_masks in (("all", 2), ("bias", 3)):
        g = frontend.load(path)
        chosen = trainable.select(g, train)
        plain = autodiff.training_graph(g, autodiff.Loss.CROSS_ENTROPY, chosen)
        tg = autodiff.training_graph(g, autodiff.Loss.CROSS_ENTROPY, chosen, options=MASKS)
        masks = [n for n in tg.nodes if n.op == "RangeMask"]
        assert len(masks) == n_masks, train  # all: the first Relu's output is read by the next dW
        assert not any(n.op in ("ReluGrad", "ClipGrad") for n in tg.nodes if n.name.startswith("grad/conv3"))
        assert all(tg.tensor(m.outputs[0]).dtype == "uint32" for m in masks)
        # the Clip now runs in place over its input (its gradient no longer reads it), MaskGrad in place too
        groups = {n.name for grp in planning.fusion_groups(tg) for n in grp[1:]}
        assert "clip3" in groups
        assert any(n.op == "MaskGrad" and n.name in groups for n in tg.nodes)
        assert _floor(tg) <= _floor(plain)


def test_c_on_host_bit_identical(tmp_path):
    need_tools("gcc")
    path = cnn(tmp_path / "cnn.onnx", batch=2)
    opts = CompileOptions(
        path, "host", 4 << 20, tmp_path / "p", 2, Loss.CROSS_ENTROPY, 0.05, 8192, "none", "bias"
    )
    compile_model(opts)
    compile_model(replace(opts, out=tmp_path / "m", training=MASKS))
    a = runner.run_project(tmp_path / "p", "host", 3)
    b = runner.run_project(tmp_path / "m", "host", 3)
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k
