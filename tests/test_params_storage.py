"""Issue 56, parameters in storage (--params): a stored parameter is loaded into the arena where the forward,
the backward and its update need it, rewritten in place by the update and written to the slot the step does
not read. The training is exactly that of parameters in RAM (bit for bit, host and QEMU); the storage traffic
is what the simulator predicts; a failed step or a power cut leaves the parameters as before the step."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, need_tools, poet

from poet_edge import autodiff, frontend, planning, reference, runner, trainable
from poet_edge.compiler import Compiled, CompileOptions, compile_model, stored_candidates
from poet_edge.errors import PoetError
from poet_edge.memory_floor import memory_floor
from poet_edge.profiles import load_profile
from poet_edge.schedule import Compute, Schedule
from poet_edge.schedulers import get_scheduler
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.simulator import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from faults import run_driver  # noqa: E402

KB = 1024
MLP = EXAMPLES / "mlp.onnx"
LR = 0.05
STEPS = 3


def _tg(batch: int = 4, options: autodiff.TrainingOptions = autodiff.DEFAULT_OPTIONS) -> autodiff.Graph:
    g = frontend.load(MLP, batch)
    return autodiff.training_graph(
        g, autodiff.Loss.CROSS_ENTROPY, trainable.select(g, "all"), options=options
    )


def test_stored_parameters_leave_the_fixed_ram_and_get_a_load_each() -> None:
    tg = _tg(options=autodiff.PLAIN)
    stored = frozenset(tg.trainable)
    plain = planning.spec_from_graph(tg, 8192)
    spec = planning.spec_from_graph(tg, 8192, stored=stored)
    assert plain.fixed.trainable_params > 0 and spec.fixed.trainable_params == 0
    assert planning.stored_params(spec) == tuple(sorted(stored))
    names = [n.name for n in spec.nodes]
    for p in stored:
        load, update = names.index(planning.param_node_name(p)), names.index(f"update/{p}")
        assert (load, update) in spec.invalidated_by  # no reload once the update ran
        assert (load, update) in spec.edges
        assert spec.nodes[update].stores == spec.nodes[load].out_bytes > 0
        # the load comes just before its first reader
        first = min(v for u, v in spec.edges if u == load)
        assert all(spec.nodes[k].kind == planning.PARAM_KIND for k in range(load, first))
    with pytest.raises(PoetError, match="only trainable"):
        planning.spec_from_graph(tg, 8192, stored=frozenset({"no-such"}))


def test_the_simulator_counts_the_traffic_and_refuses_a_reload_after_the_update() -> None:
    tg = _tg(options=autodiff.PLAIN)
    spec = planning.spec_from_graph(tg, 8192, stored=frozenset(tg.trainable))
    problem = planning.price(spec, load_profile("cortex-m4"), 1 << 30)
    schedule = get_scheduler("none")(problem)
    sim = simulate(problem, schedule)
    loads = sum(n.out_bytes for n in spec.nodes if n.kind == planning.PARAM_KIND)
    assert sim.param_bytes_read == loads and sim.param_bytes_written == sum(n.stores for n in spec.nodes)
    assert sim.storage_bytes_read == loads and sim.storage_bytes_written == loads
    p = sorted(tg.trainable)[0]
    load = planning.param_node_name(p)
    steps = list(schedule.steps)
    after = next(i for i, s in enumerate(steps) if isinstance(s, Compute) and s.node == f"update/{p}")
    steps = [s for s in steps if not (s.node == load and type(s).__name__ == "Free")]
    with pytest.raises(PoetError, match="already resident|invalidator"):
        simulate(problem, Schedule((*steps[: after + 1], Compute(load), *steps[after + 1 :]), "x"))


def _opts(out: Path, ram: int, params: planning.ParamPlace, **kw) -> CompileOptions:
    return CompileOptions(
        MLP,
        "cortex-m4",
        ram,
        out,
        4,
        autodiff.Loss.CROSS_ENTROPY,
        LR,
        scheduler="scale",
        milp=MilpOptions(threads=1, effort="quick"),
        params=params,
        training=autodiff.DEFAULT_OPTIONS,
        **kw,
    )


def test_auto_keeps_parameters_in_ram_while_the_floor_fits_and_else_stores_the_largest() -> None:
    tg = _tg()
    prof = load_profile("cortex-m4")
    roomy = _opts(Path("unused"), 256 * KB, planning.ParamPlace.AUTO)
    assert stored_candidates(tg, 8192, prof, roomy) == [frozenset()]
    assert stored_candidates(tg, 8192, prof, replace(roomy, params=planning.ParamPlace.STORAGE)) == [
        frozenset(tg.trainable)
    ]
    ram_floor = memory_floor(planning.price(planning.spec_from_graph(tg, 8192), prof, 1)).bytes
    tight = replace(roomy, ram_bytes=ram_floor - 1)
    fewest, *rest = stored_candidates(tg, 8192, prof, tight)
    largest = max(tg.trainable, key=lambda p: tg.tensor(p).nbytes)
    assert largest in fewest and fewest < frozenset(tg.trainable) and rest == [frozenset(tg.trainable)]


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Compiled]:
    """The mlp with every parameter in storage at a budget below its --params ram floor."""
    out = tmp_path_factory.mktemp("params") / "tight"
    tg = _tg()
    floor = memory_floor(
        planning.price(planning.spec_from_graph(tg, 8192), load_profile("cortex-m4"), 1)
    ).bytes
    return out, compile_model(_opts(out, floor - 4 * KB, planning.ParamPlace.AUTO))


@pytest.fixture(scope="module")
def tight_host(tight: tuple[Path, Compiled]) -> runner.RunOutcome:
    need_tools("gcc")
    return runner.run_project(tight[0], "host", STEPS)


def test_a_budget_below_the_ram_floor_compiles_with_stored_parameters(tight: tuple[Path, Compiled]) -> None:
    out, c = tight
    assert planning.stored_params(c.spec) and c.predicted_ram_bytes <= c.problem.budget_bytes
    plan = runner.load_plan(out)
    assert plan["stored_parameters"] == list(planning.stored_params(c.spec))
    assert [p["parameter"] for p in plan["storage"]["parameters"]] == plan["stored_parameters"]


def test_training_is_bit_identical_to_parameters_in_ram_and_matches_numpy(
    tmp_path: Path, tight: tuple[Path, Compiled], tight_host: runner.RunOutcome
) -> None:
    out, c = tight
    free = compile_model(_opts(tmp_path / "free", 1024 * KB, planning.ParamPlace.RAM))
    assert not planning.stored_params(free.spec)
    free_run = runner.run_project(tmp_path / "free", "host", STEPS)
    assert [s.loss for s in free_run.steps] == [s.loss for s in tight_host.steps]
    assert all(np.array_equal(free_run.params[k], tight_host.params[k]) for k in free_run.params)
    data = runner.batches(runner.load_plan(out), STEPS)
    ref_losses, ref_params = reference.train(c.training, data, LR)
    assert np.allclose([s.loss for s in tight_host.steps], ref_losses, rtol=1e-5)
    for k, want in ref_params.items():
        assert np.allclose(tight_host.params[k].reshape(-1), want.reshape(-1), rtol=1e-5, atol=1e-7), k


def test_the_storage_traffic_is_the_simulated(
    tight: tuple[Path, Compiled], tight_host: runner.RunOutcome
) -> None:
    _, c = tight
    first, *rest = tight_host.steps
    stored = sum(c.training.tensor(p).nbytes for p in planning.stored_params(c.spec))
    # the first step also writes the compiled values to storage (once after a reset)
    assert first.bytes_written == c.sim.storage_bytes_written + stored
    for s in rest:
        assert (s.bytes_written, s.bytes_read) == (c.sim.storage_bytes_written, c.sim.storage_bytes_read)


def test_qemu_gives_the_host_bits_within_the_budget(
    tight: tuple[Path, Compiled], tight_host: runner.RunOutcome
) -> None:
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    out, c = tight
    qemu = runner.run_project(out, "qemu-cortex-m4", STEPS)
    assert [s.loss for s in qemu.steps] == [s.loss for s in tight_host.steps]
    assert all(np.array_equal(qemu.params[k], tight_host.params[k]) for k in qemu.params)
    assert qemu.measured_ram_bytes <= c.problem.budget_bytes
    assert qemu.steps[-1].bytes_written == c.sim.storage_bytes_written


@pytest.mark.parametrize("verify", [False, True], ids=["plain", "verify-paging"])
def test_faults_and_power_cuts_leave_stored_parameters_as_before_or_after(
    tmp_path: Path, verify: bool
) -> None:
    """Every storage fault kind at every storage call of a step and a checkpoint save (bench/faults.py's
    driver): with parameters in storage, a failed or torn call and a power cut at any call leave the state
    before or after the step; with --verify-paging (a CRC-32 of every load, write-back read back and checked)
    bit flips too."""
    need_tools("gcc")
    out = tmp_path / "faults"
    opts = replace(
        _opts(out, 60 * KB, planning.ParamPlace.STORAGE),
        batch=32,
        scheduler="page-all",
        input=planning.InputPlace.STORAGE,
        check_inputs=True,
        verify_paging=verify,
    )
    c = compile_model(opts)
    assert planning.stored_params(c.spec) and not c.storage.journal  # the slots replace the journal
    lines = run_driver(out, "host")
    kinds = ("fail", "tear", "flip") if verify else ("fail", "tear")
    cases = [ln.split() for ln in lines if ln.startswith("case ") and ln.split()[1] in kinds]
    calls = next(ln.split() for ln in lines if ln.startswith("calls "))
    assert len(cases) == len(kinds) * (int(calls[2]) + int(calls[4]))
    fields = [dict(zip(c[4::2], c[5::2], strict=True)) for c in cases]
    assert all(f["fired"] == "1" for f in fields)
    assert all(f["ram"] in ("pre", "post", "-") and f["restored"] in ("pre", "post") for f in fields)
    assert all(f["step"] in ("ok", "-") or f["ram"] == "pre" for f in fields)  # a failed step changes nothing
    assert sum(f["power_off"] == "1" for f in fields) > 0


def test_verify_paging_traffic_is_the_simulated(tmp_path: Path) -> None:
    """--verify-paging reads every write-back back: the simulator counts it (and its CRC work)."""
    need_tools("gcc")
    tg = _tg()
    floor = memory_floor(
        planning.price(planning.spec_from_graph(tg, 8192), load_profile("cortex-m4"), 1)
    ).bytes
    c = compile_model(_opts(tmp_path / "v", floor - 4 * KB, planning.ParamPlace.AUTO, verify_paging=True))
    stored = sum(n.stores for n in c.spec.nodes)
    assert stored and c.sim.crc_bytes >= 2 * stored
    plain = simulate(c.problem, c.schedule, c.profile)
    assert c.sim.storage_bytes_read == plain.storage_bytes_read + stored
    run = runner.run_project(tmp_path / "v", "host", STEPS)
    for s in run.steps[1:]:
        assert (s.bytes_written, s.bytes_read) == (c.sim.storage_bytes_written, c.sim.storage_bytes_read)


def test_compile_reports_storage_wear_and_warns_below_100k_steps(tmp_path: Path) -> None:
    """A NOR-flash-like profile (1 MB, 4 KB erase blocks, 1,000 cycles): --params storage writes every
    parameter each step, so the summary gives the endurance and warns."""
    text = (Path(load_profile("cortex-m4").path)).read_text()
    text = text.replace("capacity_bytes = 8_589_934_592", "capacity_bytes = 1_048_576")
    text = text.replace("erase_bytes = 4_194_304", "erase_bytes = 4_096")
    text = text.replace("endurance_cycles = 3_000", "endurance_cycles = 1_000")
    prof = tmp_path / "nor.toml"
    prof.write_text(text.replace('name = "cortex-m4"', 'name = "nor-test"'))
    done = poet(
        "compile", str(MLP), "--device", str(prof), "--ram", "256KB", "--params", "storage",
        "-o", str(tmp_path / "out"), "--no-report",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "parameters in storage: 6 of 6 trainable" in done.stdout
    assert "endurance reached after" in done.stdout
    assert "wears out after" in done.stderr and "below 100,000" in done.stderr
