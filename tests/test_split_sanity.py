"""With operator splitting on, the load-time size check lets an activation bigger than --ram through when
one channel of it fits (splitting cuts it into channel tiles; the memory floor judges the rest), or with
row tiles a few rows of one channel, and still refuses activations whose smallest tile is above --ram, and
the batch unless it is read from storage in windows of rows."""

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
        PoetError, match=r"'wide'.*even the smallest tile of it \(16384 B.*is, so tiles cannot help"
    ):
        sanity.check_graph(g, 14 * KB, split=True)  # the 12 KB input fits
    sanity.check_graph(g, 14 * KB, split=True, rows=4)  # 4 rows of one channel: 1 KB
    with pytest.raises(PoetError, match=r"'wide'.*smallest tile of it \(1024 B"):
        sanity.check_graph(g, 1000, split=True, rows=4, input_rows=True)  # the input: 4 rows, 384 B


def test_the_input_is_tiled_only_in_windows_from_storage() -> None:
    g = frontend.load(ROOT / "examples" / "zoo" / "mobilenetv2_035.onnx", 1)  # input: [1, 3, 96, 96], 108 KB
    with pytest.raises(PoetError, match=r"tensor 'input' \(input.*more than --ram") as e:
        sanity.check_graph(g, 64 * KB, split=True, rows=4)
    assert "smallest tile" not in str(e.value)
    sanity.check_graph(g, 64 * KB, split=True, rows=4, input_rows=True)  # 4 rows of a channel: 1.5 KB
