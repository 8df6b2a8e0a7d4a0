"""The progress bar a command shows on a terminal while it measures (rich, on stderr)."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks.base import Progress
from clusterbench.text import terminal_text


class RichProgress(Progress):
    """A progress bar with ETA on stderr. Used only when stderr is a terminal and not --json."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress as RP, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._rp = RP(TextColumn("{task.description:<14}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f}"),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                      console=Console(stderr=True), transient=True)
        self._task: Any = None
        self._total: Any = None

    def __enter__(self) -> "RichProgress":
        self._rp.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._rp.stop()

    def start(self, description: str, total: float) -> None:
        if self._task is not None:
            self._rp.remove_task(self._task)
        self._task = self._rp.add_task(description, total=max(total, 1))

    def advance(self, amount: float = 1.0) -> None:
        if self._task is not None:
            self._rp.advance(self._task, amount)

    def note(self, text: str) -> None:
        self._rp.console.print(terminal_text(text), markup=False, highlight=False)

    def overall(self, seconds: float) -> None:
        self._total = self._rp.add_task("total (est.)", total=max(seconds, 1.0))

    def overall_done(self, seconds: float) -> None:
        if self._total is not None:
            self._rp.update(self._total, completed=seconds)
