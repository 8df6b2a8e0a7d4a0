"""``clusterbench doctor``: gather each node's evidence and apply the rules (read-only).

:func:`diagnose` reads this machine's evidence (:func:`clusterbench.doctor.evidence.gather`) or,
given hosts, every node's in one call per node through the path ``cluster check`` uses
(``launch.remote.gather``: the virtual cluster's namespaces, this machine, or ssh), then applies
the rules (:func:`clusterbench.doctor.engine.evaluate`). With ``during="mpi"`` (or ``"hpl"``) it
also reads ``/proc/softirqs`` on every node before and after a network load (:data:`LOADS`) and
judges the per-CPU deltas (``softirqs.load``). Diagnosis changes nothing on any node.
:func:`run_clusterbench` runs a clusterbench command as a bounded child (the load here, the
benchmark runs of ``--verify``).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from typing import Any, Sequence

from clusterbench.doctor import engine
from clusterbench.errors import EnvironmentProblem, UsageError

#: the loads of ``--during`` (``{hosts}``: the first two hosts for mpi, all of them for hpl)
LOADS = {
    # three large sizes: they carry nearly all the packets of a full sweep in a third of its time (the
    # small ones add seconds, not softirqs)
    "mpi": "run bw --transport tcp --direction bi --sizes 65536,1048576,4194304 --time-budget 0.5",
    "hpl": "run hpl --n 6000",
}

DOCTOR_SCHEMA = 1


def hosts_from(hosts: str | None, hostfile: str | None) -> list[str] | None:
    """``--hosts A,B`` or ``--hostfile F`` -> host names (None: this machine only)."""
    if hosts and hostfile:
        raise UsageError("--hosts and --hostfile both given", "give one of them")
    if hostfile:
        from clusterbench.launch.mpi.hosts import parse_hostfile

        return [h.name for h in parse_hostfile(hostfile)]
    if hosts is not None:
        from clusterbench.launch.mpi.hosts import host_names

        return host_names(hosts)  # the one --hosts parser (exit 2 on a bad entry)
    return None


def diagnose(hosts: Sequence[str] | None = None, root: str = "/", *, timeout: float = 60.0,
             python: str | None = None, during: str | None = None, allow_root: bool = False,
             db: str | None = None, steal_interval: float | None = None) -> dict[str, Any]:
    """Evidence of this machine (``hosts`` None) or of every host, and the rules' verdicts.
    ``steal_interval``: seconds over which stolen time is read (None: evidence.STEAL_INTERVAL; 0 reads
    it since boot without waiting, for a caller that judges one rule that does not read it).

    Returns ``{"doctor_schema": 1, "hosts": [...], "findings": [...], "cannot_tell": [...],
    "passed": [...], "rules": [rule descriptions], "evidence": {node: evidence document}}``.
    An unreachable host raises a one-line :class:`EnvironmentProblem` naming it (as ``cluster check``)."""
    from clusterbench.doctor import evidence as ev

    interval = ev.STEAL_INTERVAL if steal_interval is None else steal_interval
    if hosts:
        from clusterbench.launch import remote

        gathered = remote.gather(list(hosts), ev.snippet(interval), timeout=timeout, python=python)
        nodes = {h: d for h, d in gathered.items()}
    else:
        doc = ev.gather(root, steal_interval=interval)
        nodes = {doc.get("host") or "localhost": doc}
    load = None
    if during and during != "none":
        if root not in ("/", None) and not hosts:
            raise UsageError("--during needs the running machine, not a /sys+/proc snapshot", "drop --sysfs-root")
        load = softirqs_during(hosts, during, allow_root=allow_root, timeout=timeout, python=python, db=db)
        for node, it in load["items"].items():
            if node in nodes:
                nodes[node].setdefault("items", {})["softirqs.load"] = it
        if not hosts:  # this machine: the one node, whatever its name
            only = next(iter(nodes))
            nodes[only].setdefault("items", {})["softirqs.load"] = next(iter(load["items"].values()))
    return {**diagnose_evidence(nodes), "root": root if not hosts else None,
            "during": None if load is None else {k: v for k, v in load.items() if k != "items"}}


def diagnose_evidence(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rules' verdicts on evidence already read (``{node: evidence document}``, e.g. by the nodes'
    own sweep agents), in :func:`diagnose`'s document."""
    verdicts = engine.evaluate(nodes, hosts_text=",".join(nodes) if len(nodes) > 1 else None)
    return {"doctor_schema": DOCTOR_SCHEMA, "hosts": list(nodes), "root": None, "during": None,
            **verdicts, "rules": [r.describe() for r in engine.RULES], "evidence": nodes}


# --------------------------------------------------------------------------- --during

SOFTIRQ_SNIPPET = ("import json; from clusterbench.doctor.evidence import parse_softirqs; "
                   "print(json.dumps({'softirqs': parse_softirqs(open('/proc/softirqs').read())}))")


def _read_softirqs(hosts: Sequence[str] | None, timeout: float, python: str | None) -> dict[str, Any]:
    from clusterbench.launch import remote
    from clusterbench.doctor.evidence import parse_softirqs

    if not hosts:
        with open("/proc/softirqs") as f:
            return {"localhost": parse_softirqs(f.read())}
    return {h: d.get("softirqs") for h, d in remote.gather(list(hosts), SOFTIRQ_SNIPPET, timeout=timeout,
                                                            python=python).items()}


def load_command(during: str, hosts: Sequence[str] | None) -> list[str]:
    """The clusterbench command line (after ``clusterbench``) that loads the network for ``--during``."""
    if during not in LOADS:
        raise UsageError(f"--during {during} is not one of {', '.join(LOADS)}, none", "e.g. --during mpi")
    argv = shlex.split(LOADS[during])
    if hosts:
        argv += ["--hosts", ",".join(hosts[:2] if during == "mpi" else hosts)]
    return argv + ["--no-store"]


def softirqs_during(hosts: Sequence[str] | None, during: str, *, allow_root: bool = False, timeout: float = 60.0,
                    python: str | None = None, db: str | None = None, run_timeout: float = 900.0) -> dict[str, Any]:
    """NET_RX/NET_TX per-CPU softirq deltas on every node over one run of the ``during`` load.
    Returns ``{"load", "seconds", "items": {node: evidence item}}``."""
    argv = load_command(during, hosts)
    before = _read_softirqs(hosts, timeout, python)
    t0 = time.monotonic()
    run_clusterbench(argv, allow_root=allow_root, db=db, timeout=run_timeout, what=f"--during {during}")
    dt = time.monotonic() - t0
    after = _read_softirqs(hosts, timeout, python)
    from clusterbench.doctor.evidence import item, unreadable

    text = "clusterbench " + " ".join(argv)
    items = {}
    for node in before:
        b, a = before.get(node), after.get(node)
        if not b or not a:
            items[node] = unreadable("/proc/softirqs", "no NET_RX/NET_TX lines")
            continue
        delta = {k: [max(0, y - x) for x, y in zip(b.get(k) or [], a.get(k) or [])] for k in ("NET_RX", "NET_TX")}
        items[node] = item({**delta, "seconds": dt, "load": text},
                           f"/proc/softirqs before and after `{text}`")
    return {"load": text, "seconds": dt, "items": items}


def root_hint(allow_root: bool) -> str:
    """' (as root add --allow-root)' when that is what the user would be missing, else ''."""
    from clusterbench import config

    if allow_root or not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return ""
    try:
        if config.allow_run_as_root():
            return ""
    except UsageError:
        pass
    return " (as root add --allow-root)"


def run_clusterbench(argv: Sequence[str], *, allow_root: bool, db: str | None, timeout: float, what: str) -> str:
    """Run ``clusterbench ARGV`` as a child (bounded, its process group killed on timeout or Ctrl-C);
    a failure is one line naming ``what`` and the child's last error line."""
    from clusterbench import process

    cmd = [sys.executable, "-m", "clusterbench", *(["--db", db] if db else []), *argv]
    env = dict(os.environ)
    if allow_root:
        env["CLUSTERBENCH_ALLOW_RUN_AS_ROOT"] = "1"
    # a launcher: the child clusterbench (and, through it, its kernels and MPI jobs) dies with this
    # process however it dies: SIGTERM when it ends (the child closes its run as incomplete), a
    # watchdog's SIGKILL after the grace period if this process was killed outright
    run = process.spawn(cmd, env=env, text=True, launcher=True)
    try:
        out, err = run.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: `clusterbench {' '.join(argv)}` did not finish within {timeout:g} s",
                                 "give a smaller benchmark or a longer --timeout") from None
    finally:
        run.end()
    if run.proc.returncode != 0:
        lines = [ln.strip() for ln in (err or "").splitlines() if ln.strip()]
        raise EnvironmentProblem(f"{what}: `clusterbench {' '.join(argv)}` failed (exit {run.proc.returncode}): "
                                 f"{lines[-1] if lines else 'no message'}",
                                 "run that command by hand to see the whole error" + root_hint(allow_root))
    return out
