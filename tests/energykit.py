"""Helpers shared by tests/unit/test_energy.py (pure tests) and tests/integration/test_energy.py
(tests that start processes)."""
from __future__ import annotations

import time
from pathlib import Path


# -- energy/figures.py -----------------------------------------------------------------------
def _step_log(t_step: float, start: float, end: float, dt: float = 0.1, low: float = 10.0, high: float = 30.0):
    """A meter logging every dt seconds: ``low`` W before t_step, ``high`` W from it."""
    n = int(round((end - start) / dt))
    times = [start + i * dt for i in range(n + 1)]
    return times, [low if t < t_step else high for t in times]


def _write_step_csv(path: Path, t_step: float, start: float, end: float, iso: bool = False, sep: str = ",",
                    header: str = "timestamp,watts") -> None:
    times, watts = _step_log(t_step, start, end)
    rows = [header.replace(",", sep)]
    for t, w in zip(times, watts):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f"{t % 1:.3f}"[1:] + "Z" if iso else f"{t:.3f}"
        rows.append(f"{stamp}{sep}{w}")
    path.write_text("\n".join(rows) + "\n")
