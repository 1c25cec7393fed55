#!/usr/bin/env python3
"""PyTorch's own training of the recurrent models, stored for tests/test_rnn.py (which must not need torch).

    /tmp/torchenv/bin/python tests/data/rnn/make_torch_reference.py   # torch, onnx, onnxscript (zoo README)

Writes here: lstm_kws.onnx (an LSTM keyword spotter exported like examples/zoo/gru_kws.onnx) and, for it
and gru_kws, <name>.npz with the input x[3, 49, 10], labels, torch's cross-entropy losses of 3 SGD steps
(lr 0.05, the same batch each step) and its logits after them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ZOO = HERE.parents[2] / "examples" / "zoo"
sys.path.insert(0, str(ZOO))
sys.dont_write_bytecode = True
import export  # noqa: E402  (examples/zoo/export.py)

STEPS, LR, LABELS = 3, 0.05, [1, 5, 11]


class LSTMKWS(nn.Module):
    """49 MFCC frames x 10 -> LSTM(48) -> last hidden state -> 12 classes."""

    def __init__(self, hidden=48):
        super().__init__()
        self.hidden = hidden
        self.lstm = nn.LSTM(10, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 12)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h.reshape(-1, self.hidden))


def export_lstm(model: nn.Module, out: Path) -> None:
    import onnxscript.optimizer

    x = torch.randn(2, 49, 10, generator=torch.Generator().manual_seed(2))
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        torch.onnx.export(
            model,
            (x,),
            str(raw),
            dynamo=True,
            external_data=False,
            opset_version=20,
            input_names=["input"],
            output_names=["output"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
        )
        proto = onnxscript.optimizer.optimize(onnx.load(str(raw)), input_size_limit=1 << 20)
    proto = export._drop_zero_initial_states(export.strip_metadata(proto))
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, str(out))


def torch_training(model: nn.Module, out: Path) -> None:
    x = torch.randn(3, 49, 10, generator=torch.Generator().manual_seed(7))
    labels = torch.tensor(LABELS)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        after = model(x).numpy()
    np.savez(out, x=x.numpy(), labels=np.array(LABELS, np.int32), losses=np.array(losses), logits_after=after)


def main() -> None:
    torch.manual_seed(0)
    lstm = LSTMKWS().eval()
    export_lstm(lstm, HERE / "lstm_kws.onnx")
    torch_training(lstm, HERE / "lstm_kws.npz")
    torch_training(export.build("gru_kws"), HERE / "gru_kws.npz")  # the weights of examples/zoo/gru_kws.onnx


if __name__ == "__main__":
    main()
