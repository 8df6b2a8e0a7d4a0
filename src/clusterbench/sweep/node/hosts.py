"""Which nodes a sweep runs on and which cpus each gets on the virtual cluster (with busy loops that
even out a shared cpu)."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from clusterbench.errors import (
    UsageError,
)


# --------------------------------------------------------------------------- hosts

def node_benchmarks() -> list[str]:
    """``node`` (the profile) and every benchmark of the node family (``benchmarks/node/``)."""
    from clusterbench.benchmarks import all_benchmarks

    return ["node", *[n for n, c in all_benchmarks().items()
                      if n != "node" and c.__module__.split(".")[-2] == "node"]]


def resolve_hosts(hosts: Sequence[str] | None) -> tuple[list[str], bool]:
    """(hosts, from_allocation): the hosts given, else the batch job's (:mod:`clusterbench.launch.
    allocation`: Slurm, PBS), else a UsageError."""
    if hosts:
        from clusterbench.launch.mpi.hosts import host_names

        # the one --hosts parser; host:slots as elsewhere: one agent per node regardless
        names = host_names(",".join(hosts))
        dup = sorted({h for h in names if names.count(h) > 1})
        if dup:
            raise UsageError(f"host {dup[0]} is listed twice", "list each node once")
        return names, False
    from clusterbench.launch import allocation

    found = allocation.hosts()
    if not found:
        raise UsageError("sweep node needs --hosts or --hostfile, or to run inside a batch job (Slurm, PBS)",
                         "e.g. --hosts node1,node2,node3 or salloc -N 4 clusterbench sweep node")
    return found, True


def default_node_cpus(hosts: Sequence[str], cpus: Sequence[int], *, taken: Sequence[int] = ()) -> dict[str, list[int]]:
    """The virtual cluster's default placement (its nodes share this machine's cpus): one cpu per
    node, round robin, the cpus no node was given with ``--node-cpus`` (``taken``) first. With more
    nodes than cpus (``--oversubscribe``) some cpus carry one node more than others: see
    :func:`filler_loops`, which evens them out."""
    order = [c for c in cpus if c not in set(taken)] + [c for c in cpus if c in set(taken)]
    return {h: [order[i % len(order)]] for i, h in enumerate(hosts)}


def filler_loops(node_cpus: dict[str, list[int]]) -> dict[int, int]:
    """Busy loops to add per cpu so that every cpu carrying nodes carries as many tasks as the
    fullest one: then every node has the same share of a cpu (3 nodes on 2 cpus: n1 and n3 on cpu 0,
    n2 and one loop on cpu 1, each node half a cpu). Without them n2 would have a cpu to itself and
    twice the others' figure, and a slow node would hide."""
    count: dict[int, int] = {}
    for cs in node_cpus.values():
        for c in set(cs):
            count[c] = count.get(c, 0) + 1
    top = max(count.values(), default=0)
    return {c: top - k for c, k in sorted(count.items()) if top - k > 0}


def cpu_shares(node_cpus: dict[str, list[int]], fillers: dict[int, int] | None = None) -> dict[str, float]:
    """Each node's share of this machine's cpus, in cpus: a cpu with k nodes and f filler loops
    gives each node 1/(k+f)."""
    count: dict[int, int] = dict(fillers or {})
    for cs in node_cpus.values():
        for c in set(cs):
            count[c] = count.get(c, 0) + 1
    return {h: sum(1.0 / count[c] for c in set(cs)) for h, cs in node_cpus.items()}


def sharing_note(node_cpus: dict[str, list[int]], fillers: dict[int, int] | None = None) -> str | None:
    """What the output says when virtual nodes share cpus (None when each has its own)."""
    shares = cpu_shares(node_cpus, fillers)
    if not shares or all(abs(v - len(set(node_cpus[h]))) < 1e-9 for h, v in shares.items()):
        return None
    vals = sorted(set(round(v, 3) for v in shares.values()))
    loops = sum((fillers or {}).values())
    how = f", {loops} busy loop{'s' if loops > 1 else ''} evening them out" if loops else ""
    if len(vals) == 1:
        return (f"the virtual nodes share this machine's cpus ({vals[0]:.3g} cpu each{how}): every figure is for "
                "that share, not a whole cpu; the nodes compare with each other, not with a real node")
    shown = ", ".join(f"{h} {v:.3g}" for h, v in shares.items())
    return (f"the virtual nodes' cpu shares differ (--node-cpus: {shown} cpu): a node with a larger share "
            "measures more whatever its health, and the outlier judgement assumes equal shares")


def start_fillers(fillers: dict[int, int], seconds: float) -> list[subprocess.Popen]:
    """The busy loops of :func:`filler_loops`, each pinned, in a session of its own (as a node's
    kernel: the same weight with autogroups), ended with this process however it ends."""
    from clusterbench.process import die_with_parent, held_signals

    code = f"import time\nend = time.monotonic() + {seconds:.1f}\nwhile time.monotonic() < end:\n    pass\n"
    procs: list[subprocess.Popen] = []
    for cpu, k in fillers.items():
        for _ in range(k):
            death = die_with_parent(9)

            def pre(cpu: int = cpu, death: Any = death) -> None:
                death()
                os.sched_setaffinity(0, {cpu})

            with held_signals():
                procs.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              start_new_session=True, preexec_fn=pre))
    return procs
