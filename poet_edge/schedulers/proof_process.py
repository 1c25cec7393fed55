"""Bound computations of scheduler "scale" in a child process that is stopped at its deadline: the
split model's cutoff proof (:func:`prove`) and the interval model's refinement (:func:`start_refine`,
which runs beside the parent's own search).

HiGHS checks its time limit between root cut rounds, and one round on a large model can take seconds:
on mobilenetv2_035 with every parameter trained, at 50% of its peak, the split model (65,175 rows,
935,161 nonzeros after presolve, 2 threads) spent 4.8 s -> 9.9 s in one round, and given 9, 10 or 11 s
the solve took 2.2, 3.6 and 2.1 s longer; interrupt callbacks are not called inside a round. A child
process can be stopped at any moment: it then gives the last bound it reported. And HiGHS's MIP search
keeps one core busy: a child uses the machine's second core while the parent searches (the interval
model's refinement, :func:`start_refine`). Run as ``python -m poet_edge.schedulers.proof_process IN
OUT``: reads the job's kind and pickled arguments from IN, writes the pickled result to OUT, and each
new bound to its standard output.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from poet_edge.schedulers.highs_run import TIME_LIMIT, rows_csr
from poet_edge.schedulers.segment_lp import _Lp, _solve, _Solved

if TYPE_CHECKING:
    from poet_edge.problem import SchedulingProblem
    from poet_edge.schedulers.engine import Analysis
    from poet_edge.schedulers.interval_bound import Refined
    from poet_edge.schedulers.scale import ScaleOptions

GRACE = 0.2  # seconds the child gets past its time limit to write what it found before it is stopped


@dataclass
class Job:
    """A child process at work: its deadline (``time.time()``), the last bound it reported."""

    child: subprocess.Popen[str]
    tmp: tempfile.TemporaryDirectory[str]
    deadline: float
    bound: list[float] = field(default_factory=lambda: [0.0])
    reader: threading.Thread | None = None

    def done(self) -> bool:
        return self.child.poll() is not None

    def stop(self) -> None:
        """Stops the child now if it still runs and removes its files (its result is not needed)."""
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        if self.reader is not None:
            self.reader.join()
        self.tmp.cleanup()

    def finish(self) -> tuple[Any, bool]:
        """Waits for the child until the deadline plus ``GRACE``, stops it then; returns (its result,
        None when it was stopped; stopped). Raises RuntimeError when the child failed."""
        folder = Path(self.tmp.name)
        try:
            try:
                self.child.wait(timeout=max(0.0, self.deadline + GRACE - time.time()))
            except subprocess.TimeoutExpired:
                return None, True
            out = folder / "out.pkl"
            if self.child.returncode != 0 or not out.exists():
                why = (folder / "err.txt").read_text().strip()[-2000:]
                raise RuntimeError(f"the proof process failed (exit {self.child.returncode}): {why}")
            return pickle.loads(out.read_bytes()), False
        finally:
            self.stop()  # the bound read last (the reader joined), the files removed


def _start(kind: str, args: tuple[Any, ...], began: float, time_limit: float) -> Job:
    """Starts the child on job ``kind`` with ``args``; its deadline is ``began + time_limit``."""
    tmp = tempfile.TemporaryDirectory(prefix="poet-proof-")
    folder = Path(tmp.name)
    src, out = folder / "in.pkl", folder / "out.pkl"
    src.write_bytes(pickle.dumps((kind, args, began, time_limit), pickle.HIGHEST_PROTOCOL))
    with (folder / "err.txt").open("w") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, str(src), str(out)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=_env(),
        )
    job = Job(child, tmp, began + time_limit)
    job.reader = threading.Thread(target=_read_bounds, args=(child.stdout, job.bound), daemon=True)
    job.reader.start()
    return job


def prove(lp: _Lp, time_limit: float, options: ScaleOptions, cutoff: float) -> _Solved:
    """``_solve(lp, time_limit, options, cutoff=cutoff)`` in a child process, stopped at most ``GRACE``
    seconds after ``time_limit``; then the result has the last dual bound HiGHS reported (0 without
    one) and no point. Raises RuntimeError when the child fails."""
    slim = _Lp(cost=lp.cost, cont=lp.cont, bounds=lp.bounds, csr=rows_csr(lp.rows))  # 10x faster to load
    job = _start("proof", (slim, _quiet(options), cutoff), time.time(), time_limit)
    solved, stopped = job.finish()
    if stopped:
        return _Solved(TIME_LIMIT, True, False, None, max(0.0, job.bound[0]), None)
    assert isinstance(solved, _Solved)
    return solved


def start_refine(
    problem: SchedulingProblem,
    an: Analysis,
    latency: bool,
    norm: float,
    options: ScaleOptions,
    seconds: float,
) -> Job:
    """:func:`poet_edge.schedulers.interval_bound.refine` for at most ``seconds``, started in a child
    process, on one thread; ``Job.finish`` gives its ``Refined`` (None when it was stopped: then
    ``Job.bound`` has the last round's bound)."""
    quiet = replace(_quiet(options), threads=1)
    return _start("refine", (problem, an, latency, norm, quiet), time.time(), seconds)


def refined(job: Job) -> tuple[Refined | None, float]:
    """The refinement's result (None when the child was stopped) and its bound (the last reported)."""
    out, _ = job.finish()
    return out, out.bound if out is not None else max(0.0, job.bound[0])


def _quiet(options: ScaleOptions) -> ScaleOptions:
    return replace(options, msg=False, on_progress=None)  # its standard output carries the bounds


def _env() -> dict[str, str]:
    """The environment with this package's parent directory first on PYTHONPATH, so the child imports
    the same poet_edge as this process (also when it is not installed, e.g. run from a checkout)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _read_bounds(stream: IO[str] | None, bound: list[float]) -> None:
    """Keeps the last bound the child wrote (it writes each only when it is higher than the last)."""
    if stream is None:
        return
    for line in stream:
        try:
            bound[0] = float(line)
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
    if kind == "proof":
        lp, options, cutoff = args
        result = _solve(lp, left, options, cutoff=cutoff, on_bound=tell)
    else:
        from poet_edge.schedulers.interval_bound import refine

        problem, an, latency, norm, options = args
        result = refine(problem, an, latency, norm, options, left, on_bound=tell)
    tmp = out.with_suffix(".part")
    tmp.write_bytes(pickle.dumps(result, pickle.HIGHEST_PROTOCOL))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
