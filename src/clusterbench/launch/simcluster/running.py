"""What runs inside a virtual cluster's namespaces: listing, naming and killing it."""
from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.simcluster.state import _check_prefix, _require_root, _run, list_namespaces, load


def _kill_namespace_processes(ns: str) -> list[int]:
    """SIGKILL every process left in one of our namespaces (orted, ranks): a namespace with a
    process in it outlives ``ip netns del``, and they would be orphans."""
    p = _run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in p.stdout.split() if x.isdigit() and int(x) != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        if pids:
            time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def argv_of(pid: int) -> list[str]:
    """A process's argv (its first 4 KiB), printable characters only; ``[]`` when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096).decode(errors="replace")
    except OSError:
        return []
    return ["".join(ch if ch.isprintable() else "?" for ch in w) for w in raw.split("\0") if w]


def command_of(argv: Sequence[str]) -> str:
    """A process's command line for a message: its program's file name (not the whole path, which can
    fill the line alone) and its arguments, at most 60 characters."""
    text = " ".join([os.path.basename(argv[0]) or argv[0], *argv[1:]]) if argv else "?"
    return text if len(text) <= 60 else text[:57] + "..."


def processes(*, prefix: str | None = None) -> list[dict]:
    """The processes running inside the virtual cluster's namespaces (``ip netns pids``), as
    ``{"namespace", "pid", "command"}``. The cluster runs no daemon of its own (namespaces, a bridge,
    qdiscs: no process), so every one of them belongs to a job using it (mpirun, orted, ranks, sweep
    agents, a slurmd) or was left by one."""
    _require_root()
    prefix = _check_prefix(prefix)
    from clusterbench.launch import machines as M

    own: set[int] = set()
    c = None
    with contextlib.suppress(EnvironmentProblem):
        c = load(prefix=prefix)
    spaces = list_namespaces(prefix)
    if c is not None and c.machines:  # machines do run processes of their own: init, sshd, the head's holder
        own = M.own_processes(c)
    elif c is None and spaces:  # no state (a crash): machines, if these were, are told by their namespaces
        own = M.own_processes_in(f"{prefix}head", [ns for ns in spaces if ns not in (f"{prefix}head", f"{prefix}br")])
    out = []
    for ns in spaces:
        p = _run(["ip", "netns", "pids", ns], check=False)
        for x in p.stdout.split():
            if x.isdigit() and int(x) != os.getpid() and int(x) not in own and _alive(int(x)):
                argv = argv_of(int(x))
                out.append({"namespace": ns, "pid": int(x), "command": command_of(argv), "program": program_of(argv)})
    return out


def program_of(words: Sequence[str]) -> str:
    """The program of an argv for a summary: ``mpirun``, ``orted``, or for ``python -m M``, M. From the
    whole argv, never the shortened command line (a long path to python cut before its ``-m``)."""
    if not words:
        return "?"
    if "-m" in words[:-1] and os.path.basename(words[0]).startswith("python"):
        return words[words.index("-m") + 1]
    if len(words) == 1 and " " in words[0]:  # a process that retitled itself ("sshd: /usr/sbin/sshd -D ...")
        return os.path.basename(words[0].split()[0].rstrip(":"))
    return os.path.basename(words[0])


def describe_processes(procs: Sequence[dict]) -> str:
    """``1 mpirun, 4 orted, 8 clusterbench.sweep.agent in t1-head, t1-n1, ...`` for a one-line message."""
    count: dict[str, int] = {}
    for p in procs:
        name = p.get("program") or program_of(p["command"].split())
        count[name] = count.get(name, 0) + 1
    spaces = list(dict.fromkeys(p["namespace"] for p in procs))
    return (", ".join(f"{k} {name}" for name, k in count.items()) + " in " + ", ".join(spaces[:6])
            + (" ..." if len(spaces) > 6 else ""))
