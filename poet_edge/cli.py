"""The `poet` command. Each subcommand lives in poet_edge/commands/<name>.py (add_parser + run).

Errors: :func:`main` is the one place an exception ends a command. A :class:`PoetError` (bad input,
a refused option, a model poet cannot take) prints its one-line message. An ``OSError`` (a file that
cannot be read or written, a full disk, a read-only file system) is the user's environment, not a
bug: one line naming the file. SIGTERM, SIGHUP and SIGINT raise :class:`Interrupted` in the main
thread, so every ``finally`` runs (child processes such as QEMU or the proof processes are stopped,
temporary folders removed, a half-written output folder deleted); later signals are ignored until
the cleanup ends; the exit code is 128 + the signal. Anything else is a bug in poet-edge: it prints
"poet: internal error" with where to report it and exits 70; ``POET_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from poet_edge import __version__, highs
from poet_edge.errors import PoetError

COMMANDS = ("compile", "simulate", "run", "inspect", "profiles", "calibrate", "sweep", "solve")
REPORT_TO = "the poet-edge issue tracker"
INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

DESCRIPTION = """poet-edge compiles the training of an ONNX model for a microcontroller: it builds
the training graph, schedules recomputation and paging so one training step fits the RAM budget,
plans a static arena and emits a C99 project. Typical use:

  poet compile model.onnx --device cortex-m4 --ram 256KB -o out
  poet simulate out
  poet run out --target host --steps 10
"""


class Interrupted(KeyboardInterrupt):
    """A termination signal, raised in the main thread (a KeyboardInterrupt, so ``except Exception``
    does not catch it and every ``finally`` runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="poet", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"poet-edge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = importlib.import_module(f"poet_edge.commands.{name}")
        module.add_parser(sub)
        sub.choices[name].set_defaults(run=module.run)
    return p


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    for s in SIGNALS:  # the cleanup the exception starts must not be cut short by a second signal
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """Turns SIGTERM/SIGINT/SIGHUP into :class:`Interrupted` while the command runs (main thread only;
    the previous handlers come back afterwards)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, _raise_interrupted) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def os_error_message(e: OSError) -> str:
    """One line for a failed file operation: what failed, on which file."""
    what = e.strerror or type(e).__name__
    files = [f for f in (e.filename, e.filename2) if f is not None]
    return f"{what}: {' -> '.join(map(str, files))}" if files else f"{what} ({e})"


def entry() -> None:
    """The `poet` command and `python -m poet_edge`: :func:`main`, then the exit. Where HiGHS was loaded,
    the process ends without the interpreter's teardown, which can destroy HiGHS's thread pool under a run
    still going (a signal came during a solve, or the watchdog left one): a SIGTERM during a compile then
    aborted (SIGABRT, 'terminate called without an active exception') instead of exiting 143. Every file is
    closed and every child process ended by then (``main`` cleans up), and the output is flushed."""
    code = main()
    if highs.loaded():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    try:
        with signals_raise():
            args = parser().parse_args(argv)  # an option's own parser (--ram, --gap) may raise PoetError
            return int(args.run(args) or 0)
    except PoetError as e:
        print(f"poet: error: {e}", file=sys.stderr)
        return e.exit_code
    except Interrupted as e:
        print(f"poet: interrupted ({e}); stopped and cleaned up", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("poet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `poet simulate out | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 141
    except OSError as e:
        print(f"poet: error: {os_error_message(e)}", file=sys.stderr)
        return 1
    except MemoryError:
        print("poet: error: out of memory", file=sys.stderr)
        return 1
    except Exception as e:
        if os.environ.get("POET_DEBUG"):
            raise
        print(internal_error(e), file=sys.stderr)
        return INTERNAL_ERROR_EXIT


def internal_error(e: Exception) -> str:
    """The one line a bug in poet-edge prints: the exception, where it was raised, where to report it."""
    where = e.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    at = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where else ""
    first = (str(e).splitlines() or [""])[0]
    return (
        f"poet: internal error: {type(e).__name__}: {first}{at}; this is a bug in poet-edge, please report "
        f"it with the command line and its input files to {REPORT_TO} (POET_DEBUG=1 shows the traceback)"
    )


if __name__ == "__main__":
    sys.exit(main())
