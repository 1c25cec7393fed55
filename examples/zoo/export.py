#!/usr/bin/env python3
"""Build the poet-edge model zoo: eight small float32 ONNX models for on-device training.

    python export.py            export every model into this folder (needs torch, see README.md)
    python export.py lenet5     export only the named model(s)
    python export.py --check    onnx.checker + strict shape inference + onnxruntime at batch 1 and 3
    python export.py --ops      print the op-type histogram table (Markdown) used in README.md
    python export.py --twice    export into two temporary folders and compare the bytes

--check and --ops import only onnx, onnxruntime and numpy, so they also run in the project venv.
Exports are deterministic: fixed seeds, no timestamps, per-node exporter metadata (source stack
locations) stripped.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
OPSET = 20  # >= 17 for LayerNormalization; 20 so that GELU is one Gelu op (18 gives Div/Erf/Add/Mul/Mul)
SEED = 0

# name -> (model class in models.py, input shape at batch 1, exporter)
# All models go through the torch.export-based ("dynamo") exporter, except LeNet-5: its
# `x.view(x.size(0), -1)` is kept by the TorchScript exporter as a Shape/Gather/Unsqueeze/Concat
# subgraph in front of the Reshape, which the frontend must fold; the dynamo exporter's optimizer
# would fold it into a constant Reshape shape [-1, 400] itself.
MODELS = {
    "resnet8": ("ResNet8", (1, 3, 32, 32), "dynamo"),
    "dscnn": ("DSCNN", (1, 1, 49, 10), "dynamo"),
    "mobilenetv1_025": ("MobileNetV1", (1, 3, 96, 96), "dynamo"),
    "autoencoder": ("AutoEncoder", (1, 640), "dynamo"),
    "mobilenetv2_035": ("MobileNetV2", (1, 3, 96, 96), "dynamo"),
    "lenet5": ("LeNet5", (1, 1, 28, 28), "torchscript"),
    "bert_tiny": ("BertTiny", (1, 32, 64), "dynamo"),
    "gru_kws": ("GRUKWS", (1, 49, 10), "dynamo"),
}

# Per-model export settings. gru_kws: torch.export specializes a batch of 1 when nn.GRU makes its zero
# initial state, so the example input has batch 2 (the file's batch stays symbolic); and the exporter's
# optimizer leaves the gate reordering of weight_hh (12,288 elements, above onnxscript's default folding
# limit of 8,192) as Slice/Concat/Unsqueeze on the parameter at run time, so it is folded again with a
# larger limit.
# Its graph metadata (torch.export's range constraints) names an unbacked symbol from nn.GRU's tracing
# in some runs and not in others, so it is dropped to keep the bytes reproducible.
EXAMPLE_BATCH = {"gru_kws": 2}
FOLD_INPUT_LIMIT = {"gru_kws": 1 << 20}
DROP_GRAPH_METADATA = {"gru_kws"}


# ---------------------------------------------------------------------------------------------
# export (needs torch)
# ---------------------------------------------------------------------------------------------
def build(name: str):
    """The PyTorch model `name` in eval mode, with weights from a fixed seed."""
    import torch
    from torch import nn

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    sys.dont_write_bytecode = True  # keep __pycache__ out of the zoo folder
    import models

    torch.manual_seed(SEED)
    model = getattr(models, MODELS[name][0])()
    # Default norm parameters (gamma=1, beta=0, mean=0, var=1) would make every BatchNorm an
    # identity and every LayerNorm share the same weights (exporters deduplicate equal
    # initializers into one tensor). Randomize them so each is distinct and non-trivial.
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.5, 1.5, generator=g))
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.empty_like(m.running_var).uniform_(0.5, 1.5, generator=g))
            elif isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.8, 1.2, generator=g))
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.02)
    return model.eval()


def torch_param_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def strip_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop exporter debug metadata (node source locations, FX node text): smaller, reproducible."""
    model.doc_string = ""
    model.graph.doc_string = ""
    del model.metadata_props[:]
    for n in model.graph.node:
        n.doc_string = ""
        del n.metadata_props[:]
    for t in model.graph.initializer:
        t.doc_string = ""
        del t.metadata_props[:]
    for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        vi.doc_string = ""
        del vi.metadata_props[:]
    return model


def _zero_state_names(model: onnx.ModelProto, names: list[str]) -> set[str]:
    """The tensors among ``names`` that are all zeros for a random input at batch 1 and 3."""
    from onnx.reference import ReferenceEvaluator

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    vi = onnx.helper.make_tensor_value_info
    probe.graph.output.extend(vi(n, onnx.TensorProto.FLOAT, None) for n in names)
    sess = ReferenceEvaluator(probe)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    zero = set(names)
    for batch in (1, 3):
        x = np.random.default_rng(SEED).standard_normal((batch, *dims)).astype(np.float32)
        got = sess.run(None, {model.graph.input[0].name: x})
        zero &= {n for n, v in zip(names, got, strict=True) if not np.any(v)}
    return zero


def _drop_zero_initial_states(model: onnx.ModelProto) -> onnx.ModelProto:
    """nn.GRU / nn.LSTM without an explicit state export their zero initial state as a computed tensor
    (Shape -> Concat -> Expand -> Slice of a zero scalar; with a batch-1 example input an all-zero
    [1, 1, hidden] initializer instead). ONNX's omitted initial_h / initial_c is zeros, so dropping an
    input that is all zeros is exact; the subgraph that computed it is pruned."""
    rnns = [n for n in model.graph.node if n.op_type in ("GRU", "LSTM")]
    names = sorted({t for n in rnns for t in n.input[5:7] if t})
    zero = _zero_state_names(model, names) if names else set()
    for n in rnns:
        ins = [("" if k in (5, 6) and t in zero else t) for k, t in enumerate(n.input)]
        while ins and ins[-1] == "":
            ins.pop()
        del n.input[:]
        n.input.extend(ins)
    needed = {o.name for o in model.graph.output}
    keep = []
    for n in reversed(model.graph.node):  # prune nodes whose outputs nothing reads
        if any(o in needed for o in n.output):
            keep.append(n)
            needed.update(n.input)
    del model.graph.node[:]
    model.graph.node.extend(reversed(keep))
    inits = [t for t in model.graph.initializer if t.name in needed]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    vis = [v for v in model.graph.value_info if v.name in needed]
    del model.graph.value_info[:]
    model.graph.value_info.extend(vis)
    return model


def torch_export(model, x, path: Path, exporter: str, opset: int, dynamic: bool = True) -> None:
    """torch.onnx.export of ``model`` on the example ``x`` with the input and output named "input" and
    "output" and, when ``dynamic``, a symbolic batch dimension: ``exporter`` "dynamo" (torch.export) or
    "torchscript". Exporter warnings (e.g. the legacy TorchScript notice) are silenced."""
    import torch

    common = dict(input_names=["input"], output_names=["output"], opset_version=opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(
                model,
                (x,),
                str(path),
                dynamo=True,
                external_data=False,
                verbose=False,
                dynamic_shapes=({0: torch.export.Dim("batch")},) if dynamic else None,
                **common,
            )
        else:
            torch.onnx.export(
                model,
                (x,),
                str(path),
                dynamo=False,
                do_constant_folding=True,
                dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None,
                **common,
            )


def export(name: str, out_dir: Path, opset: int = OPSET) -> Path:
    import torch

    model = build(name)
    shape, exporter = MODELS[name][1], MODELS[name][2]
    example = (EXAMPLE_BATCH.get(name, shape[0]), *shape[1:])
    x = torch.randn(*example, generator=torch.Generator().manual_seed(SEED + 2))
    out = out_dir / f"{name}.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / out.name
        torch_export(model, x, raw, exporter, opset)
        proto = onnx.load(str(raw))  # loads external data too, if an exporter ever wrote any
    if name in FOLD_INPUT_LIMIT:
        import onnxscript.optimizer

        proto = onnxscript.optimizer.optimize(proto, input_size_limit=FOLD_INPUT_LIMIT[name])
    proto = _drop_zero_initial_states(strip_metadata(proto))
    if name in DROP_GRAPH_METADATA:
        del proto.graph.metadata_props[:]
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, str(out), save_as_external_data=False)

    # the exported file must compute what the PyTorch model computes
    import onnxruntime as ort

    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    worst = 0.0
    for batch in (1, 3):
        xb = torch.randn(batch, *shape[1:], generator=torch.Generator().manual_seed(SEED + 3))
        with torch.no_grad():
            ref = model(xb).numpy()
        got = sess.run(None, {"input": xb.numpy()})[0]
        err = float(np.max(np.abs(ref - got)))
        if got.shape != ref.shape or err > 1e-4 * max(1.0, float(np.max(np.abs(ref)))):
            raise SystemExit(
                f"{name}: onnxruntime differs from torch at batch {batch}: "
                f"shape {got.shape} vs {ref.shape}, max abs err {err:.3g}"
            )
        worst = max(worst, err)
    print(
        f"{name:16s} {exporter:11s} opset {opset}  {out.stat().st_size:>9,d} bytes  "
        f"{torch_param_count(model):>8,d} torch params  torch-vs-ort max err {worst:.2e}"
    )
    return out


# ---------------------------------------------------------------------------------------------
# checks and statistics (onnx + onnxruntime only)
# ---------------------------------------------------------------------------------------------
def model_paths(names=None) -> list[Path]:
    return [HERE / f"{n}.onnx" for n in (names or MODELS)]


def op_histogram(path: Path) -> collections.Counter:
    model = onnx.load(str(path))
    return collections.Counter(n.op_type for n in model.graph.node)


def initializer_stats(path: Path) -> tuple[int, int, int]:
    """(float32 initializer elements, number of float32 scalar initializers, bytes on disk)."""
    model = onnx.load(str(path))
    elems = scalars = 0
    for t in model.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            n = int(np.prod(t.dims)) if len(t.dims) else 1
            elems += n
            scalars += n == 1
    return elems, scalars, path.stat().st_size


def check(paths: list[Path]) -> None:
    import onnxruntime as ort

    total = 0
    for p in paths:
        model = onnx.load(str(p))
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
        (inp,), (_outp,) = model.graph.input, model.graph.output
        dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
        assert dims[0] == "batch" and all(isinstance(d, int) for d in dims[1:]), dims
        sess = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(SEED)
        shapes = []
        for batch in (1, 3):
            x = rng.standard_normal((batch, *dims[1:])).astype(np.float32)
            (y,) = sess.run(None, {inp.name: x})
            assert y.shape[0] == batch and np.all(np.isfinite(y)), (p.name, y.shape)
            shapes.append(y.shape)
        total += p.stat().st_size
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        print(
            f"ok  {p.name:22s} opset {opset}  input {tuple(dims)}  output at batch 1/3: "
            f"{shapes[0]} / {shapes[1]}  {p.stat().st_size:,d} bytes"
        )
    print(f"{len(paths)} models, {total:,d} bytes in total")


def ops_table(paths: list[Path]) -> str:
    hists = {p.stem: op_histogram(p) for p in paths}
    ops = sorted({op for h in hists.values() for op in h})
    lines = ["| op type | " + " | ".join(hists) + " |", "|---" * (len(hists) + 1) + "|"]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(str(h.get(op, "")) for h in hists.values()) + " |")
    lines.append("| **nodes** | " + " | ".join(f"**{sum(h.values())}**" for h in hists.values()) + " |")
    stats = {p.stem: initializer_stats(p) for p in paths}
    lines.append(
        "| *float32 initializer elements* | " + " | ".join(f"{s[0]:,d}" for s in stats.values()) + " |"
    )
    lines.append("| *of which float32 scalars* | " + " | ".join(str(s[1]) for s in stats.values()) + " |")
    lines.append("| *file bytes* | " + " | ".join(f"{s[2]:,d}" for s in stats.values()) + " |")
    return "\n".join(lines)


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    ap.add_argument("--check", action="store_true", help="checker + shape inference + onnxruntime")
    ap.add_argument("--ops", action="store_true", help="print the op-type histogram table")
    ap.add_argument("--twice", action="store_true", help="export twice and compare the bytes")
    ap.add_argument("--opset", type=int, default=OPSET, help=f"ONNX opset (default {OPSET})")
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: here)")
    args = ap.parse_args(argv)
    names = args.names or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    if args.check or args.ops:
        if args.check:
            check(model_paths(names))
        if args.ops:
            print(ops_table(model_paths(names)))
        return
    if args.twice:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            diff = []
            for n in names:
                pa, pb = export(n, Path(a), args.opset), export(n, Path(b), args.opset)
                same = pa.read_bytes() == pb.read_bytes()
                print(f"{n:16s} {'identical' if same else 'DIFFERENT'}  sha256 {sha256(pa)[:16]}")
                diff += [] if same else [n]
            if diff:
                raise SystemExit(f"not reproducible: {diff}")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for n in names:
        export(n, args.out, args.opset)


if __name__ == "__main__":
    main()
