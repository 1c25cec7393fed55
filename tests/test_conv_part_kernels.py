"""The channel-tile conv kernels (poet_conv2d_part_f32, poet_conv2d_grad_input_part_f32; issue 57): chains of
part calls over ascending tiles give the bits of the whole reference kernel, in the reference and the fast
kernel files, and every single part call of the fast file gives the reference's bits (host gcc with the
flags poet builds with; a few cases on QEMU Cortex-M4, where the fast kernels run their assembly blocks).
The C checker is tests/conv_part/check.c; this file writes its cases (random geometries and uneven tilings
from a fixed seed) and builds it with both kernel files linked in under renamed symbols."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import need_tools

from poet_edge import microbench as mb
from poet_edge import targets
from poet_edge.codegen import emit

CHECKER = Path(__file__).resolve().parent / "conv_part" / "check.c"
_LINE = re.compile(
    r"case (\d+) (ok|FAIL) chain_ref (\d+) chain_fast (\d+) single (\d+) aligned (\d+) guards (\d+)"
)
_SUMMARY = re.compile(r"checked (\d+) cases, (\d+) calls, (\d+) failed")


@dataclass(frozen=True)
class Case:
    """One geometry (the POET_WIN_* array of the whole conv) and the ascending tile bounds of C and M."""

    geom: tuple[int, ...]
    c_tiles: tuple[int, ...]
    m_tiles: tuple[int, ...]

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        n, c, h, w, m, kh, kw, oh, ow, _sh, _sw, _pt, _pl, g = self.geom
        return n * c * h * w, m * (c // g) * kh * kw, m, n * m * oh * ow


def geometry(
    n: int,
    c: int,
    hw: tuple[int, int],
    m: int,
    k: tuple[int, int],
    s: int,
    pads: tuple[int, int, int, int],
    g: int,
) -> tuple[int, ...]:
    h, w = hw
    pt, pl, pb, pr = pads
    oh, ow = (h + pt + pb - k[0]) // s + 1, (w + pl + pr - k[1]) // s + 1
    assert oh >= 1 and ow >= 1 and c % g == 0 and m % g == 0
    return (n, c, h, w, m, k[0], k[1], oh, ow, s, s, pt, pl, g)


def split(rng: random.Random, total: int, parts: int) -> tuple[int, ...]:
    """Ascending bounds 0 = b0 < b1 < ... = total of `parts` uneven tiles (fewer if total is small)."""
    parts = max(1, min(parts, total))
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    return (0, *cuts, total)


def aligned(total: int, size: int) -> tuple[int, ...]:
    return (*range(0, total, size), total)


def random_cases(seed: int, count: int) -> list[Case]:
    """G = 1, depthwise and grouped (G = 2, 3) convs; strides 1, 2; kernels 1x1, 3x3, 5x5 (and 1x3); pads
    (asymmetric too); N = 1, 2; odd map sizes; uneven random tilings, whole-group tilings, a whole C or M."""
    rng = random.Random(seed)
    out: list[Case] = []
    while len(out) < count:
        kind = rng.choice(["dense", "dense", "depthwise", "grouped"])
        k = rng.choice([(1, 1), (3, 3), (3, 3), (5, 5), (1, 3)])
        s = rng.choice([1, 1, 2])
        n = rng.choice([1, 2])
        hw = (rng.randint(max(1, k[0] - 2), 11), rng.randint(max(1, k[1] - 2), 11))
        pads = tuple(rng.randint(0, kk // 2) for kk in (k[0], k[1], k[0], k[1]))
        if kind == "dense":
            g, c, m = 1, rng.randint(1, 13), rng.randint(1, 13)
        elif kind == "depthwise":
            c = rng.randint(2, 13)
            g, m = c, c * rng.choice([1, 1, 2])
        else:
            g = rng.choice([2, 3])
            c, m = g * rng.randint(1, 5), g * rng.randint(1, 5)
        try:
            geom = geometry(n, c, hw, m, k, s, pads, g)  # type: ignore[arg-type]
        except AssertionError:
            continue
        tiling = rng.choice(["uneven", "uneven", "groups", "whole c", "whole m"])
        if tiling == "groups":
            ct, mt = aligned(c, (c // g) * rng.randint(1, g)), aligned(m, (m // g) * rng.randint(1, g))
        else:
            ct = (0, c) if tiling == "whole c" else split(rng, c, rng.randint(1, 4))
            mt = (0, m) if tiling == "whole m" else split(rng, m, rng.randint(1, 4))
        out.append(Case(geom, ct, mt))
    return out


# the fast kernels' specialised paths on Cortex-M4: 4-channel blocks, 3x3 assembly blocks at strides 1 and 2,
# the 1x1 GEMM blocks (6- and 3-pixel) with and without bias and P, depthwise 3x3 at strides 1 and 2
QEMU_CASES = [
    Case(geometry(1, 16, (9, 10), 12, (3, 3), 1, (1, 1, 1, 1), 1), (0, 8, 16), (0, 4, 12)),
    Case(geometry(1, 8, (11, 11), 8, (3, 3), 2, (1, 1, 1, 1), 1), (0, 5, 8), (0, 8)),
    Case(geometry(2, 12, (5, 7), 8, (1, 1), 1, (0, 0, 0, 0), 1), (0, 4, 9, 12), (0, 4, 8)),
    Case(geometry(1, 8, (6, 7), 16, (1, 1), 1, (0, 0, 0, 0), 1), (0, 8), (0, 8, 11, 16)),
    Case(geometry(1, 16, (8, 8), 16, (3, 3), 1, (1, 1, 1, 1), 16), (0, 8, 16), (0, 8, 16)),
    Case(geometry(1, 12, (9, 9), 12, (3, 3), 2, (1, 1, 1, 1), 12), (0, 4, 12), (0, 4, 12)),
    Case(geometry(1, 8, (7, 7), 12, (3, 3), 1, (1, 1, 1, 1), 2), (0, 3, 8), (0, 6, 12)),
]


def cases_header(cases: list[Case]) -> str:
    most = max(max(len(c.c_tiles), len(c.m_tiles)) for c in cases)
    mx = [max(c.sizes[i] for c in cases) for i in range(4)]

    def rows(values: list[tuple[int, ...]], width: int) -> str:
        return ",\n".join(
            "    {" + ", ".join(map(str, (*v, *([0] * (width - len(v)))))) + "}" for v in values
        )

    def counts(values: list[tuple[int, ...]]) -> str:
        return ", ".join(str(len(v) - 1) for v in values)

    cts, mts = [c.c_tiles for c in cases], [c.m_tiles for c in cases]
    return "\n".join(
        [
            "/* generated by tests/test_conv_part_kernels.py */",
            f"#define NCASES {len(cases)}",
            f"#define MAX_X {mx[0]}",
            f"#define MAX_W {mx[1]}",
            f"#define MAX_B {mx[2]}",
            f"#define MAX_Y {mx[3]}",
            f"static const int32_t case_geom[NCASES][14] = {{\n{rows([c.geom for c in cases], 14)}\n}};",
            f"static const int32_t case_ct[NCASES][{most}] = {{\n{rows(cts, most)}\n}};",
            f"static const int32_t case_mt[NCASES][{most}] = {{\n{rows(mts, most)}\n}};",
            f"static const int32_t case_nct[NCASES] = {{{counts(cts)}}};",
            f"static const int32_t case_nmt[NCASES] = {{{counts(mts)}}};",
            "",
        ]
    )


def kernel_units(work: Path) -> list[Path]:
    """conv.c, conv_part.c and what they call, reference and fast, each with every kernel symbol renamed (as
    poet_edge.microbench does: the same translation units, so the object cache serves both)."""
    units = []
    for variant, prefix in (("reference", "ref"), ("fast", "fast")):
        renames = "\n".join(f"#define {s} poet_{prefix}_{s[5:]}" for s in mb.kernel_symbols())
        for src in emit.with_dependencies({"conv", "conv_part"}):
            path = work / f"mb_{variant}_{src}.c"
            path.write_text(
                f"/* {variant} {src}.c with renamed symbols */\n{renames}\n"
                f'#include "{emit.kernel_file(src, variant)}"\n'
            )
            units.append(path)
    return units


def run_checker(target_name: str, cases: list[Case], work: Path) -> tuple[list[tuple[int, str]], str]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "cases.h").write_text(cases_header(cases))
    target = targets.load_target(target_name)
    ram = 4 * (2 * sum(max(c.sizes[i] for c in cases) for i in range(4)) * 6) + 64 * 1024
    built = targets.build(target, [CHECKER, *kernel_units(work)], [work], work / "build", ram)
    res = targets.run(target, built, work, timeout_s=600.0)
    lines = [(int(m.group(1)), m.group(0)) for m in _LINE.finditer(res.stdout)]
    return lines, res.stdout + res.stderr


def check(target_name: str, cases: list[Case], tmp_path: Path) -> None:
    lines, text = run_checker(target_name, cases, tmp_path / target_name)
    failed = [f"{line}  <- {cases[i]}" for i, line in lines if " FAIL " in line]
    assert not failed, "\n".join(failed)
    assert [i for i, _ in lines] == list(range(len(cases))), text[-2000:]
    m = _SUMMARY.search(text)
    assert m and int(m.group(1)) == len(cases) and int(m.group(3)) == 0, text[-2000:]


HOST_CASES = random_cases(57, 60)


def test_cases_cover_the_brief():
    """The random cases cover every kind the kernels must handle (deterministic: a fixed seed)."""
    geoms = [c.geom for c in HOST_CASES]
    assert any(g[13] == 1 for g in geoms) and any(g[13] == g[1] == g[4] for g in geoms)
    assert any(1 < g[13] < g[1] for g in geoms)
    assert {g[9] for g in geoms} == {1, 2} and {g[0] for g in geoms} == {1, 2}
    assert {(g[5], g[6]) for g in geoms} >= {(1, 1), (3, 3), (5, 5)}
    assert any(len(c.c_tiles) > 2 and len(c.m_tiles) > 2 for c in HOST_CASES)
    assert any(g[2] % 2 and g[3] % 2 for g in geoms)


def test_part_kernels_bit_identical_host(tmp_path):
    need_tools("gcc")
    check("host", HOST_CASES, tmp_path)


def test_part_kernels_bit_identical_qemu_m4(tmp_path):
    need_tools("arm-none-eabi-gcc", "qemu-system-arm")
    check("qemu-cortex-m4", QEMU_CASES + random_cases(4, 6), tmp_path)


def test_checker_catches_a_wrong_kernel(tmp_path):
    """The checker is not vacuous: a 'fast' kernel file whose part kernel drops P fails the chains."""
    need_tools("gcc")
    work = tmp_path / "broken"
    work.mkdir()
    cases = [Case(geometry(1, 6, (5, 5), 4, (3, 3), 1, (1, 1, 1, 1), 1), (0, 2, 6), (0, 4))]
    (work / "cases.h").write_text(cases_header(cases))
    # the reference file, its part kernel made to ignore P, stands in for the fast one
    ref = (emit.kernel_file("conv", "reference")).read_text()
    broken = ref.replace("float acc = P ? P[o + oh * OW + ow] : 0.0f;", "float acc = 0.0f;\n(void)P;")
    assert broken != ref
    src = work / "broken_conv.c"
    src.write_text(broken)
    renames = "\n".join(f"#define {s} poet_fast_{s[5:]}" for s in mb.kernel_symbols())
    unit = work / "fast_conv.c"
    unit.write_text(f'{renames}\n#include "{src}"\n')
    ref_units = [u for u in kernel_units(work) if u.name.startswith("mb_reference_")]
    target = targets.load_target("host")
    built = targets.build(target, [CHECKER, unit, *ref_units], [work], work / "build", 1 << 20)
    res = targets.run(target, built, work, timeout_s=120.0)
    assert res.exit_code == 1
    line = _LINE.search(res.stdout)
    assert line and line.group(2) == "FAIL" and int(line.group(4)) > 0 and int(line.group(3)) == 0
