"""Paging storage backed by a host file through semihosting (`poet run --storage-file`, as an SD card would
be): the same parameters as the memory-backed storage, and the bytes that went through the file (counted
in targets/common/cortex_m/platform.c) equal the simulator's predicted storage traffic."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import planning, runner, targets
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.profiles import load_profile

QEMU_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
AE = EXAMPLES / "zoo" / "autoencoder.onnx"
STEPS = 3


def _same(a: runner.RunOutcome, b: runner.RunOutcome) -> None:
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]  # float equality: bit for bit
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert np.array_equal(a.params[k].view(np.uint32), b.params[k].view(np.uint32)), k


@pytest.fixture(scope="module")
def paged(tmp_path_factory):
    """The autoencoder (bias training) pages at 56 KB (as in tests/test_qemu.py); its memory-backed run."""
    need_tools("gcc", *QEMU_TOOLS)
    out = tmp_path_factory.mktemp("storage") / "ae"
    opts = CompileOptions(
        AE, "cortex-m4", 56 * 1024, out, scheduler="greedy", batch=4, loss=Loss.MSE, train="bias"
    )
    c = compile_model(opts)
    assert c.sim.n_page_outs > 0 and c.sim.n_page_ins > 0
    memory = runner.run_project(out, "qemu-cortex-m4", STEPS)
    assert memory.storage_file_traffic is None
    return out, c, memory


def test_file_backed_storage_same_bits_and_traffic(paged):
    out, c, memory = paged
    target = "qemu-cortex-m4"
    path = out / f"storage-{target}.bin"
    path.write_bytes(b"stale contents the program must not read" * 100)  # emptied at the first transfer
    r = runner.run_project(out, target, STEPS, storage_file=path)
    _same(memory, r)
    for s in r.steps:  # per step, through the platform interface: the simulator's count
        assert (s.bytes_written, s.bytes_read) == (c.sim.storage_bytes_written, c.sim.storage_bytes_read)
    assert r.storage_file_traffic is not None
    written, read, writes, reads = r.storage_file_traffic
    # through the file (SYS_WRITE / SYS_READ byte counts), the whole run: 3 steps of the predicted traffic
    assert written == STEPS * c.sim.storage_bytes_written
    assert read == STEPS * c.sim.storage_bytes_read
    assert writes >= STEPS * c.sim.n_page_outs and reads >= STEPS * c.sim.n_page_ins
    # emptied at the first transfer, then every step writes the same offsets: no more than one step's bytes
    assert 0 < path.stat().st_size <= c.sim.storage_bytes_written


def test_simulator_charges_the_profiles_storage_latency(paged):
    _, c, _ = paged
    storage = load_profile("cortex-m4").storage
    assert c.sim.latency_page_in_s >= c.sim.n_page_ins * storage.read_latency_s > 0
    assert c.sim.latency_page_out_s >= c.sim.n_page_outs * storage.write_latency_s > 0


def test_storage_file_refused_on_host_and_bad_paths(paged, tmp_path):
    out, _, _ = paged
    with pytest.raises(PoetError, match="needs a QEMU target"):
        runner.run_project(out, "host", 1, storage_file=tmp_path / "s.bin")
    with pytest.raises(PoetError, match="does not exist"):
        runner.run_project(out, "qemu-cortex-m4", 1, storage_file=tmp_path / "no" / "s.bin")
    with pytest.raises(PoetError, match="without quotes"):
        runner.storage_file_define(targets.load_target("qemu-cortex-m4"), tmp_path / 'a"b.bin')


def test_file_backed_batch_in_storage_stm32f405(tmp_path):
    """The STM32F405 (1 MB flash: the paging autoencoder's 1 MB of frozen weights do not fit) with the mlp's
    batch staged in storage (--input storage) at a tight budget: the harness writes each batch to the file
    and the step reads it back; same bits as the memory-backed run, the file traffic as predicted."""
    need_tools("gcc", *QEMU_TOOLS)
    out = tmp_path / "mlp"
    opts = CompileOptions(
        EXAMPLES / "mlp.onnx",
        "cortex-m4",
        36 * 1024,
        out,
        batch=8,
        scheduler="greedy",
        input=planning.InputPlace.STORAGE,
    )
    c = compile_model(opts)
    assert c.storage.input_bytes == 8 * 64 * 4 and c.sim.storage_bytes_read >= c.storage.input_bytes
    memory = runner.run_project(out, "qemu-stm32f405", STEPS)
    r = runner.run_project(out, "qemu-stm32f405", STEPS, storage_file=tmp_path / "sd.bin")
    _same(memory, r)
    for s in r.steps:
        assert (s.bytes_written, s.bytes_read) == (c.sim.storage_bytes_written, c.sim.storage_bytes_read)
    assert r.storage_file_traffic is not None
    written, read, _, _ = r.storage_file_traffic
    assert written == STEPS * (c.sim.storage_bytes_written + c.storage.input_bytes)  # + the batches
    assert read == STEPS * c.sim.storage_bytes_read
