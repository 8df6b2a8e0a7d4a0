"""Helpers for tests on a cluster of separate machines (sim-cluster --machines): run a command inside
a machine, list what a test left on the machines (test_machines.py, test_run_cluster.py), and set
the environment of a module's virtual machines for its fixture (test_machines*.py, test_slurm_machines.py)."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable


def set_env(**values: str) -> Callable[[], None]:
    """Set these environment variables (a module-scoped fixture's sim-cluster prefix and state, which
    monkeypatch cannot set for a module); returns what puts every one back as it was, unset or not."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)

    def restore() -> None:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    return restore


def on(c, node: str, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run ``cmd`` inside a machine (as its root, not through ssh): to look at it or break it."""
    from clusterbench.launch import simcluster

    return subprocess.run([*simcluster.exec_prefix(node, c), *cmd], capture_output=True, text=True, timeout=timeout)


def leftovers(c) -> dict[str, list[str]]:
    """Per machine: processes other than what the machine itself runs (its init, pid 1, and the sshd
    that init started), and files in its /tmp and /var/tmp. A python3 of clusterbench's (an agent, a
    kernel's wrapper) or an ssh session still open is a leftover; so is the listing's own ``ps`` not."""
    from clusterbench.launch import machines as M

    out = {}
    for m in c.nodes:
        if not M.node_alive(m):
            continue  # a machine that was killed: nothing runs there any more
        # the shell's pid is the one ``ps`` takes over (exec), so the listing can leave itself out
        ps = on(c, m.name, "sh", "-c", 'echo "$$"; exec ps -e -o pid=,ppid=,comm=,args=').stdout.split("\n")
        me, rows = ps[0].strip(), [ln.split(None, 3) for ln in ps[1:] if ln.strip()]
        own = {"1"} | {r[0] for r in rows if r[1] == "1" and r[2] == "sshd"}
        procs = [" ".join([r[0], *r[2:]]) for r in rows if r[0] not in own and r[0] != me]  # pid comm args
        tmp = on(c, m.name, "sh", "-c", "ls -A /tmp /var/tmp | grep -v ':$' | grep -v '^$' || true").stdout.split()
        if procs or tmp:
            out[m.name] = procs + tmp
    return out
