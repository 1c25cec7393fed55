"""With operator splitting on, the load-time size check lets an activation bigger than --ram through when
one channel of it fits (splitting cuts it into channel tiles; the memory floor judges the rest), and still
refuses inputs and activations whose single channel is above --ram."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from poet_edge import frontend, sanity
from poet_edge.errors import PoetError
from poet_edge.ir import Role, Tensor

ROOT = Path(__file__).resolve().parents[1]
KB = 1024


def test_an_activation_above_ram_passes_when_one_channel_fits() -> None:
    g = frontend.load(ROOT / "examples" / "zoo" / "resnet8.onnx", 1)  # stage 1: [1, 16, 32, 32], 64 KB
    with pytest.raises(PoetError, match=r"more than --ram \(32768 B"):
        sanity.check_graph(g, 32 * KB)
    sanity.check_graph(g, 32 * KB, split=True)  # a channel is 4 KB
    wide = Tensor("wide", (1, 2, 64, 64), "float32", Role.ACTIVATION)  # 32 KB, 16 KB a channel
    g = replace(g, tensors={**g.tensors, "wide": wide})
    sanity.check_graph(g, 16 * KB, split=True)
    with pytest.raises(
        PoetError, match=r"'wide'.*even one channel of it \(16384 B.*is, so tiles cannot help"
    ):
        sanity.check_graph(g, 14 * KB, split=True)  # the 12 KB input fits


def test_the_input_is_never_tiled() -> None:
    g = frontend.load(ROOT / "examples" / "zoo" / "mobilenetv2_035.onnx", 1)  # input: [1, 3, 96, 96], 108 KB
    with pytest.raises(PoetError, match=r"tensor 'input' \(input.*more than --ram") as e:
        sanity.check_graph(g, 64 * KB, split=True)
    assert "one channel" not in str(e.value)
