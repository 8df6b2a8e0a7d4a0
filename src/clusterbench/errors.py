"""Errors a user can act on: each carries a one-line message naming the problem and the fix."""
from __future__ import annotations


class ClusterbenchError(Exception):
    """A problem the user can fix. ``str(err)`` is the one-line message the CLI prints."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem}; {fix}")


class UsageError(ClusterbenchError):
    """Bad option or parameter value."""


class EnvironmentProblem(ClusterbenchError):
    """A missing compiler, library or tool, or an unusable machine setting."""

    exit_code = 3


class KernelFailed(ClusterbenchError):
    """A kernel crashed, was killed, timed out or failed its own validation."""

    exit_code = 4


class StoreError(ClusterbenchError):
    """The results store cannot be opened, read or written."""

    exit_code = 5
