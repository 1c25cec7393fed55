"""Options of scheduler "scale": the run's settings (:class:`ScaleOptions`) and its policy
(:class:`Policy`): the size thresholds that choose a path and the shapes of its phases, passed in with
the options (a test passes its own policy; nothing is patched).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from poet_edge.errors import PoetError
from poet_edge.schedulers.effort import SAFETY_S, Budget, levels
from poet_edge.schedulers.milp import ProgressCallback


@dataclass(frozen=True)
class Policy:
    """The tuning of a run that is not a count of work (those are the levels, :class:`Budget`): which
    path a graph's size takes (value-stage pairs), when the strict bound model runs, and the shapes of
    the local search and the windows. The defaults are the shipped ones."""

    stage_pairs: int = 2000  # the stage model runs on graphs of at most this many value-stage pairs
    lns_pairs: int = 25000  # larger graphs: the local search only
    prove_pairs: int = 5000  # the cutoff proof runs on graphs of at most this many pairs (bert_tiny's
    # 6,568: the root LP of its stage model takes too long)
    strict_gap: float = 0.05  # the strict bound model runs when the gap is wider than this
    strict_above: float = 0.05  # ... and the bound is at most this above the segment cover's (relative)
    repairs: int = 400  # at most this many replays when repairing a held plan by one more eviction
    repair_rounds: int = 4  # at most this many rounds of windows around the gaps an interval point's
    # decode repairs
    repair_width: int = 6  # a repair window: the gap's stage and this many on either side
    stall_first: int = 4  # a local search's stall before its first improvement: this many times Budget.stall
    lns_width: int = 20  # stage windows: stages
    lns_step: int = 10  # ... step between windows
    lns_values: int = 3  # value windows: values (+1)
    lns_value_step: int = 2  # ... step between windows
    lns_value_share: float = 0.5  # share of the windows' HiGHS work the value windows get
    near_values: int = 6  # near windows: values (+1)
    near_step: int = 3  # ... step between windows
    near_stages: int = 16  # ... restorations at most this many stages before a consumer
    every_phase: bool = False  # the run's gap is never taken as closed, so every phase runs (tests)
    # HiGHS MIPs on segment models of more columns do not run (the bound model keeps its LP relaxation):
    # a MIP's root (LP, cuts, heuristics) is bounded by no count. resnet8 --train bias split into 8 KB
    # tiles at 96 KB (8,375 columns) stays long in the root before its first node; the zoo's largest at
    # half their no-remat peak (1,517 columns, mobilenetv2_035 bias) are quick.
    mip_cols: int = 4000


GAP_REL = 1e-4  # ScaleOptions.gap_rel's default


@dataclass(frozen=True)
class ScaleOptions:
    """``time_limit_s``: the run's wall-clock safety stop; ``effort``: quick | default | max, the
    levels of work (:mod:`~poet_edge.schedulers.effort`), or ``levels`` given as the budgets themselves;
    ``policy``: the thresholds and shapes of the phases (:class:`Policy`);
    ``kicks``: in place of every level's local-search perturbations; ``gap_rel``: stop once
    (cost - bound) / cost is at most this; ``rounds``: primal re-solves; ``prove_gap``: the gap the
    cutoff proofs try to establish; ``paging`` / ``remat`` False (--no-paging / --no-remat): no value
    is paged out / recomputed; ``on_progress(elapsed_s, incumbent, bound, None)``: told every cheaper
    schedule and higher bound (it only observes); ``stop_above``: the cost of a schedule found before
    the run, which it is to beat: the run may also stop once its lower bound is above it (no schedule
    it could find is that cheap), and it stops after its first level when that found no schedule."""

    objective: str = "energy"  # energy | latency
    time_limit_s: float = SAFETY_S
    threads: int | None = None
    gap_rel: float = GAP_REL
    rounds: int = 4
    kicks: int | None = None
    prove_gap: float = 0.01
    msg: bool = False
    paging: bool = True
    remat: bool = True
    effort: str = "default"
    levels: tuple[Budget, ...] | None = None
    policy: Policy = Policy()
    stop_above: float | None = None
    on_progress: ProgressCallback | None = field(default=None, compare=False, repr=False)  # see Board

    @property
    def inner_gap(self) -> float:
        """HiGHS's relative gap on the solves inside a run: a quarter of ``gap_rel``, at most a quarter
        of the default's (a wider ``gap_rel`` ends the run sooner, each solve stays as exact)."""
        return min(self.gap_rel, GAP_REL) / 4

    def with_gap(self, gap: float | None) -> ScaleOptions:
        """These options stopping at ``gap`` (--gap; None: unchanged); the cutoff proof then tries to
        prove that gap where it is the wider one."""
        return self if gap is None else replace(self, gap_rel=gap, prove_gap=max(self.prove_gap, gap))

    def budgets(self) -> tuple[Budget, ...]:
        """The levels the run does (PoetError on an unknown effort)."""
        try:
            out = self.levels if self.levels is not None else levels(self.effort)
        except ValueError as e:
            raise PoetError(str(e)) from None
        return out if self.kicks is None else tuple(replace(b, kicks=self.kicks) for b in out)
