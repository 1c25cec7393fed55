"""Progress reporting for the slow parts of ``poet`` (compile phases, and solver progress).

One :class:`Progress` object per command run. It writes to one stream (stdout by default) and adapts
to it: on a terminal the current phase and the solver's latest numbers share one line that is
rewritten in place with ``\\r``; on a pipe or a file it prints plain lines, and solver updates at most
every ``plain_interval_s`` seconds so logs stay short.

Verbosity (:class:`Verbosity`): ``QUIET`` prints nothing at all (errors go to stderr elsewhere);
``NORMAL`` prints messages (:meth:`Progress.info`), the live status line on a terminal and throttled
solver updates; ``VERBOSE`` also prints every finished phase with its duration, every solver update
and :meth:`Progress.detail` messages, each on its own line.

API::

    from poet_edge.progress import Progress
    p = Progress.from_flags(quiet=args.quiet, verbose=args.verbose)
    p.phase("schedule")                     # ends the previous phase (timed), starts a new one
    p.update(incumbent=3.1e-3, bound=2.9e-3, note="nodes 1200")  # a solver's progress; gap is derived
    p.update(gap=0.05)                      # or give the gap (a fraction) directly
    p.info("training graph: 24 nodes")      # a message for the user (hidden when quiet)
    p.detail("presolve removed 40 rows")    # only with --verbose
    p.done()                                # ends the last phase and clears the status line

Every method is cheap and safe to call often: updates on a terminal are redrawn at most every
``min_redraw_s`` seconds. ``phase`` returns ``None`` and can also be passed where a plain
``Callable[[str], None]`` is expected (``poet_edge.compiler.compile_model(..., phase=p.phase)``);
so can ``info`` (the ``log`` argument). ``Progress.phases`` lists ``(name, seconds)`` of finished
phases, e.g. for a summary or a test. The clock is injectable for tests.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from poet_edge.errors import PoetError


class Verbosity(enum.IntEnum):
    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


@dataclass(frozen=True)
class SolverStatus:
    """The latest numbers a solver reported (any may be unknown)."""

    incumbent: float | None = None
    bound: float | None = None
    gap: float | None = None
    note: str = ""

    def text(self) -> str:
        parts = []
        if self.incumbent is not None:
            parts.append(f"incumbent {self.incumbent:.6g}")
        if self.bound is not None:
            parts.append(f"bound {self.bound:.6g}")
        if self.gap is not None:
            parts.append(f"gap {100 * self.gap:.2f}%")
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)


def relative_gap(incumbent: float | None, bound: float | None) -> float | None:
    """(incumbent - bound) / |incumbent|, the usual MIP gap; None when either is unknown."""
    if incumbent is None or bound is None:
        return None
    if incumbent == bound:
        return 0.0
    return abs(incumbent - bound) / max(abs(incumbent), 1e-300)


@dataclass
class Progress:
    """Reports phases and solver progress on ``stream`` (see the module docstring for the API)."""

    verbosity: Verbosity = Verbosity.NORMAL
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    clock: Callable[[], float] = time.monotonic
    min_redraw_s: float = 0.1
    plain_interval_s: float = 5.0
    phases: list[tuple[str, float]] = field(default_factory=list)
    _current: str | None = None
    _phase_start: float = 0.0
    _last_draw: float = float("-inf")
    _status_width: int = 0

    @staticmethod
    def from_flags(quiet: bool = False, verbose: bool = False, stream: TextIO | None = None) -> Progress:
        level = Verbosity.QUIET if quiet else Verbosity.VERBOSE if verbose else Verbosity.NORMAL
        return Progress(level, stream if stream is not None else sys.stdout)

    @property
    def live(self) -> bool:
        """True when status lines are redrawn in place (a terminal, not quiet)."""
        isatty = getattr(self.stream, "isatty", None)
        return self.verbosity >= Verbosity.NORMAL and bool(isatty and isatty())

    def phase(self, name: str) -> None:
        """End the current phase (recording its duration) and start phase ``name``."""
        self._end_phase()
        self._current, self._phase_start = name, self.clock()
        self._last_draw = float("-inf")
        if self.live:
            self._draw(f"{name} ...", force=True)

    def update(
        self,
        incumbent: float | None = None,
        bound: float | None = None,
        gap: float | None = None,
        note: str = "",
    ) -> None:
        """A solver's progress inside the current phase: best solution so far, best bound, gap."""
        status = SolverStatus(incumbent, bound, relative_gap(incumbent, bound) if gap is None else gap, note)
        now = self.clock()
        line = f"{self._current or 'solve'} {now - self._phase_start:7.1f} s  {status.text()}".rstrip()
        if self.verbosity >= Verbosity.VERBOSE:
            self._line(line)
        elif self.live:
            self._draw(line)
        elif self.verbosity >= Verbosity.NORMAL and now - self._last_draw >= self.plain_interval_s:
            self._last_draw = now
            self._line(line)

    def solver(self, elapsed: float, incumbent: float | None, bound: float | None, gap: float | None) -> None:
        """:meth:`update` as a solver's progress callback (``on_progress``: the seconds elapsed, which the
        phase's own clock already shows, then the incumbent, the bound and the gap)."""
        self.update(incumbent=incumbent, bound=bound, gap=gap)

    def info(self, message: str) -> None:
        """A message for the user; hidden when quiet."""
        if self.verbosity >= Verbosity.NORMAL:
            self._line(message)

    def detail(self, message: str) -> None:
        """A message shown only with --verbose."""
        if self.verbosity >= Verbosity.VERBOSE:
            self._line(message)

    def done(self) -> None:
        """End the last phase and clear the status line."""
        self._end_phase()
        self._clear()

    def _end_phase(self) -> None:
        if self._current is None:
            return
        seconds = self.clock() - self._phase_start
        self.phases.append((self._current, seconds))
        if self.verbosity >= Verbosity.VERBOSE:
            self._line(f"  {self._current:<16s} {seconds:8.3f} s")
        self._current = None

    def _draw(self, text: str, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._last_draw < self.min_redraw_s:
            return
        self._last_draw = now
        pad = " " * max(0, self._status_width - len(text))
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()
        self._status_width = len(text)

    def _clear(self) -> None:
        if self._status_width:
            self.stream.write("\r" + " " * self._status_width + "\r")
            self.stream.flush()
            self._status_width = 0

    def _line(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        if self.live and self._current is not None:
            self._draw(f"{self._current} ...", force=True)


PHASE_HINTS = {
    "load": "raise --time-limit; loading takes well under a second, check the model with 'poet inspect'",
    "training graph": "raise --time-limit, or train fewer parameters (--train bias or last:N)",
    "schedule": "the scheduler did not stop at its limit: raise --time-limit, or use --scheduler greedy",
    "arena": "raise --time-limit, or give a larger --ram (less recomputation, fewer arena instances)",
    "simulate": "raise --time-limit, or give a larger --ram (a shorter schedule to replay)",
    "codegen": "raise --time-limit, or give a larger --ram (a shorter schedule to emit)",
}


class PhaseTimeout(PoetError):
    """:meth:`PhaseLimit.check`'s stop: ``phase`` ran past its limit."""

    def __init__(self, message: str, phase: str) -> None:
        super().__init__(message)
        self.phase = phase


@dataclass
class PhaseLimit:
    """A safety stop: each compile phase may run ``seconds``; past that, :meth:`check` raises a PoetError
    that names the phase and says what to do. The ``schedule`` phase may run ``schedule_factor`` times
    as long: the scheduler bounds its own search by the same limit, so this only catches one that does
    not stop. It only ever stops a compile, never changes what a phase computes. ``seconds`` None: no
    limit. The clock is injectable for tests."""

    seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    schedule_factor: float = 2.0
    current: str | None = None
    _start: float = 0.0

    def begin(self, name: str | None) -> None:
        """Checks the phase that ends, then starts phase ``name`` (None: the last phase ended)."""
        self.check()
        self.current, self._start = name, self.clock()

    def allowed(self, name: str) -> float:
        assert self.seconds is not None
        return self.seconds * (self.schedule_factor if name == "schedule" else 1.0)

    def check(self) -> None:
        """Raises if the current phase has run longer than it may; cheap, call it often."""
        if self.seconds is None or self.current is None:
            return
        took = self.clock() - self._start
        if took > self.allowed(self.current):
            hint = PHASE_HINTS.get(self.current, "raise --time-limit")
            phase, self.current = self.current, None  # the stop ends the phase: caught, it is reported once
            raise PhaseTimeout(
                f"compile stopped in the {phase} phase after {took:.1f} s, over its limit of "
                f"{self.allowed(phase):g} s (--time-limit {self.seconds:g}); {hint}",
                phase,
            )
