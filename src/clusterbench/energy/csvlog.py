"""``csv:FILE``: a power log a meter writes (USB meters and smart plugs log CSV), read after each
benchmark; a log that does not cover a phase leaves that phase's energy missing."""
from __future__ import annotations

import csv
import io
import math
import os
import re
from datetime import datetime
from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.energy.source import Source
from clusterbench.energy.spec import Spec
from clusterbench.errors import UsageError
from clusterbench.files import printable

#: how long to wait for a CSV log to reach the end of a phase before calling it not covered
CSV_GRACE_S = 3.0
_TIME_COLS = ("time", "timestamp")
_POWER_COLS = ("watts", "power", "w")


def _column(name: str) -> str:
    n = name.strip().strip('"').strip().lower()
    n = re.sub(r"\s*[\(\[]\s*w\s*[\)\]]$", "", n)  # "power (W)", "power [W]"
    n = re.sub(r"_w$", "", n)  # "power_w"
    return n


def parse_time(text: str) -> float:
    """Unix seconds, or ISO 8601 (an offset or Z; none: local time) -> unix seconds."""
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        pass
    else:
        if not (math.isfinite(v) and v >= 1e9):
            raise ValueError(f"'{printable(t, 40)}' is not unix seconds (1e9 or more) or ISO 8601")
        return v
    iso = t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"'{printable(t, 40)}' is not unix seconds or an ISO 8601 time") from None
    return when.timestamp()  # a naive time is this machine's local time


def read_csv_log(text: str) -> tuple[list[float], list[float]]:
    """(times, watts) of a power log; ValueError naming the line for anything it cannot read (a
    last line without its newline is a line still being written, and is left out)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
    body = "".join(lines)
    if not body.strip():
        raise ValueError("it has no header row yet")
    head = body.splitlines()[0]
    delim = next((d for d in (",", ";", "\t") if d in head), ",")
    rows = list(csv.reader(io.StringIO(body), delimiter=delim))
    cols = [_column(c) for c in rows[0]]
    ti = next((cols.index(c) for c in _TIME_COLS if c in cols), None)
    wi = next((cols.index(c) for c in _POWER_COLS if c in cols), None)
    if ti is None or wi is None:
        raise ValueError(f"its header '{printable(head.strip())}' names no {'time/timestamp' if ti is None else 'watts/power/W'} "
                         "column")
    times, watts = [], []
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        try:
            t = parse_time(row[ti])
            w = float(row[wi])
        except IndexError:
            raise ValueError(f"line {n} has fewer columns than its header") from None
        except ValueError as exc:
            raise ValueError(f"line {n}: {printable(str(exc))}" if "unix" in str(exc) else
                             f"line {n}: '{printable(row[wi].strip())}' is not a number of watts") from None
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"line {n}: {w!r} W is not a power")
        if times and t < times[-1]:
            raise ValueError(f"line {n}: its time {row[ti].strip()[:40]!r} is before the line above's: the log's "
                             "clock went backwards (or two logs were merged); a log must be in time order")
        times.append(t)
        watts.append(w)
    return times, watts


class CsvSource(Source):
    kind = "csv"
    grace_s = CSV_GRACE_S

    def __init__(self, label: str, covers: Sequence[str], spec: Spec, node: str) -> None:
        super().__init__(label, covers, spec)
        self.path = os.path.abspath(os.path.expanduser(spec.arg.replace("{node}", node)))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "spec": f"csv:{self.path}", "rate_hz": None}

    def _read(self) -> str:
        from clusterbench.files import read_text

        return read_text(self.path, "power log", fix="give a CSV log of the meter with time and watts columns")

    def check(self) -> None:
        if not os.path.lexists(self.path):
            raise UsageError(f"--power {self.spec.text}: no file {self.path}",
                             "start the meter's log first (it is read after each benchmark), or fix the path")
        try:
            text = self._read()
        except UsageError as exc:
            raise UsageError(f"--power {self.spec.text}: {exc.problem}", exc.fix) from None
        if not text.strip():
            raise UsageError(f"--power {self.spec.text}: {self.path} is empty",
                             "start the meter's log first, so that it has its header row and a reading, "
                             "then start the run")
        try:
            read_csv_log(text)
        except ValueError as exc:
            raise UsageError(f"--power {self.spec.text}: {self.path}: {exc}",
                             "a header with time (unix seconds or ISO 8601) and watts columns, e.g. "
                             "'time,watts'") from None

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        try:
            times, watts = read_csv_log(self._read())
        except UsageError as exc:
            raise E.NotCovered(exc.problem) from None
        except ValueError as exc:
            raise E.NotCovered(f"{self.path}: {exc}") from None
        try:
            j = E.integrate_power(times, watts, t0, t1)
        except E.NotReached as exc:
            raise E.NotCovered(f"the log {self.path} does not cover the interval: {exc}") from None
        except E.NotCovered as exc:  # it covers the interval, but a reading in it is not a power
            raise E.NotCovered(f"the log {self.path}: {exc}") from None
        inside = [w for t, w in zip(times, watts) if t0 <= t <= t1]
        return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(inside),
                "peak_watts": max(inside, default=None)}
