"""The processes one test started, found by what they inherit.

Every process clusterbench starts for a test (the CLI, mpirun and its ranks, a kernel, an engine such
as hpcc) inherits the test's environment, and tests/conftest.py gives each test its own results store
(``CLUSTERBENCH_DB``). A test that checks it left nothing behind looks for the processes carrying that
value, never for every ``mpirun`` or every kernel on the machine: another test may be running beside it
(the parallel pass runs two at once) and a user's own runs are not the test's business."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def marker() -> str:
    """This test's own value: its results store, set by tests/conftest.py for each test."""
    return os.environ["CLUSTERBENCH_DB"]


def carrying(mark: str | None = None) -> list[int]:
    """Pids of the processes whose environment holds ``mark`` (this test's marker by default);
    this process excluded."""
    needle = (mark or marker()).encode()
    me = os.getpid()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            if needle in (d / "environ").read_bytes():
                pids.append(int(d.name))
        except OSError:
            continue
    return sorted(pids)


def exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def kernels(mark: str | None = None) -> list[int]:
    """This test's processes running a kernel from the kernel cache (``CLUSTERBENCH_CACHE``)."""
    cache = os.environ["CLUSTERBENCH_CACHE"]
    return [p for p in carrying(mark) if exe(p).startswith(cache)]


def named(names: set[str], mark: str | None = None) -> list[int]:
    """This test's processes whose command name is one of ``names`` (mpirun, orted, prterun, hpcc...)."""
    return [p for p in carrying(mark) if comm(p) in names]


def gone_within(find: Callable[[], list[int]], seconds: float = 5) -> list[int]:
    """What ``find`` still returns after up to ``seconds`` (an empty list as soon as it is empty):
    a killed process takes a moment to be reaped."""
    deadline = time.monotonic() + seconds
    left = find()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = find()
    return left
