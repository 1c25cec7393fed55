"""MLPerf Tiny models on the emulated Cortex-M4: they link into exactly --ram, train, and match the host bit
for bit after 3 steps, both with the schedule that fits the budget without help and with schedules that
recompute and page. MobileNetV1-0.25 (96x96, float32) fits 256 KB only with --input storage (its 108 KB
batch is loaded into the arena and dropped after the first conv instead of being held for the whole step)
and --train last:1, whose training graph is a chain: its memory floor equals its no-remat peak (226 KB), so
no budget makes it recompute or page; --train bias does, at 520 KB."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools

from poet_edge import runner
from poet_edge.autodiff import Loss
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.planning import InputPlace
from poet_edge.schedulers.milp import MilpOptions

ZOO = EXAMPLES / "zoo"
KB = 1024
CASES = [  # model, loss, train, batch, RAM, scheduler, expects (recompute, paging); None: either
    ("resnet8", "cross-entropy", "bias", 1, 256 * KB, "greedy", (False, True)),
    ("resnet8", "cross-entropy", "bias", 1, 230 * KB, "scale", (True, True)),
    ("dscnn", "cross-entropy", "last:1", 1, 256 * KB, "none", (False, False)),
    ("dscnn", "cross-entropy", "bias", 1, 256 * KB, "greedy", (False, True)),
    ("dscnn", "cross-entropy", "bias", 1, 120 * KB, "greedy", (False, True)),
    ("dscnn", "cross-entropy", "bias", 1, 120 * KB, "scale", (True, None)),
    ("autoencoder", "mse", "bias", 4, 256 * KB, "none", (False, False)),
    ("autoencoder", "mse", "bias", 4, 56 * KB, "greedy", (False, True)),
    ("autoencoder", "mse", "bias", 4, 48 * KB, "scale", (True, None)),
    ("mobilenetv1_025", "cross-entropy", "last:1", 1, 256 * KB, "none", (False, False)),
    ("mobilenetv1_025", "cross-entropy", "bias", 1, 520 * KB, "scale", (True, False)),
]
STORAGE_INPUT = {
    "mobilenetv1_025"
}  # compiled with --input storage (and autoencoder below 55 KB, its RAM floor)


def _same(a: runner.RunOutcome, b: runner.RunOutcome) -> bool:
    return [s.loss for s in a.steps] == [s.loss for s in b.steps] and all(
        np.array_equal(a.params[k], b.params[k]) for k in a.params
    )


@pytest.mark.parametrize(
    "model,loss,train,batch,ram,scheduler,expects",
    CASES,
    ids=[f"{c[0]}-{c[2]}-{c[4] // KB}KB-{c[5]}" for c in CASES],
)
def test_zoo_on_cortex_m4(tmp_path, model, loss, train, batch, ram, scheduler, expects):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    opts = CompileOptions(
        ZOO / f"{model}.onnx",
        "cortex-m4",
        ram,
        tmp_path / "plan",
        batch,
        Loss(loss),
        scheduler=scheduler,
        train=train,
        milp=MilpOptions(time_limit_s=10, threads=1),
        input=InputPlace.STORAGE if model in STORAGE_INPUT or ram < 55 * KB else InputPlace.RAM,
    )
    c = compile_model(opts)
    got = (c.sim.n_recomputations > 0, c.sim.n_page_outs > 0)
    assert all(e is None or g == e for g, e in zip(got, expects, strict=True)), got
    qemu = runner.run_project(tmp_path / "plan", "qemu-cortex-m4", 3)
    host = runner.run_project(tmp_path / "plan", "host", 3)
    assert _same(qemu, host)  # bit for bit
    measured = qemu.measured_ram_bytes
    assert measured <= ram and abs(measured - c.predicted_ram_bytes) <= 0.05 * c.predicted_ram_bytes
    assert qemu.steps[-1].bytes_written == c.sim.storage_bytes_written
    if got != (False, False):  # the same training as the unconstrained schedule
        free = compile_model(
            CompileOptions(
                opts.model, "host", 64 * KB * KB, tmp_path / "free", batch, Loss(loss), train=train
            )
        )
        assert free.sim.n_page_outs == 0
        assert _same(runner.run_project(tmp_path / "free", "host", 3), host)
