"""--optimizer: torch.optim's SGD with momentum, Adam and AdamW, checked against torch itself.

Oracles (examples/optim/make_optim_refs.py wrote them with torch 2.13; the tests do not need torch):
updates.npz holds each update alone on one tensor over 12 steps, in float64 and float32; dscnn.npz and
gru_kws.npz hold two zoo models trained 5 steps by torch.optim with a per-step learning rate. The
generated C is checked against the numpy reference, and qemu-cortex-m4 against the host bit for bit.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools, poet
from oputil import c_vs_reference, max_rel_err

from poet_edge import autodiff, frontend, ops, reference, runner, targets
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.memory_floor import memory_floor
from poet_edge.optimizer import Optimizer
from poet_edge.planning import ParamPlace

REFS = EXAMPLES / "optim"
MLP = EXAMPLES / "mlp.onnx"


def _optimizer(z: np.lib.npyio.NpzFile, name: str) -> Optimizer:
    fields = json.loads(str(z[f"{name}__optimizer"]))
    return Optimizer(**{**fields, "betas": tuple(fields.get("betas", (0.9, 0.999)))})


def _names(z: np.lib.npyio.NpzFile) -> list[str]:
    return sorted({k.split("__")[0] for k in z.files if k.endswith("__optimizer")})


def test_each_update_matches_torch_optim():
    """Every variant (SGD with weight decay, momentum, Nesterov, Adam with L2 decay, AdamW) over 12 steps
    with a decaying learning rate, gradients from 1e-6 to 10 and exact zeros: the formulas are torch's to
    double rounding in float64, and within 2e-7 in float32 (torch's CPU kernels fuse some products)."""
    z = np.load(REFS / "updates.npz")
    assert len(_names(z)) == 6
    for name in _names(z):
        opt = _optimizer(z, name)
        op, attrs = opt.update()
        for dtype, tol in ((np.float64, 1e-14), (np.float32, 5e-7)):
            p = z["p0"].astype(dtype)
            state = [np.zeros_like(p) for _ in opt.state_names]
            for t, (g, lr) in enumerate(zip(z["grads"], z[f"{name}__lr"], strict=True), start=1):
                p, *state = ops.get(op).forward([p, g.astype(dtype), *state], {**attrs, "lr": lr, "t": t})
                ref = z[f"{name}__{np.dtype(dtype).name}"][t - 1]
                assert max_rel_err(p, ref) <= tol, (name, dtype, t)


@pytest.mark.parametrize("model", ["dscnn", "gru_kws"])
@pytest.mark.parametrize("name", ["momentum", "adam", "adamw"])
def test_reference_trains_like_torch(model, name):
    """5 steps of the numpy reference (float32) vs torch.optim on the same batches and learning rates:
    every parameter within 1e-5 (max-norm relative error), every loss within 1e-5."""
    z = np.load(REFS / f"{model}.npz")
    g = frontend.load(EXAMPLES / "zoo" / f"{model}.onnx", z["x"].shape[1])
    tg = autodiff.training_graph(g, optimizer=_optimizer(z, name))
    lrs = [float(v) for v in z[f"{name}__lr"]]
    losses, params = reference.train(tg, list(zip(z["x"], z["y"], strict=True)), lrs)
    assert max_rel_err(losses, z[f"{name}__losses"]) <= 1e-5
    for p in g.trainable:
        after = z[f"{name}__param__{p}"]
        assert not np.array_equal(after, g.params[p]), p  # it trained
        assert max_rel_err(params[p], after) <= 1e-5, p


def test_training_graph_holds_the_state():
    g = frontend.load(MLP, 2)
    tg = autodiff.training_graph(g, optimizer=Optimizer("adam"))
    updates = [n for n in tg.nodes if n.phase.value == "update"]
    assert {n.op for n in updates} == {"AdamUpdate"} and len(updates) == len(g.trainable)
    for n in updates:
        p = n.inputs[0]
        assert n.inputs[2:] == (f"{p}.exp_avg", f"{p}.exp_avg_sq")
        assert all(tg.tensor(s).role.value == "optimizer-state" for s in n.inputs[2:])
        assert all(tg.shape(s) == tg.shape(p) for s in n.inputs[2:])
    readers = {t for n in tg.nodes if n.phase.value != "update" for t in n.inputs}
    assert not any(tg.tensor(t).role.value == "optimizer-state" for t in readers)
    assert {n.op for n in autodiff.training_graph(g, optimizer=Optimizer("sgd", weight_decay=0.1)).nodes} >= {
        "SGDMomentumUpdate"
    }


def test_state_is_counted_against_ram(tmp_path):
    """Momentum adds one copy of the trainable parameters to the fixed RAM, Adam two: in the memory floor,
    plan.json, the generated header and the compile error when the budget is too small."""
    fixed, floors = {}, {}
    for kind in ("sgd", "momentum", "adam", "adamw"):
        opts = CompileOptions(MLP, "cortex-m4", 256 * 1024, tmp_path / kind, 4, optimizer=Optimizer(kind))
        c = compile_model(opts)
        fixed[kind], floors[kind] = c.fixed, memory_floor(c.problem).bytes
        plan = json.loads((tmp_path / kind / "plan.json").read_text())
        assert plan["optimizer"]["kind"] == kind
        assert plan["optimizer"]["state_bytes"] == c.fixed.optimizer_state
        assert plan["problem"]["fixed_ram"]["optimizer_state"] == c.fixed.optimizer_state
        header = (tmp_path / kind / "poet_model.h").read_text()
        assert f"#define POET_OPTIMIZER_STATE_BYTES {c.fixed.optimizer_state}u" in header
    params = fixed["sgd"].trainable_params
    assert params == 4 * (32 * 64 + 32 + 32 * 32 + 32 + 10 * 32) + 48  # fc2.bias: 40 bytes aligned to 16
    assert [fixed[k].optimizer_state for k in ("sgd", "momentum", "adam", "adamw")] == [
        0,
        params,
        2 * params,
        2 * params,
    ]
    assert fixed["adam"].total - fixed["sgd"].total == 2 * params
    assert floors["momentum"] - floors["sgd"] == params and floors["adam"] - floors["sgd"] == 2 * params
    with pytest.raises(PoetError, match="below the memory floor .* of momentum state"):
        ram = floors["sgd"] + params // 2  # fits plain SGD, not momentum
        compile_model(
            CompileOptions(
                MLP,
                "cortex-m4",
                ram,
                tmp_path / "m",
                4,
                optimizer=Optimizer("momentum"),
                params=ParamPlace.RAM,
            )
        )


@pytest.mark.parametrize(
    "opt",
    [
        Optimizer("sgd", weight_decay=0.01),
        Optimizer("momentum", momentum=0.9, weight_decay=1e-3, nesterov=True),
        Optimizer("adam", weight_decay=1e-3),
        Optimizer("adamw", weight_decay=0.05),
    ],
    ids=["sgd-wd", "nesterov-wd", "adam-l2", "adamw"],
)
def test_c_on_host_matches_reference(tmp_path, opt):
    need_tools("gcc")
    c_losses, ref_losses, c_params, ref_params, _ = c_vs_reference(
        MLP, tmp_path / "out", steps=5, batch=4, loss="cross-entropy", ram="256KB", lr=0.01, optimizer=opt
    )
    assert max_rel_err(c_losses, ref_losses) <= 1e-5
    for name, ref in ref_params.items():
        assert max_rel_err(c_params[name], ref.reshape(-1)) <= 1e-5, name


def test_sanitizers_clean_with_state(tmp_path):
    need_tools("gcc")
    c_losses, ref_losses, *_ = c_vs_reference(
        MLP, tmp_path / "out", steps=3, batch=2, sanitize=True, optimizer=Optimizer("adamw")
    )
    assert max_rel_err(c_losses, ref_losses) <= 1e-5


KERNEL_DRIVER = """#include <stdio.h>
#include <string.h>
#include "poet/kernels.h"
#define POET_TIMED(k, call) call
static float p[%(n)d] = {%(p)s}, m[%(n)d] = {%(m)s}, v[%(n)d] = {%(v)s};
static const float g[%(n)d] = {%(g)s};
int main(void)
{
    const float lr = %(lr)s;
    const int32_t t = 3;
    (void)t;
%(call)s
    const float *outs[3] = {p, m, v};
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < %(n)d; ++i) {
            unsigned int bits;
            memcpy(&bits, &outs[k][i], 4);
            printf("%%08x\\n", bits);
        }
    return 0;
}
"""


def _hex_floats(text: str) -> np.ndarray:
    return np.array([int(w, 16) for w in text.split()], np.uint32).view(np.float32)


@pytest.mark.parametrize(
    "opt",
    [
        Optimizer("momentum", weight_decay=0.01, nesterov=True),
        Optimizer("adam", weight_decay=0.1),
        Optimizer("adamw"),
    ],
)
def test_kernels_give_the_reference_bits(tmp_path, opt):
    """The C update kernels compute what the numpy ops compute, bit for bit (same float32 operations in
    the same order), at step 3 on state that is not zero."""
    need_tools("gcc")
    from poet_edge.codegen.emit import IntArrays, c_float, call_line
    from poet_edge.ir import Node

    n, rng = 67, np.random.default_rng(5)
    vals = {k: rng.standard_normal(n).astype(np.float32) * s for k, s in (("p", 1), ("g", 1e-2), ("m", 1e-2))}
    vals["v"] = (rng.standard_normal(n).astype(np.float32) * 1e-2) ** 2
    op, attrs = opt.update()
    names = ("p", "g", "m", "v")[: 2 + len(opt.state_names)]
    node = Node("u", op, names, (), attrs)
    call = ops.get(op).kernel(node, lambda t: (n,))
    src = KERNEL_DRIVER % {
        "n": n,
        "lr": c_float(0.03),
        "call": call_line(call, lambda t: t, IntArrays(), 0),
        **{k: ", ".join(c_float(x) for x in a) for k, a in vals.items()},
    }
    (tmp_path / "main.c").write_text(src)
    from poet_edge.paths import RUNTIME_C

    built = targets.build(
        targets.load_target("host"),
        [tmp_path / "main.c", RUNTIME_C / "src" / "kernels" / f"{call.source}.c"],
        [],
        tmp_path / "b",
        1 << 20,
    )
    got = _hex_floats(subprocess.run([str(built.elf)], capture_output=True, text=True, check=True).stdout)
    want = ops.get(op).forward([vals[k] for k in names], {**attrs, "lr": 0.03, "t": 3})
    for k, w in enumerate(want):
        assert np.array_equal(got[k * n : (k + 1) * n], w), names[[0, 2, 3][k]]


DRIVER = """#include <stdio.h>
#include <string.h>
#include "poet_model.h"
#define STEPS %(steps)d
static const float xs[STEPS][POET_INPUT_ELEMS] = {%(xs)s};
static const int32_t ys[STEPS][POET_LABEL_ELEMS] = {%(ys)s};
static const float lrs[STEPS] = {%(lrs)s};
static float start[%(total)d];

static void dump(void)
{
    static float buf[%(total)d];
    for (int32_t i = 0, off = 0; i < POET_NUM_PARAMS; off += poet_params[i].count, ++i) {
        poet_get_param(i, buf);
        for (int32_t k = 0; k < poet_params[i].count; ++k) {
            uint32_t bits;
            memcpy(&bits, &buf[k], 4);
            printf("%%08lx\\n", (unsigned long)bits);
        }
    }
}

int main(void)
{
    for (int32_t i = 0, off = 0; i < POET_NUM_PARAMS; off += poet_params[i].count, ++i)
        poet_get_param(i, start + off);
    for (int round = 0; round < 2; ++round) {
        poet_init();
        for (int32_t i = 0, off = 0; i < POET_NUM_PARAMS; off += poet_params[i].count, ++i)
            poet_set_param(i, start + off);
        printf("steps %%ld\\n", (long)poet_steps_done());
        for (int s = 0; s < STEPS; ++s) {
            float loss;
            if (poet_train_step(xs[s], ys[s], lrs[s], &loss) != POET_OK) return 1;
        }
        printf("steps %%ld\\n", (long)poet_steps_done());
        dump();
    }
    return 0;
}
"""


def test_learning_rate_per_step_and_poet_init_resets_the_state(tmp_path):
    """A driver of its own calls poet_train_step with a different lr each step (the caller's schedule),
    twice from the same weights with poet_init in between: both runs give the same bits (poet_init zeroed
    the moments and the step count) and match the reference trained with that schedule."""
    need_tools("gcc")
    from poet_edge.codegen.emit import c_float

    opt = Optimizer("adamw")
    c = compile_model(CompileOptions(MLP, "host", 256 * 1024, tmp_path / "out", 4, optimizer=opt))
    data = runner.batches(runner.load_plan(tmp_path / "out"), 4)
    lrs = [0.02, 0.01, 0.005, 0.0025]
    total = sum(v.size for v in c.training.params.values())
    (tmp_path / "driver.c").write_text(
        DRIVER
        % {
            "steps": len(data),
            "xs": ", ".join("{" + ", ".join(c_float(v) for v in x.reshape(-1)) + "}" for x, _ in data),
            "ys": ", ".join("{" + ", ".join(str(int(v)) for v in y) + "}" for _, y in data),
            "lrs": ", ".join(c_float(v) for v in lrs),
            "total": total,
        }
    )
    out = tmp_path / "out"
    srcs = [
        out / "poet_model.c",
        *sorted((out / "runtime" / "src" / "kernels").glob("*.c")),
        tmp_path / "driver.c",
    ]
    host = targets.load_target("host")
    built = targets.build(
        host, srcs, [out, out / "runtime" / "include", out / "target"], tmp_path / "b", 1 << 20
    )
    lines = subprocess.run(
        [str(built.elf)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split()
    half = len(lines) // 2
    assert lines[:2] == ["steps", "0"] and lines[2:4] == ["steps", str(len(data))]
    assert lines[:half] == lines[half:]  # poet_init reset the state and t
    got = _hex_floats(" ".join(lines[4:half]))
    _, ref = reference.train(c.training, data, lrs)
    names = sorted(c.training.params)  # poet_params is in name order
    want = np.concatenate([ref[n].reshape(-1) for n in names])
    assert got.size == want.size
    assert max_rel_err(got, want) <= 1e-5


@pytest.mark.parametrize("kind", ["momentum", "adam"])
def test_qemu_bit_identical_to_host(tmp_path, kind):
    """On qemu-cortex-m4 the training (double-precision bias correction included) gives the host's bits,
    and the program with its optimizer state fits --ram at link time."""
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    ram = 128 * 1024
    opt = Optimizer(kind, weight_decay=1e-3, nesterov=kind == "momentum")
    c = compile_model(CompileOptions(MLP, "cortex-m4", ram, tmp_path / kind, 4, optimizer=opt))
    host = runner.run_project(tmp_path / kind, "host", 4)
    qemu = runner.run_project(tmp_path / kind, "qemu-cortex-m4", 4)
    assert [s.loss for s in host.steps] == [s.loss for s in qemu.steps]
    for k in host.params:
        assert np.array_equal(host.params[k], qemu.params[k]), k
    assert qemu.measured_ram_bytes <= ram
    measured, predicted = qemu.measured_ram_bytes, c.predicted_ram_bytes
    assert abs(measured - predicted) <= 0.05 * predicted, (measured, predicted)


def test_numerics_do_not_depend_on_the_schedule(tmp_path):
    """Adam on the autoencoder (bias training) under a budget that forces recomputation or paging gives
    the same bits as the schedule without either."""
    need_tools("gcc")
    ae = EXAMPLES / "zoo" / "autoencoder.onnx"
    base = CompileOptions(
        ae, "cortex-m4", 1 << 20, tmp_path / "free", 4, Loss.MSE, train="bias", optimizer=Optimizer("adam")
    )
    free = compile_model(base)
    floor = memory_floor(free.problem).bytes
    tight = replace(base, ram_bytes=floor + (free.predicted_ram_bytes - floor) // 3, out=tmp_path / "tight")
    c = compile_model(replace(tight, scheduler="scale"))
    assert c.fixed.optimizer_state == 2 * c.fixed.trainable_params > 0
    assert c.sim.n_recomputations + c.sim.n_page_outs > 0
    a = runner.run_project(tmp_path / "free", "host", 3)
    b = runner.run_project(tmp_path / "tight", "host", 3)
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--optimizer", "adam", "--betas", "0.9,1.5"], "--betas"),
        (["--optimizer", "adam", "--betas", "0.9"], "--betas"),
        (["--optimizer", "adam", "--nesterov"], "--nesterov"),
        (["--optimizer", "momentum", "--momentum", "0"], "--momentum"),
        (["--optimizer", "sgd", "--weight-decay", "-1"], "--weight-decay"),
        (["--optimizer", "adamw", "--eps", "nan"], "--eps"),
    ],
)
def test_bad_hyperparameters_are_one_line_errors(tmp_path, flags, message):
    out = tmp_path / "out"
    r = poet("compile", MLP, "--ram", "256KB", "-o", out, *flags)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("poet: error: ") and message in r.stderr and r.stderr.count("\n") == 1, (
        r.stderr
    )
    assert not out.exists()


def test_inspect_reports_state_bytes_per_optimizer():
    r = poet("inspect", MLP, "--batch", "4", "--optimizer", "adam", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    per = data["optimizer_state_bytes"]
    assert per["sgd"] == 0 and per["adam"] == per["adamw"] == 2 * per["momentum"] > 0
    plain = json.loads(poet("inspect", MLP, "--batch", "4", "--json").stdout)
    assert data["floor_bytes"] - plain["floor_bytes"] == per["adam"]


def test_compile_with_state_is_byte_identical(tmp_path):
    for d in ("a", "b"):
        compile_model(
            CompileOptions(MLP, "cortex-m4", 256 * 1024, tmp_path / d, 2, optimizer=Optimizer("adamw"))
        )
    for f in ("plan.json", "poet_model.c", "poet_model.h"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    source = (tmp_path / "a" / "poet_model.c").read_text()
    assert "static float poet_state_fc0_weight_exp_avg[2048] POET_ALIGNED;" in source
    assert "memset(poet_state_fc0_weight_exp_avg, 0, sizeof poet_state_fc0_weight_exp_avg);" in source
