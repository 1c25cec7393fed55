"""A cutoff proof on a segment model (:func:`poet_edge.schedulers.segment_lp._solve`) in a child
process that is stopped at its deadline.

HiGHS checks its time limit between root cut rounds, and one round on a large model can take seconds:
on mobilenetv2_035 with every parameter trained, at 50% of its peak, the split model (65,175 rows,
935,161 nonzeros after presolve, 2 threads) spent 4.8 s -> 9.9 s in one round, and given 9, 10 or 11 s
the solve took 2.2, 3.6 and 2.1 s longer; interrupt callbacks are not called inside a round. A child
process can be stopped at any moment: the proof then keeps the last dual bound HiGHS reported
(:func:`prove`). Run as ``python -m poet_edge.schedulers.proof_process IN OUT``: reads the pickled
arguments from IN, writes the pickled result to OUT, and each new dual bound to its standard output.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from poet_edge.schedulers.highs_run import TIME_LIMIT, rows_csr
from poet_edge.schedulers.segment_lp import _Lp, _solve, _Solved

if TYPE_CHECKING:
    from poet_edge.schedulers.scale import ScaleOptions

GRACE = 0.2  # seconds the child gets past its time limit to write what it found before it is stopped


def prove(lp: _Lp, time_limit: float, options: ScaleOptions, cutoff: float) -> _Solved:
    """``_solve(lp, time_limit, options, cutoff=cutoff)`` in a child process, stopped at most ``GRACE``
    seconds after ``time_limit``; then the result has the last dual bound HiGHS reported (0 without
    one) and no point. Raises RuntimeError when the child fails."""
    began = time.time()
    quiet = replace(options, msg=False, on_progress=None)  # its standard output carries the bounds
    with tempfile.TemporaryDirectory(prefix="poet-proof-") as tmp:
        src, out, err = Path(tmp) / "in.pkl", Path(tmp) / "out.pkl", Path(tmp) / "err.txt"
        slim = _Lp(cost=lp.cost, cont=lp.cont, bounds=lp.bounds, csr=rows_csr(lp.rows))  # 10x faster to load
        src.write_bytes(pickle.dumps((slim, time_limit, quiet, cutoff, began), pickle.HIGHEST_PROTOCOL))
        with err.open("w") as errors:
            child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(src), str(out)],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=_env(),
            )
            bound = [0.0]
            reader = threading.Thread(target=_read_bounds, args=(child.stdout, bound), daemon=True)
            reader.start()
            stopped = False
            try:
                child.wait(timeout=max(0.0, began + time_limit + GRACE - time.time()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                stopped = True
            reader.join()
        if stopped:
            return _Solved(TIME_LIMIT, True, False, None, max(0.0, bound[0]), None)
        if child.returncode != 0 or not out.exists():
            why = err.read_text().strip()[-2000:]
            raise RuntimeError(f"the proof process failed (exit {child.returncode}): {why}")
        solved: _Solved = pickle.loads(out.read_bytes())
        return solved


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
    lp, time_limit, options, cutoff, began = pickle.loads(src.read_bytes())
    last = [float("-inf")]

    def tell(bound: float) -> None:
        if bound > last[0]:
            last[0] = bound
            print(repr(bound), flush=True)

    left = time_limit - (time.time() - began)
    solved = _solve(lp, left, options, cutoff=cutoff, on_bound=tell)
    tmp = out.with_suffix(".part")
    tmp.write_bytes(pickle.dumps(solved, pickle.HIGHEST_PROTOCOL))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
