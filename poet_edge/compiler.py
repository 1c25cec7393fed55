"""`poet compile`: ONNX -> training graph -> problem -> schedule -> simulation -> arena -> C project."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from poet_edge import (
    __version__,
    arena,
    autodiff,
    batch_split,
    frontend,
    inference,
    planning,
    sanity,
    splitting,
    trainable,
)
from poet_edge.codegen import emit
from poet_edge.cost import transfer_cost
from poet_edge.errors import PoetError
from poet_edge.ir import Graph, Phase
from poet_edge.memory_floor import memory_floor, node_need
from poet_edge.optimizer import PLAIN_SGD, Optimizer
from poet_edge.paths import PLAN_FILE, RUNTIME_C, TARGETS, check_output, write_project
from poet_edge.problem import SchedulingProblem
from poet_edge.profiles import Profile, load_profile
from poet_edge.progress import PhaseLimit, PhaseTimeout
from poet_edge.schedule import Schedule, SolveReport
from poet_edge.schedulers import ALIASES, configured, get_scheduler
from poet_edge.schedulers.milp import MilpOptions
from poet_edge.simulator import Integrity, SimResult, simulate
from poet_edge.units import ALIGN, fmt_bytes

PLAN = PLAN_FILE

# Extra output files made from plan.json data alone (e.g. poet_edge.report.render): {relative path: content}.
Renderer = Callable[[dict[str, Any]], dict[str, bytes | str]]


@dataclass(frozen=True)
class CompileOptions:
    model: Path
    device: str
    ram_bytes: int
    out: Path
    batch: int = 1
    loss: autodiff.Loss = autodiff.Loss.CROSS_ENTROPY
    lr: float = 0.01
    reserve_bytes: int | None = None  # None: the profile's ram_reserve_bytes
    scheduler: str = "none"
    train: str = "all"
    kernels: str = "fast"  # "fast": runtime_c/src/optimized/<k>.c where it exists; "reference": src/kernels
    input: planning.InputPlace = planning.InputPlace.RAM  # where the batch x lives during a step
    input_auto: bool = False  # --input auto: in RAM, and in storage where that may cost less (plan_input)
    params: planning.ParamPlace = planning.ParamPlace.AUTO  # where trainable parameters live (--params)
    milp: MilpOptions = MilpOptions()
    max_latency: str | None = None  # "1.5x" (of the no-remat step time) or seconds, e.g. "0.2" / "0.2s"
    time_limit_s: float | None = None  # --time-limit: each phase's safety stop (progress.PhaseLimit)
    optimizer: Optimizer = PLAIN_SGD  # --optimizer and its hyperparameters
    check_inputs: bool = False  # --check-inputs: the step scans x (and float targets) for NaN/Inf
    verify_paging: bool = False  # --verify-paging: CRC-32 of every paged value, checked at page-in
    training: autodiff.TrainingOptions = autodiff.PLAIN  # --fused-updates, --relu-masks (exact rewrites)
    ram_banks: tuple[int, ...] = ()  # --ram A+B: the RAM banks, ram_bytes their sum; (): one bank
    split: str = "off"  # --split: auto, off or a tile size (operator splitting, poet_edge/splitting.py)
    tile_order: str = "auto"  # --tile-order: rows, channels, or auto (both compared): splitting.TILE_ORDERS
    patches: str = "auto"  # --patches: auto (rows-first splits also patched, compared), on, off: PATCHES
    # --batch-parts: the batch's parts (poet_edge/batch_split.py); None: auto (with --split auto), 1: off
    batch_parts: int | None = None
    # a tile size per tensor (splitting.TileSizes, e.g. a split_for_floor's ``asked``), for callers of the
    # API: split with these sizes as --split SIZE splits with one (unless --split off)
    tiles: splitting.TileSizes | None = None
    # --arena-moves: where the static arena fragments past the budget, relocate values (arena.plan_moves)
    arena_moves: bool = True

    @property
    def explicit_tiles(self) -> Tile | None:
        """The tiles asked for: ``tiles``, or --split SIZE; None for auto / off (PoetError if malformed)."""
        if self.tiles is not None and self.split != "off":
            return self.tiles
        return splitting.tile_bytes_of(self.split)

    @property
    def windows(self) -> bool:
        """Whether Slices of a batch in storage are loads of their boxes (``_spec``): not with
        --verify-paging, whose CRC covers the whole batch."""
        return not self.verify_paging

    @property
    def input_rows(self) -> bool:
        """Whether splitting reads the batch through windows of its rows, each loaded from storage on its
        own: with --input storage, unless --verify-paging (whose CRC covers the whole batch)."""
        return self.input == planning.InputPlace.STORAGE and not self.verify_paging


@dataclass(frozen=True)
class Compiled:
    """Everything a compile produced, before it is written."""

    graph: Graph
    training: Graph
    profile: Profile
    spec: planning.ProblemSpec
    problem: SchedulingProblem
    schedule: Schedule
    sim: SimResult
    arena: arena.ArenaPlan
    storage: emit.StoragePlan
    stored: frozenset[str]  # the trainable parameters in storage (of the split graph, when split)
    inference: tuple[inference.ModePlan, ...] = ()  # poet_predict and poet_eval_step, sharing the arena
    split: splitting.Split | None = None  # the channel tiles, when the compile split operators
    batch: batch_split.BatchSplit | None = None  # the batch's parts (None at batch 1)
    # the (stored parameters, tile size) choices scheduled at --effort quick to pick this one (plan.json)
    compared: tuple[dict[str, object], ...] = ()
    hints: tuple[str, ...] = ()  # what the compile suggests trying (`poet compile` prints them)
    # --input auto: the step's cost (the objective's) with the batch in RAM and in storage; None: not
    # planned that way (plan_input says why)
    input_compared: tuple[tuple[str, float | None], ...] = ()

    @property
    def fixed(self) -> planning.FixedRam:
        return self.spec.fixed

    @property
    def bank_bytes(self) -> tuple[int, ...]:
        """The shared arena's buffer in each RAM bank: the largest of the training and inference plans'."""
        plans = [self.arena, *(m.arena for m in self.inference)]
        return tuple(max(p.tops[b] for p in plans) for b in range(len(self.arena.tops)))

    @property
    def arena_bytes(self) -> int:
        """The shared arena: the largest of the training and inference plans (in each bank)."""
        return sum(self.bank_bytes)

    @property
    def predicted_ram_bytes(self) -> int:
        return self.fixed.total + self.arena_bytes


def plan_training(
    opts: CompileOptions,
    log: Callable[[str], None] = lambda s: None,
    report: Callable[[str], None] = lambda s: None,
    limit: PhaseLimit | None = None,
    warned: set[str] | None = None,
) -> Compiled:
    """The compile up to the files. ``warned``: the warnings printed before (by an earlier plan of the same
    compile, :func:`plan_input`), not printed again; those printed now are added."""
    limit = limit or PhaseLimit(opts.time_limit_s)
    began = limit.clock()

    def phase(name: str) -> None:
        limit.begin(name)
        report(name)

    sanity.check_options(opts.lr, opts.time_limit_s, opts.milp.threads, opts.ram_bytes)
    phase("load")
    model = frontend.load_onnx(opts.model)
    sanity.check_onnx(model)
    g = frontend.to_ir(model, opts.batch)
    training = Training(g, opts)
    _check_graph(training, opts)  # before any per-element work
    phase("training graph")
    tg = training.graph(1)[1]
    profile = load_profile(opts.device)
    warned = set() if warned is None else warned
    if (flash_warning := sanity.flash_excess(tg, profile)) and flash_warning not in warned:
        warned.add(flash_warning)
        print(f"poet: warning: {flash_warning}", file=sys.stderr)
    reserve = profile.mcu.ram_reserve_bytes if opts.reserve_bytes is None else opts.reserve_bytes
    log(f"training graph: {len(tg.nodes)} nodes ({sum(n.phase == Phase.FORWARD for n in tg.nodes)} forward)")
    candidates = batch_choices(training, reserve, profile, opts)
    whole = Window.whole(limit, began)

    def plan(choice: Choice, o: CompileOptions, window: Window, modes: bool = True) -> Compiled:
        c = _plan_choice(training, profile, reserve, choice, Planner(o, limit, window, phase, log), modes)
        limit.begin(None)  # its last phase checked now: an overrun is this choice's error, not the next one's
        return c

    if len(candidates) == 1:
        _log_choice(log, tg, 0, 1, candidates[0][0])
        return _hinted(plan(candidates[0], opts, whole), opts)  # plan checks its last phase
    # several choices: compared at the quick effort (their training steps only), the chosen one then planned
    # at the asked effort, or given its inference plans
    probe = replace(opts, milp=replace(opts.milp, effort="quick"))
    replan = opts.milp.effort != "quick"
    ways = len(candidates) + replan  # the planning at the asked effort after them: one more share

    def share(k: int) -> Window:
        return whole.share(limit.clock(), ways - k, f"choice {k + 1}")

    ranked, compared = _compare(
        training, candidates, lambda c, w, cut: plan(c, _stopping(probe, cut), w, False), share, log
    )
    if replan:
        chosen = ranked[0][1]
        tiles = f", {tile_text(chosen[1])}" if chosen[1] else ""
        log(
            f"parameters in storage: {len(chosen[0])} of {len(tg.trainable)}{tiles} "
            "(the least energy at --effort quick)"
        )
        compiled = plan(chosen, opts, whole)
    else:
        compiled = _with_modes(
            ranked, compared, lambda c: _add_modes(c, Planner(opts, limit, whole, phase, log))
        )
    limit.begin(None)
    return _hinted(replace(compiled, compared=tuple(compared)), opts)


def _stopping(opts: CompileOptions, cut: float | None) -> CompileOptions:
    """``opts`` whose scheduler may stop once its lower bound is above ``cut`` joules (a compared choice
    that cannot be the cheapest, :func:`_compare`; energy objective only, as choices are compared on
    energy)."""
    if cut is None or opts.milp.objective != "energy":
        return opts
    return replace(opts, milp=replace(opts.milp, stop_above=cut))


def _compare(
    training: Training,
    candidates: Sequence[Choice],
    plan: Callable[[Choice, Window, float | None], Compiled],
    share: Callable[[int], Window],
    log: Callable[[str], None],
) -> tuple[Ranked, list[dict[str, object]]]:
    """Each choice's training step planned (``plan``: at --effort quick, without its inference plans: only
    the training step's energy is compared) within ``share(k)`` (choice k's: an equal share of what the
    earlier ones left of the limit, so the first cannot use up the others' time), its scheduler allowed to
    stop once its lower bound is above the least energy planned before it (``plan``'s third argument):
    such a choice cannot be the cheapest, whatever its run would have found, and the cheapest choice's run
    is the one it would have been without the cut (its bound never passes its own cost), so the choice is
    the same. Its row says ``stopped_above_best``, and its energy is its schedule's when it stopped
    (resnet8 --train bias at 96 KB, --effort quick, is a compile where some choices stop early: it ends
    sooner, more so with the order wrapper's runs cut likewise, and gives the same C). Returns those that
    plan, least energy first (the first of equals), and plan.json's rows of all. Raises the last choice's
    error when none plans."""
    tg = training.graph(1)[1]
    planned: Ranked = []
    compared: list[dict[str, object]] = []
    for k, choice in enumerate(candidates):
        stored, tile, parts = choice
        _log_choice(log, tg, k, len(candidates), stored)
        row: dict[str, object] = {"stored_parameters": len(stored), **_tile_json(tile)}
        if training.extent > 1:
            row["batch_parts"] = parts
        best = min((p[0].sim.energy_j for p in planned), default=None)
        try:
            c = plan(choice, share(k), best)
        except PoetError as e:
            compared.append({**row, "energy_j": None, "error": str(e)})
            if isinstance(e, PhaseTimeout):  # the safety stop, not the choice, ended it
                compared[-1].update(cut_by_time_limit=True, cut_phase=e.phase)
            if not planned and k == len(candidates) - 1:
                raise
            continue
        if c.split is not None:  # the largest size the split uses
            row["tile_bytes"] = c.split.tile_bytes
        cut = c.schedule.report.cut_by_time_limit  # then its energy may be above what a longer limit gives
        compared.append({**row, "energy_j": c.sim.energy_j, "error": None, "cut_by_time_limit": bool(cut)})
        if cut:
            compared[-1]["cut_phase"] = c.schedule.report.cut_phase
        report, why = c.schedule.report, ""  # scale's bound, or its order's where a sequence won
        bound = max((b for b in (report.bound, report.order_bound) if b is not None), default=None)
        if best is not None and bound is not None and bound > best:
            compared[-1]["stopped_above_best"] = True
            why = f" (stopped: at least {bound * 1e3:.3f} mJ, above {best * 1e3:.3f})"
        if tile is not None:
            log(f"split into {tile_text(tile)}: {c.sim.energy_j * 1e3:.3f} mJ{why}")
        planned.append((c, choice, len(compared) - 1))
    return sorted(planned, key=lambda p: (p[0].sim.energy_j, p[2])), compared


def _log_choice(log: Callable[[str], None], tg: Graph, k: int, n: int, stored: frozenset[str]) -> None:
    if stored:
        log(
            f"parameters in storage ({k + 1} of {n} choices): {len(stored)} of {len(tg.trainable)}, "
            f"{fmt_bytes(sum(tg.tensor(p).nbytes for p in stored))}"
        )


def _with_modes(
    ranked: Ranked,
    compared: list[dict[str, object]],
    add_modes: Callable[[Compiled], Compiled],
) -> Compiled:
    """The least-energy planned choice with its inference plans (``add_modes``: :func:`_add_modes`); where
    those cannot be planned, the next one (its row in ``compared`` then says why). Raises the first error
    when none can."""
    first: PoetError | None = None
    for c, _, row in ranked:
        try:
            return add_modes(c)
        except PoetError as e:
            compared[row] = {**compared[row], "energy_j": None, "error": str(e)}
            first = first or e
    assert first is not None
    raise first


# (parameters kept in storage, tile size or None: no operator splitting, the batch's parts: 1 is unsplit)
Tile = int | splitting.TileSizes  # one tile size for the whole graph, or a size per tensor (mixed)
Choice = tuple[frozenset[str], Tile | None, int]
Ranked = list[tuple[Compiled, Choice, int]]  # planned choices, least energy first, with their row


def tile_text(tile: Tile) -> str:
    """A tile choice for the log: "16.0 KiB tiles", "mixed tiles of 2.0 KiB to 16.0 KiB", with ", rows
    first" when rows are cut before channels."""
    if isinstance(tile, int):
        return f"{fmt_bytes(tile)} tiles"
    first = (", rows first" if tile.rows_first else "") + (
        ", forward stages in patches" if tile.patches else ""
    )
    if not tile.sizes:
        return f"{fmt_bytes(tile.default)} tiles{first}"
    sizes = (tile.default, *tile.sizes.values())
    return f"mixed tiles of {fmt_bytes(min(sizes))} to {fmt_bytes(max(sizes))}{first}"


def _tile_json(tile: Tile | None) -> dict[str, object]:
    """A tile choice in plan.json's compared choices: the largest size, whether sizes are mixed and whether
    rows were cut first."""
    if tile is None or isinstance(tile, int):
        return {"tile_bytes": tile}
    mixed = {"mixed_tiles": True} if tile.sizes else {}
    return {
        "tile_bytes": max((tile.default, *tile.sizes.values())),
        **mixed,
        "rows_first": tile.rows_first,
        "patches": tile.patches,
    }


TileChoice = tuple[frozenset[str], Tile | None]  # (parameters kept in storage, tile size): plan_choices


class Training:
    """The forward and training graphs of a compile, with the batch in any number of parts (each built
    once, on first use)."""

    def __init__(self, g: Graph, opts: CompileOptions) -> None:
        self.g, self.opts = g, opts
        self.batch = frontend.graph_batch(g)
        # what is split into parts: the batch's samples; at batch 1, a sequence model's positions
        self.extent = batch_split.parts_extent(g)
        self.noun = "sequence" if self.batch == 1 and self.extent > 1 else "batch"
        self._made: dict[int, tuple[batch_split.BatchSplit, Graph]] = {}

    def split(self, parts: int) -> batch_split.BatchSplit:
        return self._make(parts)[0]

    def graph(self, parts: int) -> tuple[Graph, Graph]:
        """(forward graph, training graph) with the batch in ``parts`` parts."""
        s, tg = self._make(parts)
        return s.graph, tg

    def _make(self, parts: int) -> tuple[batch_split.BatchSplit, Graph]:
        if parts not in self._made:
            o = self.opts
            chosen = trainable.select(self.g, o.train)  # on the unsplit graph (the parameters are shared)
            s = batch_split.split_parts(self.g, parts, chosen)
            tg = autodiff.training_graph(s.graph, o.loss, chosen, o.optimizer, o.training)
            self._made[parts] = s, tg
        return self._made[parts]

    def max_parts(self) -> int:
        """The most parts the options allow: --batch-parts K, else (auto, with --split auto) the batch."""
        if self.opts.split == "off":
            return 1
        if self.opts.batch_parts is not None:
            return self.opts.batch_parts
        return min(self.extent, batch_split.MAX_PARTS) if self.opts.split == "auto" else 1


def _check_graph(training: Training, opts: CompileOptions) -> None:
    """sanity.check_graph on the model; when a tensor is too big for the budget, on the model with the batch
    in the most parts the options allow (a part's tensors must fit then), and the error says so."""
    split = opts.split != "off"
    rows = splitting.MIN_ROWS if split else 0
    wanted = batch_split.parts_wanted(str(opts.batch_parts)) if opts.batch_parts is not None else None
    asked = 1 if wanted is None else wanted
    batch_split.part_sizes(training.extent, asked, training.noun)  # --batch-parts 0 or above the extent
    if opts.split == "off" and asked > 1:
        raise PoetError(
            f"--batch-parts {opts.batch_parts} splits the {training.noun}, --split off splits nothing"
        )
    try:
        sanity.check_graph(training.g, opts.ram_bytes, split, rows, opts.input_rows)
    except PoetError as e:
        k = training.max_parts() if opts.split != "off" else min(training.extent, batch_split.MAX_PARTS)
        if k <= 1:
            raise
        try:
            sanity.check_graph(training.split(k).graph, opts.ram_bytes, split, rows, opts.input_rows)
        except PoetError:
            raise PoetError(f"{e}; with the {training.noun} in {k} parts too") from None
        if opts.split == "off":
            raise PoetError(
                f"{e}; --split auto can run the {training.noun} in {k} parts (--batch-parts)"
            ) from None


def _plan_choice(
    training: Training,
    profile: Profile,
    reserve: int,
    choice: Choice,
    pl: Planner,
    modes: bool = True,
) -> Compiled:
    """:func:`_plan_stored` on the training graph with the batch in ``choice[2]`` parts, split into tiles of
    ``choice[1]`` bytes when given (``modes``: with the inference plans)."""
    opts, log = pl.opts, pl.log
    stored, tile, parts = choice
    g, tg = training.graph(parts)
    bs = training.split(parts) if training.extent > 1 else None
    if parts > 1:
        s = training.split(parts)
        log(
            f"{training.noun} split: {parts} parts of {s.sizes_text()} {s.what}, "
            f"{len(s.replicated)} nodes run per part, joined at {', '.join(s.joined) or 'nothing'}; "
            f"{len(tg.nodes)} nodes"
        )
    hint = _batch_hint(training, reserve, profile, opts, parts)
    if tile is None:
        c = _plan_stored(g, tg, profile, reserve, stored, pl, hint, modes)
        return replace(c, batch=bs)
    split = splitting.split_graph(tg, tile, input_rows=opts.input_rows)
    log(
        f"operator splitting: {len(split.tiles)} tensors in {tile_text(tile)}"
        + (f" ({len(split.rows)} also in row tiles)" if split.rows else "")
        + f", {len(split.split_nodes)} nodes split, {len(split.graph.nodes)} nodes"
    )
    if split.blocks:
        n = sum(len(b) for b in split.blocks.values())
        log(f"operator splitting: {len(split.blocks)} parameters cut into {n} blocks (docs/splitting.md)")
    stored = split.param_names(stored)
    c = _plan_stored(g, split.graph, profile, reserve, stored, pl, hint, modes)
    return replace(c, split=split, batch=bs)


def batch_choices(training: Training, reserve: int, profile: Profile, opts: CompileOptions) -> list[Choice]:
    """The (stored parameters, tile size, batch parts) choices the compile schedules, the least energy kept.

    --split off: :func:`plan_choices` of the whole batch. A tile size: :func:`plan_choices` with the batch
    in --batch-parts parts (1 unless given); so with --batch-parts K and --split auto. auto: the whole
    batch when one of its :func:`stored_candidates` fits the budget; else (batch > 1, or a sequence's
    positions at batch 1) the fewest parts, 2 up to the batch (at most ``batch_split.MAX_PARTS``), whose
    floor fits, with :func:`plan_choices` of that graph; else with channel / row tiles, one sample per part
    (a sequence: the fewest of 2, 4, 8, ... parts whose tiles fit); else tiles of the whole batch; the whole
    batch when nothing fits (the floor error then says so)."""
    fixed = 1 if opts.split == "off" else opts.batch_parts
    if opts.explicit_tiles is not None:
        fixed = opts.batch_parts or 1
    if fixed is not None:
        return _with_parts(training, reserve, profile, opts, fixed)
    tg = training.graph(1)[1]
    if any(
        _stored_floor(tg, reserve, profile, opts, s) <= opts.ram_bytes
        for s in stored_candidates(tg, reserve, profile, opts)
    ):
        return _with_parts(training, reserve, profile, opts, 1)
    most = training.max_parts()
    for parts in range(2, most + 1):
        if parts_floor(training, reserve, profile, opts, parts) <= opts.ram_bytes:
            return _with_parts(training, reserve, profile, opts, parts)
    # with tiles: a sequence's fewest parts that fit (one position per part multiplies the nodes by T, and
    # the energy grows with them: bert_tiny --train bias --input storage at 28 KB is such a case); a batch's
    # samples one per part (mobilenetv2_035 --train bias at batch 8 in 256 KB: with 2 parts and tiles a step
    # pages more than QEMU's 16 MB of storage, with 8 parts far less)
    for parts in _doubling(most) if training.noun == "sequence" else [most]:
        with_tiles = _with_parts(training, reserve, profile, opts, parts)
        if any(tile is not None for _, tile, _ in with_tiles):
            return with_tiles
    return _with_parts(training, reserve, profile, opts, 1)


def _doubling(most: int) -> list[int]:
    """2, 4, 8, ... below ``most``, then ``most`` (none when ``most`` < 2)."""
    out = [k for k in (2**i for i in range(1, most.bit_length())) if k < most]
    return [*out, most] if most >= 2 else []


def _with_parts(
    training: Training, reserve: int, profile: Profile, opts: CompileOptions, parts: int
) -> list[Choice]:
    """:func:`plan_choices` of the training graph with the batch in ``parts`` parts."""
    return [(s, t, parts) for s, t in plan_choices(training.graph(parts)[1], reserve, profile, opts)]


def parts_floor(training: Training, reserve: int, profile: Profile, opts: CompileOptions, parts: int) -> int:
    """The lowest floor with the batch in ``parts`` parts, no tiles: every trainable parameter in storage
    (none with --params ram)."""
    tg = training.graph(parts)[1]
    keep = frozenset() if opts.params == planning.ParamPlace.RAM else frozenset(tg.trainable)
    return _stored_floor(tg, reserve, profile, opts, keep)


def plan_choices(tg: Graph, reserve: int, profile: Profile, opts: CompileOptions) -> list[TileChoice]:
    """The (stored parameters, tile size) pairs the compile schedules, the least energy kept.

    --split off: :func:`stored_candidates` unsplit. A tile size: the same choices, split in each order
    --tile-order allows (rows first, channels first). auto: unsplit when one of those fits the budget; else
    every trainable parameter in storage (none with --params ram) and, per order, the largest tile size of
    ``splitting.TILE_SIZES`` whose floor fits (as coarse as that floor allows: :func:`_coarsest`) and the
    next size whose floor fits too (smaller tiles: more room for the scheduler, more nodes): so auto
    schedules every choice the channels-first compile did, and never keeps a costlier one (rows first cost
    less on most conv nets measured, not on all: bench/results/tile_order.md); a rows-first split that cuts
    no tensor in rows is the channels-first one and is not scheduled twice, nor is a size whose coarsened
    split is a graph already chosen (resnet8 --train bias at 96 KB: rows first at 16 KB, and 8 KB coarsened
    to 16 KB). Unsplit when no size fits (the floor error then says so)."""
    stored = stored_candidates(tg, reserve, profile, opts)
    size = splitting.tile_bytes_of(opts.split)
    if opts.split == "off":
        return [(s, None) for s in stored]
    if opts.tiles is not None:  # sizes given through the API: as given
        return [(s, opts.tiles) for s in stored]
    if size is not None:
        tiles = [t for t in _ordered(size, opts.tile_order, opts.patches) if _stages_if_patched(tg, t, opts)]
        return [(s, t) for t in tiles for s in stored]
    if any(_stored_floor(tg, reserve, profile, opts, s) <= opts.ram_bytes for s in stored):
        return [(s, None) for s in stored]
    keep = frozenset() if opts.params == planning.ParamPlace.RAM else frozenset(tg.trainable)
    fits: list[Tile] = []
    seen: set[tuple[object, ...]] = set()  # the split graphs chosen: one coarsened to another's is skipped
    for rows_first in splitting.TILE_ORDERS[opts.tile_order]:
        found, staged = 0, False  # staged: a split with forward-only stages (--patches) was seen
        for split in splitting.splits(tg, opts.input_rows, rows_first):  # largest first
            staged = staged or bool(rows_first and splitting.patch_stages(tg, split.tiles, split.rows, set()))
            floor = _stored_floor(split.graph, reserve, profile, opts, split.param_names(keep))
            if floor <= opts.ram_bytes and not (rows_first and not split.rows) and split.asked is not None:
                chosen = _coarsest(tg, reserve, profile, opts, keep, split, floor) or split
                if (shape := _graph_shape(chosen.graph)) not in seen and chosen.asked is not None:
                    fits.append(chosen.asked)
                seen.add(shape)
                found += 1
            if found == 2:
                break
        if staged and found and opts.patches != "off":
            patched = _patched_choice(tg, reserve, profile, opts, keep)
            if patched is not None:
                fits = [t for t in fits if not _rows_first(t)] if opts.patches == "on" else fits
                fits.append(patched)
    return [(keep, t) for t in fits] or [(s, None) for s in stored]


PATCHES = ("auto", "on", "off")  # --patches


def _stages_if_patched(tg: Graph, t: Tile, opts: CompileOptions) -> bool:
    """False for a patched choice whose split has no forward-only stage (it is the unpatched one)."""
    if not isinstance(t, splitting.TileSizes) or not t.patches:
        return True
    return bool(splitting.split_graph(tg, t, input_rows=opts.input_rows).patched)


def _rows_first(t: Tile) -> bool:
    return isinstance(t, splitting.TileSizes) and t.rows_first


def _patched_choice(
    tg: Graph, reserve: int, profile: Profile, opts: CompileOptions, keep: frozenset[str]
) -> Tile | None:
    """The largest rows-first tile size whose split has forward-only stages in patches
    (:func:`splitting.patch_stages`) and a floor within the budget; None without one. A patch is bigger
    than a row tile (its halo), so its floor may need smaller tiles than the unpatched split."""
    for split in splitting.splits(tg, opts.input_rows, True, patches=True):
        if not split.patched or split.asked is None:
            continue
        if _stored_floor(split.graph, reserve, profile, opts, split.param_names(keep)) <= opts.ram_bytes:
            return split.asked
    return None


def _graph_shape(g: Graph) -> tuple[object, ...]:
    """What tells two split graphs apart: their nodes (names carry the tiles) and output shapes."""
    return tuple((n.name, n.op, *(g.shape(o) for o in n.outputs)) for n in g.nodes)


def _ordered(size: int, order: str, patches: str = "off") -> list[Tile]:
    """--split SIZE in each order --tile-order ``order`` allows, rows first also (auto) or only (on) with
    forward-only stages in patches (a split without such stages is the same graph either way)."""
    out: list[Tile] = []
    for r in splitting.TILE_ORDERS[order]:
        ways = (False, True) if r and patches == "auto" else (r and patches == "on",)
        out += [splitting.TileSizes(size, rows_first=r, patches=p) for p in ways]
    return out


def _coarsest(
    tg: Graph,
    reserve: int,
    profile: Profile,
    opts: CompileOptions,
    keep: frozenset[str],
    uniform: splitting.Split,
    floor: int,
) -> splitting.Split | None:
    """The split whose tiles are only as small as ``uniform``'s floor (``floor`` bytes) needs
    (:func:`splitting.split_for_floor`, counted by the planning's own node needs: in-place epilogues and
    fixed bytes included), when its sizes are mixed, its floor is within ``floor`` and it has fewer nodes
    than ``uniform``; None otherwise (one size for the whole graph is then as coarse)."""

    def need(split: splitting.Split) -> dict[str, int]:
        spec = _spec(split.graph, reserve, opts, split.param_names(keep))
        problem = planning.price(spec, profile, opts.ram_bytes)
        preds = problem.preds()
        named = ((v, m) for v, ns in enumerate(spec.nodes) for m in (ns.name, *ns.epilogue))
        return {m: node_need(problem, v, preds) for v, m in named}

    split = splitting.split_for_floor(
        tg, floor, input_rows=opts.input_rows, stored=keep, need=need, rows_first=uniform.rows_first
    )
    if split.asked is None or not split.asked.sizes or len(split.graph.nodes) >= len(uniform.graph.nodes):
        return None
    if _stored_floor(split.graph, reserve, profile, opts, split.param_names(keep)) > floor:
        return None
    return split


def _plan_stored(
    g: Graph,
    tg: Graph,
    profile: Profile,
    reserve: int,
    stored: frozenset[str],
    pl: Planner,
    batch_hint: Callable[[int], str] = lambda floor: "",
    modes: bool = True,
) -> Compiled:
    """Schedule, arena, simulation and (``modes``) inference plans with the parameters ``stored`` in storage
    (``batch_hint(floor)``: what batch parts would do, for the floor error)."""
    opts = pl.opts
    spec = _spec(tg, reserve, opts, stored)
    problem = planning.price(spec, profile, opts.ram_bytes)
    problem = replace(problem, max_latency_s=max_latency_s(opts.max_latency, problem))
    floor = memory_floor(problem)
    if opts.ram_bytes < floor.bytes:
        raise PoetError(
            f"--ram {fmt_bytes(opts.ram_bytes)} is below the memory floor of this model, "
            f"{fmt_bytes(floor.bytes)} ({floor.explanation}){_state_hint(spec.fixed, opts)}"
            f"{_storage_hint(tg, reserve, profile, opts)}"
            f"{_params_hint(tg, reserve, profile, opts, floor.bytes)}"
            f"{_rewrites_hint(g, reserve, profile, opts, floor.bytes)}"
            f"{_split_hint(tg, reserve, profile, opts, spec, floor.bytes)}"
            f"{batch_hint(floor.bytes)}"
        )
    schedule, plan = _fit(problem, floor.bytes, spec, pl)
    pl.phase("simulate")
    storage = emit.storage_for(tg, spec, schedule)
    sim = simulate(problem, schedule, profile, integrity(opts, tg, storage))
    compiled = Compiled(g, tg, profile, spec, problem, schedule, sim, plan, storage, stored)
    _check_ram(compiled, opts)
    return _add_modes(compiled, pl) if modes else compiled


def _add_modes(compiled: Compiled, pl: Planner) -> Compiled:
    """``compiled`` with the inference plans (poet_predict, poet_eval_step) in its arena: poet_eval_step's
    first, then poet_predict's from it (:func:`_plan_mode`)."""
    tg, spec = compiled.training, compiled.spec
    params = emit.stored_bytes(tg, planning.stored_params(spec))
    ev = _plan_mode(tg, inference.EVAL, spec.fixed, compiled.stored, params, compiled.profile, pl)
    pr = _plan_mode(tg, inference.PREDICT, spec.fixed, compiled.stored, params, compiled.profile, pl, ev)
    modes = tuple({inference.PREDICT: pr, inference.EVAL: ev}[m] for m in inference.MODES)
    out = replace(compiled, inference=modes)
    _check_ram(out, pl.opts)
    return out


def _check_ram(compiled: Compiled, opts: CompileOptions) -> None:
    """PoetError when the plans' RAM exceeds --ram."""
    sim = compiled.sim
    if compiled.predicted_ram_bytes > opts.ram_bytes:
        raise PoetError(
            f"the schedule needs {fmt_bytes(compiled.predicted_ram_bytes)} of RAM (arena "
            f"{fmt_bytes(compiled.arena_bytes)} + parameters, inputs and reserve "
            f"{fmt_bytes(compiled.fixed.total)}; "
            f"simulated peak {fmt_bytes(sim.peak_ram_bytes)}), more than --ram {fmt_bytes(opts.ram_bytes)}"
        )


def _spec(g: Graph, reserve: int, opts: CompileOptions, stored: frozenset[str]) -> planning.ProblemSpec:
    """planning.spec_from_graph as the options ask: the batch where --input puts it, its Slices loads of
    their boxes unless --verify-paging (CompileOptions.windows)."""
    return planning.spec_from_graph(g, reserve, opts.input, stored, opts.windows)


def _stored_floor(
    tg: Graph, reserve: int, profile: Profile, opts: CompileOptions, stored: frozenset[str]
) -> int:
    spec = _spec(tg, reserve, opts, stored)
    return memory_floor(planning.price(spec, profile, opts.ram_bytes)).bytes


def stored_candidates(
    tg: Graph, reserve: int, profile: Profile, opts: CompileOptions
) -> list[frozenset[str]]:
    """The sets of trainable parameters to keep in storage that the compile schedules, the least energy
    kept. --params ram: none; storage: all. auto: none when the model's floor fits the budget that way;
    else the fewest of the largest parameters that bring the floor under the budget (keeping a parameter in
    storage lowers the floor or leaves it), and all of them (more room for activations, more storage
    traffic); all when even that is above the budget (its floor is then the error). Several choices are
    compared at --effort quick (plan_training), and the chosen one planned at the asked effort."""
    everything = frozenset(tg.trainable)
    if opts.params == planning.ParamPlace.RAM or not everything:
        return [frozenset()]
    if opts.params == planning.ParamPlace.STORAGE:
        return [everything]
    if _stored_floor(tg, reserve, profile, opts, frozenset()) <= opts.ram_bytes:
        return [frozenset()]
    order = sorted(tg.trainable, key=lambda p: (-tg.tensor(p).nbytes, p))
    lo, hi = 1, len(order)  # the smallest prefix whose floor fits (the floor does not rise along the order)
    if _stored_floor(tg, reserve, profile, opts, everything) > opts.ram_bytes:
        return [everything]
    while lo < hi:
        mid = (lo + hi) // 2
        if _stored_floor(tg, reserve, profile, opts, frozenset(order[:mid])) <= opts.ram_bytes:
            hi = mid
        else:
            lo = mid + 1
    fewest = frozenset(order[:lo])
    return [fewest] if fewest == everything else [fewest, everything]


def _params_hint(tg: Graph, reserve: int, profile: Profile, opts: CompileOptions, floor: int) -> str:
    """With --params ram: what the floor would be with every trainable parameter in storage, when lower."""
    if opts.params != planning.ParamPlace.RAM or not tg.trainable:
        return ""
    alt = _stored_floor(tg, reserve, profile, opts, frozenset(tg.trainable))
    return f"; with --params storage (or auto) the floor is {fmt_bytes(alt)}" if alt < floor else ""


def _rewrites_hint(g: Graph, reserve: int, profile: Profile, opts: CompileOptions, floor: int) -> str:
    """Without both exact rewrites (--fused-updates, --relu-masks): the floor with them, when lower."""
    if opts.training == autodiff.DEFAULT_OPTIONS:
        return ""
    tg = autodiff.training_graph(
        g, opts.loss, trainable.select(g, opts.train), opts.optimizer, autodiff.DEFAULT_OPTIONS
    )
    stored = frozenset() if opts.params == planning.ParamPlace.RAM else frozenset(tg.trainable)
    alt = _stored_floor(tg, reserve, profile, opts, stored)
    return f"; with --fused-updates --relu-masks the floor is {fmt_bytes(alt)}" if alt < floor else ""


def _split_hint(
    tg: Graph, reserve: int, profile: Profile, opts: CompileOptions, spec: planning.ProblemSpec, floor: int
) -> str:
    """Unsplit (--split off, or auto when no tile size fits): the floor with the smallest tiles, when lower,
    and the node that sets it."""
    if opts.explicit_tiles is not None:
        return ""
    stored = frozenset(planning.stored_params(spec))
    floors = [
        memory_floor(planning.price(_spec(s.graph, reserve, opts, ps), profile, 1))
        for s in splitting.all_splits(tg, opts.input_rows, opts.tile_order)
        for ps in (s.param_names(stored),)
    ]
    low = min(floors, key=lambda f: f.bytes, default=None)
    if low is None or low.bytes >= floor:
        return ""
    how = "--split auto" if opts.split == "off" else "operator splitting (with any tile size)"
    return f"; with {how} the floor is {fmt_bytes(low.bytes)}, set by node {low.node}"


def _batch_hint(
    training: Training, reserve: int, profile: Profile, opts: CompileOptions, parts: int
) -> Callable[[int], str]:
    """For the floor error with the batch in ``parts`` parts: the floor with the most parts (one sample
    per part, up to ``batch_split.MAX_PARTS``; every parameter in storage, no tiles), when lower, and how
    to get it."""

    def hint(floor: int) -> str:
        n = min(training.extent, batch_split.MAX_PARTS)
        if parts >= n:
            return ""
        alt = parts_floor(training, reserve, profile, opts, n)
        if alt >= floor:
            return ""
        how = "--split auto --batch-parts" if opts.split == "off" else "--batch-parts"
        return f"; with the {training.noun} in {n} parts ({how} {n}) the floor is {fmt_bytes(alt)}"

    return hint


def _state_hint(fixed: planning.FixedRam, opts: CompileOptions) -> str:
    """What of the fixed bytes is optimizer state, when there is any."""
    if not fixed.optimizer_state:
        return ""
    return (
        f"; the fixed bytes include {fmt_bytes(fixed.optimizer_state)} of {opts.optimizer.kind.value} "
        "state (--optimizer sgd keeps none)"
    )


# --time-limit bounds the whole compile. A schedule may use what is left of it but RESERVE_SHARE (the arena,
# simulation and code generation after it); when fragmentation makes the arena exceed the budget, a reschedule
# with the budget tightened by the excess runs while any of that is left (its solver gets what is left as its
# own limit, and says so when that cuts it), at most MAX_ROUNDS schedules in all; after the last one,
# evict_fragments repairs the schedule instead. Whether a compile reschedules thus depends on the machine's
# load only where the safety stop is reached (until 2026-11-30 it needed half the limit left: mobilenetv2_035
# --train bias --ram 256KB --time-limit 60 on a loaded machine failed in poet_predict's arena phase, over the
# budget after fragmentation, where a short reschedule fits).
RESERVE_SHARE = 0.1
MAX_ROUNDS = 5


@dataclass(frozen=True)
class Window:
    """What of --time-limit a compile's schedules may use: ``seconds`` from ``began`` (the limit's clock;
    ``seconds`` None: no limit); ``what`` names it where it is spent."""

    began: float
    seconds: float | None
    what: str

    @staticmethod
    def whole(limit: PhaseLimit, began: float) -> Window:
        """The whole compile's: --time-limit but RESERVE_SHARE."""
        if limit.seconds is None:
            return Window(began, None, "")
        return Window(began, limit.seconds * (1 - RESERVE_SHARE), f"--time-limit {limit.seconds:g} s")

    def left(self, now: float) -> float | None:
        return None if self.seconds is None else self.seconds - (now - self.began)

    def share(self, now: float, ways: int, name: str) -> Window:
        """One of ``ways`` equal parts of what is left at ``now`` (``name``: whose part it is)."""
        left = self.left(now)
        if left is None:
            return self
        part = max(left, 0.0) / ways
        return Window(now, part, f"{name}'s share ({part:.1f} s) of {self.what}")


@dataclass(frozen=True)
class Planner:
    """How one planning runs: its options, the phase limit, the share of --time-limit its schedules may use
    (``window``), and where phase names and log lines go."""

    opts: CompileOptions
    limit: PhaseLimit
    window: Window
    phase: Callable[[str], None]
    log: Callable[[str], None]

    def left(self) -> float | None:
        """Seconds of the window a schedule may still use (None: no limit)."""
        return self.window.left(self.limit.clock())


def _round_options(pl: Planner) -> CompileOptions:
    """The options of the next schedule: its solver's time limit is what is left of the window."""
    opts, left = pl.opts, pl.left()
    if left is None or opts.milp.time_limit_s is None or left >= opts.milp.time_limit_s:
        return opts
    return replace(opts, milp=replace(opts.milp, time_limit_s=max(left, 0.01)))


EVICT_ROUNDS = 4  # eviction repairs of one schedule's arena (a count: plans stay deterministic)


def evict_fragments(
    problem: SchedulingProblem,
    schedule: Schedule,
    plan: arena.ArenaPlan,
    opts: CompileOptions,
    limit: PhaseLimit,
    log: Callable[[str], None],
) -> tuple[Schedule, arena.ArenaPlan]:
    """When fragmentation makes the arena exceed the budget and no reschedule is possible (time, rounds),
    the last resort, cheap in time but not in energy: evict the values the
    plan placed above it between their reads (:func:`arena.evict_above`: recomputed, else paged; neither
    with --no-remat / --no-paging) and plan again, while that shrinks the arena; each repaired schedule is
    replayed by the simulator (budget, storage, latency bound) before it is taken. Not with --scheduler none
    (every node once, nothing paged)."""
    rooms = _rooms(opts, problem)
    room = sum(rooms)
    if arena.excess(plan, rooms) <= 0 or opts.scheduler == "none":
        return schedule, plan
    names = [n.name for n in problem.nodes]
    preds: dict[str, set[str]] = {n: set() for n in names}
    consumers: dict[str, set[str]] = {n: set() for n in names}
    for u, w in problem.edges:
        consumers[names[u]].add(names[w])
        preds[names[w]].add(names[u])
    recomputable = {n.name for n in problem.nodes if n.recomputable and opts.milp.remat}
    pageable = {n.name for n in problem.nodes if n.pageable and opts.milp.paging}
    sizes = {n.name: n.out_bytes for n in problem.nodes}
    ws = {n.name: n.workspace_bytes for n in problem.nodes}
    for _ in range(EVICT_ROUNDS):
        found: list[tuple[bool, float, Schedule, arena.ArenaPlan]] = []
        for once in (False, True):  # page around every run of reads, or once around the longest idle stretch
            limit.check()
            repaired = arena.evict_above(
                schedule, plan, rooms, preds, consumers, recomputable, pageable, once
            )
            energy = _valid_energy(problem, repaired)
            if repaired is not None and energy is not None:
                new = arena.plan_banks(arena.instances(repaired, sizes, ws), rooms, limit.check)
                over = arena.excess(new, rooms)
                fits = over <= 0  # then the least energy, else the smallest arena (one bank: arena - room)
                found.append((not fits, energy if fits else over, repaired, new))
        found = [f for f in found if arena.excess(f[3], rooms) < arena.excess(plan, rooms)]
        if not found:
            break
        _, _, schedule, new = min(found, key=lambda f: f[:2])
        log(
            f"arena {plan.arena_bytes} B > {room} B after fragmentation; evicted the values above: "
            f"{new.arena_bytes} B (this costs energy; a longer --time-limit reschedules instead)"
        )
        plan = new
        if arena.excess(plan, rooms) <= 0:
            break
    return schedule, plan


def _valid_energy(problem: SchedulingProblem, schedule: Schedule | None) -> float | None:
    """The energy of ``schedule`` if the simulator accepts it (and it keeps a latency bound), else None."""
    if schedule is None:
        return None
    try:
        sim = simulate(problem, schedule)
    except PoetError:
        return None
    return sim.energy_j if problem.max_latency_s is None or sim.latency_s <= problem.max_latency_s else None


def _spent(pl: Planner) -> str:
    """Why no reschedule when the schedules' share of --time-limit is spent, else ""."""
    left = pl.left()
    return f"{pl.window.what} is spent" if left is not None and left <= 0 else ""


def _cut_by_time(schedule: Schedule, phase: str) -> Schedule:
    """``schedule``, its report saying the safety stop cut the run in ``phase`` (kept: an earlier cut)."""
    if schedule.report.cut_by_time_limit:
        return schedule
    return replace(schedule, report=schedule.report.cut_at(phase))


def _no_reschedule(pl: Planner, rounds: int, below_floor: bool) -> str:
    """Why no other schedule is tried after ``rounds`` ("" when one may be)."""
    if pl.opts.scheduler == "none":
        return "--scheduler none cannot trade compute for memory"
    if below_floor:
        return "a budget tightened by the excess is below the memory floor"
    if rounds >= MAX_ROUNDS:
        return f"{MAX_ROUNDS} schedules is the most tried"
    return _spent(pl)


def _fit(
    problem: SchedulingProblem,
    floor: int,
    spec: planning.ProblemSpec,
    pl: Planner,
    what: str = "",
) -> tuple[Schedule, arena.ArenaPlan]:
    """Schedules ``problem`` and plans its arena. The arena, not only the live bytes, must fit. Where the
    static plan does not but the live bytes do (of each RAM bank), values are moved within the arena instead
    (--arena-moves, :func:`arena.plan_moves`: memmoves, priced by the simulator, far cheaper than
    recomputation or paging). Otherwise, while it does not fit, reschedules with the budget tightened by the
    excess (doubled while the same excess comes back), while :func:`_no_reschedule` allows; then, as the last
    resort, evicts the values placed above the budget (:func:`evict_fragments`); where that leaves the
    arena too big because the excess is more than the room above the memory floor, reschedules with the
    budget tightened by half that room instead (while rounds and time allow); an arena still too big stops
    the compile naming the phase."""
    opts, limit, log = pl.opts, pl.limit, pl.log
    target, rounds, why, cut, last = problem, 0, "", 0, 0
    rooms = _rooms(opts, problem)
    while True:
        pl.phase("schedule" + what)
        schedule = schedule_problem(target, _round_options(pl))
        rounds += 1
        schedule, plan = _arena(schedule, problem, spec, pl, what)
        excess = arena.excess(plan, rooms)  # one bank: fixed + arena - --ram
        cut, last = (2 * cut if excess == last else excess), excess  # the same excess again: cut more
        below = target.budget_bytes - cut < floor
        why = _no_reschedule(pl, rounds, below)
        if excess > 0 and why:  # the last resort, cheap in time but dearer than a reschedule
            schedule, plan = evict_fragments(problem, schedule, plan, opts, limit, log)
            if why == _spent(pl):  # the time limit, not a count, chose the repair: the run says it was cut
                schedule = _cut_by_time(schedule, "arena repair" + what)
            excess = arena.excess(plan, rooms)
            if excess > 0 and below and not _no_reschedule(pl, rounds, False):
                cut = (target.budget_bytes - floor) // 2  # the excess is more than the room above the floor
                why = why if cut < ALIGN else ""
        if excess <= 0 or why:
            break
        log(f"arena exceeds the budget by {excess} B after fragmentation; rescheduling with a tighter budget")
        target = replace(target, budget_bytes=target.budget_bytes - cut)
    arena.verify(plan)
    if excess > 0:
        raise PoetError(
            f"compile stopped in the arena phase{what}: after fragmentation the arena needs "
            f"{fmt_bytes(plan.arena_bytes)} for a live peak of {fmt_bytes(plan.peak_live_bytes)}, "
            f"{fmt_bytes(excess)} more than --ram {fmt_bytes(opts.ram_bytes)} leaves (after "
            f"{rounds} schedule(s); {why}); give a larger --ram, or a longer --time-limit for a "
            f"reschedule with a budget tightened by the excess"
            + (f" (RAM banks: {arena.bank_report(plan, rooms)})" if len(rooms) > 1 else "")
        )
    return schedule, plan


def _storage(schedule: Schedule, spec: planning.ProblemSpec, params: dict[str, int]) -> emit.StoragePlan:
    """A mode's storage: its paged values; stored parameters in the training step's slots."""
    sizes = {n.name: n.out_bytes for n in spec.nodes}
    return emit.plan_storage(schedule, sizes, emit.input_region(spec), param_bytes=params)


def _plan_mode(
    tg: Graph,
    mode: str,
    fixed: planning.FixedRam,
    stored: frozenset[str],
    params: dict[str, int],
    profile: Profile,
    pl: Planner,
    ev: inference.ModePlan | None = None,
) -> inference.ModePlan:
    """poet_predict / poet_eval_step: the same scheduler on the mode's graph at the same --ram, with the
    training step's fixed RAM (parameters stay where they are; the caller's buffers exist throughout).
    Given poet_eval_step's plan ``ev``, where the no-remat pass does not fit, poet_predict takes its
    schedule without the loss nodes instead, where it replays and its arena fits
    (:func:`inference.without_loss`); else the scheduler."""
    g = inference.mode_graph(tg, mode)
    used = frozenset(p for p in stored if any(p in n.inputs for n in g.nodes))
    spec = inference.with_fixed(_spec(g, fixed.reserve, pl.opts, used), fixed)
    problem = planning.price(spec, profile, pl.opts.ram_bytes)
    placed = None
    if ev is not None and _no_remat(problem)[1] > problem.budget_bytes:
        placed = _placed(inference.without_loss(problem, ev.schedule), problem, spec, pl, f" ({mode})")
    schedule, plan = placed or _fit(problem, memory_floor(problem).bytes, spec, pl, f" ({mode})")
    sim = simulate(problem, schedule, profile)
    return inference.ModePlan(mode, g, spec, problem, schedule, sim, plan, _storage(schedule, spec, params))


def _rooms(opts: CompileOptions, problem: SchedulingProblem) -> tuple[int, ...]:
    """The arena's room in each RAM bank: --ram (its banks) less the fixed RAM."""
    return arena.bank_rooms(opts.ram_banks, opts.ram_bytes, problem.fixed_bytes)


def _arena(
    schedule: Schedule, problem: SchedulingProblem, spec: planning.ProblemSpec, pl: Planner, what: str
) -> tuple[Schedule, arena.ArenaPlan]:
    """``schedule``'s arena plan; where fragments would not fit but the live bytes do, with values moved
    within the arena instead (--arena-moves: memmoves, the exact slot model otherwise)."""
    opts = pl.opts
    pl.phase("arena" + what)
    sizes = {n.name: n.out_bytes for n in spec.nodes}
    ws = {n.name: n.workspace_bytes for n in problem.nodes}
    rooms = _rooms(opts, problem)
    movable = opts.arena_moves  # moves, not the exact slot model, mend fragments
    plan = arena.plan_banks(arena.instances(schedule, sizes, ws), rooms, pl.limit.check, exact=not movable)
    if arena.excess(plan, rooms) > 0 and movable:
        moved = arena.plan_moves(schedule, plan, rooms, sizes, ws)
        if moved is not None:
            pl.log(
                f"arena {' + '.join(f'{t} B' for t in plan.tops)} > "
                f"{' + '.join(f'{r} B' for r in rooms)} after fragmentation; values moved within "
                f"the arena instead: {moved[1].planner}"
            )
            return moved
    return schedule, plan


def _placed(
    schedule: Schedule, problem: SchedulingProblem, spec: planning.ProblemSpec, pl: Planner, what: str
) -> tuple[Schedule, arena.ArenaPlan] | None:
    """``schedule`` where it replays within the budget, with its arena (:func:`_arena`), never
    rescheduled: None where either fails."""
    try:
        if simulate(problem, schedule).peak_ram_bytes > problem.budget_bytes:
            return None
    except PoetError:
        return None
    schedule, plan = _arena(schedule, problem, spec, pl, what)
    rooms = _rooms(pl.opts, problem)
    if arena.excess(plan, rooms) > 0:
        return None
    arena.verify(plan)
    return schedule, plan


def integrity(opts: CompileOptions, tg: Graph, storage: emit.StoragePlan) -> Integrity:
    """The generated step's checks and undo journal, as the simulator prices them."""
    x, labels = tg.tensor(tg.inputs[0]), tg.tensor(tg.inputs[1])
    in_ram = storage.input_bytes == 0
    checked = (x.size if in_ram else 0) + (labels.size if labels.dtype != "int32" else 0)
    return Integrity(
        checked if opts.check_inputs else 0,
        0 if in_ram or not opts.check_inputs else x.size,
        opts.verify_paging,
        tuple(tg.tensor(p).nbytes for p in storage.journal),
    )


def _storage_hint(tg: Graph, reserve: int, profile: Profile, opts: CompileOptions) -> str:
    """With --input ram: what the floor would be with the batch in storage, when that is lower."""
    if opts.input != planning.InputPlace.RAM:
        return ""
    spec = planning.spec_from_graph(tg, reserve, planning.InputPlace.STORAGE)
    alt = memory_floor(planning.price(spec, profile, opts.ram_bytes)).bytes
    return f"; with --input storage the floor is {fmt_bytes(alt)}" if alt < opts.ram_bytes else ""


def _hinted(c: Compiled, opts: CompileOptions) -> Compiled:
    """``c`` with its hints (:func:`input_hint`)."""
    hint = input_hint(c, opts)
    return c if hint is None else replace(c, hints=(*c.hints, hint))


def _batch_moves(c: Compiled, opts: CompileOptions) -> tuple[float, float]:
    """With the batch in RAM: (what recomputing and paging add to the step over every node once, what
    writing the batch to storage and reading it back once costs: :func:`~poet_edge.cost.transfer_cost`),
    in the compile's objective."""
    batch = c.training.tensor(c.training.inputs[0]).nbytes
    io = transfer_cost(c.profile, batch, write=True) + transfer_cost(c.profile, batch, write=False)
    latency = opts.milp.objective == "latency"
    plain = sum(n.compute_s if latency else n.compute_j for n in c.problem.nodes)
    return _objective(c, opts) - plain, io.seconds if latency else io.joules


def _objective(c: Compiled, opts: CompileOptions) -> float:
    return c.sim.latency_s if opts.milp.objective == "latency" else c.sim.energy_j


def input_hint(c: Compiled, opts: CompileOptions) -> str | None:
    """With the batch in RAM (``--input ram``, the default) and a step that recomputes or pages: a hint to
    try ``--input storage``. What recomputing and paging add to the step is pro-rated by the share of the
    overflow the batch accounts for (the batch's bytes over how far the step, every node once, peaks above
    the budget, at most all of it); the hint is given when that share is more than writing the batch to
    storage and reading it back once costs (:func:`~poet_edge.cost.transfer_cost`), in the compile's
    objective. An estimate, not a comparison: only compiling both ways (``--input auto``, which then gives
    no hint) tells which is cheaper."""
    if opts.input != planning.InputPlace.RAM or opts.input_auto:
        return None
    if not (c.sim.n_recomputations or c.sim.n_page_outs):
        return None
    added, moving = _batch_moves(c, opts)
    if added <= moving:  # the share is at most 1: no need to replay every node once
        return None
    batch = c.training.tensor(c.training.inputs[0]).nbytes
    latency = opts.milp.objective == "latency"
    over = _no_remat(c.problem)[1] - c.problem.budget_bytes
    share = min(1.0, batch / over) if over > 0 else 0.0
    if added * share <= moving:
        return None
    unit = "ms" if latency else "mJ"
    return (
        f"hint: the input batch ({fmt_bytes(batch)}) stays in RAM for the whole step, "
        f"{100 * share:.0f}% of the {fmt_bytes(over)} that every node once peaks above --ram; recomputing "
        f"and paging add {added * 1e3:.3f} {unit} to the step, writing the batch to storage and reading it "
        f"back once {moving * 1e3:.3f} {unit}: --input storage may cost less (--input auto compiles both "
        "ways)"
    )


def _no_remat(problem: SchedulingProblem) -> tuple[Schedule, int]:
    unlimited = replace(problem, budget_bytes=1 << 62)
    schedule = get_scheduler("none")(unlimited)
    return schedule, simulate(unlimited, schedule).peak_ram_bytes


def max_latency_s(text: str | None, problem: SchedulingProblem) -> float | None:
    """--max-latency: a factor of the no-remat step time ("1.5x") or seconds ("0.2", "0.2s")."""
    if text is None:
        return None
    t = text.strip().lower()
    try:
        value = float(t[:-1] if t.endswith(("x", "s")) else t)
    except ValueError:
        raise PoetError(f"--max-latency {text!r}: use a factor like 1.5x or seconds like 0.2s") from None
    sanity.positive_finite("--max-latency", value)
    return value * sum(n.compute_s for n in problem.nodes) if t.endswith("x") else value


def schedule_problem(problem: SchedulingProblem, opts: CompileOptions) -> Schedule:
    """Runs the scheduler. `none` cannot trade anything for memory: over budget, its simulated peak is
    the error.
    `scale`, `milp`: when the no-remat schedule fits (and no latency bound binds it), it is optimal — every
    node once, nothing paged is the least energy and time possible — so the solver is not needed."""
    if ALIASES.get(opts.scheduler, opts.scheduler) in ("milp", "scale"):
        schedule, peak = _no_remat(problem)
        if peak <= problem.budget_bytes and problem.max_latency_s is None:
            return Schedule(
                schedule.steps,
                opts.scheduler,
                SolveReport.of(status="Optimal (the no-remat schedule fits)", gap=0.0),
            )
    if opts.scheduler != "none":
        return configured(opts.scheduler, opts.milp)(problem)
    schedule, peak = _no_remat(problem)
    if peak > problem.budget_bytes:
        raise PoetError(
            f"without recomputation or paging the training step peaks at {fmt_bytes(peak)}, above "
            f"--ram {fmt_bytes(problem.budget_bytes)}; try --scheduler scale, milp, greedy or page-all"
        )
    return schedule


DETERMINISTIC_INFO = (
    "status",
    "objective",
    "bound",
    "gap",
    "binaries",
    "rows",
    "solver",
    "warm_start",
    "fallback",
    "objective_kind",
    "bound_from",
    "schedule_from",
    "effort",
    "cut_by_time_limit",
    "cut_phase",
    "bound_covers",  # the order wrapper (schedulers/ordering.py): which orders the bound covers
    "order",
    "order_evaluations",
    "order_bound",
)


def plan_json(opts: CompileOptions, c: Compiled) -> dict[str, Any]:
    tg = c.training
    return {
        "poet_edge_version": __version__,
        "model": opts.model.name,
        "model_sha256": hashlib.sha256(opts.model.read_bytes()).hexdigest(),
        "device": c.profile.name,
        "ram_budget_bytes": opts.ram_bytes,
        **({"ram_banks": _banks_json(c, opts)} if len(opts.ram_banks) > 1 else {}),
        "batch": frontend.graph_batch(c.graph),  # the batch used, also where the export fixed it
        "loss": opts.loss.value,
        "lr": opts.lr,
        "optimizer": {**opts.optimizer.to_json(), "state_bytes": c.fixed.optimizer_state},
        "train": opts.train,
        "training_options": opts.training.to_json(),
        "kernels": opts.kernels,
        "input": opts.input.value,
        **({"input_compared": dict(c.input_compared)} if c.input_compared else {}),
        "params": opts.params.value,
        "stored_parameters": list(planning.stored_params(c.spec)),
        "split": opts.split,
        "tiles": c.split.summary() if c.split else None,
        **({"batch_split": c.batch.summary()} if c.batch else {}),
        "choices_compared": list(c.compared),
        "hints": list(c.hints),
        "peak_ram_bytes": c.predicted_ram_bytes,
        "simulated_peak_ram_bytes": c.sim.peak_ram_bytes,
        "fixed_ram_bytes": c.fixed.total,
        "training_graph": {
            "inputs": list(tg.inputs),
            "nodes_by_phase": {p.value: sum(n.phase == p for n in tg.nodes) for p in Phase},
            "nodes": [
                {
                    "name": n.name,
                    "op": n.op,
                    "phase": n.phase.value,
                    "inputs": list(n.inputs),
                    "outputs": list(n.outputs),
                }
                for n in tg.nodes
            ],
            "tensors": {
                t.name: {"shape": list(t.shape), "dtype": t.dtype, "role": t.role.value}
                for t in sorted(tg.tensors.values(), key=lambda t: t.name)
            },
        },
        "parameters": [
            {
                "name": p,
                "shape": list(tg.shape(p)),
                "trainable": p in tg.trainable,
                "bytes": tg.tensor(p).nbytes,
            }
            for p in sorted(tg.params)
        ],
        "problem": c.spec.to_json(),
        "schedule": {
            "solver": c.schedule.solver,
            "steps": c.schedule.to_json(),
            # solver details without timings (plan.json must not depend on the wall clock)
            "info": c.schedule.report.to_json(DETERMINISTIC_INFO),
        },
        "integrity": integrity(opts, tg, c.storage).to_json(),
        "simulation": c.sim.to_json(),
        "arena": {
            "planner": c.arena.planner,
            "arena_bytes": c.arena.arena_bytes,
            "peak_live_bytes": c.arena.peak_live_bytes,
            "overhead": round(c.arena.overhead, 6),
            "instances": [
                {"value": i.value, "offset": o, "bytes": i.size, "first_step": i.start, "last_step": i.end}
                | ({"bank": c.arena.bank(k)} if c.arena.banks else {})
                for k, (i, o) in enumerate(zip(c.arena.instances, c.arena.offsets, strict=False))
            ],
            **({"bank_bytes": list(c.arena.bank_bytes)} if c.arena.banks else {}),
        },
        "storage": c.storage.to_json(),
        # poet_predict / poet_eval_step: own schedules, replayed by the simulator, in the same arena
        "runtime_arena_bytes": c.arena_bytes,
        "inference": {m.mode: m.to_json(DETERMINISTIC_INFO) for m in c.inference},
    }


def _banks_json(c: Compiled, opts: CompileOptions) -> list[dict[str, Any]]:
    """--ram A+B: each bank's budget, the shared arena's buffer in it (``poet_arena``, then
    ``poet_arena_ccm`` in section .ccmram), and what else the linker puts there (the first bank: the fixed
    RAM, i.e. .data and .bss with the parameters, optimizer state and inputs, the heap and the stack)."""
    return [
        {
            "bytes": size,
            "arena_symbol": emit.ARENA_SYMBOLS[b],
            "section": ".bss" if b == 0 else emit.BANK_SECTION,
            "arena_bytes": c.bank_bytes[b],
            "fixed_bytes": c.fixed.total if b == 0 else 0,
            "predicted_bytes": c.bank_bytes[b] + (c.fixed.total if b == 0 else 0),
        }
        for b, size in enumerate(opts.ram_banks)
    ]


def project_files(
    opts: CompileOptions, c: Compiled, renderers: Sequence[Renderer] = ()
) -> dict[str, str | bytes | Path]:
    """Relative path -> text, bytes, or a Path to copy."""
    files: dict[str, str | bytes | Path] = dict(
        emit.generate(
            c.training,
            c.spec,
            c.schedule,
            c.arena,
            c.storage,
            {
                "model": opts.model.name,
                "predicted_ram_bytes": c.predicted_ram_bytes,
                "device": c.profile.name,
                "budget_bytes": opts.ram_bytes,
                "fixed": c.fixed,
                "sim": c.sim,
                "storage_kind": c.profile.storage.kind,
                "optimizer": opts.optimizer.kind.value,
                "optimizer_state_bytes": c.fixed.optimizer_state,
                "check_inputs": opts.check_inputs,
                "verify_paging": opts.verify_paging,
                "kernels": opts.kernels,
            },
            c.inference,
        )
    )
    files[PLAN] = text = json.dumps(plan_json(opts, c), indent=1) + "\n"
    for render in renderers:
        files.update(render(json.loads(text)))
    for h in sorted((RUNTIME_C / "include" / "poet").glob("*.h")):
        files[f"runtime/include/poet/{h.name}"] = h
    for k in emit.kernel_sources(c.training, opts.kernels, [m.graph for m in c.inference]):
        files[f"runtime/src/kernels/{k}.c"] = emit.kernel_file(k, opts.kernels)
    files["harness/main.c"] = RUNTIME_C / "harness" / "main.c"
    files["target/poet_target.h"] = TARGETS / "common" / "poet_target.h"
    files["target/poet_fault.h"] = TARGETS / "common" / "poet_fault.h"
    files["target/platform_host.c"] = TARGETS / "host" / "platform_host.c"
    return files


def plan_input(
    opts: CompileOptions,
    log: Callable[[str], None] = lambda s: None,
    report: Callable[[str], None] = lambda s: None,
    limit: PhaseLimit | None = None,
) -> tuple[Compiled, CompileOptions]:
    """:func:`plan_training`, and its options with ``input`` the batch's place. ``--input auto``
    (``opts.input_auto``): the batch in RAM first; in storage too where that may cost less, which is where
    the step in RAM adds more by recomputing and paging than writing the batch to storage and reading it
    back once costs (the step with the batch in storage costs at least that more than every node once), or
    where the batch in RAM does not fit. The cheaper is kept (RAM on ties), both costs in plan.json's
    ``input_compared``; a phase's --time-limit error is raised as it comes."""
    if not opts.input_auto:
        return plan_training(opts, log, report, limit), opts
    ram = replace(opts, input=planning.InputPlace.RAM)
    storage = replace(opts, input=planning.InputPlace.STORAGE)
    warned: set[str] = set()  # each warning once
    in_ram: Compiled | None = None
    ram_error: PoetError | None = None
    try:
        in_ram = plan_training(ram, log, report, limit, warned)
    except PhaseTimeout:
        raise
    except PoetError as e:
        ram_error = e
        log(f"--input auto: with the batch in RAM: {e}")
    if in_ram is not None:
        added, moving = _batch_moves(in_ram, ram)
        if added <= moving:
            log("--input auto: the batch stays in RAM (recomputing and paging add less than moving it costs)")
            return _placed_input(in_ram, ram, None), ram
    log("--input auto: planning with the batch in storage" + (" too" if in_ram is not None else ""))
    try:
        in_storage = plan_training(storage, log, report, limit, warned)
    except PhaseTimeout:
        raise
    except PoetError as f:
        if in_ram is None:
            raise PoetError(
                f"--input auto: with the batch in RAM: {ram_error}; in storage: {f}", f.exit_code
            ) from f
        log(f"--input auto: with the batch in storage: {f}; the batch stays in RAM")
        return _placed_input(in_ram, ram, None), ram
    if in_ram is None:
        return _placed_input(in_storage, storage, None), storage
    cost, other = _objective(in_ram, ram), _objective(in_storage, storage)
    unit = "ms" if opts.milp.objective == "latency" else "mJ"
    log(f"--input auto: in RAM {cost * 1e3:.3f} {unit}, in storage {other * 1e3:.3f} {unit}")
    if other < cost:
        return _placed_input(in_storage, storage, cost), storage
    return _placed_input(in_ram, ram, other), ram


def _placed_input(c: Compiled, opts: CompileOptions, other: float | None) -> Compiled:
    """``c``, the compile with the batch where ``opts.input`` says, with ``input_compared``: its cost and
    ``other``, the other placement's (None: not planned)."""
    costs = {
        opts.input.value: _objective(c, opts),
        "ram" if opts.input.value == "storage" else "storage": other,
    }
    return replace(c, input_compared=tuple((k, costs[k]) for k in ("ram", "storage")))


def compile_model(
    opts: CompileOptions,
    log: Callable[[str], None] = lambda s: None,
    renderers: Sequence[Renderer] = (),
    phase: Callable[[str], None] = lambda s: None,
    limit: PhaseLimit | None = None,
) -> Compiled:
    """Plans and writes the project; with ``opts.time_limit_s`` each phase stops the compile with a
    PoetError naming it once it runs longer (``limit``: the clock to measure it with, for tests)."""
    check_output(opts.out)  # before the solve: -o at a file, a foreign folder, an unwritable place
    limit = limit or PhaseLimit(opts.time_limit_s)
    c, opts = plan_input(opts, log, phase, limit)
    limit.begin("codegen")
    phase("codegen")
    files = project_files(opts, c, renderers)
    limit.begin(None)  # nothing is written once the limit is passed
    write_project(opts.out, files)
    return c
