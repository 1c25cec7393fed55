"""Emits poet_model.{h,c} from templates; the body is one structured kernel call per schedule step."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

import numpy as np

from poet_edge import __version__, ops
from poet_edge.arena import ArenaPlan
from poet_edge.codegen.link import KERNEL_VARIANTS as KERNEL_VARIANTS
from poet_edge.codegen.link import SHARED_SOURCES, check_defines, closure
from poet_edge.codegen.link import kernel_file as kernel_file
from poet_edge.codegen.readme import render_readme
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Node, Phase, Role
from poet_edge.ops.base import (
    CArg,
    DoubleArg,
    FloatArg,
    IntArg,
    IntArrayArg,
    KernelCall,
    NullArg,
    RuntimeArg,
    TensorArg,
    WorkspaceArg,
)
from poet_edge.paths import RUNTIME_C
from poet_edge.planning import INPUT_KIND, PARAM_KIND, ProblemSpec, param_node_name, stored_params
from poet_edge.schedule import Compute, Free, Move, PageIn, PageOut, Schedule, Step
from poet_edge.splitting import BatchWindows, batch_windows
from poet_edge.units import align

if TYPE_CHECKING:
    from poet_edge.inference import ModePlan

TEMPLATES = Path(__file__).parent / "templates"
M4F_FLAGS = "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard"
# -mcpu/-mfpu/-mfloat-abi of cmake/arm-none-eabi.cmake by device profile (others: the Cortex-M4F's); the
# M55 keeps auto-vectorization off (MVE float flushes subnormals: docs/targets.md)
CPU_FLAGS = {
    "cortex-m0plus": "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft",
    "cortex-m3": "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft",
    "cortex-m7": "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard",
    "cortex-m33": "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard",
    "cortex-m55": "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard -fno-tree-vectorize",
}
DRIVER_SOURCES = (
    "poet_nor_log.h",
    "poet_nor_log.c",
    "poet_storage_nor.c",
    "poet_stm32f4_flash.h",
    "poet_stm32f4_flash.c",
    "poet_spi_nor.h",
    "poet_spi_nor.c",
)
BARE_METAL_EXAMPLE = ("main.c", "startup_stm32f405.c", "stm32f405.ld")


def render(name: str, **values: object) -> str:
    return Template((TEMPLATES / name).read_text()).substitute({k: str(v) for k, v in values.items()})


def c_float(v: float) -> str:
    """Shortest decimal that reads back as the same float32 (C parses 'f' literals correctly rounded)."""
    if np.isinf(v):  # masks: Where(mask, scores, -inf) (math.h's INFINITY is a float constant expression)
        return "INFINITY" if v > 0 else "(-INFINITY)"
    if np.isnan(v):
        raise PoetError(f"cannot emit NaN constant {v}")
    mant, exp = np.format_float_scientific(np.float32(v), unique=True, trim="-").split("e")
    mant = mant if "." in mant else mant + ".0"
    return f"{mant}f" if int(exp) == 0 else f"{mant}e{int(exp)}f"


def c_double(v: float) -> str:
    """Shortest decimal that reads back as the same double."""
    if not np.isfinite(v):
        raise PoetError(f"cannot emit non-finite double constant {v}")
    text = repr(float(v))
    return text if any(c in text for c in ".en") else text + ".0"


def c_comment(text: str) -> str:
    """``text`` made safe inside a C block comment: no comment end or nested start, no line break, no
    trigraph, printable ASCII only (anything else becomes '?'); the comment keeps the name
    recognisable, not exact."""
    safe = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    safe = safe.replace("*/", "* /").replace("/*", "/ *")
    while "??" in safe:
        safe = safe.replace("??", "? ?")
    return safe


def c_string(text: str) -> str:
    """``text`` as a C string literal (with its quotes) holding exactly its UTF-8 bytes: quote, backslash and
    '?' (trigraphs) escaped, every byte outside printable ASCII as a three-digit octal escape."""
    out = []
    for b in text.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def c_name(name: str, taken: set[str], prefix: str = "poet_param_") -> str:
    base = prefix + re.sub(r"[^0-9A-Za-z_]", "_", name)
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


@dataclass(frozen=True)
class StoragePlan:
    """Byte offset of every paged value in storage. With the batch in storage, it comes first: bytes
    [0, input_bytes) hold x, written by the caller before each step; paged values follow, then the undo
    journal (``journal``: parameter -> offset, see :func:`journaled_updates`). ``total_bytes`` is what one
    step uses; the two checkpoint slots follow it (``checkpoint_offset``, each ``checkpoint_slot_bytes``:
    a CHECKPOINT_HEADER_BYTES header, then ``checkpoint_payload_bytes`` of persistent tensors)."""

    offsets: dict[str, int]
    total_bytes: int
    input_bytes: int = 0
    journal: dict[str, int] = field(default_factory=dict)
    checkpoint_payload_bytes: int = 0
    params: dict[str, tuple[int, int]] = field(default_factory=dict)  # stored parameter -> its A and B slots

    @property
    def checkpoint_offset(self) -> int:
        return align(self.total_bytes, CHECKPOINT_ALIGN)

    @property
    def checkpoint_slot_bytes(self) -> int:
        return align(CHECKPOINT_HEADER_BYTES + self.checkpoint_payload_bytes, CHECKPOINT_ALIGN)

    def to_json(self) -> dict[str, object]:
        return {
            "bytes": self.total_bytes,
            "input_bytes": self.input_bytes,
            "offsets": self.offsets,
            "journal": [{"parameter": k, "offset": o} for k, o in self.journal.items()],
            "parameters": [{"parameter": k, "slots": list(o)} for k, o in self.params.items()],
            "checkpoint": {
                "offset": self.checkpoint_offset,
                "slot_bytes": self.checkpoint_slot_bytes,
                "slots": 2,
                "header_bytes": CHECKPOINT_HEADER_BYTES,
                "payload_bytes": self.checkpoint_payload_bytes,
            },
        }


CHECKPOINT_HEADER_BYTES = 32  # poet_ckpt_header in poet_model.c.in
CHECKPOINT_ALIGN = 256  # slots start on a 256-byte boundary (a flash page)
STEP_COUNTER_BYTES = 4  # the first persistent tensor: uint32 poet_step_count


def input_region(spec: ProblemSpec) -> int:
    """Bytes of storage that hold the batch (0 unless the spec loads the batch from storage)."""
    return spec.input_bytes or sum(n.out_bytes for n in spec.nodes if n.kind == INPUT_KIND)


def _touches_storage(step: Step, kinds: dict[str, str], stores: dict[str, int]) -> bool:
    return isinstance(step, PageIn | PageOut) or (
        isinstance(step, Compute) and (kinds[step.node] in (INPUT_KIND, PARAM_KIND) or stores[step.node] > 0)
    )


def journaled_updates(spec: ProblemSpec, schedule: Schedule) -> tuple[str, ...]:
    """SGD update nodes that run before the step's last storage access (page-in, page-out or batch load), in
    schedule order: a failure of that access must undo them, so their parameters' old values are written to
    the undo journal just before each update (parameters updated after it need nothing)."""
    kinds = {n.name: n.kind for n in spec.nodes}
    stores = {n.name: n.stores for n in spec.nodes}
    steps = schedule.steps
    last = max((k for k, s in enumerate(steps) if _touches_storage(s, kinds, stores)), default=0)
    return tuple(
        s.node for s in steps[:last] if isinstance(s, Compute) and kinds[s.node] == Phase.UPDATE.value
    )


def persistent_tensors(tg: Graph) -> list[str]:
    """The tensors of the training state (after the step counter): the trainable parameters, then the
    optimizer state, each in name order."""
    state = sorted(k for k, t in tg.tensors.items() if t.role == Role.OPTIMIZER_STATE)
    return [*sorted(tg.trainable), *state]


def persistent_bytes(tg: Graph) -> int:
    """Bytes of the training state a checkpoint holds: the step counter, the trainable parameters and the
    optimizer state."""
    return STEP_COUNTER_BYTES + sum(tg.tensor(p).nbytes for p in persistent_tensors(tg))


def updated_in_place(tg: Graph, node: Node) -> tuple[str, ...]:
    """What an update node changes: its parameter, and the optimizer state it reads (momentum, moments)."""
    return (node.inputs[0], *(t for t in node.inputs[1:] if tg.tensor(t).role == Role.OPTIMIZER_STATE))


def plan_storage(
    schedule: Schedule,
    sizes: dict[str, int],
    input_bytes: int = 0,
    block: int = 16,
    journal_bytes: dict[str, int] | None = None,
    checkpoint_payload_bytes: int = 0,
    param_bytes: dict[str, int] | None = None,
) -> StoragePlan:
    """Storage bytes of a step, in order: the batch (``input_bytes``), two slots of every stored parameter
    (``param_bytes``, in name order: the step reads one slot and writes the other), the paged values, the
    undo journal."""
    top = align(input_bytes, block)
    params: dict[str, tuple[int, int]] = {}
    for p in sorted(param_bytes or {}):
        size = align((param_bytes or {})[p], block)
        params[p] = (top, top + size)
        top += 2 * size
    offsets: dict[str, int] = {}
    for s in schedule.steps:
        if isinstance(s, PageOut) and s.node not in offsets:
            offsets[s.node] = top
            top += align(sizes[s.node], block)
    journal: dict[str, int] = {}
    for param, nbytes in (journal_bytes or {}).items():
        journal[param] = top
        top += align(nbytes, block)
    return StoragePlan(offsets, top, input_bytes, journal, checkpoint_payload_bytes, params)


def stored_bytes(tg: Graph, stored: Sequence[str]) -> dict[str, int]:
    return {p: tg.tensor(p).nbytes for p in stored}


def storage_for(tg: Graph, spec: ProblemSpec, schedule: Schedule) -> StoragePlan:
    """The storage layout of a compiled step: batch, stored parameters, paged values, undo journal,
    checkpoint slots. A stored parameter needs no journal: its update writes the slot the step does not
    read, and only a step that succeeds switches slots."""
    stored = stored_params(spec)
    changed = {n.name: updated_in_place(tg, n) for n in tg.nodes if n.phase == Phase.UPDATE}
    journal = {
        t: tg.tensor(t).nbytes
        for u in journaled_updates(spec, schedule)
        for t in changed[u]
        if t not in stored
    }
    sizes = {n.name: n.out_bytes for n in spec.nodes}
    return plan_storage(
        schedule, sizes, input_region(spec), 16, journal, persistent_bytes(tg), stored_bytes(tg, stored)
    )


# the arena's buffer in each RAM bank (--ram A+B): poet_arena, beside the fixed RAM in the first bank, and
# poet_arena_ccm in section .ccmram (the STM32 name of the 64 KB CCM), which the board's linker script maps
# to the second bank
ARENA_SYMBOLS = ("poet_arena", "poet_arena_ccm")
BANK_SECTION = ".ccmram"


def bank_arrays(bank_bytes: Sequence[int]) -> tuple[str, str]:
    """The declarations of the arena's later-bank buffers and their zeroing in poet_init (both empty with
    one bank: the file is as without banks)."""
    if len(bank_bytes) <= 1:
        return "", ""
    if len(bank_bytes) > len(ARENA_SYMBOLS):
        raise PoetError(f"at most {len(ARENA_SYMBOLS)} RAM banks, got {len(bank_bytes)}")
    decl = f"""
/* the arena's part in the second RAM bank (--ram A+B; no array spans two banks), in section {BANK_SECTION},
 * which the board's linker script maps to that bank (STM32F4: the 64 KB CCM at 0x10000000); the section may
 * be NOLOAD: poet_init zeroes it */
#ifndef POET_BANK1_SECTION
#if defined(__GNUC__) && defined(__ELF__)
#define POET_BANK1_SECTION __attribute__((section("{BANK_SECTION}")))
#else
#define POET_BANK1_SECTION
#endif
#endif
static float {ARENA_SYMBOLS[1]}[{max(1, bank_bytes[1] // 4)}] POET_ALIGNED POET_BANK1_SECTION;"""
    return decl, f"\n    memset({ARENA_SYMBOLS[1]}, 0, sizeof {ARENA_SYMBOLS[1]});"


class _Pointers:
    """Where each tensor lives at each point of the schedule."""

    def __init__(
        self,
        tg: Graph,
        spec: ProblemSpec,
        plan: ArenaPlan,
        param_vars: dict[str, str],
        outs: Mapping[str, str] | None = None,
    ):
        self.tg, self.param_vars = tg, param_vars
        self.outs = outs or {}  # tensor -> the caller's buffer it is written to (poet_predict's out)
        self.sub: dict[str, tuple[str, int]] = {}  # tensor -> (scheduling node, byte offset inside its value)
        nodes = {n.name: n for n in tg.nodes}
        for s in spec.nodes:
            if s.kind == INPUT_KIND:  # the batch, or a box of it (splitting.batch_windows)
                x = next(t for t in tg.inputs if tg.tensor(t).role == Role.INPUT)
                self.sub[nodes[s.name].outputs[0] if s.name in nodes else x] = (s.name, 0)
                continue
            if s.kind == PARAM_KIND:  # a stored parameter: its loaded copy in the arena
                self.sub[s.name[len(param_node_name("")) :]] = (s.name, 0)
                continue
            off = 0
            for o in nodes[s.name].outputs:
                self.sub[o] = (s.name, off)
                off += align(tg.tensor(o).nbytes)
            for e in s.epilogue:  # in place: every epilogue output is the head's buffer
                self.sub[nodes[e].outputs[0]] = (s.name, 0)
        self.birth = {(i.start, i.value): k for k, i in enumerate(plan.instances)}
        self.offsets = plan.offsets
        self.current: dict[str, int] = {}  # node value -> arena byte offset of its live instance
        self.plan = plan
        self.arena: dict[str, str] = {}  # node value -> the arena buffer (RAM bank) of its live instance
        self.group = ""  # the scheduling node being computed (whose workspace WORKSPACE names)

    def born(self, step: int, value: str) -> None:
        k = self.birth.get((step, value))
        if k is not None:
            self.current[value] = self.offsets[k]
            self.arena[value] = ARENA_SYMBOLS[self.plan.bank(k)]

    def value_ptr(self, value: str) -> str:
        return f"({self.arena[value]} + {self.current[value] // 4})"

    def tensor_ptr(self, name: str) -> str:
        if name == WORKSPACE:  # the running node's kernel workspace (arena instance "<node>#ws")
            return self.value_ptr(f"{self.group}#ws")
        if name in self.outs:
            return self.outs[name]
        t = self.tg.tensor(name)
        if t.role == Role.INPUT and name not in self.sub:
            return "x"
        if t.role == Role.LABEL:
            return "labels"
        if t.role in (Role.PARAMETER, Role.OPTIMIZER_STATE) and name not in self.sub:
            return self.param_vars[name]
        node, off = self.sub[name]
        return f"({self.arena[node]} + {(self.current[node] + off) // 4})"


class IntArrays:
    """Constant int32 arrays of kernel calls (shapes, strides), emitted once each as static const data
    (flash), never as compound literals, which would take stack space for every call."""

    def __init__(self) -> None:
        self.names: dict[tuple[int, ...], str] = {}

    def ref(self, values: tuple[int, ...]) -> str:
        return self.names.setdefault(tuple(values), f"poet_ints_{len(self.names)}")

    def declarations(self) -> str:
        return "\n".join(
            f"static const int32_t {name}[{max(1, len(v))}] = {{{', '.join(map(str, v)) or '0'}}};"
            for v, name in self.names.items()
        )


WORKSPACE = "#ws"  # what a WorkspaceArg asks the pointer function for


def _arg(a: CArg, ptr: Callable[[str], str], arrays: IntArrays) -> str:
    if isinstance(a, TensorArg):
        return ptr(a.name)
    if isinstance(a, IntArg):
        return str(a.value)
    if isinstance(a, FloatArg):
        return c_float(a.value)
    if isinstance(a, DoubleArg):
        return c_double(a.value)
    if isinstance(a, IntArrayArg):
        return arrays.ref(a.values)
    if isinstance(a, RuntimeArg):
        return a.name
    if isinstance(a, NullArg):
        return "NULL"
    if isinstance(a, WorkspaceArg):
        return ptr(WORKSPACE)
    raise TypeError(a)


def call_line(call: KernelCall, ptr: Callable[[str], str], arrays: IntArrays, kind: int) -> str:
    return f"    POET_TIMED({kind}, {call.func}({', '.join(_arg(a, ptr, arrays) for a in call.args)}));"


def op_kinds(tg: Graph) -> list[str]:
    """Op names in the training graph, sorted: the index of each is its profiling slot."""
    return sorted({n.op for n in tg.nodes})


def kernel_call(node: Node, tg: Graph) -> KernelCall:
    op = ops.get(node.op)
    if op.kernel is None:
        raise PoetError(f"node '{node.name}' ({node.op}): no C kernel")
    return op.kernel(node, tg.shape)


class _ErrorPath:
    """How the step fails at the current point of the schedule: ``return <status>`` before the first
    journaled update, ``return poet_rollback(<status>, n)`` after n of them."""

    def __init__(self) -> None:
        self.journaled = 0

    def check(self, call: str, status: str) -> str:
        return f"    if ({call} != 0) {self.fail(status)}"

    def fail(self, status: str) -> str:
        return f"return poet_rollback({status}, {self.journaled});" if self.journaled else f"return {status};"


def body(
    tg: Graph,
    spec: ProblemSpec,
    schedule: Schedule,
    plan: ArenaPlan,
    storage: StoragePlan,
    param_vars: dict[str, str],
    arrays: IntArrays,
    kinds: Mapping[str, int] | None = None,
    outs: Mapping[str, str] | None = None,
    verify_paging: bool = False,
) -> list[str]:
    """``kinds``: profiling slot of each op (default: of ``tg``'s ops); ``outs``: tensors written straight
    to a caller's buffer instead of the arena."""
    nodes = {n.name: n for n in tg.nodes}
    groups = {s.name: s for s in spec.nodes}
    value_bytes = {s.name: s.out_bytes for s in spec.nodes}
    kinds = kinds or {op: k for k, op in enumerate(op_kinds(tg))}
    ptrs = _Pointers(tg, spec, plan, param_vars, outs)
    page_index = {v: i for i, v in enumerate(storage.offsets)}
    param_index = {p: i for i, p in enumerate(sorted(tg.params))}
    err = _ErrorPath()
    windows = batch_windows(tg)
    computed: set[str] = set()
    lines: list[str] = []
    for k, s in enumerate(schedule.steps):
        if isinstance(s, Compute):
            ptrs.born(k, s.node)
            ptrs.born(k, f"{s.node}#ws")
            ptrs.group = s.node
            again = " (recompute)" if s.node in computed else ""
            computed.add(s.node)
            if groups[s.node].kind == INPUT_KIND and s.node in nodes:
                what = f"load a box of the batch from storage{again}"
                lines.append(f"    /* {k}: {what}: {c_comment(s.node)} */")
                lines += _load_box(tg, windows, nodes[s.node], ptrs.value_ptr(s.node), err)
                continue
            if groups[s.node].kind == INPUT_KIND:
                lines.append(f"    /* {k}: load the batch from storage{again} */")
                lines += _load_batch(ptrs.value_ptr(s.node), err, verify_paging)
                continue
            if groups[s.node].kind == PARAM_KIND:
                p = s.node[len(param_node_name("")) :]
                lines.append(f"    /* {k}: load {c_comment(p)} from storage{again} */")
                lines.append(
                    err.check(
                        f"poet_storage_read({_slot(storage, p, False)}, {ptrs.value_ptr(s.node)}, "
                        f"{value_bytes[s.node]}u)",
                        "POET_ERR_STORAGE_READ",
                    )
                )
                if verify_paging:
                    crc = f"poet_crc32({ptrs.value_ptr(s.node)}, {value_bytes[s.node]}u)"
                    lines.append(
                        f"    if ({crc} != poet_param_crc[{param_index[p]}][poet_param_slot]) "
                        + err.fail("POET_ERR_CORRUPT")
                    )
                continue
            for i, name in enumerate((s.node, *groups[s.node].epilogue)):
                n = nodes[name]
                where = " (in place)" if i else again
                journaled = (
                    [t for t in updated_in_place(tg, n) if t in storage.journal]
                    if n.phase == Phase.UPDATE
                    else []
                )
                for t in journaled:
                    lines += _journal_lines(t, storage, param_vars, err, verify_paging)
                    err.journaled += 1
                lines.append(f"    /* {k}: {c_comment(n.name)} = {n.op}{where} */")
                lines.append(call_line(kernel_call(n, tg), ptrs.tensor_ptr, arrays, kinds[n.op]))
                if n.outputs and tg.tensor(n.outputs[0]).role == Role.LOSS:
                    lines.append(f"    loss = *{ptrs.tensor_ptr(n.outputs[0])};")
                if n.phase == Phase.UPDATE and n.inputs[0] in storage.params:
                    lines += _write_back(
                        n.inputs[0], storage, ptrs, value_bytes, param_index, err, verify_paging
                    )
        elif isinstance(s, PageOut):
            ptr, nbytes = ptrs.value_ptr(s.node), value_bytes[s.node]
            lines.append(f"    /* {k}: page out {c_comment(s.node)} */")
            if verify_paging:
                lines.append(f"    poet_page_crc[{page_index[s.node]}] = poet_crc32({ptr}, {nbytes}u);")
            lines.append(
                err.check(
                    f"poet_storage_write({storage.offsets[s.node]}u, {ptr}, {nbytes}u)",
                    "POET_ERR_STORAGE_WRITE",
                )
            )
        elif isinstance(s, PageIn):
            ptrs.born(k, s.node)
            ptr, nbytes = ptrs.value_ptr(s.node), value_bytes[s.node]
            lines.append(f"    /* {k}: page in {c_comment(s.node)} */")
            lines.append(
                err.check(
                    f"poet_storage_read({storage.offsets[s.node]}u, {ptr}, {nbytes}u)",
                    "POET_ERR_STORAGE_READ",
                )
            )
            if verify_paging:
                lines.append(
                    f"    if (poet_crc32({ptr}, {nbytes}u) != poet_page_crc[{page_index[s.node]}]) "
                    + err.fail("POET_ERR_CORRUPT")
                )
        elif isinstance(s, Move):  # the arena plan relocates the value (arena.plan_moves)
            old = ptrs.value_ptr(s.node)
            ptrs.born(k, s.node)
            lines.append(f"    /* {k}: move {c_comment(s.node)} within the arena */")
            lines.append(f"    memmove({ptrs.value_ptr(s.node)}, {old}, {value_bytes[s.node]}u);")
        elif isinstance(s, Free):
            pass  # the arena plan already reuses the bytes
    return lines


def _write_back(
    p: str,
    storage: StoragePlan,
    ptrs: _Pointers,
    value_bytes: dict[str, int],
    param_index: dict[str, int],
    err: _ErrorPath,
    verify: bool,
) -> list[str]:
    """After the update of stored parameter ``p``: write it to the slot the step does not read; with
    ``verify``, its CRC-32 first, then read it back into the same (now dead) buffer and check it."""
    ptr, nbytes, slot = ptrs.tensor_ptr(p), value_bytes[param_node_name(p)], _slot(storage, p, True)
    crc = f"poet_param_crc[{param_index[p]}][poet_param_slot ^ 1u]"
    lines = [f"    /* write {c_comment(p)} back to the slot this step does not read */"]
    if verify:
        lines.append(f"    {crc} = poet_crc32({ptr}, {nbytes}u);")
    lines.append(err.check(f"poet_storage_write({slot}, {ptr}, {nbytes}u)", "POET_ERR_STORAGE_WRITE"))
    if verify:
        lines.append(err.check(f"poet_storage_read({slot}, {ptr}, {nbytes}u)", "POET_ERR_STORAGE_READ"))
        lines.append(f"    if (poet_crc32({ptr}, {nbytes}u) != {crc}) " + err.fail("POET_ERR_CORRUPT"))
    return lines


def _slot(storage: StoragePlan, p: str, other: bool) -> str:
    """C expression of the storage offset of stored parameter ``p``: the current slot (``poet_param_slot``),
    or with ``other`` the one the step writes."""
    a, b = storage.params[p]
    return f"(poet_param_slot {'==' if other else '!='} 0u ? {b}u : {a}u)"


def _outs(m: ModePlan) -> dict[str, str]:
    """poet_predict writes the logits to the caller's ``out``; poet_eval_step keeps its loss in the arena."""
    return {m.graph.outputs[0]: "out"} if m.mode == "predict" else {}


def _load_batch(ptr: str, err: _ErrorPath, verify: bool) -> list[str]:
    """Read the batch from storage into ``ptr``; with ``verify``, check it against the caller's CRC-32."""
    lines = [
        err.check(f"poet_storage_read(POET_INPUT_OFFSET, {ptr}, POET_INPUT_BYTES)", "POET_ERR_STORAGE_READ")
    ]
    if verify:
        lines.append(
            f"    if (poet_crc32({ptr}, POET_INPUT_BYTES) != poet_input_crc) " + err.fail("POET_ERR_CORRUPT")
        )
    nonfinite = err.fail("POET_ERR_NONFINITE_INPUT")
    return [
        *lines,
        "#ifdef POET_CHECK_INPUTS",
        f"    if (!poet_all_finite({ptr}, POET_INPUT_ELEMS)) {nonfinite}",
        "#endif",
    ]


def _load_box(tg: Graph, windows: BatchWindows, window: Node, ptr: str, err: _ErrorPath) -> list[str]:
    """Read the box of the batch x that ``window`` (a Slice of x, or of such a Slice: splitting.batch_windows)
    holds from storage into ``ptr``: one read per contiguous run (per sample and channel for a window of
    rows, per sample for a range of channels, one for a range of samples)."""
    shape = tg.shape(next(t for t in tg.inputs if tg.tensor(t).role == Role.INPUT))
    runs = windows.runs(window.name, shape)
    per = runs.per
    offset = " + ".join([f"{runs.start}u", *(f"(uint32_t)i{a} * {st}u" for a, _, _, st in runs.loops)])
    read = (
        f"poet_storage_read(POET_INPUT_OFFSET + 4u * ({offset}), {ptr} + (uint32_t)run * {per}u, {4 * per}u)"
    )
    lines = [f"    /* {runs.count} run(s) of {per} floats */", "    {", "    uint32_t run = 0u;"]
    for d, (a, lo, hi, _) in enumerate(runs.loops):
        lines.append(f"    {'    ' * d}for (int32_t i{a} = {lo}; i{a} < {hi}; ++i{a}) {{")
    pad = "    " * len(runs.loops)
    lines += [pad + err.check(read, "POET_ERR_STORAGE_READ"), f"    {pad}++run;"]
    lines += [f"    {'    ' * d}}}" for d in reversed(range(len(runs.loops)))]
    nonfinite = err.fail("POET_ERR_NONFINITE_INPUT")
    return [
        *lines,
        "    (void)run;",
        "    }",
        "#ifdef POET_CHECK_INPUTS",
        f"    if (!poet_all_finite({ptr}, {runs.count * per}u)) {nonfinite}",
        "#endif",
    ]


def _journal_lines(
    param: str, storage: StoragePlan, param_vars: dict[str, str], err: _ErrorPath, verify: bool
) -> list[str]:
    """Before the update of ``param``: its old values go to the undo journal (and their CRC, verified)."""
    var, j = param_vars[param], err.journaled
    lines = [
        f"    /* journal {c_comment(param)}: a storage access follows its update */",
        err.check(
            f"poet_storage_write({storage.journal[param]}u, {var}, sizeof {var})", "POET_ERR_STORAGE_WRITE"
        ),
    ]
    if verify:
        lines.append(f"    poet_journal_crc[{j}] = poet_crc32({var}, sizeof {var});")
    return lines


def journal_section(storage: StoragePlan, param_vars: dict[str, str], verify: bool) -> str:
    """C declarations the step's error path needs: the CRC-32s of paged values (verify) and, when some
    update precedes a storage access, the undo journal and ``poet_rollback``."""
    out = []
    if verify and storage.offsets:
        out.append(f"static uint32_t poet_page_crc[{len(storage.offsets)}]; /* of each paged value */")
    if not storage.journal:
        return "\n".join(out)
    n = len(storage.journal)
    rows = ",\n".join(f"    {{{param_vars[p]}, sizeof {param_vars[p]}, -1}}" for p in storage.journal)
    offs = ", ".join(f"{o}u" for o in storage.journal.values())
    out += [
        f"static const poet_persistent_span poet_journal_src[{n}] = {{\n{rows}\n}};",
        f"static const uint32_t poet_journal_offset[{n}] = {{{offs}}};",
    ]
    check = ""
    if verify:
        out.append(f"static uint32_t poet_journal_crc[{n}];")
        check = (
            " ||\n            poet_crc32(poet_journal_src[done].data, poet_journal_src[done].bytes) != "
            "poet_journal_crc[done]"
        )
    out.append(
        "/* Undoes the first `done` journaled updates (newest first) and returns `status`. */\n"
        "static poet_status poet_rollback(poet_status status, int32_t done)\n{\n"
        "    while (done-- > 0) {\n"
        "        if (poet_storage_read(poet_journal_offset[done], poet_journal_src[done].data,\n"
        f"                              poet_journal_src[done].bytes) != 0{check}) {{\n"
        "            return POET_ERR_UNDO_FAILED;\n"
        "        }\n"
        "    }\n"
        "    return status;\n"
        "}"
    )
    return "\n".join(out)


def num_classes(tg: Graph) -> int:
    """Classes of a cross-entropy model (the logits' second dimension); 0 with float targets."""
    if tg.tensor(tg.inputs[1]).dtype != "int32":
        return 0
    loss = next(n for n in tg.nodes if n.outputs and tg.tensor(n.outputs[0]).role == Role.LOSS)
    return int(tg.shape(loss.inputs[0])[1])


def persistent_table(tg: Graph, param_vars: dict[str, str], stored: Mapping[str, object]) -> str:
    """Rows of poet_persistent[]: the step counter, then every trainable parameter (name order; a stored
    one by its index in poet_params), then the optimizer state."""
    index = {p: i for i, p in enumerate(sorted(tg.params))}
    rows = ["    {&poet_step_count, sizeof poet_step_count, -1},"]
    for p in persistent_tensors(tg):
        if p in stored:
            rows.append(f"    {{NULL, {tg.tensor(p).nbytes}u, {index[p]}}},")
        else:
            rows.append(f"    {{{param_vars[p]}, sizeof {param_vars[p]}, -1}},")
    return "\n".join(rows)


def _param_arrays(tg: Graph, stored: Mapping[str, tuple[int, int]]) -> tuple[str, str, dict[str, str]]:
    """C arrays of the parameters and the rows of poet_params[]. A ``stored`` parameter (-> its two storage
    slots) has only its compiled values, const (flash), to be written to storage before first use."""
    taken: set[str] = set()
    names = sorted(tg.params)
    decls, table, vars_ = [], [], {}
    for name in names:
        var = c_name(name, taken)
        vars_[name] = var
        arr = np.asarray(tg.params[name], dtype=np.float32).reshape(-1)
        trainable = name in tg.trainable
        qual = "static float" if trainable and name not in stored else "static const float"
        what = "trainable, kept in storage" if name in stored else "trainable" if trainable else "frozen"
        rows = [", ".join(c_float(v) for v in arr[i : i + 8]) for i in range(0, arr.size, 8)]
        decls.append(
            f"/* {c_comment(name)} {list(tg.params[name].shape)}, {what} */"
            "\n"
            f"{qual} {var}[{arr.size}] POET_ALIGNED = {{\n    " + ",\n    ".join(rows) + "\n};"
        )
        if name in stored:
            a, b = stored[name]
            table.append(f"    {{{c_string(name)}, NULL, {arr.size}, 1, {{{a}u, {b}u}}, {var}}},")
        else:
            table.append(f"    {{{c_string(name)}, {var}, {arr.size}, {int(trainable)}, {{0u, 0u}}, NULL}},")
    return "\n".join(decls), "\n".join(table), vars_


def _state_arrays(tg: Graph, vars_: dict[str, str]) -> tuple[str, str]:
    """Optimizer state: zero-initialised RAM arrays (added to ``vars_``), and the lines of poet_init that
    zero them again."""
    taken = set(vars_.values())
    decls, zero = [], []
    for name in sorted(k for k, t in tg.tensors.items() if t.role == Role.OPTIMIZER_STATE):
        var = vars_[name] = c_name(name, taken, "poet_state_")
        size = tg.tensor(name).size
        decls.append(
            f"/* {c_comment(name)} {list(tg.shape(name))} */\nstatic float {var}[{size}] POET_ALIGNED;"
        )
        zero.append(f"    memset({var}, 0, sizeof {var});")
    return "\n".join(decls) or "/* none: the optimizer keeps no state */", "\n".join(zero)


def generate(
    tg: Graph,
    spec: ProblemSpec,
    schedule: Schedule,
    plan: ArenaPlan,
    storage: StoragePlan,
    meta: dict[str, object],
    modes: Sequence[ModePlan] = (),
) -> dict[str, str]:
    """Returns {relative path: text} for poet_model.{h,c}, Makefile, CMakeLists.txt and README.md.
    ``modes``: the planned poet_predict / poet_eval_step; they share the arena (the largest plan's size)."""
    x, labels = tg.tensor(tg.inputs[0]), tg.tensor(tg.inputs[1])
    param_decls, table, vars_ = _param_arrays(tg, storage.params)
    state_decls, state_zero = _state_arrays(tg, vars_)
    arrays = IntArrays()
    verify = bool(meta.get("verify_paging", False))
    step_lines = body(
        tg, spec, schedule, plan, storage, vars_, arrays, verify_paging=verify
    )  # fills ``arrays``
    kinds = {op: k for k, op in enumerate(op_kinds(tg))}
    mode_lines = {
        m.mode: body(m.graph, m.spec, m.schedule, m.arena, m.storage, vars_, arrays, kinds, _outs(m), verify)
        for m in modes
    }
    plans = [plan, *(m.arena for m in modes)]
    bank_bytes = [max(p.tops[b] for p in plans) for b in range(len(plan.tops))]  # per RAM bank
    arena_bytes = sum(bank_bytes)  # one bank: the largest plan's arena
    banks_decl, banks_zero = bank_arrays(bank_bytes)
    scratch = max((align(tg.tensor(p).nbytes) for p in storage.params), default=0)
    if verify and len(bank_bytes) > 1 and bank_bytes[0] < scratch:  # poet_param_rehash reads into poet_arena
        raise PoetError(
            f"--verify-paging with parameters in storage needs the first bank's arena to hold the largest "
            f"stored parameter ({scratch} B); it has {bank_bytes[0]} B: give a larger first bank"
        )
    storage_bytes = max([storage.total_bytes, *(m.storage.total_bytes for m in modes)])
    out = next((m.graph.tensor(m.graph.outputs[0]) for m in modes if m.mode == "predict"), None)
    common = {"version": __version__, "model": c_comment(str(meta["model"])), "arena_bytes": arena_bytes}
    header = render(
        "poet_model.h.in",
        **common,
        batch=x.shape[0],
        input_elems=x.size,
        label_elems=labels.size,
        labels_are_int=int(labels.dtype == "int32"),
        num_params=len(tg.params),
        output_elems=out.size if out else 0,
        storage_bytes=storage_bytes,
        input_in_storage=int(storage.input_bytes > 0),
        predicted_ram=meta["predicted_ram_bytes"],
        optimizer=c_comment(str(meta.get("optimizer", "sgd"))),
        state_bytes=meta.get("optimizer_state_bytes", 0),
        num_classes=num_classes(tg),
        checkpoint_offset=storage.checkpoint_offset,
        checkpoint_slot_bytes=storage.checkpoint_slot_bytes,
        checkpoint_payload_bytes=storage.checkpoint_payload_bytes,
        verify_paging=int(verify),
        check_inputs_define=(
            "#ifndef POET_CHECK_INPUTS\n#define POET_CHECK_INPUTS 1\n#endif"
            if meta.get("check_inputs")
            else "/* (not compiled with --check-inputs) */"
        ),
        num_persistent=len(persistent_tensors(tg)) + 1,
        num_stored=len(storage.params),
    )
    source = render(
        "poet_model.c.in",
        **common,
        solver=schedule.solver,
        num_steps=len(schedule.steps),
        param_arrays=param_decls,
        param_table=table,
        state_arrays=state_decls,
        state_zero=state_zero,
        arena_floats=max(1, bank_bytes[0] // 4),
        bank_arrays=banks_decl,
        bank_zero=banks_zero,
        label_type="int32_t" if labels.dtype == "int32" else "float",
        body="\n".join(step_lines),
        predict_body="\n".join(mode_lines.get("predict", ["    (void)out;"])),
        eval_body="\n".join(mode_lines.get("eval", [])),
        persistent_table=persistent_table(tg, vars_, storage.params),
        journal=journal_section(storage, vars_, verify),
        int_arrays=arrays.declarations(),
        num_kinds=len(op_kinds(tg)),
        kind_names=", ".join(f'"{k}"' for k in op_kinds(tg)),
    )
    return {
        "poet_model.h": header,
        "poet_model.c": source,
        **build_files(common, kernel_sources(tg, str(meta.get("kernels", "fast")), [m.graph for m in modes])),
        **board_files(str(meta.get("device", "host"))),
        "README.md": render_readme(
            tg,
            schedule,
            plan,
            storage_bytes,
            {**meta, "arena_bytes": arena_bytes, "output_elems": out.size if out else 0},
            storage.input_bytes,
        ),
    }


def build_files(common: Mapping[str, object], kernels: Sequence[str]) -> dict[str, str]:
    """The Makefile and CMakeLists.txt, each listing the project's ``kernels`` (kernel_sources) by name."""
    paths = [f"runtime/src/kernels/{k}.c" for k in kernels]
    return {
        "Makefile": render("Makefile.in", **common, kernels=" \\\n    ".join(paths)),
        "CMakeLists.txt": render("CMakeLists.txt.in", **common, kernels="\n  ".join(paths)),
    }


def board_files(device: str) -> dict[str, str]:
    """What a board build adds to the project: the storage drivers (runtime_c/drivers/), the toolchain
    file for arm-none-eabi-gcc with the flags of ``device``'s core, and the STM32F405 bare-metal example."""
    flags = CPU_FLAGS.get(device, M4F_FLAGS)
    files = {
        "cmake/arm-none-eabi.cmake": render(
            "board/arm-none-eabi.cmake.in",
            version=__version__,
            device=device,
            cpu_flags=flags,
            board="stm32f405" if flags == M4F_FLAGS else "",
        )
    }
    files.update({f"drivers/{n}": (RUNTIME_C / "drivers" / n).read_text() for n in DRIVER_SOURCES})
    example = TEMPLATES / "board"
    files.update({f"examples/bare_metal/{n}": (example / n).read_text() for n in BARE_METAL_EXAMPLE})
    return files


def with_dependencies(sources: set[str]) -> list[str]:
    """``sources`` and the kernel sources their fast or reference files call (read from the files:
    :mod:`poet_edge.codegen.link`), sorted; math.c's shared helpers (poet_expf...), which a build of both
    variants links once, only when ``sources`` names it."""
    shared = set(SHARED_SOURCES) - sources
    return [s for s in closure(sources, KERNEL_VARIANTS) if s not in shared]


def kernel_sources(tg: Graph, variant: str = "fast", graphs: Sequence[Graph] = ()) -> list[str]:
    """The kernel sources a project of ``tg`` (and of ``graphs``: poet_predict's and poet_eval_step's)
    links with the ``variant`` kernels: those that define its nodes' kernels (each op's KernelCall names
    its source) and what their files call, sorted."""
    used = set()
    for g in (tg, *graphs):
        for n in g.nodes:
            call = kernel_call(n, g)
            check_defines(call.func, call.source)
            used.add(call.source)
    return closure(used, (variant,))
