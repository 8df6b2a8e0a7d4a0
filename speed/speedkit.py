"""What the speed scripts share: the raw log (its default name, a log every line is printed to and appended
to, a log written at the end), and the machine in one line (cpu model, load). Imported by the scripts of
this folder (a script's own folder is on its import path); it measures nothing itself.
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def log_file(given: str | None, name: str) -> Path:
    """``given`` (a script's ``--log``), else ``speed/results-<today>-<name>.txt``."""
    return Path(given) if given else REPO / "speed" / f"results-{time.strftime('%Y-%m-%d')}-{name}.txt"


class RawLog:
    """A raw log written as it goes: each line printed and appended to ``path`` (opened with ``mode``),
    flushed, so a run cut short keeps what it said. Without a path the lines are only printed."""

    def __init__(self, path: Path | str | None, mode: str = "a") -> None:
        self.path = Path(path) if path else None
        self._file = open(self.path, mode) if self.path else None

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()


def save_log(path: Path, lines: list[str], label: str = "raw log") -> None:
    """Write a log gathered in memory at the end of a script, and say where it is."""
    path.write_text("\n".join(lines) + "\n")
    print(f"{label}: {path}")


def cpu_model() -> str:
    """The cpu's model name from /proc/cpuinfo (the architecture where it has none)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
