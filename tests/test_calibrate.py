"""`poet calibrate`: the least-squares fit recovers known coefficients; a real run on QEMU writes a loadable
profile whose compute model predicts the MLP's training step within 10 % of the measured instructions."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, need_tools, poet

from poet_edge import calibrate as cal
from poet_edge import microbench as mb
from poet_edge import runner
from poet_edge.compiler import CompileOptions, compile_model
from poet_edge.errors import PoetError
from poet_edge.profiles import load_profile
from poet_edge.work import OpClass


def _synthetic() -> tuple[list[mb.KernelCase], dict[OpClass, float], float]:
    rates = {OpClass.DENSE: 2.75, OpClass.ELEMENTWISE: 7.0, OpClass.UPDATE: 6.25, OpClass.COPY: 1.0}
    cases = [mb.gemm_case(8, n, k, 0, 1) for n, k in [(4, 16), (10, 32), (32, 64), (128, 128)]]
    cases += [mb.op_case("Relu", [(n,)]) for n in (16, 64, 256, 1024)]
    cases += [mb.op_case("SGDUpdate", [(n,), (n,)]) for n in (16, 100, 4096)]
    cases += [mb.op_case("Flatten", [(2, n, 1, 1)], {"axis": 1}) for n in (8, 512)]
    return cases, rates, 40.0


def test_fit_recovers_known_coefficients():
    cases, rates, per_call = _synthetic()
    measured = [rates[c.op_class] * c.priced + per_call for c in cases]
    f = cal.fit(cases, measured)
    assert f.per_call == pytest.approx(per_call, rel=1e-6)
    for cls, r in rates.items():
        assert f.rates[cls] == pytest.approx(r, rel=1e-6)
    assert all(rms < 1e-9 and worst < 1e-9 for rms, worst, _ in f.errors().values())


def test_fit_keeps_a_separate_fixed_cost_for_convolutions():
    cases, rates, per_call = _synthetic()
    shapes = [(4, 8), (8, 8), (8, 16)]
    conv = [mb.conv_case((1, c, hw, hw), (c, c, 3, 3), pads=(1, 1, 1, 1)) for c, hw in shapes]
    rates = {**rates, OpClass.CONV: 2.5}
    measured = [rates[c.op_class] * c.priced + per_call for c in cases]
    measured += [2.5 * c.priced + 1800.0 for c in conv]
    f = cal.fit([*cases, *conv], measured)
    assert f.per_call == pytest.approx(per_call, rel=1e-6)
    assert f.per_call_conv == pytest.approx(1800.0, rel=1e-6)
    assert f.rates[OpClass.CONV] == pytest.approx(2.5, rel=1e-6)
    prof = cal.profile_from_fit(load_profile("cortex-m4"), f, "qemu-cortex-m4", True, "fast", "t")
    assert (prof.compute.cycles_per_call, prof.compute.cycles_per_call_conv) == (40.0, 1800.0)


def test_fit_with_noise_stays_close_and_reports_errors():
    cases, rates, per_call = _synthetic()
    noise = [1.0 + 0.02 * ((-1) ** i) for i in range(len(cases))]  # +-2 %, deterministic
    exact = [rates[c.op_class] * c.priced + per_call for c in cases]
    f = cal.fit(cases, [m * e for m, e in zip(exact, noise, strict=True)])
    for cls, r in rates.items():
        assert f.rates[cls] == pytest.approx(r, rel=0.05)
        rms, worst, n = f.errors()[cls]
        assert 0 < rms <= worst < 0.1 and n == sum(c.op_class == cls for c in cases)


def test_fit_rejects_mismatched_input():
    cases, _, _ = _synthetic()
    with pytest.raises(PoetError):
        cal.fit(cases, [1.0])


def test_profile_toml_roundtrip(tmp_path):
    cases, rates, per_call = _synthetic()
    f = cal.fit(cases, [rates[c.op_class] * c.priced + per_call for c in cases])
    base = load_profile("cortex-m4")
    prof = cal.profile_from_fit(base, f, "qemu-cortex-m4", True, "fast", "m4-test")
    path = tmp_path / "m4-test.toml"
    path.write_text(cal.profile_toml(prof, "test"))
    back = load_profile(path)
    assert back.compute.cycles_per_mac_dense == pytest.approx(2.75, rel=1e-3)
    assert back.compute.cycles_per_element_loss == base.compute.cycles_per_element_loss  # not measured
    assert back.storage == base.storage and back.mcu == base.mcu
    assert "instruction counts, not cycles" in back.compute.source and "qemu-cortex-m4" in back.compute.source


def test_profile_scaled_by_cycles_per_instruction_and_back():
    cases, rates, per_call = _synthetic()
    f = cal.fit(cases, [rates[c.op_class] * c.priced + per_call for c in cases])
    base = load_profile("cortex-m4")
    prof = cal.profile_from_fit(base, f, "qemu-cortex-m4", True, "fast", "m4", cycles_per_instruction=1.24)
    assert prof.compute.cycles_per_mac_dense == pytest.approx(2.75 * 1.24, rel=1e-3)
    assert prof.compute.cycles_per_call == pytest.approx(40.0 * 1.24, rel=1e-3)
    assert (
        "1.24 cycles per instruction" in prof.compute.source
        and "dense 2.750 instr/MAC" in prof.compute.source
    )
    back = cal.instruction_profile(prof, 1.24)
    assert back.compute.cycles_per_mac_dense == pytest.approx(2.75, rel=1e-3)
    assert back.compute.cycles_per_element_update == pytest.approx(6.25, rel=1e-3)
    assert back.compute.cycles_per_call == pytest.approx(40.0, rel=1e-3)
    # unmeasured classes are divided too: the instruction profile is the scaled one divided back
    assert back.compute.cycles_per_element_loss == pytest.approx(base.compute.cycles_per_element_loss / 1.24)


def test_shipped_cortex_m_profiles_state_their_calibration():
    for name in ("cortex-m4", "cortex-m7", "cortex-m33"):
        src = " ".join(load_profile(name).compute.source.split())
        factor = cal.CYCLES_PER_INSTRUCTION[name]
        assert "poet calibrate" in src and "2026-11-22" in src and f"{factor:g} cycles per instruction" in src
        assert "instr/MAC" in src, name


def _loss_ops(loss: str) -> set[str]:
    return {c.name.split()[0] for c in cal.calibration_cases(0, loss=loss) if c.op_class == OpClass.LOSS}


def test_loss_cases_both_losses():
    ce = {"SoftmaxCrossEntropy", "SoftmaxCrossEntropyGrad"}
    assert _loss_ops("both") == ce | {"MeanSquaredError", "MeanSquaredErrorGrad"}
    assert _loss_ops("cross-entropy") == ce


def test_conv_cases_include_all_three_kernels():
    cases = cal.calibration_cases(0)
    for cls in (OpClass.CONV, OpClass.DEPTHWISE):
        kinds = {c.name.split()[0] for c in cases if c.op_class == cls}
        assert kinds == {"conv", "conv_dx", "conv_dw"}, (cls, kinds)


def test_cases_cover_dense_and_elementwise():
    classes = {c.op_class for c in cal.calibration_cases(0)}
    assert {OpClass.DENSE, OpClass.ELEMENTWISE, OpClass.UPDATE, OpClass.LOSS, OpClass.REDUCE} <= classes


def test_calibrate_on_qemu_predicts_mlp_step(tmp_path):
    need_tools("gcc", "arm-none-eabi-gcc", "qemu-system-arm")
    out = tmp_path / "m4.toml"
    r = poet("calibrate", "--target", "qemu-cortex-m4", "--sizes", "0", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "dense" in r.stdout and "instr/MAC" in r.stdout and "rms err" in r.stdout
    prof = load_profile(out)
    assert "instruction counts, not cycles" in prof.compute.source
    opts = CompileOptions(EXAMPLES / "mlp.onnx", str(out), 256 * 1024, tmp_path / "mlp", batch=8)
    compile_model(opts)
    measured = runner.run_project(tmp_path / "mlp", "qemu-cortex-m4", 1)
    instr = measured.instructions(measured.steps[0].ticks)
    assert instr is not None
    plan = json.loads((tmp_path / "mlp" / "plan.json").read_text())
    predicted = cal.predicted_step_instructions(plan, prof)
    assert abs(predicted - instr) <= 0.10 * instr, (predicted, instr)


def test_calibrate_help_says_instructions_not_cycles():
    r = poet("calibrate", "--help")
    assert r.returncode == 0 and "not cycles" in " ".join(r.stdout.split())
