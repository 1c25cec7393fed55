"""The device cost model: how long and how much energy a kernel call or a storage transfer takes.

Compute (one kernel call, :func:`node_cost`)::

    cycles  = rate[op_class] * quantity + per_call
    per_call = compute.cycles_per_call_conv for conv/depthwise, compute.cycles_per_call otherwise
    seconds = cycles / mcu.clock_hz
    joules  = mcu.active_power_w * seconds

where quantity (:attr:`poet_edge.work.Work.quantity`) is ``work.weight`` times ``work.macs`` for
dense/conv/depthwise, ``work.bytes_written`` for copy and ``work.elements`` for elementwise/reduce/loss/
update. The weight (:mod:`poet_edge.kernel_model`) says how much one unit of this call costs relative to
one of a large GEMM (MACs: the register-blocked kernels' block structure) or of a plain elementwise
kernel (elementwise ops that call math helpers); 1.0 otherwise. There is no separate per-MAC energy term:
energy is the MCU's active power over the kernel's duration.

Storage transfer (one page-in or page-out of ``nbytes``, :func:`transfer_cost`)::

    moved   = nbytes rounded up to storage.block_bytes
    seconds = latency + moved / throughput  (+ erase_time_s * moved / erase_bytes for writes)
    joules  = (storage.active_power_w + mcu.active_power_w) * seconds

(the MCU stays active while it drives the transfer). A transfer of 0 bytes costs nothing.

Wear (:func:`erase_blocks`, :func:`steps_until_endurance`): paged values are written sequentially
(ring / log-structured), so a write of ``moved`` bytes consumes ``moved / erase_bytes`` erase cycles
of one erase block; with wear spread over the whole storage capacity, the storage is worn out after
``endurance_cycles * capacity_bytes / erase_bytes`` erase-block cycles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from poet_edge.profiles import Profile
from poet_edge.work import OpClass, Work


@dataclass(frozen=True)
class Cost:
    """Time and energy of one operation."""

    seconds: float
    joules: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.seconds + other.seconds, self.joules + other.joules)


def rate(profile: Profile, op_class: OpClass) -> float:
    """The profile's cycles per unit of ``op_class``'s quantity (:attr:`poet_edge.work.Work.quantity`)."""
    c = profile.compute
    table: dict[OpClass, float] = {
        OpClass.DENSE: c.cycles_per_mac_dense,
        OpClass.CONV: c.cycles_per_mac_conv,
        OpClass.DEPTHWISE: c.cycles_per_mac_depthwise,
        OpClass.ELEMENTWISE: c.cycles_per_element_elementwise,
        OpClass.REDUCE: c.cycles_per_element_reduce,
        OpClass.COPY: c.cycles_per_byte_copy,
        OpClass.LOSS: c.cycles_per_element_loss,
        OpClass.UPDATE: c.cycles_per_element_update,
    }
    return table[OpClass(op_class)]


def node_cycles(profile: Profile, work: Work) -> float:
    """Estimated cycles of one kernel call."""
    cycles = rate(profile, work.op_class) * work.quantity + call_cycles(profile, OpClass(work.op_class))
    if work.update_elements:  # a fused update: its optimizer step, priced as the update op would be
        cycles += rate(profile, OpClass.UPDATE) * work.update_elements * work.update_weight
    return cycles


CONV_CLASSES = (OpClass.CONV, OpClass.DEPTHWISE)


def call_cycles(profile: Profile, op_class: OpClass) -> float:
    """The fixed cycles of one kernel call of ``op_class``."""
    c = profile.compute
    return c.cycles_per_call_conv if op_class in CONV_CLASSES else c.cycles_per_call


def node_cost(profile: Profile, work: Work) -> Cost:
    """Time and energy of one kernel call (model in the module docstring)."""
    seconds = node_cycles(profile, work) / profile.mcu.clock_hz
    return Cost(seconds, profile.mcu.active_power_w * seconds)


def moved_bytes(profile: Profile, nbytes: int) -> int:
    """``nbytes`` rounded up to the storage's transfer block."""
    block = profile.storage.block_bytes
    return -(-nbytes // block) * block


def transfer_cost(profile: Profile, nbytes: int, write: bool) -> Cost:
    """Time and energy of paging ``nbytes`` out (``write``) or in (model in the module docstring)."""
    if nbytes <= 0:
        return Cost(0.0, 0.0)
    s = profile.storage
    moved = moved_bytes(profile, nbytes)
    if write:
        seconds = s.write_latency_s + moved / s.write_throughput_bytes_per_s
        seconds += s.erase_time_s * moved / s.erase_bytes
    else:
        seconds = s.read_latency_s + moved / s.read_throughput_bytes_per_s
    return Cost(seconds, (s.active_power_w + profile.mcu.active_power_w) * seconds)


def erase_blocks(profile: Profile, writes: Iterable[int]) -> float:
    """Erase-block cycles consumed by page-outs of the given sizes (bytes each)."""
    return sum(moved_bytes(profile, n) for n in writes if n > 0) / profile.storage.erase_bytes


def steps_until_endurance(profile: Profile, erase_blocks_per_step: float) -> float | None:
    """Training steps until the storage reaches its endurance; None when nothing is written."""
    if erase_blocks_per_step <= 0:
        return None
    s = profile.storage
    total = s.endurance_cycles * (s.capacity_bytes / s.erase_bytes)
    return total / erase_blocks_per_step
