"""Models users bring (issue 54): nine architectures nobody here wrote, exported by both torch exporters
at opset 17 and 18, and what poet-edge does with each file.

For each (model, exporter, opset) row: does `poet compile` load it (else the exact error, "refused: ..."),
do the parameters after 3 SGD steps in the generated C (host gcc, --kernels fast) match PyTorch trained
on the same batches with the same lr and loss (max relative error of the parameters and of their update),
does qemu-cortex-m4 give the same bits as the host, and the memory floor (`poet inspect`, --train all and
--train bias). PyTorch is trained on the model as the ONNX file has it: both exporters fold eval-mode
BatchNorm into the preceding conv, so the reference model is the torch model with each BN folded into its
conv (the trained weights are the folded ones), started from the file's own initializer values.

Needs torch, torchvision, onnx, onnxscript, onnxruntime (not poet-edge's dependencies), e.g.
    python3 -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch==2.13.0 torchvision onnx onnxscript onnxruntime numpy
    PYTHONPATH=$PWD /tmp/torchenv/bin/python bench/user_models.py [--only accel_cnn1d] [--no-qemu]
Writes bench/results/user_models.md and .json (each row as it finishes, so a partial run keeps its rows)."""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# POET_TREE=/path/to/another/checkout: run that tree's poet_edge (e.g. a branch that adds ops) unchanged
sys.path.insert(0, os.environ.get("POET_TREE", str(ROOT)))
sys.path.insert(0, str(ROOT / "examples" / "user_models"))

import export as um  # noqa: E402
from provenance import machine  # noqa: E402

from poet_edge import inspect_model, runner, targets  # noqa: E402
from poet_edge.compiler import CompileOptions, compile_model, plan_training  # noqa: E402
from poet_edge.errors import PoetError  # noqa: E402

RESULTS = ROOT / "bench" / "results"
STEPS, LR = 3, 0.01
MB = 1024 * 1024
QEMU = "qemu-cortex-m4"
MAX_PARAMS = [4_000_000]  # --max-params: above this the C program is not built (gcc on the initializers)


# ---------------------------------------------------------------------------------------------
# the PyTorch reference: BN folded as the exporters fold it, parameters matched to the ONNX file's
# ---------------------------------------------------------------------------------------------
def fold_batchnorm(model):
    """A copy of `model` (eval mode) with every BatchNorm whose input is a conv's output folded into that
    conv (W*g/sqrt(v+eps), b' = beta + (b - mean)*g/sqrt(v+eps)) and replaced by Identity. Pairs are found
    by running the model once with hooks, so it works for Sequential and attribute-style blocks alike."""
    from torch import nn

    model = copy.deepcopy(model).eval()
    produced: dict[int, nn.Module] = {}
    pairs: list[tuple[nn.Module, nn.Module]] = []

    def on_conv(m, _inp, out):
        produced[id(out)] = m

    def on_bn(m, inp, _out):
        conv = produced.get(id(inp[0]))
        if conv is not None:
            pairs.append((conv, m))

    hooks = [
        m.register_forward_hook(on_conv if isinstance(m, nn.modules.conv._ConvNd) else on_bn)
        for m in model.modules()
        if isinstance(m, (nn.modules.conv._ConvNd, nn.modules.batchnorm._BatchNorm))
    ]
    return model, pairs, hooks


def folded_model(model, x):
    import torch
    from torch import nn

    model, pairs, hooks = fold_batchnorm(model)
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    parents = {id(c): (p, n) for p in model.modules() for n, c in p.named_children()}
    with torch.no_grad():
        for conv, bn in pairs:
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            shape = (-1,) + (1,) * (conv.weight.dim() - 1)
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            conv.weight.copy_(conv.weight * scale.reshape(shape))
            conv.bias = nn.Parameter(bn.bias + (bias - bn.running_mean) * scale)
            parent, name = parents[id(bn)]
            setattr(parent, name, nn.Identity())
    left = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if left:
        raise RuntimeError(f"{len(left)} BatchNorm(s) not after a conv: no folded reference")
    return model, len(pairs)


def _zrn(t: np.ndarray) -> np.ndarray:
    """torch's GRU gate order r, z, n -> ONNX's z, r, h (rows of a [3H, ...] tensor)."""
    r, z, n = np.split(t, 3, axis=0)
    return np.concatenate([z, r, n])


def _rzn(t: np.ndarray) -> np.ndarray:
    z, r, n = np.split(t, 3, axis=0)
    return np.concatenate([r, z, n])


# how a torch parameter (or a GRU's pair of biases) may be laid out as an ONNX initializer:
# view -> (torch tensors -> ONNX layout (flat), ONNX layout (flat) + torch shapes -> torch tensors)
VIEWS = {
    "same": (lambda ts: ts[0].reshape(-1), lambda a, shapes: [a.reshape(shapes[0])]),
    "T": (lambda ts: ts[0].T.reshape(-1), lambda a, shapes: [a.reshape(shapes[0][::-1]).T]),
    "zrn": (lambda ts: _zrn(ts[0]).reshape(-1), lambda a, shapes: [_rzn(a.reshape(shapes[0]))]),
    "zrn2": (
        lambda ts: np.concatenate([_zrn(ts[0]), _zrn(ts[1])]),
        lambda a, shapes: [_rzn(x) for x in np.split(a, 2)],
    ),
}


def _candidates(torch_params: dict[str, np.ndarray]):
    """(torch names, view) pairs to try: every parameter as is / transposed / GRU-reordered, and the
    bias_ih/bias_hh pair of each recurrent layer as one ONNX GRU B."""
    for name, t in torch_params.items():
        yield (name,), "same"
        if t.ndim == 2:
            yield (name,), "T"
        if t.ndim in (1, 2) and t.shape[0] % 3 == 0:
            yield (name,), "zrn"
        if "bias_ih" in name and name.replace("bias_ih", "bias_hh") in torch_params:
            yield (name, name.replace("bias_ih", "bias_hh")), "zrn2"


def match_params(onnx_params: dict[str, np.ndarray], torch_params: dict[str, np.ndarray]):
    """ONNX initializer name -> (torch names, view), matched by size and value (rel. diff < 1e-4); a
    parameter that torch has not (e.g. a constant the frontend made trainable) maps to None."""
    cands = list(_candidates(torch_params))
    found: dict[str, tuple[tuple[str, ...], str] | None] = {}
    for name, a in onnx_params.items():
        flat, best = a.reshape(-1), None
        for tnames, view in cands:
            if sum(torch_params[t].size for t in tnames) != flat.size:
                continue
            v = VIEWS[view][0]([torch_params[t] for t in tnames])
            err = float(np.max(np.abs(v - flat)) / max(np.max(np.abs(flat)), 1e-30))
            if err < 1e-4 and (best is None or err < best[0]):
                best = (err, tnames, view)
        found[name] = None if best is None else (best[1], best[2])
    return found


def torch_train(model, params0: dict[str, np.ndarray], batches, lr: float):
    """Folds BN, matches the poet parameters to torch's, sets torch's to the file's values, trains
    len(batches) SGD steps (cross-entropy, mean over the batch); returns (poet name -> trained value as
    poet lays it out, or the initial value where torch has no such parameter; unmatched names)."""
    import torch

    model, _ = folded_model(model, torch.from_numpy(batches[0][0]))
    tparams = dict(model.named_parameters())
    match = match_params(params0, {k: v.detach().numpy() for k, v in tparams.items()})
    with torch.no_grad():
        for name, m in match.items():
            if m is not None:
                shapes = [tuple(tparams[t].shape) for t in m[0]]
                for t, v in zip(m[0], VIEWS[m[1]][1](params0[name].reshape(-1), shapes), strict=True):
                    tparams[t].copy_(torch.from_numpy(np.ascontiguousarray(v)))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
        loss.backward()
        opt.step()
    out = {}
    for name, m in match.items():
        if m is None:
            out[name] = params0[name]
        else:
            ts = [tparams[t].detach().numpy() for t in m[0]]
            out[name] = VIEWS[m[1]][0](ts).reshape(params0[name].shape)
    return out, sorted(n for n, m in match.items() if m is None)


def rel_errors(c: dict[str, np.ndarray], ref: dict[str, np.ndarray], p0: dict[str, np.ndarray]):
    """Returns (max over parameters of max|c - ref| / max|ref|; the update error over all parameters,
    max|dc - dref| / max|dref| with d = after - before; the worst parameter's own update error and its
    name). One parameter's own update error is floored by float32 rounding where its update is a few ulps
    of its values (vanishing gradients deep in a random-init net), hence the global one in the table."""
    perr, worst, worst_name, num, den = 0.0, 0.0, "", 0.0, 0.0
    for name, r in ref.items():
        a, r, s = (np.asarray(v, np.float64).reshape(-1) for v in (c[name], r, p0[name]))
        perr = max(perr, float(np.max(np.abs(a - r)) / max(np.max(np.abs(r)), 1e-30)))
        du, diff = r - s, np.abs((a - s) - (r - s))
        num, den = max(num, float(np.max(diff))), max(den, float(np.max(np.abs(du))))
        own = float(np.max(diff) / max(np.max(np.abs(du)), 1e-30))
        if own > worst:
            worst, worst_name = own, name
    return perr, num / max(den, 1e-30), worst, worst_name


# ---------------------------------------------------------------------------------------------
# one row
# ---------------------------------------------------------------------------------------------
def short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:400]


def qemu_fits(peak: int) -> tuple[bool, int]:
    mem = targets.load_target(QEMU).memory
    ram_max = mem.ram_max_bytes if mem else 0
    return peak + 64 * 1024 <= ram_max, ram_max


def poet_rows(path: Path, batch: int, row: dict[str, Any]) -> int:
    """Fills loads and the floors; returns the no-remat peak (train all)."""
    all_ = inspect_model.inspect(path, batch, train="all")
    row["floor_all"] = all_.floor_bytes
    row["peak_all"] = all_.no_remat_peak_bytes
    row["params_trainable"] = all_.params_trainable[0]
    row["param_bytes"] = all_.params_trainable[1]
    try:
        bias = inspect_model.inspect(path, batch, train="bias")
        row["floor_bias"] = bias.floor_bytes
        row["peak_bias"] = bias.no_remat_peak_bytes
        row["frozen_bytes_bias"] = bias.params_frozen[1]
    except PoetError as e:
        row["floor_bias"] = f"refused: {e}"
    return all_.no_remat_peak_bytes


def exported(name: str, exporter: str, opset: int, folder: Path) -> tuple[Path, bool]:
    """The export in `folder` if an earlier run left it there (--work), else a new one."""
    import onnx

    path = folder / f"{name}-{exporter}-op{opset}.onnx"
    if path.is_file():
        dim = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim[0]
        return path, bool(dim.dim_param)
    return um.export(name, exporter, opset, folder)


def file_opset(path: Path) -> int:
    import onnx

    return max(
        o.version
        for o in onnx.load(str(path), load_external_data=False).opset_import
        if o.domain in ("", "ai.onnx")
    )


def run_row(name: str, exporter: str, opset: int, work: Path, qemu: bool) -> dict[str, Any]:
    t0 = time.monotonic()
    row: dict[str, Any] = {"model": name, "exporter": exporter, "opset": opset}
    try:
        path, dynamic = exported(name, exporter, opset, work / "onnx")
        row["export_s"] = round(time.monotonic() - t0, 1)  # 0 where --work had the file already
        t0 = time.monotonic()  # "seconds": poet, the C runs and torch, without the export
    except Exception as e:
        row["loads"] = f"export failed: {short(e)}"
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    row["file_bytes"] = path.stat().st_size
    row["file_opset"] = file_opset(path)
    row["batch_dim"] = "dynamic" if dynamic else "static"
    batch = um.EXPORT_BATCH
    try:
        peak = poet_rows(path, batch, row)
        fits, ram_max = qemu_fits(peak)
        out = work / "out" / path.stem
        device, ram = ("cortex-m4", ram_max) if fits else ("host", max(64 * MB, 2 * peak))
        t1 = time.monotonic()
        opts = CompileOptions(path, device, ram, out, batch, lr=LR, scheduler="none")
        if row["param_bytes"] // 4 > MAX_PARAMS[0]:  # plan only: the C initializers alone would be huge
            plan_training(opts)
            row["compile_s"] = round(time.monotonic() - t1, 1)
            row["loads"] = "yes"
            n = row["param_bytes"] / 4e6
            row["host"] = f"not run: {n:.1f} M parameters > --max-params (planned, C not written)"
            row["qemu"] = (
                f"impossible: --train all needs {peak / MB:.0f} MiB > {ram_max // MB} MiB RAM of {QEMU}"
            )
            row["seconds"] = round(time.monotonic() - t0, 1)
            return row
        c = compile_model(opts)
        row["compile_s"] = round(time.monotonic() - t1, 1)
        row["loads"] = "yes"
    except PoetError as e:
        row["loads"] = f"refused: {e}"
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    except Exception as e:
        row["loads"] = f"crash: {short(e)}"
        row["trace"] = traceback.format_exc()[-2000:]
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    row.update(compare(name, out, c, row))
    if not qemu:
        row["qemu"] = "not run (--no-qemu)"
    elif not fits:
        t1 = time.monotonic()
        row["qemu"] = qemu_bias(path, batch, work / "out-bias" / path.stem, row, peak, ram_max)
        row["qemu_s"] = round(time.monotonic() - t1, 1)
    else:
        t1 = time.monotonic()
        row["qemu"] = qemu_check(out, row.get("_host_params"))
        row["qemu_s"] = round(time.monotonic() - t1, 1)
    row.pop("_host_params", None)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def compare(name: str, out: Path, c, row: dict[str, Any]) -> dict[str, Any]:
    res: dict[str, Any] = {}
    plan = runner.load_plan(out)
    data = runner.batches(plan, STEPS)
    p0 = {k: np.asarray(v, np.float32) for k, v in c.training.params.items() if k in c.training.trainable}
    t0 = time.monotonic()
    try:
        host = runner.run_project(out, "host", STEPS, timeout_s=900)
    except PoetError as e:
        res["host"] = f"failed: {e}"
        return res
    res["host_s"] = round(time.monotonic() - t0, 1)
    res["_host_params"] = host.params
    res["host_losses"] = [s.loss for s in host.steps]
    t0 = time.monotonic()
    ref, unmatched = torch_train(um.build(name), p0, data, LR)
    res["torch_s"] = round(time.monotonic() - t0, 1)
    perr, uerr, worst, worst_name = rel_errors({k: host.params[k] for k in ref}, ref, p0)
    res["max_rel_err_params"] = perr
    res["max_rel_err_update"] = uerr
    res["worst_param_update_err"] = [worst_name, worst]
    res["unmatched_params"] = unmatched
    return res


def qemu_bias(path: Path, batch: int, out: Path, row: dict[str, Any], peak: int, ram_max: int) -> str:
    """Where --train all does not fit the QEMU board, host vs QEMU bits with --train bias (weights frozen
    in flash), if that fits its RAM and flash."""
    why = f"--train all needs {peak / MB:.1f} MiB > {ram_max // MB} MiB RAM of {QEMU}"
    mem = targets.load_target(QEMU).memory
    flash = mem.flash_bytes if mem else 0
    if not isinstance(row.get("peak_bias"), int) or not qemu_fits(row["peak_bias"])[0]:
        return f"impossible: {why}, --train bias too"
    if row["frozen_bytes_bias"] + 256 * 1024 > flash:
        frozen = row["frozen_bytes_bias"] / MB
        return f"impossible: {why}; --train bias: {frozen:.1f} MiB of frozen weights > flash"
    try:
        compile_model(
            CompileOptions(path, "cortex-m4", ram_max, out, batch, lr=LR, scheduler="none", train="bias")
        )
        host = runner.run_project(out, "host", STEPS, timeout_s=900)
    except PoetError as e:
        return f"failed (--train bias): {e}"
    return f"{qemu_check(out, host.params)} with --train bias ({why})"


def qemu_check(out: Path, host_params: dict[str, np.ndarray] | None) -> str:
    if host_params is None:
        return "not run (no host result)"
    try:
        q = runner.run_project(out, QEMU, STEPS, timeout_s=900)
    except PoetError as e:
        return f"failed: {e}"
    same = all(np.array_equal(q.params[k].view(np.uint32), v.view(np.uint32)) for k, v in host_params.items())
    return "bit-identical" if same else "DIFFERENT"


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------
def one_line(text: str) -> str:
    """A table cell: a link error as its overflow line, anything else its first line, no pipes."""
    m = re.search(r"region `(\w+)' overflowed by (\d+) bytes", text)
    if m:
        tail = text[text.rfind(" with --train bias") :] if " with --train bias" in text else ""
        text = f"impossible: ld: {m.group(1)} overflowed by {int(m.group(2)):,} B{tail}"
    return text.splitlines()[0].replace("|", "\\|")[:240] if text else ""


def fmt_bytes(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else ("" if v is None else str(v))


def fmt_err(v: Any) -> str:
    return f"{v:.1e}" if isinstance(v, float) else ""


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    head = [
        "# Models users bring (issue 54)",
        "",
        f"Machine: {meta['machine']}. Commit {meta['commit']}, {meta['date']}. torch {meta['torch']}, "
        f"torchvision {meta['torchvision']}, onnx {meta['onnx']}, onnxscript {meta['onnxscript']}.",
        "",
        f"Batch {um.EXPORT_BATCH}, {STEPS} SGD steps at lr {LR}, cross-entropy, `--train all`, "
        "`--kernels fast`, "
        '`--scheduler none`, the runner\'s synthetic batches. "err params": max over parameters of '
        'max|C - torch| / max|torch| after 3 steps; "err update": max|dC - dtorch| / max|dtorch| over all '
        "parameters, d = after - before (the JSON has each row's worst single parameter). "
        "PyTorch trains the model with each BatchNorm folded into its conv, as both exporters export it. "
        "QEMU: the same project built for qemu-cortex-m4 (mps2-an386: 4 MiB RAM, 4 MiB flash) with "
        "`--device cortex-m4 --ram 4MB`; where `--train all` does not fit, the row says so and checks "
        "`--train bias` (weights frozen in flash) instead, if that fits. "
        'Floors: `poet inspect --batch 2` (bytes, 8 KiB reserve included). "s": wall seconds of the row '
        "without the export (inspect, compile, host run, torch, QEMU), on a 2-core machine shared with other "
        'jobs; "export s": the export, 0 where a previous run\'s file was reused.',
        "",
        "| model | exporter | opset | loads | err params | err update | qemu-cortex-m4 = host | floor all | "
        "floor bias | s | export s |",
        "|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    order = {m: i for i, m in enumerate(um.MODELS)}
    rows = sorted(
        rows, key=lambda r: (order.get(r["model"], 99), um.EXPORTERS.index(r["exporter"]), r["opset"])
    )
    for r in rows:
        loads = one_line(r["loads"].split("; supported:")[0])
        opset = f"{r['opset']}" + (
            f" (file: {r['file_opset']})" if r.get("file_opset", r["opset"]) != r["opset"] else ""
        )
        host = r.get("host")
        err_p = fmt_err(r.get("max_rel_err_params")) or (host or "")
        head.append(
            f"| {r['model']} | {r['exporter']} | {opset} | {loads} | {err_p} | "
            f"{fmt_err(r.get('max_rel_err_update'))} | {one_line(r.get('qemu', ''))} | "
            f"{fmt_bytes(r.get('floor_all'))} | "
            f"{fmt_bytes(r.get('floor_bias'))} | {r['seconds']} | {r.get('export_s', '')} |"
        )
    return "\n".join(head + notes(rows)) + "\n"


def notes(rows: list[dict[str, Any]]) -> list[str]:
    """What stops each refused row (the frontend reports the first unsupported op only), and parameters
    that torch does not have."""
    out = ["", "## Why rows do not load", ""]
    causes: dict[str, list[str]] = {}
    for r in rows:
        if r["loads"] != "yes":
            key = re.sub(r"node '[^']*'", "node", r["loads"].split(";")[0])[:160]
            causes.setdefault(key, []).append(f"{r['model']}/{r['exporter']}/{r['opset']}")
    for cause, which in sorted(causes.items(), key=lambda kv: -len(kv[1])):
        out.append(f"- {len(which)} row(s): `{cause}`: {', '.join(which)}")
    noted = [r for r in rows if r.get("note")]
    if noted:
        out += ["", "## Rows run differently", ""]
        out += [f"- {r['model']}/{r['exporter']}/{r['opset']}: {r['note']}" for r in noted]
    extra = [r for r in rows if r.get("unmatched_params")]
    if extra:
        out += ["", "## Trained parameters that PyTorch does not have", ""]
        for r in extra:
            out.append(f"- {r['model']}/{r['exporter']}/{r['opset']}: {', '.join(r['unmatched_params'])}")
    return out


def meta_info() -> dict[str, Any]:
    import onnx
    import onnxscript
    import torch

    try:
        import torchvision

        tv = torchvision.__version__
    except Exception:
        from importlib.metadata import version

        tv = version("torchvision")
    tree = os.environ.get("POET_TREE", str(ROOT))
    commit = subprocess.run(
        ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    branch = subprocess.run(["git", "-C", tree, "branch", "--show-current"], capture_output=True, text=True)
    return {
        "machine": machine(),
        "commit": f"{commit.stdout.strip()} ({branch.stdout.strip()})",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "torchvision": tv,
        "onnx": onnx.__version__,
        "onnxscript": onnxscript.__version__,
        "steps": STEPS,
        "lr": LR,
        "batch": um.EXPORT_BATCH,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", help=f"model(s): {', '.join(um.MODELS)}")
    ap.add_argument("--exporter", action="append", choices=um.EXPORTERS)
    ap.add_argument("--opset", action="append", type=int)
    ap.add_argument("--no-qemu", action="store_true")
    ap.add_argument("--work", type=Path, help="keep exports and projects here (default: a temporary folder)")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--max-params", type=int, default=MAX_PARAMS[0], help="build C only up to this many")
    ap.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    ap.add_argument("--append", action="store_true", help="keep the rows of the .json, replace re-run ones")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads((args.results / "user_models.json").read_text())
        (args.results / "user_models.md").write_text(markdown(saved["meta"], saved["rows"]))
        return 0
    import importlib.util

    # torchvision's __init__ may fail to load its C ops against a CPU torch (RuntimeError); its model files
    # are imported without it (examples/user_models/models.py), so only its presence is checked here
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
        print("bench/user_models.py: skipped: needs torch and torchvision (not poet-edge deps); see --help")
        return 0
    MAX_PARAMS[0] = args.max_params
    meta = meta_info()
    rows: list[dict[str, Any]] = []
    if args.append and (args.results / "user_models.json").is_file():
        rows = json.loads((args.results / "user_models.json").read_text())["rows"]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for name in args.only or um.MODELS:
            for exporter in args.exporter or um.EXPORTERS:
                for opset in args.opset or um.OPSETS:
                    key = (name, exporter, opset)
                    rows = [r for r in rows if (r["model"], r["exporter"], r["opset"]) != key]
                    rows.append(run_row(name, exporter, opset, work, not args.no_qemu))
                    print(json.dumps(rows[-1], default=str)[:600], flush=True)
                    args.results.mkdir(parents=True, exist_ok=True)
                    (args.results / "user_models.json").write_text(
                        json.dumps({"meta": meta, "rows": rows}, indent=1, default=str) + "\n"
                    )
                    (args.results / "user_models.md").write_text(markdown(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
