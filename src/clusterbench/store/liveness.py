"""Whether the process that recorded a run or a fix is still alive: same boot, same pid, same start
time, so a reused pid never keeps a killed run 'running'."""
from __future__ import annotations

import os
import sqlite3



def process_start(pid: int) -> int | None:
    """When process ``pid`` started (``/proc/PID/stat`` field 22, clock ticks since boot), or None.
    The command name (field 2) may hold spaces and parentheses: fields are counted after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            rest = fh.read().rsplit(b")", 1)[1].split()
        return int(rest[19])  # rest[0] is field 3 (state)
    except (OSError, IndexError, ValueError):
        return None


def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _recorder_alive(row: sqlite3.Row) -> bool:
    """Whether the process that recorded a ``running`` run is still that process: same boot, same
    pid and the same start time (a pid reused by another process does not count). Rows written
    before schema 3 carry no start time and fall back to the pid alone."""
    keys = row.keys()
    recorded_boot = row["boot_id"] if "boot_id" in keys else None
    if recorded_boot and boot_id() and recorded_boot != boot_id():
        return False
    return process_alive(row["pid"], row["pid_start"] if "pid_start" in keys else None)


def process_alive(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` that started at ``start`` (clock ticks since boot, /proc/PID/stat) still
    runs: a pid reused by another process is not it. With no start time (None or 0), or when /proc
    hides the process (hidepid), the pid alone decides."""
    now = process_start(pid) if start else None
    if now is not None:
        return now == start
    return _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
