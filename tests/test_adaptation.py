"""The adaptation demo (examples/digits): its committed files are what its scripts make, and fine-tuning
on the rotated digits on qemu-cortex-m4 raises the held-out accuracy, bit-identical to the host."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import runner
from poet_edge.compiler import CompileOptions, compile_model

DIGITS = EXAMPLES / "digits"
sys.path.insert(0, str(DIGITS))


def test_committed_data_is_what_make_data_writes(tmp_path):
    pytest.importorskip("sklearn", reason="the 'demo' extra (scikit-learn) regenerates the data")
    import make_data

    for path in make_data.write(tmp_path):
        with np.load(path) as new, np.load(DIGITS / path.name) as old:
            assert np.array_equal(new["x"], old["x"]) and np.array_equal(new["y"], old["y"]), path.name
            assert new["x"].dtype == np.float32 and new["y"].dtype == np.int32
            assert new["x"].shape[1:] == (1, 8, 8) and set(np.unique(new["y"])) == set(range(10))


def test_rotated_domain_is_the_upright_digits_turned():
    with np.load(DIGITS / "rotated_test.npz") as z:
        x = z["x"]
    back = np.rot90(x, -1, axes=(2, 3))
    with np.load(DIGITS / "upright_train.npz") as z:
        upright = {a.tobytes() for a in z["x"]}
    assert not any(a.tobytes() in upright for a in back)  # held-out samples, none of the pretraining ones
    assert not np.array_equal(x, back)


def test_pretraining_with_poet_edge_reproduces_the_committed_model(tmp_path):
    """1500 SGD steps of the generated C on the host, written into the ONNX: the same bytes."""
    need_tools("gcc")
    import pretrain

    acc = pretrain.pretrain(tmp_path / "p.onnx")
    assert (tmp_path / "p.onnx").read_bytes() == (DIGITS / "digits_pretrained.onnx").read_bytes()
    assert acc["after"] is not None and acc["after"] >= 0.9 > 0.2 >= (acc["before"] or 0)


def test_fine_tuning_on_qemu_raises_rotated_accuracy(tmp_path):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    out = tmp_path / "ft"
    c = compile_model(
        CompileOptions(
            DIGITS / "digits_pretrained.onnx", "cortex-m4", 61 * 1024, out, 8, lr=0.05, scheduler="scale"
        )
    )
    assert c.sim.n_recomputations > 0  # the budget is below the no-recomputation peak
    args = (60, DIGITS / "rotated_train.npz")
    qemu = runner.run_project(out, "qemu-cortex-m4", *args, eval_data=DIGITS / "rotated_test.npz")
    host = runner.run_project(out, "host", *args, eval_data=DIGITS / "rotated_test.npz")
    before, after = qemu.evals
    assert before.accuracy is not None and after.accuracy is not None
    assert before.accuracy < 0.2 and after.accuracy > before.accuracy + 0.3
    assert after.loss < before.loss / 5
    for a, b in zip(host.evals, qemu.evals, strict=True):
        assert a.outputs.tobytes() == b.outputs.tobytes() and a.batch_losses == b.batch_losses
    assert qemu.measured_ram_bytes <= 61 * 1024
