"""How much work one node does: the single input of the cost model."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OpClass(str, Enum):
    """Kinds of kernels that a device profile prices differently."""

    DENSE = "dense"  # Gemm / MatMul and their gradients: priced per MAC
    CONV = "conv"  # 2-D convolution (groups == 1 or grouped): priced per MAC
    DEPTHWISE = "depthwise"  # depthwise convolution: priced per MAC
    ELEMENTWISE = "elementwise"  # relu, add, mul, ...: priced per element
    REDUCE = "reduce"  # sums, means, pooling: priced per element read
    COPY = "copy"  # reshape, flatten, transpose, concat: priced per byte moved
    LOSS = "loss"  # softmax cross-entropy, mse: priced per element
    UPDATE = "update"  # optimizer step: priced per element


@dataclass(frozen=True)
class Work:
    """What one execution of a node costs, independent of any device."""

    op_class: OpClass
    macs: int = 0  # multiply-accumulates (DENSE, CONV, DEPTHWISE)
    elements: int = 0  # elements processed (all other classes)
    bytes_read: int = 0
    bytes_written: int = 0
    workspace_bytes: int = 0  # scratch RAM the kernel needs while it runs
    # how many units of its class's rate one unit of this call costs: a MAC relative to one of a large
    # GEMM (block structure of the fast kernels), an element relative to a plain elementwise kernel (ops that
    # call math helpers); poet_edge.kernel_model
    weight: float = 1.0
    # a fused weight-gradient update (poet_edge/ops/fused.py) also runs the optimizer update on this many
    # elements, priced at the update rate times update_weight (poet_edge.cost.node_cycles)
    update_elements: int = 0
    update_weight: float = 1.0

    @property
    def quantity(self) -> float:
        """The amount the cost model multiplies by its rate: weight times MACs (dense, conv, depthwise),
        bytes written (copy) or elements (every other class)."""
        if self.op_class in (OpClass.DENSE, OpClass.CONV, OpClass.DEPTHWISE):
            base = self.macs
        else:
            base = self.bytes_written if self.op_class == OpClass.COPY else self.elements
        return base * self.weight
