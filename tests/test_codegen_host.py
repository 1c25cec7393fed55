"""Generated C on the host: equals the numpy reference, is deterministic, and is sanitizer-clean."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest
from conftest import need_tools
from oputil import c_vs_reference, max_rel_err


@pytest.mark.parametrize("loss", ["cross-entropy", "mse"])
def test_mlp_c_matches_reference_over_20_steps(mlp_path, tmp_path, loss):
    need_tools("gcc")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        mlp_path, tmp_path / "out", steps=20, batch=4, loss=loss, ram="64KB", lr=0.05
    )
    assert len(c_losses) == 20
    assert max_rel_err(c_losses, ref_losses) <= 1e-5
    for name, ref in ref_params.items():
        assert max_rel_err(c_params[name], ref.reshape(-1)) <= 1e-5, name
    if loss == "cross-entropy":
        assert np.mean(c_losses[-4:]) < np.mean(c_losses[:4])  # it learns the synthetic teacher


def test_compile_is_byte_identical(mlp_path, tmp_path):
    from poet_edge.autodiff import Loss
    from poet_edge.compiler import CompileOptions, compile_model

    for d in ("a", "b"):
        compile_model(CompileOptions(mlp_path, "cortex-m4", 256 * 1024, tmp_path / d, 2, Loss.CROSS_ENTROPY))
    cmp = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert Path("plan.json") in files and Path("poet_model.c") in files
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert not cmp.left_only and not cmp.right_only


def test_sanitizers_clean(mlp_path, tmp_path):
    need_tools("gcc")
    c_losses, ref_losses, *_ = c_vs_reference(mlp_path, tmp_path / "out", steps=3, batch=2, sanitize=True)
    assert max_rel_err(c_losses, ref_losses) <= 1e-5


def test_initial_parameters_round_trip_exactly(mlp_path, tmp_path):
    """Weights are emitted as decimal literals that read back to the same float32 bits."""
    need_tools("gcc")
    _, _, c_params, _, _ = c_vs_reference(mlp_path, tmp_path / "out", steps=1, batch=1, lr=0.0)
    from poet_edge import frontend

    g = frontend.load(mlp_path)
    for name, value in g.params.items():
        assert np.array_equal(c_params[name], value.reshape(-1)), name
