"""`--optimizer`: which update the training graph ends with, and the persistent state it keeps.

The formulas are torch.optim's (single-tensor CPU path, ``maximize=False``, ``amsgrad=False``,
``dampening=0``), one update node per trainable parameter:

- ``sgd``: ``p -= lr * g`` (``SGDUpdate``); with weight decay ``p -= lr * (g + wd * p)``
  (``SGDMomentumUpdate`` without a buffer).
- ``momentum``: ``d = g + wd * p; buf = momentum * buf + d; p -= lr * (nesterov ? d + momentum * buf :
  buf)`` (``SGDMomentumUpdate``); the buffer starts at zero, so the first step gives ``buf = d`` as
  torch's clone does.
- ``adam`` / ``adamw``: ``m = lerp(m, g, 1 - b1); v = b2 * v + (1 - b2) * g * g; p -= lr / (1 - b1^t) *
  m / (sqrt(v) / sqrt(1 - b2^t) + eps)`` (``AdamUpdate``); Adam adds ``wd * p`` to the gradient, AdamW
  multiplies ``p`` by ``1 - lr * wd`` first. ``t`` is the step count the generated model keeps.

The learning rate is not here: the caller passes it to every step (its schedule is the caller's).
The state tensors (``momentum_buffer``; ``exp_avg``, ``exp_avg_sq``: torch's names) are zero at
``poet_init`` and live in RAM for the whole step, like the trainable parameters.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import Enum
from typing import Any

from poet_edge.errors import PoetError


class OptimizerKind(str, Enum):
    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"
    ADAMW = "adamw"


# torch.optim's default weight decay per optimizer (AdamW decays by default, the others do not)
DEFAULT_WEIGHT_DECAY = {
    OptimizerKind.SGD: 0.0,
    OptimizerKind.MOMENTUM: 0.0,
    OptimizerKind.ADAM: 0.0,
    OptimizerKind.ADAMW: 0.01,
}

STATE_NAMES: dict[OptimizerKind, tuple[str, ...]] = {
    OptimizerKind.SGD: (),
    OptimizerKind.MOMENTUM: ("momentum_buffer",),
    OptimizerKind.ADAM: ("exp_avg", "exp_avg_sq"),
    OptimizerKind.ADAMW: ("exp_avg", "exp_avg_sq"),
}

OPTIMIZER_HELP = (
    "the update after the backward pass, as torch.optim computes it: sgd (default), momentum (SGD with "
    "momentum: one state tensor per parameter), adam or adamw (two state tensors per parameter); the "
    "state is counted against --ram"
)


@dataclass(frozen=True)
class Optimizer:
    kind: OptimizerKind = OptimizerKind.SGD
    momentum: float = 0.9
    weight_decay: float | None = None  # None: torch's default for the kind (DEFAULT_WEIGHT_DECAY)
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        kind = OptimizerKind(self.kind)
        object.__setattr__(self, "kind", kind)
        if self.weight_decay is None:
            object.__setattr__(self, "weight_decay", DEFAULT_WEIGHT_DECAY[kind])
        wd = self.decay
        if not 0.0 <= wd < float("inf"):
            raise PoetError(f"--weight-decay {wd}: must be a finite number >= 0")
        if kind == OptimizerKind.MOMENTUM and not 0.0 < self.momentum < float("inf"):
            raise PoetError(f"--momentum {self.momentum}: must be > 0 (use --optimizer sgd for none)")
        if self.nesterov and kind != OptimizerKind.MOMENTUM:
            raise PoetError("--nesterov applies to --optimizer momentum only")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise PoetError(f"--betas {','.join(map(str, self.betas))}: two numbers in [0, 1) are needed")
        if not 0.0 <= self.eps < float("inf"):
            raise PoetError(f"--eps {self.eps}: must be a finite number >= 0")

    @property
    def decay(self) -> float:
        return float(self.weight_decay or 0.0)

    @property
    def state_names(self) -> tuple[str, ...]:
        return STATE_NAMES[self.kind]

    def update(self) -> tuple[str, dict[str, object]]:
        """The update op of each parameter and its attributes (inputs: param, grad, *state)."""
        if self.kind == OptimizerKind.SGD and self.decay == 0.0:
            return "SGDUpdate", {}
        if self.kind in (OptimizerKind.SGD, OptimizerKind.MOMENTUM):
            m = self.momentum if self.kind == OptimizerKind.MOMENTUM else 0.0
            return "SGDMomentumUpdate", {"momentum": m, "weight_decay": self.decay, "nesterov": self.nesterov}
        return "AdamUpdate", {
            "beta1": self.betas[0],
            "beta2": self.betas[1],
            "eps": self.eps,
            "weight_decay": self.decay,
            "decoupled": self.kind == OptimizerKind.ADAMW,
        }

    def to_json(self) -> dict[str, Any]:
        op, attrs = self.update()
        return {"kind": self.kind.value, "op": op, **attrs, "state": list(self.state_names)}


PLAIN_SGD = Optimizer()  # the default: p -= lr * g


def parse_betas(text: str) -> tuple[float, float]:
    """--betas B1,B2 (e.g. 0.9,0.999)."""
    try:
        b1, b2 = (float(v) for v in text.split(","))
    except ValueError:
        raise PoetError(f"--betas {text!r}: expected two numbers B1,B2 such as 0.9,0.999") from None
    return b1, b2


def add_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--optimizer and its hyperparameters (compile, sweep, inspect)."""
    p.add_argument(
        "--optimizer", choices=[k.value for k in OptimizerKind], default="sgd", help=OPTIMIZER_HELP
    )
    p.add_argument(
        "--momentum", type=float, default=0.9, help="--optimizer momentum: the momentum (default 0.9)"
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        default=None,
        metavar="WD",
        help="weight decay, as torch.optim applies it: added to the gradient (sgd, momentum, adam) or "
        "decoupled (adamw); default torch's: 0, and 0.01 for adamw",
    )
    p.add_argument("--nesterov", action="store_true", help="--optimizer momentum: Nesterov momentum")
    p.add_argument(
        "--betas",
        type=parse_betas,
        default=(0.9, 0.999),
        metavar="B1,B2",
        help="adam, adamw: the moment decay rates (default 0.9,0.999)",
    )
    p.add_argument("--eps", type=float, default=1e-8, help="adam, adamw: the denominator term (default 1e-8)")


def from_args(args: argparse.Namespace) -> Optimizer:
    return Optimizer(
        OptimizerKind(args.optimizer), args.momentum, args.weight_decay, args.nesterov, args.betas, args.eps
    )
