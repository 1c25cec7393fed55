#!/usr/bin/env python3
"""torch.optim's own training of two zoo models, stored for tests/test_optimizers.py (no torch there).

    PYTHONPATH=$PWD /work/torch-venv/bin/python examples/optim/make_optim_refs.py   # torch 2.13, onnx

For dscnn and gru_kws (examples/zoo, built by examples/zoo/export.py from a fixed seed; dscnn with its
BatchNorms folded into the convolutions as the exporter folds them, bench/user_models.py's folded_model),
the parameters as poet-edge reads them from the ONNX file are copied into the torch model, which then trains
5 steps on 5 different random batches with a learning rate that changes every step (the caller's
schedule), once per optimizer of OPTIMIZERS: torch.optim.SGD with momentum, Nesterov and weight decay,
Adam with weight decay, AdamW. Writes examples/optim/<model>.npz: the batches (x, y), the learning rates,
each optimizer's hyperparameters (JSON, poet-edge's --optimizer flags) and its losses and parameters after
the 5 steps, under poet-edge's initializer names and layouts.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.dont_write_bytecode = True

import user_models  # noqa: E402  (bench/user_models.py: folded_model, match_params, VIEWS)

from poet_edge import frontend  # noqa: E402


def _zoo_export():
    spec = importlib.util.spec_from_file_location("zoo_export", ROOT / "examples" / "zoo" / "export.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODELS = {"dscnn": 4, "gru_kws": 4}  # name -> batch
STEPS = 5
# name -> (poet-edge Optimizer fields, base learning rate)
OPTIMIZERS: dict[str, tuple[dict[str, object], float]] = {
    "momentum": ({"kind": "momentum", "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True}, 0.05),
    "adam": ({"kind": "adam", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 1e-3}, 1e-3),
    "adamw": ({"kind": "adamw", "betas": [0.85, 0.99], "eps": 1e-7, "weight_decay": 0.05}, 2e-3),
}


def learning_rates(base: float) -> list[float]:
    """A schedule the caller gives per step: linear warm-up over 2 steps, then cosine decay."""
    return [float(base * min(1.0, (t + 1) / 2) * 0.5 * (1 + np.cos(np.pi * t / STEPS))) for t in range(STEPS)]


def torch_optimizer(params, fields: dict[str, object], lr: float) -> torch.optim.Optimizer:
    kind = fields["kind"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=fields["weight_decay"])
    if kind == "momentum":
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=fields["momentum"],
            weight_decay=fields["weight_decay"],
            nesterov=fields["nesterov"],
        )
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(
        params, lr=lr, betas=tuple(fields["betas"]), eps=fields["eps"], weight_decay=fields["weight_decay"]
    )


def train(name: str, model0, params0, batches, fields, lrs) -> tuple[list[float], dict[str, np.ndarray]]:
    model, _ = user_models.folded_model(model0, torch.from_numpy(batches[0][0]))
    tparams = dict(model.named_parameters())
    match = user_models.match_params(params0, {k: v.detach().numpy() for k, v in tparams.items()})
    missing = sorted(k for k, m in match.items() if m is None)
    if missing:
        raise SystemExit(f"{name}: no torch parameter matches {missing}")
    views = user_models.VIEWS
    with torch.no_grad():
        for p, (tnames, view) in match.items():
            shapes = [tuple(tparams[t].shape) for t in tnames]
            for t, v in zip(tnames, views[view][1](params0[p].reshape(-1), shapes), strict=True):
                tparams[t].copy_(torch.from_numpy(np.ascontiguousarray(v)))
    opt = torch_optimizer(model.parameters(), fields, lrs[0])
    losses = []
    for (x, y), lr in zip(batches, lrs, strict=True):
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {
        p: views[view][0]([tparams[t].detach().numpy() for t in tnames]).reshape(params0[p].shape)
        for p, (tnames, view) in match.items()
    }
    return losses, out


# the update alone, on one tensor with given gradients: every variant of each optimizer
UPDATES: dict[str, tuple[dict[str, object], float]] = {
    "sgd_wd": ({"kind": "sgd", "weight_decay": 0.1}, 0.1),
    "momentum": ({"kind": "momentum", "momentum": 0.9, "weight_decay": 0.0, "nesterov": False}, 0.1),
    "momentum_wd_nesterov": (
        {"kind": "momentum", "momentum": 0.5, "weight_decay": 0.01, "nesterov": True},
        0.1,
    ),
    "adam": ({"kind": "adam", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}, 1e-2),
    "adam_wd": ({"kind": "adam", "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}, 1e-2),
    "adamw": ({"kind": "adamw", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}, 1e-2),
}
UPDATE_STEPS, UPDATE_SIZE = 12, 64


def update_refs() -> dict[str, np.ndarray]:
    """p0 and 12 gradients (a few of them tiny, a few zero), each UPDATES entry applied by torch.optim in
    float64 and in float32; the parameter after every step."""
    rng = np.random.default_rng(7)
    p0 = rng.standard_normal(UPDATE_SIZE)
    grads = rng.standard_normal((UPDATE_STEPS, UPDATE_SIZE)) * np.logspace(-6, 1, UPDATE_SIZE)
    grads[:, :4] = 0.0
    out: dict[str, np.ndarray] = {"p0": p0, "grads": grads}
    for name, (fields, base) in UPDATES.items():
        lrs = [base * (0.9**t) for t in range(UPDATE_STEPS)]
        out[f"{name}__optimizer"] = np.array(json.dumps(fields))
        out[f"{name}__lr"] = np.array(lrs)
        for dtype in (torch.float64, torch.float32):
            p = torch.nn.Parameter(torch.tensor(p0, dtype=dtype))
            opt = torch_optimizer([p], fields, lrs[0])
            steps = []
            for g, lr in zip(grads, lrs, strict=True):
                opt.param_groups[0]["lr"] = lr
                p.grad = torch.tensor(g, dtype=dtype)
                opt.step()
                steps.append(p.detach().numpy().copy())
            out[f"{name}__{str(dtype).split('.')[1]}"] = np.array(steps)
    return out


def main() -> None:
    np.savez_compressed(HERE / "updates.npz", **update_refs())
    zoo = _zoo_export()
    for name, batch in MODELS.items():
        g = frontend.load(ROOT / "examples" / "zoo" / f"{name}.onnx", batch)
        params0 = {p: np.asarray(g.params[p], np.float32) for p in sorted(g.trainable)}
        xshape = g.shape(g.inputs[0])
        classes = g.shape(g.outputs[0])[1]
        rng = np.random.default_rng(61)
        xs = rng.standard_normal((STEPS, *xshape)).astype(np.float32)
        ys = rng.integers(0, classes, (STEPS, batch)).astype(np.int32)
        batches = list(zip(xs, ys, strict=True))
        arrays: dict[str, np.ndarray] = {"x": xs, "y": ys}
        for opt, (fields, base) in OPTIMIZERS.items():
            lrs = learning_rates(base)
            losses, trained = train(name, zoo.build(name), params0, batches, fields, lrs)
            arrays[f"{opt}__optimizer"] = np.array(json.dumps(fields))
            arrays[f"{opt}__lr"] = np.array(lrs, np.float64)
            arrays[f"{opt}__losses"] = np.array(losses, np.float64)
            arrays.update({f"{opt}__param__{p}": v.astype(np.float32) for p, v in trained.items()})
            print(f"{name} {opt}: losses {' '.join(f'{v:.4f}' for v in losses)}")
        np.savez_compressed(HERE / f"{name}.npz", **arrays)


if __name__ == "__main__":
    main()
