#!/usr/bin/env python3
"""Export the models of the "models users bring" table (issue 54) with both torch exporters.

    python export.py -o DIR                       every model x {torchscript, dynamo} x opset {17, 18}
    python export.py -o DIR accel_cnn1d --exporter dynamo --opset 18

Needs torch, torchvision, onnx, onnxscript and onnxruntime (not poet-edge's dependencies). The models
are exported as they are defined (models.py; torchvision's definitions unchanged, random init) in
eval mode, with a symbolic batch dimension where the exporter allows it. Weights: torch's default
init from a fixed seed, then every bias, BatchNorm scale/shift/statistics and LayerNorm scale/shift
redrawn at random, so that no BatchNorm is an identity and no two initializers are equal (exporters
merge equal initializers into one shared tensor, which would tie parameters that torch trains apart).
Each file is checked with onnx.checker and against the PyTorch model in onnxruntime at batch 1 and 3
(or at the export batch only, for a static-batch export)."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
SEED = 0
EXPORTERS = ("torchscript", "dynamo")
OPSETS = (17, 18)
EXPORT_BATCH = 2  # the example input's batch (also the static batch where a dynamic one fails)


def _tv(module: str, fn: str) -> Callable[[], object]:
    def make():
        sys.path.insert(0, str(HERE))
        import models

        return getattr(models.torchvision_module(module), fn)(num_classes=10)

    return make


def _own(cls: str) -> Callable[[], object]:
    def make():
        sys.path.insert(0, str(HERE))
        import models

        return getattr(models, cls)()

    return make


TORCHVISION = {
    "mobilenetv3_small": ("mobilenetv3", "mobilenet_v3_small"),
    "squeezenet1_1": ("squeezenet", "squeezenet1_1"),
    "shufflenetv2_x0_5": ("shufflenetv2", "shufflenet_v2_x0_5"),
    "resnet18": ("resnet", "resnet18"),
    "mnasnet0_5": ("mnasnet", "mnasnet0_5"),
}
# name -> (constructor, input shape at batch 1)
MODELS: dict[str, tuple[Callable[[], object], tuple[int, ...]]] = {
    f"{name}_{size}": (_tv(*where), (1, 3, size, size))
    for name, where in TORCHVISION.items()
    for size in (32, 64)
}
MODELS.update(
    {
        "gru_kws": (_own("GRUKWS"), (1, 49, 10)),
        "grucell_kws": (_own("GRUCellKWS"), (1, 49, 10)),
        "tiny_vit": (_own("TinyViT"), (1, 3, 32, 32)),
        "accel_cnn1d": (_own("AccelCNN1d"), (1, 3, 128)),
        "m5_audio": (_own("M5"), (1, 1, 8000)),
        "tiny_upnet": (_own("TinyUpNet"), (1, 3, 32, 32)),
    }
)


def build(name: str):
    """The PyTorch model `name` in eval mode, weights from a fixed seed (see the module docstring)."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    model = MODELS[name][0]()
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.5, 1.5, generator=g))
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.empty_like(m.running_var).uniform_(0.5, 1.5, generator=g))
            elif isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.8, 1.2, generator=g))
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.02)
            else:
                for pname, p in m.named_parameters(recurse=False):
                    if "bias" in pname:
                        p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def example_input(name: str, batch: int = EXPORT_BATCH, seed: int = SEED + 2):
    import torch

    shape = MODELS[name][1]
    return torch.randn(batch, *shape[1:], generator=torch.Generator().manual_seed(seed))


@functools.cache
def _zoo_export():
    """examples/zoo/export.py, loaded by path (both folders have an export.py and a models.py): its metadata
    stripping and torch.onnx.export call serve both."""
    spec = importlib.util.spec_from_file_location("poet_zoo_export", HERE.parent / "zoo" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def export(name: str, exporter: str, opset: int, out_dir: Path) -> tuple[Path, bool]:
    """Writes out_dir/<name>-<exporter>-op<opset>.onnx; returns (path, batch dimension is dynamic).
    Raises whatever the exporter raises."""
    import onnxruntime as ort
    import torch

    model = build(name)
    x = example_input(name)
    out = Path(out_dir) / f"{name}-{exporter}-op{opset}.onnx"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / out.name
        try:
            _zoo_export().torch_export(model, x, raw, exporter, opset, dynamic=True)
            dynamic = True
        except Exception as e:  # a symbolic batch the exporter cannot keep: export a static batch
            print(f"{name} {exporter} opset {opset}: dynamic batch failed ({type(e).__name__}), static")
            _zoo_export().torch_export(model, x, raw, exporter, opset, dynamic=False)
            dynamic = False
        proto = onnx.load(str(raw))
    proto = _zoo_export().strip_metadata(proto)
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, str(out), save_as_external_data=False)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for batch in (1, 3) if dynamic else (EXPORT_BATCH,):
        xb = example_input(name, batch, SEED + 3)
        with torch.no_grad():
            ref = model(xb).numpy()
        (got,) = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})
        err = float(np.max(np.abs(ref - got)))
        if got.shape != ref.shape or err > 1e-4 * max(1.0, float(np.max(np.abs(ref)))):
            raise RuntimeError(f"onnxruntime differs from torch at batch {batch}: max abs err {err:.3g}")
    return out, dynamic


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    ap.add_argument("--exporter", choices=EXPORTERS, action="append", help="default: both")
    ap.add_argument("--opset", type=int, action="append", help="default: 17 and 18")
    ap.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    for name in args.names or MODELS:
        for exporter in args.exporter or EXPORTERS:
            for opset in args.opset or OPSETS:
                try:
                    path, dynamic = export(name, exporter, opset, args.out)
                    size = path.stat().st_size
                    print(f"{path.name:44s} {size:>11,d} bytes  batch {'dynamic' if dynamic else 'static'}")
                except Exception as e:
                    print(
                        f"{name}-{exporter}-op{opset}: export failed: {type(e).__name__}: {e}".splitlines()[0]
                    )


if __name__ == "__main__":
    main()
