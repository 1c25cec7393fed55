"""Work of scheduler "scale" in child processes that run beside the parent's search and are stopped at
their deadline: the interval model's refinement (:func:`start_refine`), the split model with its cutoff
proofs (:func:`start_split`), and any picklable call (:func:`start_call`: scale's run on the given order
beside the run on the chosen one).

HiGHS's MIP search keeps one core busy, so a child uses the machine's second core while the parent
searches. And HiGHS checks its time limit between root cut rounds, and one round on a large model can
take seconds (the split model of mobilenetv2_035 with every parameter trained, at 50% of its peak,
65,175 rows and 935,161 nonzeros after presolve, is one: a time limit that falls inside a round is
passed by seconds); interrupt callbacks are not called inside a round. A child can be stopped at any
moment: it then gives the last bound it reported. Run as
``python -m poet_edge.schedulers.proof_process IN OUT``: reads the job's kind and pickled arguments
from IN, writes the pickled result to OUT, and each new bound to its standard output (the split
model's child reads its cutoffs from its standard input).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from poet_edge.errors import PoetError
from poet_edge.highs import TIME_LIMIT
from poet_edge.schedulers.lp_model import LpResult, solve_lp

if TYPE_CHECKING:
    from poet_edge.schedulers.interval_bound import Refined
    from poet_edge.schedulers.scale import ScaleOptions
    from poet_edge.schedulers.segment_strict import SplitModels

GRACE = 0.2  # seconds the child gets past its time limit to write what it found before it is stopped


@dataclass
class Job:
    """A child process at work: its deadline (``time.time()``), the last bound it reported; ``grace``:
    the seconds past the deadline it gets to write what it found (default ``GRACE``)."""

    child: subprocess.Popen[str]
    tmp: tempfile.TemporaryDirectory[str]
    deadline: float
    bounds: list[float] = field(default_factory=list)  # each bound the child reported, in order (rising)
    reader: threading.Thread | None = None
    grace: float = GRACE

    @property
    def last(self) -> float:
        """The last bound the child reported (0 before any)."""
        return max(0.0, self.bounds[-1]) if self.bounds else 0.0

    def done(self) -> bool:
        return self.child.poll() is not None

    def stop(self) -> None:
        """Stops the child now if it still runs and removes its files (its result is not needed)."""
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        if self.child.stdin is not None:
            try:
                self.child.stdin.close()
            except BrokenPipeError:
                pass
        if self.reader is not None:
            self.reader.join()
        self.tmp.cleanup()

    def finish(self) -> tuple[Any, bool]:
        """Waits for the child until the deadline plus ``grace``, stops it then; returns (its result,
        None when it was stopped; stopped). Raises RuntimeError when the child failed."""
        folder = Path(self.tmp.name)
        try:
            try:
                self.child.wait(timeout=max(0.0, self.deadline + self.grace - time.time()))
            except subprocess.TimeoutExpired:
                return None, True
            out = folder / "out.pkl"
            if self.child.returncode != 0 or not out.exists():
                why = (folder / "err.txt").read_text().strip()[-2000:]
                raise RuntimeError(f"the proof process failed (exit {self.child.returncode}): {why}")
            return pickle.loads(out.read_bytes()), False
        finally:
            self.stop()  # the bound read last (the reader joined), the files removed


def _start(
    kind: str,
    args: tuple[Any, ...],
    began: float,
    time_limit: float,
    told: bool = False,
    grace: float = GRACE,
) -> Job:
    """Starts the child on job ``kind`` with ``args``; its deadline is ``began + time_limit``, ``grace``
    the seconds past it to write its result. ``told``: its standard input is a pipe (:func:`send`), else
    closed."""
    tmp = tempfile.TemporaryDirectory(prefix="poet-proof-")
    folder = Path(tmp.name)
    src, out = folder / "in.pkl", folder / "out.pkl"
    src.write_bytes(pickle.dumps((kind, args, began, time_limit), pickle.HIGHEST_PROTOCOL))
    with (folder / "err.txt").open("w") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, str(src), str(out)],
            stdin=subprocess.PIPE if told else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=_env(),
        )
    job = Job(child, tmp, began + time_limit, grace=grace)
    job.reader = threading.Thread(target=_read_bounds, args=(child.stdout, job.bounds), daemon=True)
    job.reader.start()
    return job


def start_call(fn: Callable[..., Any], args: tuple[Any, ...], seconds: float, grace: float) -> Job:
    """``fn(*args)`` started in a child process (``fn`` and ``args`` pickled to it; a
    :class:`~poet_edge.errors.PoetError` it raises comes back as the result), stopped ``grace`` seconds
    after ``seconds``: ``fn`` is expected to keep its own time limit of ``seconds``, the stop is for a
    run that does not. ``Job.finish`` gives the result (None when the child was stopped)."""
    return _start("call", (fn, args), time.time(), seconds, grace=grace)


def start_refine(refine: Callable[..., Refined], options: ScaleOptions, seconds: float) -> Job:
    """``refine(options, seconds, on_bound=..., growth=0)`` started in a child process, on one thread,
    for at most ``seconds``: :func:`poet_edge.schedulers.interval_bound.refine` with its problem
    arguments bound (a ``functools.partial``, pickled to the child). ``Job.finish`` gives its
    ``Refined`` (None when it was stopped: then ``Job.last`` is the last round's bound). A round starts
    whenever time is left (``growth`` 0): one stopped at the deadline costs the parent nothing, it
    searches meanwhile (mobilenetv1_025 with every parameter trained at 60%: beside the split model's
    child, with ``ROUND_GROWTH`` the last round, whose point is the optimum, did not start in some
    runs)."""
    return _start("refine", (refine, replace(_quiet(options), threads=1)), time.time(), seconds)


def refined(job: Job) -> tuple[Refined | None, float]:
    """The refinement's result (None when the child was stopped) and its bound (the last reported)."""
    out, _ = job.finish()
    return out, out.bound if out is not None else job.last


def start_split(
    build: Callable[[float, ScaleOptions], SplitModels],
    options: ScaleOptions,
    seconds: float,
    nodes: int | None = None,
) -> Job:
    """``build(seconds, options)`` started in a child process, on one thread, for at most ``seconds``:
    :func:`poet_edge.schedulers.segment_strict.split_model` with its model arguments bound (a
    ``functools.partial``, pickled to the child). The child reports the LP relaxation's bound first
    (:func:`split_relaxed`), then waits for a cutoff (:func:`send`) and proves it, HiGHS told to look
    only below it (:func:`poet_edge.schedulers.lp_model.solve_lp`; result: :func:`split_proved`), on
    the strict model, then, where that has a point below the cutoff, on the split model (:func:`_split`),
    while this process searches on; it starts again on a new cutoff. ``nodes``: each proof's
    branch-and-bound nodes at most (deterministic; ``seconds`` is a safety stop)."""
    args = (build, replace(_quiet(options), threads=1), nodes)
    return _start("split", args, time.time(), seconds, told=True)


def split_relaxed(job: Job, wait: bool = False) -> float | None:
    """The split model's LP-relaxation bound, once the child of :func:`start_split` has reported it
    (None before; 0 when it ended without one). ``wait``: for it, until the child's deadline (None
    when it is not known by then)."""
    while True:
        if job.bounds:
            return max(0.0, job.bounds[0])
        if job.done() and job.reader is not None:
            job.reader.join()  # every line it wrote is read
            return max(0.0, job.bounds[0]) if job.bounds else 0.0
        if not wait or time.time() >= job.deadline:
            return None
        time.sleep(0.01)


def send(job: Job, cutoff: float) -> None:
    """Tells the child of :func:`start_split` to prove ``cutoff``: it starts the proof again when it
    was proving another."""
    assert job.child.stdin is not None
    try:
        job.child.stdin.write(f"{cutoff!r}\n")
        job.child.stdin.flush()
    except BrokenPipeError:  # it has ended (no model to prove on): split_proved says so
        pass


def split_proved(job: Job) -> LpResult:
    """The proof of the last cutoff :func:`send` gave the child of :func:`start_split`, waited for
    until its deadline: HiGHS's result (when the child was stopped, or had no model, status "Time
    limit reached", no point, and the last bound it reported)."""
    out, stopped = job.finish()
    if stopped or out is None:
        return LpResult(TIME_LIMIT, True, False, None, job.last, None)
    assert isinstance(out, LpResult)
    return out


def _quiet(options: ScaleOptions) -> ScaleOptions:
    return replace(options, msg=False, on_progress=None)  # its standard output carries the bounds


def _env() -> dict[str, str]:
    """The environment with this package's parent directory first on PYTHONPATH, so the child imports
    the same poet_edge as this process (also when it is not installed, e.g. run from a checkout)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _read_bounds(stream: IO[str] | None, bounds: list[float]) -> None:
    """Appends each bound the child writes (it writes one only when it is higher than the last)."""
    if stream is None:
        return
    for line in stream:
        try:
            bounds.append(float(line))
        except ValueError:  # HiGHS writes nothing there with its output off: ignore whatever else comes
            continue


def main(argv: list[str]) -> int:
    src, out = Path(argv[0]), Path(argv[1])
    kind, args, began, time_limit = pickle.loads(src.read_bytes())
    last = [float("-inf")]

    def tell(bound: float) -> None:
        if bound > last[0]:
            last[0] = bound
            print(repr(bound), flush=True)

    left = time_limit - (time.time() - began)
    result: object
    if kind == "split":
        result = _split(args, began + time_limit, tell)
    elif kind == "call":
        fn, call_args = args
        try:
            result = fn(*call_args)
        except PoetError as e:
            result = PoetError(str(e), e.exit_code)
    else:
        refine, options = args
        result = refine(options, left, on_bound=tell, growth=0.0)
    tmp = out.with_suffix(".part")
    tmp.write_bytes(pickle.dumps(result, pickle.HIGHEST_PROTOCOL))
    tmp.replace(out)
    return 0


def _split(args: tuple[Any, ...], deadline: float, tell: Callable[[float], None]) -> LpResult | None:
    """The child of :func:`start_split`: the strict model and its relaxation's bound (told first), then
    the proof of the last cutoff read from standard input, started again whenever a new one comes:
    on the strict model, until its first point below the cutoff (reduced costs from the relaxation:
    its LP is not solved again); from then on, on the split model (:meth:`SplitModels.split`, built
    then). The strict model alone is the faster proof where it holds (mobilenetv2_035 with every
    parameter trained, at 1.1x its floor and at 50%, against the split model with its build); where it
    fails it fails within seconds (bias-trained bert_tiny at 50%: it finds a point below the cutoff
    quickly, and the split model then proves the cutoff). None without a model or a cutoff."""
    build, options, nodes = args
    cutoffs: list[float] = []
    came = threading.Event()

    def listen() -> None:
        for line in sys.stdin:
            cutoffs.append(float(line))
            came.set()
        came.set()  # the end of the input: no more

    threading.Thread(target=listen, daemon=True).start()
    models: SplitModels = build(deadline - time.time(), options)
    tell(models.bound)
    if models.strict is None:
        return None
    came.wait()
    lp, reduced, solved = models.strict, models.reduced, None
    while cutoffs and time.time() < deadline:
        cutoff = cutoffs[-1]
        newer = partial(_newer, cutoffs, cutoff)
        strict = lp is models.strict
        left = deadline - time.time()
        solved = solve_lp(
            lp,
            left,
            options,
            cutoff=cutoff,
            on_bound=tell,
            stop=newer,
            reduced=reduced,
            first_point=strict,
            nodes=nodes,
        )
        if newer():
            continue
        if not (strict and solved.objective is not None and solved.objective < cutoff):
            break
        split = models.split()  # the strict model has a point below the cutoff
        if split is None or split is models.strict:
            break
        lp, reduced = split, None
    return solved


def _newer(cutoffs: list[float], cutoff: float) -> bool:
    return cutoffs[-1] != cutoff


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
