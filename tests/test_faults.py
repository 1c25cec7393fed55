"""Issue 59, the device side: the generated step is transactional under storage faults and power cuts, and
checkpoints survive a cut at any byte. The mlp (batch 32, batch in storage, page-all: it loads the batch,
pages one value and journals 4 parameters) runs every fault kind at every storage call of a step and a
checkpoint save on the host, and a subset on QEMU (bench/faults.py runs the zoo models too)."""

from __future__ import annotations

import math
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from conftest import need_tools  # noqa: E402
from faults import MODELS, compile_for_faults, run_driver, summarize  # noqa: E402

from poet_edge.compiler import Compiled  # noqa: E402
from poet_edge.paths import RUNTIME_C  # noqa: E402
from poet_edge.schedule import PageIn, PageOut  # noqa: E402
from poet_edge.simulator import Integrity, simulate  # noqa: E402


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Compiled]:
    out = tmp_path_factory.mktemp("faults") / "mlp"
    return out, compile_for_faults(MODELS[0], out)


@pytest.fixture(scope="module")
def mlp_lines(mlp: tuple[Path, Compiled]) -> list[str]:
    need_tools("gcc")
    return run_driver(mlp[0], "host")


@pytest.fixture(scope="module")
def mlp_run(mlp_lines: list[str]) -> dict:
    return summarize(mlp_lines)


def test_crc32_matches_zlib(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8).tobytes()
    (tmp_path / "d.bin").write_bytes(data)
    src = tmp_path / "crc.c"
    src.write_text(
        '#include <stdio.h>\n#include "poet/crc32.h"\nint main(void) { static unsigned char b[1000];\n'
        'FILE *f = fopen("d.bin", "rb"); if (!f || fread(b, 1, 1000, f) != 1000) return 1;\n'
        "uint32_t c = poet_crc32_update(POET_CRC32_INIT, b, 333);\nc = poet_crc32_update(c, b + 333, 667);\n"
        'printf("%08lx %08lx\\n", (unsigned long)poet_crc32(b, 1000), (unsigned long)poet_crc32_final(c));\n'
        "for (unsigned i = 0; i < 256; ++i) { unsigned char v = (unsigned char)i;\n"
        'printf("%08lx\\n", (unsigned long)poet_crc32_update(0u, &v, 1)); }\n'  # = table[i]
        "return 0; }\n"
    )
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{RUNTIME_C / 'include'}"]
    subprocess.run(["gcc", *flags, str(src), "-o", str(tmp_path / "crc")], check=True)
    out = subprocess.run([str(tmp_path / "crc")], cwd=tmp_path, capture_output=True, text=True, check=True)
    whole, *table = out.stdout.splitlines()
    assert whole.split() == [f"{zlib.crc32(data):08x}"] * 2
    # every entry of the written-out table: update(0, [i]) = table[i] = ~zlib.crc32([i], ~0)
    assert table == [f"{~zlib.crc32(bytes([i]), 0xFFFFFFFF) & 0xFFFFFFFF:08x}" for i in range(256)]


def test_storage_calls_are_the_schedules(mlp: tuple[Path, Compiled], mlp_run: dict) -> None:
    """The driver counts the storage calls the plan implies: page-ins, page-outs, batch loads, journal
    writes; a save: erase magic, one write per persistent tensor, header, magic, then the read-back."""
    _, c = mlp
    kinds = {n.name: n.kind for n in c.problem.nodes}
    paging = sum(isinstance(s, PageIn | PageOut) for s in c.schedule.steps)
    loads = sum(kinds[s.node] == "input" for s in c.schedule.steps if type(s).__name__ == "Compute")
    assert c.storage.journal and paging and loads  # the case exercises rollback, paging and the batch load
    assert mlp_run["step_calls"] == paging + loads + len(c.storage.journal)
    persistent = 1 + len(c.training.trainable)
    readback = 1 + math.ceil(c.storage.checkpoint_payload_bytes / 64)
    assert mlp_run["save_calls"] == 1 + persistent + 2 + readback


def test_every_fault_is_survived(mlp_run: dict) -> None:
    s = mlp_run
    calls = s["step_calls"] + s["save_calls"]
    assert s["cases"] == 3 * calls and s["fired"] == s["cases"]
    assert (s["torn"], s["flips"], s["fails"]) == (calls, calls, calls)
    assert s["corrupt"] == 0 and s["not_transactional"] == 0
    assert s["reported"] + s["unread"] == s["cases"]
    # unread flips: the 4 journal entries of a step that succeeded and the erased magic of the save's slot
    assert s["unread"] == 4 + 1
    assert s["restored_pre"] > 0 and s["restored_post"] > 0


def test_bad_labels_and_inputs_change_nothing(mlp_run: dict) -> None:
    assert mlp_run["checks"] == {
        "bad_label": ["bad_label", "pre"],
        "negative_label": ["bad_label", "pre"],
        "nonfinite": ["nonfinite_input", "pre"],
    }


def test_checks_are_priced(mlp: tuple[Path, Compiled]) -> None:
    _, c = mlp
    base = simulate(c.problem, c.schedule, c.profile)
    journal = tuple(c.training.tensor(p).nbytes for p in c.storage.journal)
    x_floats = c.training.tensor(c.training.inputs[0]).size
    full = simulate(c.problem, c.schedule, c.profile, Integrity(0, x_floats, True, journal))
    paged = sum(
        c.problem.nodes[c.problem.index()[s.node]].out_bytes
        for s in c.schedule.steps
        if isinstance(s, PageIn | PageOut)
    )
    assert base.latency_checks_s == 0 and base.crc_bytes == 0 and base.journal_bytes_written == 0
    assert full.crc_bytes == paged + sum(journal) and full.journal_bytes_written == sum(journal)
    assert full.storage_bytes_written == base.storage_bytes_written + sum(journal)
    assert full.latency_s > base.latency_s and full.energy_j > base.energy_j
    assert c.sim.latency_checks_s == pytest.approx(full.latency_checks_s)  # the compile priced the same


def test_qemu_cortex_m4_gives_the_same_outcomes(mlp: tuple[Path, Compiled], mlp_lines: list[str]) -> None:
    """The Cortex-M platform's in-memory storage with the same hooks (-DPOET_FAULTS): every step call and
    every 64th save call, case for case the host's outcome."""
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    qemu = run_driver(mlp[0], "qemu-cortex-m4", stride=64)
    host = {" ".join(ln.split()[1:3]): ln for ln in mlp_lines if ln.startswith("case ")}
    cases = [ln for ln in qemu if ln.startswith("case ")]
    calls = summarize(mlp_lines)
    assert len(cases) == 3 * (calls["step_calls"] + math.ceil(calls["save_calls"] / 64))
    assert all(host[" ".join(ln.split()[1:3])] == ln for ln in cases)
    assert summarize(qemu)["corrupt"] == 0
