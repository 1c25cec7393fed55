"""The one exception type the command line turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class PoetError(Exception):
    """A user-facing error: the message is printed as is, the exit code is ``exit_code``."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class CutError(PoetError):
    """No result before the safety stop (``--time-limit``) cut the run: a longer limit may give one."""
