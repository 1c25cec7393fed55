"""poet_predict and poet_eval_step in the generated runtime: the numpy reference and onnxruntime as
oracles, their own schedules inside the training step's arena and budget, host = QEMU bit for bit, and
`poet run --eval-data` / `--load-params`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import EXAMPLES, need_tools, poet
from onnx import numpy_helper
from oputil import max_rel_err, ort_outputs

from poet_edge import reference, runner
from poet_edge.autodiff import Loss
from poet_edge.compiler import Compiled, CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.inference import mode_graph
from poet_edge.planning import InputPlace
from poet_edge.schedule import Compute

KB = 1024
DIGITS = EXAMPLES / "digits"
CNN = DIGITS / "digits_pretrained.onnx"


def _compile(model: Path, out: Path, ram: int = 1 << 20, batch: int = 4, **kw: object) -> Compiled:
    opts = dict(device="cortex-m4", ram_bytes=ram, out=out, batch=batch, lr=0.05, **kw)
    return compile_model(CompileOptions(model, **opts))  # type: ignore[arg-type]


def _data(path: Path, c: Compiled, n: int, seed: int) -> Path:
    """n samples of deterministic synthetic data for the compiled model, as an npz."""
    tg = c.training
    x, lab = (tg.tensor(t) for t in tg.inputs)
    is_int = lab.dtype == "int32"
    classes = tg.shape(mode_graph(tg, "predict").outputs[0])[1]
    xs, ys = runner.synthetic(x.shape, lab.shape, is_int, classes if is_int else 0, seed, samples=n)
    np.savez(path, x=xs, y=ys)
    return path


def _shaped(c: Compiled, flat: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: flat[k].reshape(v.shape) for k, v in c.training.params.items()}


def _with_params(model: Path, params: dict[str, np.ndarray]) -> onnx.ModelProto:
    m = onnx.load(model)
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(params[init.name].reshape(tuple(init.dims)), init.name))
    return m


def _oracle_outputs(c: Compiled, x: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    """The numpy reference's forward pass over x in batches of the compiled size (wrapping the last)."""
    g = mode_graph(c.training, "predict")
    b = c.training.shape(c.training.inputs[0])[0]
    outs = []
    for i in range(0, len(x), b):
        xb = np.take(x, range(i, i + b), axis=0, mode="wrap")
        outs.append(reference.run(g, {g.inputs[0]: xb}, params)[g.outputs[0]])
    return np.concatenate(outs)[: len(x)]


@pytest.mark.parametrize(
    "model, loss",
    [(EXAMPLES / "mlp.onnx", Loss.CROSS_ENTROPY), (EXAMPLES / "mlp.onnx", Loss.MSE), (CNN, None)],
)
def test_predict_and_eval_match_reference_and_onnxruntime(tmp_path, model, loss):
    """Before and after 4 SGD steps: poet_predict = the numpy reference's forward (1e-6) = onnxruntime
    (1e-5); poet_eval_step = the reference loss; its loss on the first training batch before training is
    poet_train_step's first loss, bit for bit (same kernels, another schedule)."""
    need_tools("gcc")
    c = _compile(model, tmp_path / "out", loss=loss or Loss.CROSS_ENTROPY)
    data = _data(tmp_path / "d.npz", c, 10, seed=3)  # 10 samples: batches of 4, the last wraps
    r = runner.run_project(tmp_path / "out", "host", 4, data, eval_data=data)
    with np.load(data) as z:
        x, y = z["x"], z["y"]
    before, after = r.evals
    assert before.phase == 0 and after.phase == 1 and before.samples == after.samples == 10
    assert len(before.batch_losses) == 3
    assert before.batch_losses[0] == r.steps[0].loss  # bit for bit
    for e, params in ((before, dict(c.training.params)), (after, _shaped(c, r.params))):
        ref = _oracle_outputs(c, x, params)
        assert e.outputs.shape == ref.shape
        assert max_rel_err(e.outputs, ref) <= 1e-6
        (ort,) = ort_outputs(_with_params(model, params), {"input": x[:8]})
        assert max_rel_err(e.outputs[:8], ort) <= 1e-5
        eg = mode_graph(c.training, "eval")
        env = reference.run(eg, {eg.inputs[0]: x[:4], eg.inputs[1]: y[:4]}, params)
        assert abs(e.batch_losses[0] - float(env["loss"])) <= 1e-6 * max(1.0, abs(float(env["loss"])))
        if loss == Loss.MSE:
            assert e.accuracy is None
        else:
            assert e.accuracy == float(np.mean(np.argmax(ref, axis=1) == y))
    assert after.loss < before.loss  # four steps on the same 10 samples


def test_evaluation_leaves_training_bit_identical(tmp_path):
    """The three functions share the arena: evaluating before and after changes no trained bit."""
    need_tools("gcc")
    c = _compile(CNN, tmp_path / "out")
    data = _data(tmp_path / "d.npz", c, 12, seed=1)
    plain = runner.run_project(tmp_path / "out", "host", 3, data)
    evald = runner.run_project(tmp_path / "out", "host", 3, data, eval_data=data)
    assert [s.loss for s in plain.steps] == [s.loss for s in evald.steps]
    for k, v in plain.params.items():
        assert np.array_equal(v, evald.params[k]), k
    assert not plain.evals and len(evald.evals) == 2


def test_inference_plans_fit_the_budget_and_share_the_arena(tmp_path):
    """At a budget where training must recompute, each function keeps its own simulated peak and arena
    within --ram; the C arena is the largest plan; outputs equal the roomy compile's bit for bit, with
    the batch in RAM or loaded from storage."""
    need_tools("gcc")
    roomy = _compile(CNN, tmp_path / "roomy", batch=8)
    tight = _compile(CNN, tmp_path / "tight", ram=62 * KB, batch=8, scheduler="scale")
    stored = _compile(
        CNN, tmp_path / "sto", ram=64 * KB, batch=8, scheduler="scale", input=InputPlace.STORAGE
    )
    assert tight.sim.n_recomputations > 0
    for name, c in (("tight", tight), ("sto", stored)):
        plan = json.loads((tmp_path / name / "plan.json").read_text())
        assert {m.mode for m in c.inference} == {"predict", "eval"}
        for m in c.inference:
            assert m.sim.peak_ram_bytes <= 64 * KB and m.spec.fixed == c.fixed
            assert plan["inference"][m.mode]["ram_bytes"] == c.fixed.total + m.arena.arena_bytes <= 64 * KB
        assert plan["runtime_arena_bytes"] == max(
            c.arena.arena_bytes, *(m.arena.arena_bytes for m in c.inference)
        )
        assert c.predicted_ram_bytes == plan["peak_ram_bytes"] <= 64 * KB
        header = (tmp_path / name / "poet_model.h").read_text()
        assert f"#define POET_ARENA_BYTES {plan['runtime_arena_bytes']}u" in header
    data = _data(tmp_path / "d.npz", roomy, 20, seed=2)
    outs = [
        runner.run_project(tmp_path / d, "host", 2, data, eval_data=data) for d in ("roomy", "tight", "sto")
    ]
    for o in outs[1:]:
        for a, b in zip(outs[0].evals, o.evals, strict=True):
            assert np.array_equal(a.outputs, b.outputs) and a.batch_losses == b.batch_losses


def test_predict_takes_eval_steps_schedule_without_the_loss(tmp_path):
    """Where the forward pass alone must still recompute or page (4 KB tiles at 20 KB), poet_predict takes
    poet_eval_step's schedule without the loss nodes instead of a scheduler run of its own: the same
    steps on its nodes, no costlier than eval, within --ram, and the same outputs and losses as the roomy
    compile, bit for bit, on the host and on QEMU."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    roomy = _compile(CNN, tmp_path / "roomy", batch=8)
    tight = _compile(CNN, tmp_path / "tight", ram=20 * KB, batch=8, scheduler="greedy", split="4KB")
    pr, ev = tight.inference
    assert pr.schedule.report.schedule_from == "poet_eval_step's schedule without the loss"
    names = {n.name for n in pr.problem.nodes}
    computes = [s.node for s in ev.schedule.steps if isinstance(s, Compute) and s.node in names]
    assert [s.node for s in pr.schedule.steps if isinstance(s, Compute)] == computes
    assert pr.sim.n_recomputations + pr.sim.n_page_outs > 0 and pr.sim.energy_j < ev.sim.energy_j
    assert max(pr.sim.peak_ram_bytes, tight.predicted_ram_bytes) <= 20 * KB
    data = _data(tmp_path / "d.npz", roomy, 16, seed=5)
    a = runner.run_project(tmp_path / "roomy", "host", 1, data, eval_data=data)
    b = runner.run_project(tmp_path / "tight", "host", 1, data, eval_data=data)
    q = runner.run_project(tmp_path / "tight", "qemu-cortex-m4", 1, data, eval_data=data)
    for x, y, z in zip(a.evals, b.evals, q.evals, strict=True):
        assert x.outputs.tobytes() == y.outputs.tobytes() == z.outputs.tobytes()
        assert x.batch_losses == y.batch_losses == z.batch_losses
    assert q.measured_ram_bytes <= 20 * KB


def test_qemu_predict_and_eval_bit_identical_to_host(tmp_path):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    c = _compile(CNN, tmp_path / "out", ram=64 * KB, batch=8, scheduler="scale")
    data = DIGITS / "rotated_test.npz"
    host = runner.run_project(tmp_path / "out", "host", 3, DIGITS / "rotated_train.npz", eval_data=data)
    qemu = runner.run_project(
        tmp_path / "out", "qemu-cortex-m4", 3, DIGITS / "rotated_train.npz", eval_data=data
    )
    for a, b in zip(host.evals, qemu.evals, strict=True):
        assert a.outputs.tobytes() == b.outputs.tobytes() and a.batch_losses == b.batch_losses
        assert a.accuracy == b.accuracy
    assert qemu.measured_ram_bytes <= 64 * KB
    assert min(qemu.evals[0].predict_ticks) > 0 and min(qemu.evals[0].eval_ticks) > 0
    assert c.predicted_ram_bytes <= 64 * KB


def test_load_params_continues_where_a_dump_ended(tmp_path):
    need_tools("gcc")
    c = _compile(EXAMPLES / "mlp.onnx", tmp_path / "out", train="bias")
    data = _data(tmp_path / "d.npz", c, 8, seed=4)
    first = runner.run_project(tmp_path / "out", "host", 3, data, eval_data=data)
    np.savez(tmp_path / "p.npz", **first.params)
    second = runner.run_project(
        tmp_path / "out", "host", 1, data, eval_data=data, load_params=tmp_path / "p.npz"
    )
    assert second.evals[0].outputs.tobytes() == first.evals[1].outputs.tobytes()
    frozen = next(n for n in sorted(c.training.params) if n not in c.training.trainable)
    np.savez(tmp_path / "bad.npz", **{**first.params, frozen: first.params[frozen] + 1})
    with pytest.raises(PoetError, match="frozen in this build"):
        runner.run_project(tmp_path / "out", "host", 1, data, load_params=tmp_path / "bad.npz")
    trainable = sorted(c.training.trainable)[0]
    np.savez(tmp_path / "missing.npz", **{k: v for k, v in first.params.items() if k != trainable})
    with pytest.raises(PoetError, match=f"trainable parameter '{trainable}' is missing"):
        runner.run_project(tmp_path / "out", "host", 1, data, load_params=tmp_path / "missing.npz")


def test_cli_eval_data_prints_and_writes_accuracy(tmp_path):
    need_tools("gcc")
    out = tmp_path / "out"
    r = poet("compile", CNN, "--device", "cortex-m4", "--ram", "64KB", "--batch", "8", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "poet_predict:" in r.stdout and "poet_eval_step:" in r.stdout
    data = DIGITS / "rotated_test.npz"
    r = poet("run", out, "--steps", "2", "--data", data, "--eval-data", data, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "r.json").read_text())
    for when in ("before", "after"):
        e = s["eval"][when]
        assert e["samples"] == 200 and len(e["batch_losses"]) == 25 and 0 <= e["accuracy"] <= 1
        assert f"eval {when:<6} training: accuracy {100 * e['accuracy']:.2f}%" in r.stdout
    sim = poet("simulate", out, "--json")
    assert json.loads(sim.stdout)["inference"]["predict"]["energy_j"] > 0
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((3, 64), np.float32), y=np.zeros(3, np.int32))
    r = poet("run", out, "--steps", "1", "--eval-data", bad)
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "--eval-data" in r.stderr
    r = poet("run", out, "--steps", "1", "--eval-data", data, "--profile")
    assert r.returncode != 0 and "--profile" in r.stderr
